"""The AXI4-Lite register block (``rtl/csr.py``) in Verilator, driven by cocotbext-axi's
``AxiLiteMaster`` (``sim/tb_csr.py``): ID and parameters, counters with clear and soft-reset
pulses, write strobes, SLVERR for every unmapped word, AW/W in either order and random pauses
with a protocol monitor. The build is cached in ``build/sim/csr-*/`` like the other designs'."""

from __future__ import annotations

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

    text = verilog.convert(CSRBlock(rm), name=TOP)
    manifest = {"top": TOP, "regmap": rm.to_dict()}
    return simbuild.build_verilog_text(text, TOP, f"csr-{tag}", manifest)


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


@pytest.mark.parametrize("algo", ["vla", "gated-deltanet"])
def test_rule_csr_top_in_verilator(algo):
    """``RuleCSRTop`` (``sim/tb_rule_csr.py``): tokens through the real core from cocotbext-axi's
    stream source while its AXI4-Lite master reads TOKENS, FRAMING_ERRORS, REFRESHES (VLA), clears
    them and soft-resets the core; every expected count is the testbench's own."""
    from amaranth.back import verilog

    from specmem.rtl.csr import CORE_CODES
    from specmem.rtl.csr_top import RuleCSRTop

    d, k = 8, 2
    params = {"refresh_period": 2} if algo == "vla" else {}
    dut = RuleCSRTop(algo, d, k, **params)
    top = f"specmem_{algo.replace('-', '_')}_csr"
    b = simbuild.build_verilog_text(verilog.convert(dut, name=top), top, f"csr-top-{algo}", {"top": top})
    core = dut.top.core
    case = {"name": f"csr-top-{algo}", "regmap": dut.regmap.to_dict(), "d": d, "k": k, "seed": 5,
            "core_code": CORE_CODES[algo], "x_width": dut.top.x_width, "o_width": dut.top.o_width,
            "beats_per_token": 4 * (d // k) if algo == "vla" else core.beats_per_token,
            "out_beats_per_token": d // k, "refresh_period": params.get("refresh_period")}
    run = run_cocotb(b, "specmem.sim.tb_rule_csr", case)
    assert run.passed, run.describe()
    rec = run.record["counters_clear_and_soft_reset"]
    assert (rec["tokens"], rec["framing_errors"], rec["beats"]) == (3, 1, 3 * d // k)
