"""The bad-input table (issue 15, item 3): each case ends in one ``specmem: error:`` line that names
the argument, exit status 2, no traceback, and no output file left behind."""

import os
import subprocess
import sys

import numpy as np
import pytest

from specmem.cli import main

UNWRITABLE = "/proc/specmem-out"  # /proc takes no new files, not even from root


@pytest.fixture
def work(tmp_path):
    """A folder with good and bad input files; returns (folder, {name: path})."""
    rng = np.random.default_rng(0)
    vla = {n: rng.standard_normal((24, 6)) for n in ("k", "v", "q", "u")}  # > refresh_period 20: eta acts
    files = {"vla": tmp_path / "vla.npz", "ann": tmp_path / "ann.npz", "empty": tmp_path / "empty.npz",
             "trunc": tmp_path / "trunc.npz", "npy": tmp_path / "x.npy", "complex": tmp_path / "complex.npz",
             "object": tmp_path / "strings.npz"}
    np.savez(files["vla"], **vla)
    np.savez(files["ann"], x=rng.standard_normal((12, 6)))
    files["empty"].write_bytes(b"")
    files["trunc"].write_bytes(files["vla"].read_bytes()[:200])
    np.save(files["npy"], vla["k"])
    np.savez(files["complex"], **{**vla, "k": vla["k"] * (1 + 1j)})
    np.savez(files["object"], **{**vla, "q": np.array(["a"] * 6)})
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    return tmp_path, {n: str(p) for n, p in files.items()}


def _run(t, f):
    return ["run", "--algo", "vla", "--in", f["vla"], "--out", str(t / "o.npz")]


def _board_build(t, d=6):
    """A 'specmem board build' manifest (no bitstream) for a d x 2 build, inside the existing
    folder adir (so that the listing of the work folder does not change); returns the folder."""
    import json

    from specmem.board import MANIFEST_NAME
    from specmem.rtl.board import BoardTop

    folder = t / "adir" / f"board-d{d}"
    folder.mkdir(exist_ok=True)
    from specmem.sim.build import _silence

    top = BoardTop(d, 2, divisor=217)
    (folder / MANIFEST_NAME).write_text(json.dumps(top.manifest(), default=str))
    _silence(top)  # built for its manifest only
    return str(folder)


def _board_run(t, f, **kw):
    argv = {"--port": "/dev/null", "--in": f["ann"], "--out": str(t / "o.npz"), "--build": str(t / "nobuild")}
    argv.update(kw)
    return ["board", "run"] + [x for kv in argv.items() for x in kv]


# (id, argv builder, text the error line must contain: the argument's name first)
CASES = [
    ("run-in-text-file", lambda t, f: ["run", "--algo", "vla", "--in", str(t / "afile"), "--out", str(t / "o.npz")],
     "in: "),
    ("synth-freq-negative", lambda t, f: ["synth", "--algo", "annihilation", "--d", "8", "--k", "2", "--freq", "-1",
                                          "--out", str(t / "syn")], "freq: must be"),
    ("run-out-missing-dir", lambda t, f: _run(t, f)[:-1] + [str(t / "nope" / "o.npz")], "out: directory does not exist"),
    ("run-out-unwritable", lambda t, f: _run(t, f)[:-1] + [UNWRITABLE + "/o.npz"], "out: "),
    ("run-out-is-dir", lambda t, f: _run(t, f)[:-1] + [str(t / "adir")], "out: "),
    ("vectors-out-missing-dir", lambda t, f: ["vectors", "--algo", "vla", "--out", str(t / "nope" / "v.npz")],
     "out: directory does not exist"),
    ("vectors-out-unwritable", lambda t, f: ["vectors", "--algo", "vla", "--out", UNWRITABLE + "/v.npz"], "out: "),
    ("vectors-out-is-dir", lambda t, f: ["vectors", "--algo", "vla", "--out", str(t / "adir")], "out: "),
    ("claims-out-unwritable", lambda t, f: ["claims", "--out", UNWRITABLE], "out: "),
    ("claims-out-is-file", lambda t, f: ["claims", "--out", str(t / "afile")], "out: "),
    ("accuracy-out-unwritable", lambda t, f: ["accuracy", "--out", UNWRITABLE], "out: "),
    ("accuracy-json-is-dir", lambda t, f: ["accuracy", "--in", f["vla"], "--algo", "vla", "--json", str(t / "adir")],
     "json: "),
    ("accuracy-json-missing-dir", lambda t, f: ["accuracy", "--in", f["vla"], "--algo", "vla", "--json",
                                                str(t / "nope" / "r.json")], "json: directory does not exist"),
    ("rtl-out-unwritable", lambda t, f: ["rtl", "--algo", "annihilation", "--d", "16", "--k", "4", "--out",
                                         UNWRITABLE], "out: "),
    ("rtl-out-is-file", lambda t, f: ["rtl", "--algo", "annihilation", "--d", "16", "--k", "4", "--out",
                                      str(t / "afile")], "out: "),
    ("regs-out-is-file", lambda t, f: ["regs", "--out", str(t / "afile")], "out: "),
    ("regs-bad-d", lambda t, f: ["regs", "--d", "0", "--out", str(t / "r")], "d: "),
    ("board-build-bad-d", lambda t, f: ["board", "build", "--d", "0", "--out", str(t / "b")], "d: "),
    ("board-build-k-not-dividing", lambda t, f: ["board", "build", "--d", "8", "--k", "3", "--out", str(t / "b")],
     "d: must be a multiple of k"),
    ("board-build-bad-preset", lambda t, f: ["board", "build", "--preset", "wide", "--out", str(t / "b")],
     "preset: "),
    ("board-build-out-is-file", lambda t, f: ["board", "build", "--out", str(t / "afile")], "out: "),
    ("board-build-clock-too-slow", lambda t, f: ["board", "build", "--clock", "1", "--out", str(t / "b")],
     "clock: the ECP5 PLL makes"),
    ("board-build-baud-unreachable", lambda t, f: ["board", "build", "--baud", "9000000", "--out", str(t / "b")],
     "baud: 9000000 is not reachable"),
    ("board-build-with-port", lambda t, f: ["board", "build", "--port", "/dev/ttyUSB0", "--out", str(t / "b")],
     "port: "),
    ("board-run-no-port", lambda t, f: _board_run(t, f)[:2] + _board_run(t, f)[4:], "port: "),
    ("board-run-no-build", lambda t, f: _board_run(t, f), "build: no "),
    ("board-run-out-is-dir", lambda t, f: _board_run(t, f, **{"--out": str(t / "adir")}), "out: "),
    ("board-run-wrong-d", lambda t, f: _board_run(t, f, **{"--build": _board_build(t, 8)}), "in: the board takes"),
    ("board-run-requested-k", lambda t, f: _board_run(t, f, **{"--build": _board_build(t), "--k": "3"}),
     "k: 3 requested, but the build in"),
    ("board-run-port-missing", lambda t, f: _board_run(t, f, **{"--build": _board_build(t), "--port":
                                                                str(t / "ttyUSB9")}), "port: "),
    ("bench-json-is-dir", lambda t, f: ["bench", "golden", "--json", str(t / "adir")], "json: "),
    ("bench-json-missing-dir", lambda t, f: ["bench", "sim", "--json", str(t / "nope" / "b.json")],
     "json: directory does not exist"),
    ("synth-out-unwritable", lambda t, f: ["synth", "--algo", "engine", "--d", "16", "--k", "4", "--out",
                                           UNWRITABLE], "out: "),
    ("mqar-doc-unwritable", lambda t, f: ["mqar", "report", "--doc", UNWRITABLE + "/mqar.md"], "doc: "),
    ("main-out-unwritable", lambda t, f: ["main", "--out", UNWRITABLE], "out: "),
    ("main-out-is-file", lambda t, f: ["main", "--out", str(t / "afile")], "out: "),
    ("empty-npz", lambda t, f: _run(t, f)[:4] + [f["empty"]] + _run(t, f)[5:], "in: "),
    ("truncated-npz", lambda t, f: _run(t, f)[:4] + [f["trunc"]] + _run(t, f)[5:], "in: "),
    ("npy-not-npz", lambda t, f: _run(t, f)[:4] + [f["npy"]] + _run(t, f)[5:], "in: "),
    ("complex-input", lambda t, f: _run(t, f)[:4] + [f["complex"]] + _run(t, f)[5:], "in: array 'k'"),
    ("string-input", lambda t, f: _run(t, f)[:4] + [f["object"]] + _run(t, f)[5:], "in: array 'q'"),
    ("accuracy-complex-input", lambda t, f: ["accuracy", "--in", f["complex"], "--algo", "vla"], "in: array 'k'"),
    ("fixed-shift-overflow", lambda t, f: _run(t, f) + ["--backend", "fixed", "--param", "lambda0=1e-30"],
     "lambda0: the scaled fixed-point VLA model is checked for"),
    ("fixed-legacy-shift-overflow", lambda t, f: _run(t, f) + ["--backend", "fixed", "--format", "legacy-int8",
                                                              "--param", "lambda0=1e-30"], "param: "),
    ("float-overflow", lambda t, f: _run(t, f) + ["--param", "eta=1e300"], "param: "),
    ("vectors-too-large", lambda t, f: ["vectors", "--algo", "vla", "--T", str(10 ** 12), "--out", str(t / "v.npz")],
     "T: "),
    ("sim-tokens-too-many", lambda t, f: ["sim", "--tokens", str(10 ** 13)], "tokens: "),
    ("sim-mutants-with-options", lambda t, f: ["sim", "--mutants", "--algo", "vla", "--d", "8"], "mutants: "),
    ("sim-no-testbench", lambda t, f: ["sim", "--algo", "engine"], "algo: "),
    ("sim-waves-with-coverage", lambda t, f: ["sim", "--coverage", "--waves"], "waves: "),
    ("argparse-bad-int", lambda t, f: ["vectors", "--algo", "vla", "--T", "many", "--out", str(t / "v.npz")],
     "argument --T"),
    ("argparse-missing", lambda t, f: ["run", "--algo", "vla"], "--in"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_error_line(work, capsys, case):
    _, build, needle = case
    tmp, files = work
    before = sorted(os.listdir(tmp))
    try:
        rc = main(build(tmp, files))
    except SystemExit as exc:  # argparse errors exit from inside parse_args
        rc = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("specmem: error: "), err
    assert needle in err[0], err[0]
    assert sorted(os.listdir(tmp)) == before, "an output (or a temporary file) was left behind"


COMMANDS = ["run", "vectors", "claims", "bench", "accuracy", "rtl", "regs", "sim", "synth", "mqar", "board",
            "main"]


def test_every_command_is_in_the_table():
    from specmem.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    assert sorted(sub.choices) == sorted(COMMANDS)


@pytest.mark.parametrize("cmd", [None, *COMMANDS])
def test_help_without_traceback(cmd):
    """``specmem [CMD] --help`` in a fresh interpreter: exit 0, a usage line, nothing on stderr."""
    argv = [sys.executable, "-m", "specmem", *([cmd] if cmd else []), "--help"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.startswith(f"usage: specmem{' ' + cmd if cmd else ''}")


def test_version():
    from specmem import __version__

    res = subprocess.run([sys.executable, "-m", "specmem", "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == f"specmem {__version__}"


def test_entry_point_prints_no_traceback(work):
    """Through the installed entry point: a bad file is one line on stderr, exit 2."""
    tmp, files = work
    res = subprocess.run([sys.executable, "-m", "specmem", "run", "--algo", "vla", "--in", files["empty"], "--out",
                          str(tmp / "o.npz")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().startswith("specmem: error: in: ") and len(res.stderr.strip().splitlines()) == 1
