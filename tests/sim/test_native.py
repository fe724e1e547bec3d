"""The native Verilator harness (``specmem sim --engine native``, ``sim/native``): bit exact
against the golden model under random idle gaps, backpressure and mid-stream resets; a corrupted
output, tuser or counter is named by token and field; bad input ends in one error line.

Small configurations only (d=16, k=4; each harness build is cached under ``build/native``); the
10^6-token soaks are ``slow``. No test looks at the speed (verdicts never depend on wall time)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specmem.cli import main
from specmem.golden.common import SpecmemInputError
from specmem.sim import stimulus
from specmem.sim.native import (CUTS, _schedule, compare_run, design_for, read_tokens, simulate_native, soak)


def _seed_with_every_cut(tokens: int, every: int, in_beats: int) -> int:
    """A seed whose schedule ends segments in each of the four ways (the schedule is seeded)."""
    for seed in range(100):
        if {kind for _, kind, _ in _schedule(tokens, every, seed, in_beats)[:-1]} == set(range(len(CUTS))):
            return seed
    raise AssertionError("no seed in 0..99 covers every cut")


@pytest.fixture(scope="module")
def ann_run():
    """300 tokens (d=16, k=4) in segments of 40 with every kind of reset; files kept."""
    seed = _seed_with_every_cut(300, 40, 4)
    res = simulate_native("annihilation", 16, 4, 300, seed, reset_every=40, quiet=True, name="test-resets")
    return res


def test_annihilation_bit_exact_one_stream(capsys):
    """One stream (no reset after the first), random gaps and backpressure, the cocotb engine's
    stimulus for the same seed: every output element and the counters equal the golden model's."""
    res = simulate_native("annihilation", 16, 4, 250, 3, name="test-one")
    assert res.passed, res.errors
    assert res.tokens == res.tokens_compared == 250 and res.segments == 1 and res.drained == 1
    assert res.cycles > 250 * 16 and res.cycles_per_s > 0 and res.tokens_per_s > 0
    out = capsys.readouterr().out
    assert "PASS (native)" in out and "cycles/s" in out and "tokens/s" in out
    X = np.fromfile(Path(res.run_dir) / "tokens.bin", dtype=np.int8).reshape(-1, 16)
    assert np.array_equal(X, stimulus.quantize(stimulus.make("mixed", 3, 250, 16, 4), 4))  # tb_top's stream


def test_annihilation_bit_exact_with_resets(ann_run):
    """Segments of 40 tokens, each started by a synchronous reset and ended by draining, a reset
    inside a token's beats, right after the last input beat or in the middle of an output token:
    outputs are the golden model's prefix per segment, the counters agree at every token."""
    res = ann_run
    assert res.passed, res.errors
    assert res.segments == 8 and all(n > 0 for n in res.counts["segments_by_end"].values())
    assert res.tokens_compared < res.tokens  # the cuts dropped outputs that were still pending


def test_corrupted_output_names_token_and_field(ann_run, tmp_path):
    """One flipped output bit, one wrong status value after a token, one wrong saturation count:
    each is caught and named (token index in the input file, segment, field, element/beat/lane)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ann_run.run_dir, run)
    segs = json.loads((run / "summary.json").read_text())["segments"]
    s = segs[2]
    y = np.fromfile(run / "y.bin", dtype=np.int16).reshape(-1, 16)
    y[s["out_start"] + 7, 6] ^= 1
    y.tofile(run / "y.bin")
    res = compare_run(run)
    assert not res.passed and res.mismatched_tokens == 1
    tok = s["start"] + 7
    assert res.first.token == tok and res.first.field == "y"
    assert res.first.line().startswith(f"token {tok} (segment 2, its token 7), field y: element 6 (beat 1, lane 2)")
    y[s["out_start"] + 7, 6] ^= 1
    y.tofile(run / "y.bin")
    assert compare_run(run).passed

    names = json.loads((run / "summary.json").read_text())["status_names"]
    st = np.fromfile(run / "status.bin", dtype=np.int64).reshape(-1, len(names))
    st[s["start"] + 20, names.index("orth_count")] += 1
    st.tofile(run / "status.bin")
    res = compare_run(run)
    assert not res.passed and res.first.token == s["start"] + 20 and res.first.field == "status_orth_count"
    st[s["start"] + 20, names.index("orth_count")] -= 1
    st.tofile(run / "status.bin")

    summ = json.loads((run / "summary.json").read_text())
    last = len(summ["segments"]) - 1
    summ["segments"][last]["counters"][names.index("saturations")] += 1
    (run / "summary.json").write_text(json.dumps(summ))
    res = compare_run(run)
    assert not res.passed and res.first.field == "status_saturations" and res.first.segment == last
    assert "at the segment's end" in res.first.line()


def test_vla_bit_exact_and_tuser_checked(tmp_path):
    """VLA (4d elements per token, o_frac on m_axis_tuser) with gaps, backpressure and resets;
    a wrong tuser on one beat is named."""
    res = simulate_native("vla", 16, 4, 60, 1, reset_every=20, quiet=True, name="test-vla")
    assert res.passed, res.errors
    assert res.segments == 3
    run = Path(res.run_dir)
    u = np.fromfile(run / "user.bin", dtype=np.int32).reshape(-1, 4)
    u[5, 3] += 1
    u.tofile(run / "user.bin")
    bad = compare_run(run)
    assert not bad.passed and bad.first.field == "tuser" and bad.first.token == 5
    assert "beat 3: expected o_frac" in bad.first.line()


def test_cli_native_runs_a_token_file(tmp_path, capsys):
    """``specmem sim --engine native --in FILE``: text, one token per line."""
    X = np.random.default_rng(0).integers(-128, 128, (30, 16))
    np.savetxt(tmp_path / "t.txt", X, fmt="%d")
    assert main(["sim", "--engine", "native", "--in", str(tmp_path / "t.txt"), "--seed", "2"]) == 0
    assert "PASS (native): 30 output tokens bit exact" in capsys.readouterr().out
    assert np.array_equal(read_tokens(tmp_path / "t.txt", 16, 8), X)


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specmem: error: "), err
    return err[0]


@pytest.mark.parametrize("argv,needle", [
    (["--algo", "linear"], "algo: the native engine simulates annihilation and vla only"),
    (["--algo", "nope"], "algo: the native engine simulates annihilation and vla only"),
    (["--in", "/nonexistent/tokens.npy"], "in: no such file: /nonexistent/tokens.npy"),
    (["--reset-every", "0"], "reset_every: must be an integer >= 1"),
    (["--d", "18"], "d: must be a multiple of k"),
    (["--waves"], "engine: --waves runs on the cocotb engine only"),
    (["--mutants"], "engine: --mutants runs on the cocotb engine only"),
    (["--soak", "--in", "x.npy"], "in: --soak makes its own seeded stream"),
])
def test_native_bad_input_one_line(capsys, argv, needle):
    assert needle in _error(capsys, ["sim", "--engine", "native", *argv])


def test_bad_token_files_and_cocotb_refusals(tmp_path, capsys):
    (tmp_path / "short.txt").write_text("1 2 3\n")
    assert "in: " in _error(capsys, ["sim", "--engine", "native", "--in", str(tmp_path / "short.txt")])
    np.save(tmp_path / "big.npy", np.full((3, 16), 300))
    assert "does not fit the 8-bit input format" in _error(
        capsys, ["sim", "--engine", "native", "--in", str(tmp_path / "big.npy")])
    assert "engine: --reset-every applies to the native engine only" in _error(capsys, ["sim", "--reset-every", "5"])
    assert "engine: --engine applies to 'specmem bench sim' only" in _error(
        capsys, ["bench", "golden", "--engine", "native"])
    with pytest.raises(SpecmemInputError, match="algo: the native engine"):
        design_for("deltanet", 16, 4)


@pytest.mark.slow
@pytest.mark.parametrize("algo,d,k", [("annihilation", 64, 8), ("vla", 16, 4)])
def test_soak_million_tokens(algo, d, k):
    """10^6 tokens with gaps, backpressure and a reset every 1000 tokens, bit exact."""
    res = soak(algo, d, k, tokens=10**6, seed=0, quiet=True)
    assert res.passed, res.errors
    assert res.segments == 1000 and res.tokens > 990_000
