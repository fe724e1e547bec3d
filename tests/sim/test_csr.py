"""The AXI4-Lite register block (``rtl/csr.py``) in Verilator, driven by cocotbext-axi's
``AxiLiteMaster`` (``sim/tb_csr.py``): ID and parameters, counters with clear and soft-reset
pulses, write strobes, SLVERR for every unmapped word, AW/W in either order and random pauses
with a protocol monitor. The build is cached in ``build/sim/csr-*/`` like the other designs'."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path

import pytest

from specmem.rtl.csr import CSRBlock, RegisterMap, core_register_map, register_map
from specmem.sim import build as simbuild
from specmem.sim.build import Build, run_cocotb

TB = "specmem.sim.tb_csr"
TOP = "specmem_csr"


def build_csr(rm: RegisterMap, tag: str) -> Build:
    """Verilog of ``CSRBlock(rm)`` and its Verilator build (reused when the hash matches), with the
    same flags, runtime-object cache and make variables as ``sim/build.py``'s designs."""
    from amaranth.back import verilog
    import cocotb_tools.runner as cocotb_runner

    from specmem.sim.toolchain import verilator_build_env

    text = verilog.convert(CSRBlock(rm), name=TOP)
    manifest = {"top": TOP, "regmap": rm.to_dict()}
    args = ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0"]
    key = hashlib.sha256("\0".join([text, " ".join(args), simbuild._versions(),
                                     json.dumps(simbuild.MAKE_VARS, sort_keys=True)]).encode()).hexdigest()[:12]
    directory = simbuild.BUILD_ROOT / f"csr-{tag}" / f"plain-{key}"
    t0 = time.perf_counter()
    with simbuild._locked(directory.parent / f".plain-{key}.lock"):
        if not ((directory / "build.json").is_file() and (directory / TOP).is_file()):
            if directory.exists():
                shutil.rmtree(directory)
            directory.mkdir(parents=True)
            (directory / f"{TOP}.v").write_text(text)
            runtime = simbuild._runtime_cache("plain")
            with verilator_build_env(simbuild.MAKE_VARS):
                cocotb_runner.MAX_PARALLEL_BUILD_JOBS = simbuild.BUILD_JOBS
                runner = cocotb_runner.get_runner("verilator")
                simbuild._restore_between_steps(runner, runtime, directory, directory / "build.log")
                runner.build(sources=[directory / f"{TOP}.v"], hdl_toplevel=TOP, build_dir=directory,
                             build_args=args, always=True)
            simbuild._save_runtime(runtime, directory)
            for pch in directory.glob("*.gch"):
                pch.unlink()
            (directory / "build.json").write_text(json.dumps({"seconds": time.perf_counter() - t0}))
            simbuild._prune_builds(directory.parent, "plain", keep=simbuild.KEEP_BUILDS)
    return Build(None, "plain", directory, TOP, manifest, directory / f"{TOP}.v", False,
                 time.perf_counter() - t0)


@pytest.mark.parametrize("name, rm", [
    ("annihilation", core_register_map("annihilation", 64, 8, "legacy-int8")),
    ("config", register_map("deltanet", 16, 2, "legacy-int16", heads=3, status=(("busy", 1, "b"),),
                            extra_counters=(("framing_errors", "f"), ("extra", "x")), orth_policies=("skip", "evict"))),
])
def test_csr_block_axi_lite(name, rm):
    b = build_csr(rm, name)
    run = run_cocotb(b, TB, {"name": f"csr-{name}", "regmap": rm.to_dict(), "seed": 3})
    assert run.passed, run.describe()
    assert set(run.tests) == {"identification", "counters_clear_and_soft_reset", "write_strobes",
                              "unmapped_addresses", "channel_ordering/order=w_first",
                              "channel_ordering/order=aw_first", "channel_ordering/order=random"}
    rec = run.record
    assert rec["counters_clear_and_soft_reset"]["pulses"] == {"ctrl_soft_reset": 2, "ctrl_clear_counters": 2}
    mapped = len(rm.registers)
    assert rec["unmapped_addresses"]["unmapped"] == 64 - mapped
    assert rec["channel_ordering/order=random"]["writes"] >= 12
    # the pause generators did what they are for: W ahead of AW, AW ahead of W, and a mix
    assert rec["channel_ordering/order=w_first"]["order"]["w_first"] >= 10
    assert rec["channel_ordering/order=aw_first"]["order"]["aw_first"] >= 10
    assert sum(v > 0 for v in rec["channel_ordering/order=random"]["order"].values()) >= 2
