"""The board design end to end in Verilator (``sim/tb_board.py``): ``host/board.py``'s driver, the
code of ``specmem board run``, talks to :class:`~specmem.rtl.board.BoardTop` through its UART pins
(4 clock cycles per bit) at d = 8, k = 2; outputs and counters are compared with the golden
fixed-point model here too, independently of the driver's own check; a corrupted reply byte is
named by token and field; a bitstream with other parameters is refused. The build is cached in
``build/sim/board-*/`` like the other designs'."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.sim import build as simbuild
from specmem.sim.build import Build, run_cocotb

TB = "specmem.sim.tb_board"
TOP = "specmem_board"
D, K, PRESET, DIVISOR = 8, 2, "legacy-int8", 4


def build_board(d: int, k: int, preset: str, divisor: int) -> Build:
    """Verilog of ``BoardTop`` and its Verilator build (reused when the hash matches), with the same
    flags, runtime-object cache and make variables as ``sim/build.py``'s designs."""
    from amaranth.back import verilog

    from specmem.rtl.board import BoardTop

    top = BoardTop(d, k, preset, divisor=divisor)
    text = verilog.convert(top, name=TOP)
    manifest = {"top": TOP, **top.manifest()}
    return simbuild.build_verilog_text(text, TOP, f"board-d{d}k{k}-{preset}", manifest)


def _stream(seed: int, T: int) -> np.ndarray:
    """Raw legacy-int8 tokens: random ones, an orthogonal one (token 2 has no support where the
    two stored directions, tokens 0 and 1, have theirs), a zero token, a repeated token, and
    full-scale tokens (saturations)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-40, 41, size=(T, D))
    X[:2, D // 2:] = 0
    X[2, :D // 2] = 0
    X[4] = 0
    X[5] = X[3]
    X[7] = rng.choice([-128, 127], size=D)
    X[8] = 127
    return X


def _golden(X: np.ndarray) -> dict:
    """The golden fixed-point model on raw tokens, straight from ``golden/fixed`` (not via the
    driver's ``expected_outputs``)."""
    from specmem.golden.fixed.annihilation import annihilation_fixed
    from specmem.golden.fixed.formats import formats_for

    frac = formats_for("annihilation", PRESET, D, {"k": K, "in_range": None})["x"].frac
    return annihilation_fixed(np.ldexp(X.astype(np.float64), -frac), K, PRESET, trace=False)


@pytest.fixture(scope="module")
def board_run():
    b = build_board(D, K, PRESET, DIVISOR)
    X = _stream(1, 32)
    Xc = _stream(2, 12)[[0, 1, 3]]          # two warm-up tokens, then a full-rank one (y != 0)
    # the bit to flip: token 2's output beat 1 (the 10th beat read), data byte 1 (the high byte of
    # lane 0: y is 16 bits wide), bit 6
    corrupt = {"beat": 2 * (D // K) + 1, "byte": 1, "bit": 6}
    run = run_cocotb(b, TB, {"name": "board", "tokens": X.tolist(), "corrupt_tokens": Xc.tolist(),
                             "corrupt": corrupt})
    return b, run, X, Xc


def test_stream_through_the_pins_matches_the_golden_model(board_run):
    b, run, X, _ = board_run
    assert set(run.tests) == {"stream_and_check", "corrupted_reply_is_named", "refusals"}, run.describe()
    assert run.tests["stream_and_check"], run.describe()
    rec = run.record["stream_and_check"]
    ref = _golden(X)
    np.testing.assert_array_equal(np.array(rec["y_raw"]), ref["y_raw"])
    beats = D // K
    assert rec["last"] == [[b == beats - 1 for b in range(beats)]] * len(X)
    sat = sum(int(v) for n, v in ref["sat"].items() if n != "x")
    assert (rec["tokens"], rec["saturations"], rec["orth_count"]) == (len(X), sat, int(np.sum(ref["orth"])))
    assert (rec["count"], rec["orth_flag"], rec["framing_errors"], rec["busy"]) == (int(ref["count"]), 1, 0, 0)
    # the stream exercises what the counters count
    assert sat > 0 and int(np.sum(ref["orth"])) >= 1
    assert rec["mismatch"] is None and rec["stop_errors"] == 0
    # LEDs: orthogonal input seen (1), saturations (2), no bridge error (3)
    assert rec["leds"] & 0b1110 == 0b0110


def test_corrupted_reply_names_token_and_field(board_run):
    _, run, _, Xc = board_run
    rec = run.record["corrupted_reply_is_named"]
    ref = _golden(Xc)
    # beat 1 of token 2, lane 0 -> element 1 * k = 2; bit 6 of its high byte = bit 14 of the element
    want_raw = int(ref["y_raw"][2, 2])
    assert want_raw != 0
    flipped = ((want_raw & 0xFFFF) ^ (1 << 14))
    flipped -= (1 << 16) if flipped >> 15 else 0
    assert (rec["token"], rec["field"]) == (2, "y[2]"), rec
    assert (rec["got"], rec["want"]) == (flipped, want_raw), rec
    assert "token 2, field y[2]" in rec["mismatch"]


def test_refusals(board_run):
    _, run, _, _ = board_run
    assert run.tests["refusals"], run.describe()
    rec = run.record["refusals"]
    assert rec["wrong_k"].startswith("bitstream: the board reports d=8, k=2") and "k=4" in rec["wrong_k"]
    assert rec["identity"] == {"d": D, "k": K, "preset": PRESET, "core": "annihilation"}
    assert rec["bad_opcode_reply"] == 0xEE
    assert "AXI response 2" in rec["unmapped"]
    assert rec["ping"] == [1, 2, 4]          # protocol 1; beats of 2 x 8 bits in, 2 x 16 bits out
    assert rec["silence"].startswith("simulated board: no answer")


@pytest.mark.slow
def test_core_v2_on_the_board_matches_the_golden_model():
    """The board with the annihilation core v2 (``int8``, co-accumulated Gram, evicting orthogonal
    inputs) behind the same bridge and registers: the driver's stream and its own check, then the
    outputs and counters against ``golden/fixed`` here. A build of several minutes: slow."""
    from specmem.golden.fixed.annihilation import annihilation_fixed
    from specmem.golden.fixed.formats import formats_for
    from specmem.sim.model import V2_SAT_TENSORS

    b = build_board(D, K, "int8", DIVISOR)
    X = _stream(1, 24)
    run = run_cocotb(b, TB, {"name": "board-v2", "tokens": X.tolist(), "corrupt_tokens": X[:3].tolist(),
                             "corrupt": {"beat": 2 * (D // K) + 1, "byte": 1, "bit": 6}})
    assert run.tests.get("stream_and_check"), run.describe()
    rec = run.record["stream_and_check"]
    assert rec["mismatch"] is None and rec["stop_errors"] == 0
    frac = formats_for("annihilation", "int8", D, {"k": K, "in_range": None})["x"].frac
    ref = annihilation_fixed(np.ldexp(X.astype(np.float64), -frac), K, "int8", gram="coaccumulate",
                             orth_policy="evict", trace=False)
    np.testing.assert_array_equal(np.array(rec["y_raw"]), ref["y_raw"])
    sat = sum(int(ref["sat"][n]) for n in V2_SAT_TENSORS)
    assert (rec["tokens"], rec["saturations"], rec["orth_count"]) == (len(X), sat, int(np.sum(ref["orth"])))
    assert int(np.sum(ref["orth"])) >= 1 and np.any(ref["y_raw"] != 0)
    assert run.record["refusals"]["identity"] == {"d": D, "k": K, "preset": "int8", "core": "annihilation"}
