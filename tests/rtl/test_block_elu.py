"""BlockElu1 against ``golden/fixed/scaled/elu.elu1_block``, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.elu import FRAC_HI, TOP_MAX, elu1_block
from specmem.rtl.elu import BlockElu1
from specmem.rtl.testing import VectorBeats, run_simulation


def _vectors(rng, n, d, M):
    """Block vectors over the whole input window: scales from 2^-40 (past FRAC_HI: the
    pre-rounding) to just below 2^TOP_MAX, all-negative and all-positive vectors, zero elements
    and all-zero vectors (frac 0)."""
    scale = np.exp2(rng.uniform(-40, TOP_MAX - 0.01, (n, 1)))
    x = rng.standard_normal((n, d))
    x = x / np.max(np.abs(x), axis=-1, keepdims=True) * scale
    sel = rng.random(n)
    x[sel < 0.15] = -np.abs(x[sel < 0.15])
    x[(sel >= 0.15) & (sel < 0.25)] = np.abs(x[(sel >= 0.15) & (sel < 0.25)])
    x[rng.random((n, d)) < 0.1] = 0
    x[rng.random(n) < 0.05] = 0
    return quantize_block(x, M)


def _run(dut, raw, frac, *, stall=0.0, gap=0.0, seed=0):
    rng = np.random.default_rng(seed)
    w, B = dut.lanes, dut.beats
    n = raw.shape[0]
    out, err = VectorBeats(w, B), []
    order = [(i, b) for i in range(n) for b in range(B)]

    async def tb(ctx):
        j = 0
        while len(out.got) < n:
            en = rng.random() >= stall
            i, b = order[j] if j < len(order) else (None, None)
            feed = i is not None and (b > 0 or rng.random() >= gap)
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            for lane in range(w):
                ctx.set(dut.i_data[lane], int(raw[i, b * w + lane]) if feed else int(rng.integers(-100, 100)))
            ctx.set(dut.i_frac, int(frac[i]) if feed else int(rng.integers(-60, 60)))
            await ctx.tick()
            if en:
                j += int(feed)
                out.take(ctx, dut)
        err.append(ctx.get(dut.o_err))

    run_simulation(dut, tb, deadline_cycles=(20 + 4 * dut.latency) * n + 400)
    return out.got, err[0]


@pytest.mark.parametrize("lanes,beats,M,L", [(4, 2, 8, 4), (2, 4, 8, 4), (3, 1, 18, 6)])
def test_random_vectors_bit_exact_with_stalls_and_gaps(lanes, beats, M, L):
    rng = np.random.default_rng(lanes * 10 + beats + M)
    raw, frac = _vectors(rng, 60, lanes * beats, M)
    assert frac.max() > FRAC_HI and frac.min() <= M - 1 - TOP_MAX + 1  # both ends of the window reached
    dut = BlockElu1(lanes, beats, M, L)
    got, err = _run(dut, raw, frac, stall=0.2, gap=0.3, seed=lanes)
    want, wf = elu1_block(raw, frac, M, L)
    assert not err
    assert [g for g, _ in got] == want.tolist()
    assert [f for _, f in got] == wf.tolist()


def test_back_to_back_vectors_at_full_rate_in_block_ram_wait():
    rng = np.random.default_rng(4)
    raw, frac = _vectors(rng, 40, 16, 8)
    dut = BlockElu1(4, 4, 8, 4, delay_style="behavioural")
    got, err = _run(dut, raw, frac)
    want, wf = elu1_block(raw, frac, 8, 4)
    assert not err and [g for g, _ in got] == want.tolist() and [f for _, f in got] == wf.tolist()


def test_an_input_beyond_the_window_raises_the_error_flag():
    """max |x| >= 2^TOP_MAX: frac below the window; the flag rises (and stays up) only then."""
    M = 8
    x = np.array([[3.0, -1.0, 0.5, 2.0], [-(2.0 ** TOP_MAX), 1.0, 0.0, 4.0]])
    raw, frac = quantize_block(x, M)
    assert frac[1] == M - 2 - TOP_MAX
    dut = BlockElu1(2, 2, M, 4)
    _, err = _run(dut, raw[:1], frac[:1])
    assert not err
    _, err = _run(BlockElu1(2, 2, M, 4), raw, frac)
    assert err


def test_every_int8_mantissa_at_every_exponent_of_the_window():
    """Single-element vectors: each of the 256 int8 mantissas at every exponent from the window's
    low end to FRAC_HI (8,448 vectors back to back). A one-element block keeps its element's own
    rounding, so the interpolation's floor is seen here (rounded half up instead, 41 of these elements
    change; in the random multi-element vectors none did)."""
    M, L = 8, 4
    fr = np.arange(M - 1 - TOP_MAX, FRAC_HI + 1)
    raw = np.tile(np.arange(-128, 128), len(fr))[:, None]
    frac = np.repeat(fr, 256)
    dut = BlockElu1(1, 1, M, L)
    got, err = _run(dut, raw, frac)
    want, wf = elu1_block(raw, frac, M, L)
    assert not err
    assert [g[0] for g, _ in got] == want[:, 0].tolist()
    assert [f for _, f in got] == wf.tolist()
