"""The command line: run/vectors round trip, parameter parsing, and one clear error line for bad input."""

import json
import os

import numpy as np
import pytest

from specmem.cli import main


def _vectors(tmp_path, algo, T=12, d=6, extra=()):
    path = tmp_path / f"{algo}.in.npz"
    assert main(["vectors", "--algo", algo, "--T", str(T), "--d", str(d), "--seed", "3", "--out", str(path), *extra]) == 0
    return path


@pytest.mark.parametrize("algo,params", [
    ("annihilation", ["k=3"]),
    ("annihilation", ["k=3", "variant=literal"]),
    ("vla", ["eta=0.01", "refresh_period=5"]),
    ("linear", []),
    ("deltanet", []),
    ("gated-deltanet", []),
    ("lattice", ["gamma=0.5"]),
    ("ska", ["K=1"]),
])
def test_run_matches_golden(tmp_path, algo, params):
    from specmem.algorithms import get_algorithm, parse_params

    inp = _vectors(tmp_path, algo)
    out = tmp_path / "out.npz"
    argv = ["run", "--algo", algo, "--in", str(inp), "--out", str(out)]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    spec = get_algorithm(algo)
    with np.load(inp) as f:
        ref = spec.golden()(**{n: f[n] for n in spec.inputs}, **parse_params(spec, params))
    assert set(spec.outputs) <= set(ref), f"registry promises outputs {spec.outputs}, golden gives {sorted(ref)}"
    with np.load(out) as f:
        for name, val in ref.items():
            np.testing.assert_array_equal(f[name], val, err_msg=name)
        assert "meta" in f.files


def test_batch_vectors(tmp_path):
    inp = _vectors(tmp_path, "vla", extra=["--batch", "2", "--batch", "3"])
    with np.load(inp) as f:
        assert f["k"].shape == (2, 3, 12, 6)


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specmem: error: "), err
    return err[0]


@pytest.mark.parametrize("params,needle", [
    (["k=0"], "k:"),
    (["k=7"], "k:"),          # k > d = 6
    (["k=3", "eps=0"], "eps:"),
    (["k=3", "eps=-1"], "eps:"),
    (["k=3", "variant=bogus"], "variant:"),
    (["k=3", "bogus=1"], "unknown parameter 'bogus'"),
    (["k=three"], "k: expected an integer"),
    ([], "k: required parameter"),
    (["k3"], "NAME=VALUE"),
])
def test_bad_params_give_one_line(tmp_path, capsys, params, needle):
    inp = _vectors(tmp_path, "annihilation")
    argv = ["run", "--algo", "annihilation", "--in", str(inp), "--out", str(tmp_path / "o.npz")]
    for p in params:
        argv += ["--param", p]
    assert needle in _error(capsys, argv)
    assert not (tmp_path / "o.npz").exists()


def test_bad_inputs_give_one_line(tmp_path, capsys):
    inp = _vectors(tmp_path, "vla")
    with np.load(inp) as f:
        arrays = dict(f)
    nan = dict(arrays)
    nan["k"] = nan["k"].copy()
    nan["k"][3, 2] = np.nan
    np.savez(tmp_path / "nan.npz", **nan)
    base = ["run", "--algo", "vla", "--out", str(tmp_path / "o.npz"), "--in"]
    assert "k: contains NaN or Inf" in _error(capsys, base + [str(tmp_path / "nan.npz")])
    inf = dict(arrays)
    inf["u"] = np.full_like(arrays["u"], np.inf)
    np.savez(tmp_path / "inf.npz", **inf)
    assert "u: contains NaN or Inf" in _error(capsys, base + [str(tmp_path / "inf.npz")])
    short = dict(arrays)
    short["v"] = arrays["v"][:-1]
    np.savez(tmp_path / "short.npz", **short)
    assert "v:" in _error(capsys, base + [str(tmp_path / "short.npz")])
    missing = {n: a for n, a in arrays.items() if n != "q"}
    np.savez(tmp_path / "missing.npz", **missing)
    assert "lacks array 'q'" in _error(capsys, base + [str(tmp_path / "missing.npz")])
    assert "file not found" in _error(capsys, base + [str(tmp_path / "nope.npz")])
    (tmp_path / "junk.npz").write_text("not a zip")
    assert "not a readable .npz" in _error(capsys, base + [str(tmp_path / "junk.npz")])


def test_unknown_algo_and_backend(tmp_path, capsys):
    inp = _vectors(tmp_path, "linear")
    assert "unknown algorithm" in _error(capsys, ["run", "--algo", "softmax", "--in", str(inp), "--out", str(tmp_path / "o.npz")])
    assert "unknown backend" in _error(capsys, ["run", "--algo", "linear", "--in", str(inp), "--out",
                                               str(tmp_path / "o.npz"), "--backend", "fpga"])
    assert "vectors" and "T:" in _error(capsys, ["vectors", "--algo", "vla", "--T", "0", "--out", str(tmp_path / "v.npz")])


@pytest.mark.parametrize("algo,params", [("annihilation", ["k=3"]), ("vla", []), ("linear", []), ("deltanet", [])])
def test_run_fixed_backend_matches_model_and_float_names(tmp_path, algo, params):
    from specmem.algorithms import get_algorithm, parse_params
    from specmem.golden.fixed import run_fixed

    inp = _vectors(tmp_path, algo, T=20, d=6)
    out = tmp_path / "fx.npz"
    argv = ["run", "--algo", algo, "--in", str(inp), "--out", str(out), "--backend", "fixed", "--format", "int16"]
    for p in params:
        argv += ["--param", p]
    assert main(argv) == 0
    spec = get_algorithm(algo)
    with np.load(inp) as f:
        inputs = {n: f[n] for n in spec.inputs}
    ref = run_fixed(algo, inputs, "int16", parse_params(spec, params))
    flt = spec.golden()(**inputs, **parse_params(spec, params))
    with np.load(out) as f:
        for name in ref:
            np.testing.assert_array_equal(f[name], ref[name], err_msg=name)
        for name in spec.outputs:
            if name not in ("orth", "count"):
                assert name in f.files and f[name].shape == flt[name].shape, name
        for name in (("u", "y") if algo == "annihilation" else ("o", "s")):
            assert f"{name}_raw" in f.files and f[f"{name}_raw"].dtype == np.int64, name


def test_fixed_format_errors(tmp_path, capsys):
    inp = _vectors(tmp_path, "vla")
    base = ["run", "--algo", "vla", "--in", str(inp), "--out", str(tmp_path / "o.npz")]
    assert "format" in _error(capsys, base + ["--backend", "fixed", "--format", "int4"])
    assert "format:" in _error(capsys, base + ["--format", "int8"])


def test_rtl_commands_take_only_the_rtl_formats(tmp_path, capsys):
    """The RTL is bit-exact with the legacy fixed-binary-point formats and, for the annihilation
    (core v2), int18/int16/int8: ``--backend verilator``, ``specmem rtl`` and ``specmem sim``
    reject the others (the scaled int8 of VLA and linear attention, the reference wide) with one line,
    before anything is built."""
    inp = _vectors(tmp_path, "annihilation")
    run = ["run", "--algo", "annihilation", "--in", str(inp), "--out", str(tmp_path / "o.npz"), "--param", "k=3",
           "--backend", "verilator"]
    legacy = "the RTL implements legacy-int8, legacy-int16, legacy-wide"
    err = _error(capsys, run + ["--format", "wide"])
    assert f"format: {legacy}" in err and "int18, int16, int8 (core v2); got 'wide'" in err
    assert "orth_policy: the annihilation RTL at int18 (core v2) implements 'evict'" in _error(
        capsys, run + ["--format", "int18", "--param", "orth_policy=skip"])
    rtl = ["rtl", "--algo", "annihilation", "--d", "16", "--k", "4", "--out", str(tmp_path / "rtl"), "--no-lint"]
    assert f"preset: {legacy}" in _error(capsys, rtl + ["--format", "wide"])
    assert "core: core v1 implements" in _error(capsys, rtl + ["--format", "int18", "--core", "v1"])
    assert "core: only the annihilation" in _error(capsys, ["rtl", "--algo", "vla", "--d", "16", "--k", "4", "--out",
                                                            str(tmp_path / "rtl"), "--core", "v2"])
    assert f"preset: {legacy}" in _error(capsys, ["sim", "--format", "wide"])
    vla = ["run", "--algo", "vla", "--in", str(_vectors(tmp_path, "vla")), "--out", str(tmp_path / "o.npz"),
           "--backend", "verilator"]
    assert "'int18' is the scaled golden-model format" in _error(capsys, vla + ["--format", "int18"])
    assert not (tmp_path / "o.npz").exists() and not (tmp_path / "rtl").exists()


def test_rtl_int8_delta_rules_write_the_scaled_core(tmp_path, capsys):
    """``specmem rtl --algo gated-deltanet --format int8``: the scaled core's Verilog, linted, with a
    manifest naming its ports, formats and counted cycles; ``--bram ecp5`` brings the DP16KD model;
    the register block and ``in_range`` are refused, not ignored."""
    import json

    out = tmp_path / "g"
    assert main(["rtl", "--algo", "gated-deltanet", "--d", "8", "--k", "4", "--format", "int8", "--bram", "ecp5",
                 "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "steady-state cycles per token: 124, floor d^2/k = 16" in said and "lint-only -Wall: clean" in said
    man = json.loads((out / "specmem_gated_deltanet_scaled.json").read_text())
    assert man["parameters"]["gated"] is True and man["parameters"]["bram"] == "ecp5"
    assert {"i_g", "i_fg", "s_gamma", "s_gamma_f", "i_data", "i_frac"} <= {p["name"] for p in man["ports"]}
    assert (out / "DP16KD.v").is_file() and man["cycles_per_token"]["full_steady_state"] == 124
    out = tmp_path / "d"
    assert main(["rtl", "--algo", "deltanet", "--d", "8", "--k", "4", "--format", "int8", "--dsp", "ecp5",
                 "--out", str(out)]) == 0
    assert "lint-only -Wall: clean" in capsys.readouterr().out and (out / "MULT18X18D.v").is_file()
    assert "MULT18X18D " in (out / "specmem_deltanet_scaled.v").read_text()
    base = ["rtl", "--algo", "deltanet", "--d", "8", "--k", "4", "--format", "int8", "--out", str(tmp_path / "x")]
    assert "dsp: the scaled cores take registered (portable registers) or ecp5" in \
        _error(capsys, base + ["--dsp", "fabric"])
    assert "csr: not a parameter of the scaled deltanet core (int8): the scaled core has no register block" in \
        _error(capsys, base + ["--csr"])
    lin = ["rtl", "--algo", "linear", "--d", "8", "--k", "4", "--format", "int8", "--out", str(tmp_path / "x")]
    assert "heads: only the annihilation core v2 and the scaled deltanet and gated-deltanet cores (--format int8) " \
        "take it, not linear" in _error(capsys, lin + ["--heads", "2"])
    assert not (tmp_path / "x").exists()
    out = tmp_path / "gh"
    assert main(["rtl", "--algo", "gated-deltanet", "--d", "8", "--k", "4", "--format", "int8", "--heads", "2",
                 "--out", str(out)]) == 0
    man = json.loads((out / "specmem_gated_deltanet_scaled.json").read_text())
    assert man["parameters"]["heads"] == 2 and man["parameters"]["gated"] is True
    out = tmp_path / "h"
    assert main(["rtl", "--algo", "deltanet", "--d", "8", "--k", "4", "--format", "int8", "--heads", "2",
                 "--out", str(out)]) == 0
    man = json.loads((out / "specmem_deltanet_scaled.json").read_text())
    assert man["parameters"]["heads"] == 2 and "2 heads in turn" in man["interface"]["i_valid, i_ready"]


def test_rtl_int8_linear_attention_writes_the_scaled_core(tmp_path, capsys):
    """``specmem rtl --algo linear --format int8``: the scaled linear-attention core, linted, its
    manifest naming the z read-out; an unknown parameter refused."""
    import json

    out = tmp_path / "l"
    assert main(["rtl", "--algo", "linear", "--d", "8", "--k", "4", "--format", "int8", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "lint-only -Wall: clean" in said and "floor d^2/k = 16" in said
    man = json.loads((out / "specmem_linear_scaled.json").read_text())
    assert man["parameters"]["algo"] == "linear" and man["parameters"]["eps"] == 1e-4
    assert {"z_data", "z_frac", "i_data", "i_frac", "o_data", "s_data"} <= {p["name"] for p in man["ports"]}
    assert "i_beta" not in {p["name"] for p in man["ports"]}
    assert man["cycles_per_token"]["full_steady_state"] == 126  # the front end at d = 8 (measured in sim)
    base = ["rtl", "--algo", "linear", "--d", "8", "--k", "4", "--format", "int8", "--out", str(tmp_path / "x")]
    assert "csr: not a parameter of the scaled linear core (int8)" in _error(capsys, base + ["--csr"])
    assert not (tmp_path / "x").exists()


def test_rtl_csr_writes_the_register_block_top_and_its_map(tmp_path, capsys):
    """``specmem rtl --csr``: core v2 with two heads behind the AXI4-Lite block, linted, with the
    register files beside it and PARAMS_CORE carrying the format and the heads; DeltaNet's top behind
    its block; the engine refuses."""
    import json

    from specmem.cli import main
    from specmem.rtl.csr import FORMAT_CODES

    out = tmp_path / "csr"
    assert main(["rtl", "--algo", "annihilation", "--d", "8", "--k", "2", "--format", "int8", "--heads", "2", "--csr",
                 "--out", str(out)]) == 0
    assert "lint-only -Wall: clean" in capsys.readouterr().out
    man = json.loads((out / "specmem_annihilation_csr.json").read_text())
    ports = {p["name"] for p in man["ports"]}
    assert man["core"] == "v2" and {"s_axil_araddr", "s_axil_rdata", "s_axis_tdata", "m_axis_tdata"} <= ports
    assert not any(n.startswith("status_") for n in ports)
    fields = {f["name"]: f for r in man["registers"]["registers"] if r["name"] == "PARAMS_CORE" for f in r["fields"]}
    assert (fields["format"]["reset"], fields["heads"]["reset"]) == (FORMAT_CODES["int8"], 2)
    assert {"specmem_csr.h", "registers.md", "specmem_csr.rdl", "specmem_csr.xml"} <= {p.name for p in out.iterdir()}
    assert "| 23:16 | `heads` | RO (constant) | `0x2` |" in (out / "registers.md").read_text()  # the files' map too
    assert "csr: the engine has no register block" in _error(
        capsys, ["rtl", "--algo", "engine", "--d", "16", "--k", "4", "--csr", "--out", str(tmp_path / "e")])
    out = tmp_path / "dn"   # the other rules' tops: the same block, their own counters
    assert main(["rtl", "--algo", "deltanet", "--d", "8", "--k", "2", "--csr", "--out", str(out)]) == 0
    assert "lint-only -Wall: clean" in capsys.readouterr().out
    man = json.loads((out / "specmem_deltanet_csr.json").read_text())
    assert {"s_axil_araddr", "s_axis_tdata"} <= {p["name"] for p in man["ports"]}
    assert [r["name"] for r in man["registers"]["registers"]][-4:] == ["TOKENS", "SATURATIONS", "ORTH_INPUTS",
                                                                        "FRAMING_ERRORS"]


def test_rtl_fe_lanes_sets_the_vla_front_end(tmp_path, capsys):
    """``--fe-lanes`` reaches the VLA core (its manifest names the lanes) and is refused, with
    one line, for a non-divisor of k and for the other rules."""
    vla = ["rtl", "--algo", "vla", "--d", "8", "--k", "4", "--no-lint", "--out", str(tmp_path / "v")]
    assert "fe_lanes: must be a divisor of k (4), got 3" in _error(capsys, vla + ["--fe-lanes", "3"])
    assert "fe_lanes: only the VLA core takes it, not linear" in _error(
        capsys, ["rtl", "--algo", "linear", "--d", "8", "--k", "4", "--fe-lanes", "2", "--out", str(tmp_path / "l")])
    assert not (tmp_path / "v").exists() and not (tmp_path / "l").exists()
    assert main(vla + ["--fe-lanes", "2"]) == 0
    man = json.loads((tmp_path / "v" / "specmem_vla.json").read_text())
    assert man["engines"]["front_end"]["lanes"] == 2


def test_rtl_chain_lanes_sets_the_scaled_vla_chain(tmp_path, capsys):
    """``--chain-lanes`` reaches the scaled VLA core (its manifest names the lanes; fewer lanes,
    more cycles per token) and is refused, with one line and nothing written, for a value that does
    not divide k by a power of two, for the other rules and for the legacy VLA core."""
    vla = ["rtl", "--algo", "vla", "--format", "int8", "--d", "8", "--k", "4", "--no-lint"]
    assert "chain_lanes: must divide k = 4 by a power of two, got 3" in _error(
        capsys, vla + ["--chain-lanes", "3", "--out", str(tmp_path / "x")])
    assert "chain_lanes: only the scaled VLA core (--algo vla --format int8) takes it, not linear int8" in _error(
        capsys, ["rtl", "--algo", "linear", "--format", "int8", "--d", "8", "--k", "4", "--chain-lanes", "2",
                 "--out", str(tmp_path / "x")])
    assert "chain_lanes: only the scaled VLA core" in _error(
        capsys, ["rtl", "--algo", "vla", "--d", "8", "--k", "4", "--chain-lanes", "2", "--out", str(tmp_path / "x")])
    assert "fe_lanes: the scaled VLA core (--format int8) takes --chain-lanes instead" in _error(
        capsys, vla + ["--fe-lanes", "2", "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists()
    cycles = {}
    for c in (None, 2):
        out = tmp_path / f"c{c}"
        assert main(vla + ["--out", str(out)] + ([] if c is None else ["--chain-lanes", str(c)])) == 0
        man = json.loads((out / "specmem_vla_scaled.json").read_text())
        assert man["parameters"]["chain_lanes"] == (4 if c is None else c)
        cycles[c] = man["cycles_per_token"]["full_steady_state"]
    assert cycles[2] > cycles[None]  # the feeds take d/c beats (the counts are simulated in tests/rtl)


def test_rtl_command_defaults_are_legacy_int8():
    from specmem.cli import build_parser

    from specmem.cli import SIM_DEFAULTS

    p = build_parser()
    assert p.parse_args(["synth"]).format == "legacy-int8"
    # rtl leaves it unset: legacy-int8 for every core but the annihilation with --core v2 (int18)
    assert p.parse_args(["rtl", "--algo", "engine", "--d", "16", "--k", "4", "--out", "x"]).format is None
    # sim leaves its options unset (so --mutants can refuse the ones given) and fills them from SIM_DEFAULTS
    assert p.parse_args(["sim"]).format is None and SIM_DEFAULTS["format"] == "legacy-int8"


def test_batch_run_reports_batch_times_tokens(tmp_path, capsys):
    """A [2, 3, T, d] input is 2 x 3 x T tokens, and the summary line says so."""
    inp = _vectors(tmp_path, "linear", T=12, d=4, extra=["--batch", "2", "--batch", "3"])
    capsys.readouterr()
    assert main(["run", "--algo", "linear", "--in", str(inp), "--out", str(tmp_path / "o.npz")]) == 0
    assert "72 tokens (2 x 3 x 12: batch x T)" in capsys.readouterr().out


def test_saturation_is_a_warning_with_its_count(tmp_path, capsys):
    """Inputs beyond a fixed format's range: one ``specmem: warning:`` line per saturated tensor,
    whose count is the ``sat_<tensor>`` the run writes."""
    rng = np.random.default_rng(0)
    arrays = {n: rng.standard_normal((20, 8)) * (50 if n in ("k", "v") else 1) for n in ("k", "v", "q", "u")}
    np.savez(tmp_path / "big.npz", **arrays)
    out = tmp_path / "o.npz"
    assert main(["run", "--algo", "vla", "--in", str(tmp_path / "big.npz"), "--out", str(out), "--backend", "fixed",
                 "--format", "legacy-int8"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err and all(line.startswith("specmem: warning: ") for line in err), err
    with np.load(out) as f:
        for tensor in ("k", "v"):
            n = int(f[f"sat_{tensor}"])
            assert n > 0 and f"vla in legacy-int8: {n} saturated value(s) in {tensor}" in "\n".join(err)


@pytest.mark.slow
def test_sim_prints_the_waveform_path(capsys):
    """``specmem sim --waves`` names the VCD it wrote (and the file is there)."""
    import re

    assert main(["sim", "--tokens", "20", "--waves"]) == 0
    found = re.search(r"specmem sim: waveform (\S+)", capsys.readouterr().out)
    assert found and os.path.exists(found.group(1))


def test_board_command_defaults():
    """``specmem board``: build's small default configuration and folder, run's build folder and
    timeout (the baud rate comes from the build's manifest unless given)."""
    from specmem.board import DEFAULT_OUT
    from specmem.cli import build_parser

    p = build_parser()
    from specmem.board import DEFAULTS

    b = p.parse_args(["board", "build"])
    # unset, so that run can tell a requested parameter from none; build fills them from DEFAULTS
    assert (b.d, b.k, b.preset, b.out, b.baud) == (None, None, None, None, None) and DEFAULT_OUT == "out/board"
    assert DEFAULTS == {"d": 16, "k": 4, "preset": "legacy-int8"} and b.clock == 12.5
    r = p.parse_args(["board", "run", "--port", "/dev/ttyUSB0", "--in", "x.npz", "--out", "o.npz"])
    assert (r.build, r.timeout, r.baud) == ("out/board", 2.0, None)
