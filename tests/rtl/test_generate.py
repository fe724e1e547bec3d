# amaranth: UnusedElaboratable=no
"""Verilog generation, manifest, and Verilator lint of the generated Verilog."""

from __future__ import annotations

import json
import re

import pytest

from specmem.rtl.generate import WAIVERS, generate, lint, model_sources


def _waived_rules():
    return set(re.findall(r"lint_off -rule (\w+)", WAIVERS.read_text()))


def test_generated_engine_lints_clean(tmp_path):
    m = generate("engine", 16, 4, "legacy-int8", tmp_path)
    res = lint(m["paths"]["verilog"])
    assert res.clean, res.output
    # every warning -Wall raises without the waiver file is of a waived kind
    raw = lint(m["paths"]["verilog"], waivers=None)
    kinds = {re.match(r"%(?:Warning|Error)-?(\w*)", w).group(1) for w in raw.warnings}
    kinds.discard("")  # the final "%Error: Exiting due to N warning(s)" line
    assert kinds <= _waived_rules(), kinds - _waived_rules()


def test_engine_manifest(tmp_path):
    m = generate("engine", 32, 4, "legacy-int8", tmp_path)
    on_disk = json.loads((tmp_path / "dot_engine.json").read_text())
    assert on_disk["parameters"] == {"d": 32, "k": 4, "max_len": 8, "a_width": 8, "b_width": 8,
                                     "acc_width": 21, "tree_reg_every": 1, "dsp": "fabric"}
    ports = {p["name"]: p for p in on_disk["ports"]}
    assert ports["i__payload"]["width"] == 2 * 4 * 8 + 2 and ports["i__payload"]["direction"] == "input"
    assert ports["o__payload"]["width"] == 21 and ports["o__valid"]["direction"] == "output"
    assert {"clk", "rst", "i__valid", "i__ready", "o__ready"} <= set(ports)
    fields = {f["name"]: f for f in on_disk["streams"]["i"]}
    assert fields["a[0]"] == {"name": "a[0]", "lsb": 0, "width": 8, "signed": True}
    assert fields["b[3]"]["lsb"] == 56 and fields["first"]["lsb"] == 64 and fields["last"]["lsb"] == 65
    assert m["cycles_per_token"] == 8 and m["latency_cycles"] == 4 and m["sim_models"] == []


def test_ecp5_engine_instantiates_registered_dsps(tmp_path):
    """``dsp="ecp5"``: one MULT18X18D per lane with its input, pipeline and output registers on
    CLK0 and CE0 driven (the engine's advance), signed operands;
    it lints clean only together with the primitive's model (rtl/vendor/MULT18X18D.v)."""
    m = generate("engine", 32, 4, "legacy-int8", tmp_path, dsp="ecp5")
    text = (tmp_path / "dot_engine.v").read_text()
    insts = re.findall(r"MULT18X18D #\((.*?)\) \w+ \((.*?)\);", text, re.S)
    assert len(insts) == 4 and m["latency_cycles"] == 6 and m["sim_models"] == ["MULT18X18D"]
    for params, ports in insts:
        for reg in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_PIPELINE_CLK", "REG_OUTPUT_CLK"):
            assert re.search(rf"\.{reg}\(\"CLK0\"\)", params), reg
        assert re.search(r"\.CE0\(en\)", ports) and re.search(r"\.SIGNEDA\(1'h1\)", ports)
        assert re.search(r"\.CLK0\(clk\)", ports)
    assert lint(m["paths"]["verilog"], models=model_sources(m)).clean
    assert not lint(m["paths"]["verilog"]).clean  # without the model the primitive is unknown


@pytest.mark.parametrize("algo,params,match", [
    ("engine", {"dsp": "xilinx"}, "dsp: must be one of fabric, registered, ecp5"),
    ("engine", {"tree": 2}, "tree: not a parameter of engine"),
    ("annihilation", {"dsp": "ecp5"}, r"dsp: only the annihilation core v2 \(int18/int16/int8\) takes it"),
])
def test_generate_rejects_bad_engine_parameters(tmp_path, algo, params, match):
    with pytest.raises(ValueError, match=match):
        generate(algo, 16, 4, "legacy-int8", tmp_path, **params)


def test_lint_reports_warnings(tmp_path):
    """The lint wrapper really runs Verilator: an unused input is reported."""
    src = tmp_path / "bad.v"
    src.write_text("module bad(input wire a, input wire b, output wire y);\n  assign y = a;\nendmodule\n")
    res = lint(src, waivers=None)
    assert not res.clean and any("UNUSEDSIGNAL" in w for w in res.warnings)


@pytest.mark.parametrize(
    "args,match",
    [
        (("lattice", 16, 4, "legacy-int8"), "algo: must be one of"),
        (("engine", 18, 4, "legacy-int8"), "d: must be a multiple of k"),
        (("engine", 16, 4, "int3"), "preset: the RTL implements legacy-int8, legacy-int16, legacy-wide"),
        (("annihilation", 16, 4, "wide"), "preset: the RTL implements legacy-int8, legacy-int16, legacy-wide .*core "
                                          "v1.*int18, int16, int8 \\(core v2\\); got 'wide'"),
        (("annihilation", 16, 4, "int18", {"core": "v1"}), "core: core v1 implements legacy-int8.*'int18' is a core v2"),
        (("annihilation", 16, 4, "legacy-int8", {"core": "v2"}), "core: core v2 implements int18.*'legacy-int8' is a "
                                                                "core v1"),
        (("annihilation", 16, 4, "int18", {"core": "v3"}), "core: must be one of v1, v2"),
        (("annihilation", 16, 4, "legacy-int8", {"dsp": "ecp5"}), "dsp: only the annihilation core v2"),
        (("annihilation", 16, 4, "int18", {"dsp": "fabric"}), "dsp: core v2's row unit takes registered"),
        (("annihilation", 16, 4, "int18", {"in_range": 2.0}), "in_range: core v2 takes the preset's input range"),
        (("annihilation", 16, 4, "int18", {"lambda0": 2.0}), "lambda0: not a parameter of annihilation"),
        (("vla", 16, 4, "int18"), "preset: the RTL implements .*'int18' is the scaled golden-model format"),
        (("engine", 16, 4, "int16"), "preset: .*'int16' is a golden-model preset, not built in RTL"),
    ],
)
def test_generate_rejects_bad_arguments(tmp_path, args, match):
    params = args[4] if len(args) > 4 else {}
    with pytest.raises(ValueError, match=match):
        generate(*args[:4], tmp_path, **params)


def test_generated_annihilation_core_v2_top_lints_clean(tmp_path):
    """``--format int18`` generates the core v2 top (``--core`` agrees): the same module name and
    ports as core v1's top, a clean lint, a manifest that names the core, the golden model it is
    bit-exact with, the saturation counter's tensors and how its cycles per token are known."""
    m = generate("annihilation", 16, 4, "int18", tmp_path, core="v2")
    assert m["top"] == "specmem_annihilation" and m["core"] == "v2"
    res = lint(m["paths"]["verilog"], models=model_sources(m))
    assert res.clean, res.output
    ports = [(p["name"], p["direction"]) for p in m["ports"]]
    assert sorted(ports) == sorted([
        ("clk", "input"), ("rst", "input"), ("s_axis_tdata", "input"), ("s_axis_tvalid", "input"),
        ("s_axis_tready", "output"), ("s_axis_tlast", "input"), ("m_axis_tdata", "output"),
        ("m_axis_tvalid", "output"), ("m_axis_tready", "input"), ("m_axis_tlast", "output"),
        ("status_tokens", "output"), ("status_saturations", "output"), ("status_orth_count", "output"),
        ("status_framing_errors", "output"), ("status_orth_flag", "output"), ("status_count", "output"),
        ("status_busy", "output")])
    widths = {p["name"]: p["width"] for p in m["ports"]}
    assert widths["s_axis_tdata"] == 4 * m["formats"]["tensors"]["x"]["width"]
    assert widths["m_axis_tdata"] == 4 * m["formats"]["tensors"]["y"]["width"]
    on_disk = json.loads((tmp_path / "specmem_annihilation.json").read_text())
    assert on_disk["parameters"]["gram"] == "coaccumulate" and on_disk["parameters"]["preset"] == "int18"
    assert on_disk["parameters"]["orthogonal_input_policy"].startswith("evict")
    assert on_disk["status"]["status_saturation_tensors"] == ["u", "u_mul", "r", "ahat", "q", "t", "y"]
    cpt = on_disk["cycles_per_token"]
    assert cpt["floor_d"] == 16 and cpt["pass_cycles"] > 16 and "measured" in cpt["full_steady_state_source"]


def test_generated_annihilation_top_lints_clean(tmp_path):
    """The AXI4-Stream top at d=16, k=4: standard port names, a manifest, and a clean lint."""
    m = generate("annihilation", 16, 4, "legacy-int8", tmp_path)
    res = lint(m["paths"]["verilog"])
    assert res.clean, res.output
    ports = {p["name"]: p for p in m["ports"]}
    for name, direction, width in [
        ("s_axis_tdata", "input", 4 * 8), ("s_axis_tvalid", "input", 1), ("s_axis_tready", "output", 1),
        ("s_axis_tlast", "input", 1), ("m_axis_tdata", "output", 4 * 16), ("m_axis_tvalid", "output", 1),
        ("m_axis_tready", "input", 1), ("m_axis_tlast", "output", 1), ("clk", "input", 1), ("rst", "input", 1),
        ("status_tokens", "output", 32), ("status_saturations", "output", 32),
        ("status_orth_count", "output", 32), ("status_orth_flag", "output", 1),
    ]:
        assert ports[name]["direction"] == direction and ports[name]["width"] == width, name
    # the UNUSEDSIGNAL waiver covers debug wires and unread high bits, never a top-level input
    raw = lint(m["paths"]["verilog"], waivers=None)
    text = (tmp_path / "specmem_annihilation.v").read_text().splitlines()
    first = next(n for n, ln in enumerate(text, 1) if ln.startswith("module specmem_annihilation("))
    last = next(n for n, ln in enumerate(text, 1) if n > first and ln.startswith("endmodule"))
    unused = [w for w in raw.warnings if "UNUSEDSIGNAL" in w
              and first <= int(re.search(r"\.v:(\d+):", w).group(1)) <= last]
    for p in m["ports"]:
        if p["direction"] == "input":
            assert not [w for w in unused if f"'{p['name']}'" in w or f"'{p['name']}'[" in w], p["name"]
    on_disk = json.loads((tmp_path / "specmem_annihilation.json").read_text())
    assert on_disk["parameters"]["orthogonal_input_policy"] == "skip and flag"
    assert on_disk["formats"]["tensors"]["x"]["q"] == "Q2.5"
    assert on_disk["streams"]["s_axis"]["beats_per_token"] == 4
    assert on_disk["streams"]["m_axis"]["lanes"][1] == {"lane": 1, "lsb": 16, "width": 16, "signed": True}
    assert on_disk["cycles_per_token"]["floor_d"] == 16


def test_core_v2_heads_and_chains_generate_and_lint(tmp_path):
    """``heads``/``chains`` reach the v2 core: the manifest names them, the token order and the cycles
    measured for that configuration; the Verilog lints clean; v1 and bad counts are refused."""
    m = generate("annihilation", 16, 4, "int18", tmp_path, heads=3, chains=2)
    assert m["parameters"]["heads"] == 3 and m["parameters"]["chains"] == 2
    assert m["parameters"]["token_order"].startswith("n = t*heads + h")
    from specmem.rtl.top import V2_MEASURED_CYCLES
    assert m["cycles_per_token"]["full_steady_state"] == V2_MEASURED_CYCLES[(16, 4, "int18", 3, 2, 2)]
    res = lint(m["paths"]["verilog"])
    assert res.clean, res.output
    with pytest.raises(ValueError, match="^heads: only the annihilation core v2"):
        generate("annihilation", 16, 4, "legacy-int8", tmp_path / "v1", heads=2)
    with pytest.raises(ValueError, match=r"^chains: must be an integer in \[1, heads = 2\]"):
        generate("annihilation", 16, 4, "int18", tmp_path / "bad", heads=2, chains=3)


def test_core_v2_norm_lanes_reach_the_manifest_and_bad_ones_are_refused(tmp_path):
    """``norm_lanes`` (the token chain's block normalisers): 2 by default, k for the wide ones; the
    manifest names it and its measured cycles; v1, 5 lanes and more than k are refused."""
    from specmem.rtl.generate import build
    from specmem.rtl.top import V2_MEASURED_CYCLES

    for nl, want in ((None, 2), (4, 4), (1, 1)):
        params = {} if nl is None else {"norm_lanes": nl}
        m = build("annihilation", 16, 4, "int18", **params).manifest
        assert m["parameters"]["norm_lanes"] == want
        assert m["cycles_per_token"]["full_steady_state"] == V2_MEASURED_CYCLES[(16, 4, "int18", 1, 1, want)]
    assert V2_MEASURED_CYCLES[(16, 4, "int18", 1, 1, 2)] > V2_MEASURED_CYCLES[(16, 4, "int18", 1, 1, 4)]
    with pytest.raises(ValueError, match="^norm_lanes: only the annihilation core v2"):
        build("annihilation", 16, 4, "legacy-int8", norm_lanes=2)
    with pytest.raises(ValueError, match=r"^norm_lanes: 1 \.\. 3 .* or k = 4"):
        build("annihilation", 16, 4, "int18", norm_lanes=5)
