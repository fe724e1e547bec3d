"""``specmem accuracy --in``: every format against float64 on the user's inputs; bad arguments."""

import json

import pytest

from specmem.cli import main


def _vectors(tmp_path, algo, T=40, d=8):
    path = tmp_path / f"{algo}.in.npz"
    assert main(["vectors", "--algo", algo, "--T", str(T), "--d", str(d), "--seed", "1", "--out", str(path)]) == 0
    return path


def _error(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specmem: error: "), err
    return err[0]


def test_table_and_json_for_every_supported_format(tmp_path, capsys):
    inp = _vectors(tmp_path, "deltanet")
    out = tmp_path / "cmp.json"
    assert main(["accuracy", "--in", str(inp), "--algo", "deltanet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    res = json.loads(out.read_text())
    names = [r["format"] for r in res["rows"]]
    assert names == ["int8", "int18", "int16", "wide", "legacy-int8", "legacy-int16", "legacy-wide"]
    for n in names:
        assert f"\n{n} " in text
    err = {r["format"]: r["median_o_err"] for r in res["rows"]}
    assert err["wide"] < 1e-5 < err["int18"] < err["int8"] < 0.1 and err["int8"] < err["legacy-int8"]


def test_annihilation_angles(tmp_path, capsys):
    inp = _vectors(tmp_path, "annihilation", T=60)
    assert main(["accuracy", "--in", str(inp), "--algo", "annihilation", "--param", "k=2",
                 "--format", "int18,legacy-int8"]) == 0
    text = capsys.readouterr().out
    assert "median angle" in text and "\nint18 " in text and "\nlegacy-int8 " in text


@pytest.mark.parametrize("argv,needle", [
    (["--algo", "deltanet"], "in: --in and --algo go together"),
    (["--format", "int8"], "format: --format applies to the comparison"),
    (["--IN", "--algo", "deltanet", "--format", "int4"], "format: must be one of"),
    (["--IN", "--algo", "gated-deltanet", "--format", "int16"], "g"),  # the file lacks g: named by the loader
    (["--IN", "--algo", "deltanet", "--json", "/nonexistent/dir/x.json"], "json: directory does not exist"),
])
def test_bad_arguments_give_one_line(tmp_path, capsys, argv, needle):
    inp = _vectors(tmp_path, "deltanet")
    argv = [str(inp) if a == "--IN" else a for a in argv]
    if str(inp) in argv:
        argv.insert(argv.index(str(inp)), "--in")
    assert needle in _error(capsys, ["accuracy", *argv])


def test_annihilation_parameters_the_fixed_model_lacks_are_refused(tmp_path, capsys):
    inp = _vectors(tmp_path, "annihilation")
    assert "variant: the fixed-point model implements the exact variant only" in _error(
        capsys, ["accuracy", "--in", str(inp), "--algo", "annihilation", "--param", "k=2", "--param", "variant=literal"])


def test_out_is_for_the_reports(tmp_path, capsys):
    inp = _vectors(tmp_path, "deltanet")
    assert "--out write a report" in _error(
        capsys, ["accuracy", "--in", str(inp), "--algo", "deltanet", "--out", str(tmp_path)])


def test_annihilation_needs_k(tmp_path, capsys):
    inp = _vectors(tmp_path, "annihilation")
    assert "k: required" in _error(capsys, ["accuracy", "--in", str(inp), "--algo", "annihilation"])


def test_gated_deltanet_takes_the_legacy_formats(tmp_path, capsys):
    """Gated DeltaNet's fixed-binary-point presets have a model (gated_deltanet_fixed): rows, not a refusal."""
    inp = tmp_path / "g.npz"
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(inp, k=rng.standard_normal((10, 4)), v=rng.standard_normal((10, 4)), q=rng.standard_normal((10, 4)),
             beta=np.ones(10), g=np.full(10, 0.9))
    out = tmp_path / "g.json"
    assert main(["accuracy", "--in", str(inp), "--algo", "gated-deltanet", "--format", "legacy-int8,legacy-wide",
                 "--json", str(out)]) == 0
    err = {r["format"]: r["median_o_err"] for r in json.loads(out.read_text())["rows"]}
    assert 0 < err["legacy-wide"] < 1e-5 < err["legacy-int8"] < 0.2
