# amaranth: UnusedElaboratable=no
"""The streaming row-BFP write against ``golden/fixed/scaled/bfp.RowBFP.write``, bit for bit."""

import numpy as np
import pytest

from specmem.golden.fixed.fxtype import msb, round_shift
from specmem.golden.fixed.scaled.bfp import RowBFP, block, product_bound_exp
from specmem.rtl.row_bfp import RowBFPWrite
from specmem.rtl.testing import run_simulation


def _case(rng, rows, n, Ws, M, zero_rows=0.1, zero_prods=0.1, spread=6):
    """A random state (rows of every magnitude, some all zero) and a rank-one product ``bh knᵀ``
    of block vectors (some ``bh_i`` zero), as the delta rules write it."""
    S = RowBFP(1, rows, n, Ws)
    lim = 1 << (Ws - 1)
    tops = rng.integers(0, Ws - 1, rows)  # each row's msb: full rows and rows that cancelled
    S.mant[0] = np.array([rng.integers(-(1 << t), 1 << t, n) for t in tops])
    S.mant[0][rng.random(rows) < zero_rows] = 0
    S.mant = np.clip(S.mant, -lim, lim - 1)
    S.frac[0] = rng.integers(-spread, spread + 1, rows) + 10
    bh, fbh = block(rng.standard_normal(rows) * np.exp(rng.normal(0, 2, rows)), np.int64(8), M)
    bh = np.where(rng.random(rows) < zero_prods, 0, bh)
    kn, fkn = block(rng.standard_normal(n) * 100, np.int64(int(rng.integers(0, 4))), M)
    fbh = int(fbh) + int(rng.integers(-spread, spread + 1))
    return S, bh, int(fbh), kn, int(fkn)


def _reference(S, bh, fbh, kn, fkn):
    """The model's write, and the per-row inputs the block takes (what the caller holds)."""
    old_mant, old_frac = S.mant[0].copy(), S.frac[0].copy()
    kmax = np.max(np.abs(kn))
    bound = product_bound_exp(bh[None, :], fbh, kmax, fkn)
    S.write([(S.mant, S.frac), ((bh[:, None] * kn[None, :])[None], np.full((1, len(bh)), fbh + fkn))],
            [S.row_exp(), bound])
    mx = np.max(np.abs(old_mant), axis=-1)
    ins = [dict(frac=int(old_frac[i]), msb=int(max(msb(mx[i]), 0)), zero=int(mx[i] == 0),
                e_prod=int(bound[0, i]) if bh[i] != 0 and kmax != 0 else 0, p_zero=int(bh[i] == 0 or kmax == 0),
                f_prod=fbh + fkn) for i in range(len(bh))]
    return old_mant, ins, S.mant[0], S.frac[0], S.sat


def _run(dut, old, prods, ins, stall=0.0, gap=0.0, seed=0):
    """Stream the rows (``beats`` beats each); random stalls and bubbles anywhere. Returns the
    output rows, their exponents, the saturation count and the row msb reports."""
    rng = np.random.default_rng(seed)
    rows, n = old.shape
    k = dut.lanes
    B = n // k
    beats = [(r, b) for r in range(rows) for b in range(B)]
    out, fr, rep, cnt = [], [], [], []
    cur = []

    async def tb(ctx):
        nonlocal cur
        j = 0
        while len(rep) < rows:
            en = rng.random() >= stall
            feed = j < len(beats) and rng.random() >= gap
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            r, b = beats[min(j, len(beats) - 1)]
            ctx.set(dut.i_first, int(b == 0) if feed else int(rng.integers(0, 2)))  # garbage on a bubble
            ctx.set(dut.i_last, int(b == B - 1) if feed else int(rng.integers(0, 2)))
            for lane in range(k):
                ctx.set(dut.i_old[lane], int(old[r, b * k + lane]) if feed else int(rng.integers(-99, 99)))
                ctx.set(dut.i_prod[lane], int(prods[r, b * k + lane]) if feed else int(rng.integers(-99, 99)))
            for key, val in ins[r].items():
                ctx.set(getattr(dut, f"i_{key}"), val if feed and b == 0 else int(rng.integers(0, 2)))
            await ctx.tick()
            if en:
                j += int(feed)
                if ctx.get(dut.o_valid):
                    assert ctx.get(dut.o_first) == (len(cur) == 0)
                    cur += [ctx.get(dut.o_data[lane]) for lane in range(k)]
                    assert ctx.get(dut.o_last) == (len(cur) == n)
                    if len(cur) == n:
                        out.append(cur)
                        fr.append(ctx.get(dut.o_frac))
                        cur = []
                if ctx.get(dut.o_row_valid):
                    rep.append((ctx.get(dut.o_row_msb), ctx.get(dut.o_row_zero)))
        for _ in range(12):
            ctx.set(dut.i_valid, 0)
            ctx.set(dut.en, 1)
            await ctx.tick()
        cnt.append(ctx.get(dut.count))

    run_simulation(dut, tb, deadline_cycles=(rows * B + 40) * 8 + 500)
    return np.array(out), np.array(fr), rep, cnt[0]


def _check(dut, S, bh, fbh, kn, fkn, **kw):
    old, ins, want, wfrac, wsat = _reference(S, bh, fbh, kn, fkn)
    prods = bh[:, None] * kn[None, :]
    got, gfrac, rep, count = _run(dut, old, prods, ins, **kw)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(gfrac, wfrac)
    mx = np.max(np.abs(want), axis=-1)
    assert rep == [(int(max(msb(x), 0)), int(x == 0)) for x in mx]
    assert count == wsat
    return ins, old


@pytest.mark.parametrize("lanes,beats,Ws,M", [(4, 2, 16, 8), (2, 3, 12, 6), (1, 4, 16, 8), (8, 1, 18, 8)])
def test_random_rows_bit_exact_with_stalls_and_bubbles(lanes, beats, Ws, M):
    rng = np.random.default_rng(lanes * 10 + beats)
    dut = RowBFPWrite(lanes, Ws, M)
    for trial in range(3):
        S, bh, fbh, kn, fkn = _case(rng, 24, lanes * beats, Ws, M)
        _check(dut, S, bh, fbh, kn, fkn, stall=0.2, gap=0.3, seed=trial)


def test_dead_and_half_dead_rows():
    """Rows with a zero old row, a zero product row, or both (the row keeps its exponent)."""
    rng = np.random.default_rng(9)
    dut = RowBFPWrite(2, 16, 8)
    S, bh, fbh, kn, fkn = _case(rng, 40, 4, 16, 8, zero_rows=0.5, zero_prods=0.5)
    ins, _ = _check(dut, S, bh, fbh, kn, fkn, gap=0.2)
    assert {(r["zero"], r["p_zero"]) for r in ins} == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_both_bounds_win_somewhere_and_old_rows_shift_both_ways():
    """The random cases are not all one kind: for some rows the old row's bound decides the new
    exponent, for others the product's; the old row moves right for some and left for others."""
    rng = np.random.default_rng(5)
    kinds, dirs = set(), set()
    for _ in range(4):
        S, bh, fbh, kn, fkn = _case(rng, 24, 8, 16, 8)
        old_frac = S.frac[0].copy()
        old, ins, _, wfrac, _ = _reference(S, bh, fbh, kn, fkn)
        for i, r in enumerate(ins):
            if not r["zero"] and not r["p_zero"]:
                kinds.add(r["msb"] + 1 - r["frac"] >= r["e_prod"])
                dirs.add(int(np.sign(old_frac[i] - wfrac[i])))
    assert kinds == {True, False} and {-1, 1} <= dirs


def test_saturation_is_counted():
    """Inputs that break the bound (an old row larger than its stated msb) overflow the sum: the
    block saturates and counts like the model's arithmetic written out (round, add, clip)."""
    Ws, M, k = 12, 6, 2
    dut = RowBFPWrite(k, Ws, M)
    rows, n = 6, 4
    old = np.full((rows, n), (1 << (Ws - 1)) - 1)
    old[1::2] = -(1 << (Ws - 1))
    prods = np.full((rows, n), 31 * 31)
    prods[1::2] = -31 * 31
    ins = [dict(frac=0, msb=2, zero=0, e_prod=-3, p_zero=0, f_prod=8) for _ in range(rows)]
    got, gfrac, _, count = _run(dut, old, prods, ins)
    # stated msb 2: E = max(3, -3) = 3, fnew = Ws - 5; shifts 0 - fnew and 8 - fnew
    fnew = Ws - 2 - 3
    lim = 1 << (Ws - 1)
    want = np.clip(round_shift(old, -fnew, "rne") + round_shift(prods, 8 - fnew, "rne"), -lim, lim - 1)
    np.testing.assert_array_equal(got, want)
    assert list(gfrac) == [fnew] * rows
    assert count == rows * n > 0


def test_latency_is_declared():
    dut = RowBFPWrite(4, 16, 8)
    rng = np.random.default_rng(2)
    old = rng.integers(-1000, 1000, (3, 8))
    times, sent = [], []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for t in range(3 * 2 + dut.latency + dut.row_latency + 4):
            r, b = divmod(t, 2)
            feed = r < 3
            ctx.set(dut.i_valid, int(feed))
            ctx.set(dut.i_first, int(b == 0))
            ctx.set(dut.i_last, int(b == 1))
            ctx.set(dut.i_frac, 0)
            ctx.set(dut.i_msb, 9)
            ctx.set(dut.i_p_zero, 1)
            for lane in range(4):
                ctx.set(dut.i_old[lane], int(old[r, b * 4 + lane]) if feed else 0)
            if feed:
                sent.append(t)
            await ctx.tick()
            if ctx.get(dut.o_valid):
                times.append(t + 1)
            if ctx.get(dut.o_row_valid):
                times.append(("row", t + 1))

    run_simulation(dut, tb, deadline_cycles=200)
    beats = [t for t in times if not isinstance(t, tuple)]
    assert beats == [s + dut.latency for s in sent]
    assert [t for _, t in (x for x in times if isinstance(x, tuple))] == [
        sent[2 * r + 1] + dut.latency + dut.row_latency for r in range(3)]


def test_bad_parameters():
    with pytest.raises(ValueError, match="M:"):
        RowBFPWrite(4, 8, 10)
    with pytest.raises(ValueError, match="lanes"):
        RowBFPWrite(0, 16, 8)
    with pytest.raises(ValueError, match="shift_width"):
        RowBFPWrite(4, 40, 8, shift_width=5)


@pytest.mark.parametrize("lanes,Ws,M", [(8, 16, 8), (1, 12, 6)])
def test_verilog_lints_clean(tmp_path, lanes, Ws, M):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "row_bfp_write.v"
    path.write_text(verilog.convert(RowBFPWrite(lanes, Ws, M), name="row_bfp_write"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.warnings


def test_exponents_far_apart_clamp_the_shifts():
    """Old rows and products 40..120 binades apart: shifts past the shifters' 7-bit range give
    what a shift past the word gives (zero or the rounding of the sign), as the model's."""
    rng = np.random.default_rng(11)
    dut = RowBFPWrite(2, 16, 8)
    S, bh, fbh, kn, fkn = _case(rng, 32, 4, 16, 8, spread=60)
    S.frac[0] = np.where(np.arange(32) % 2 == 0, S.frac[0] + 60, S.frac[0] - 60)
    ins, _ = _check(dut, S, bh, fbh, kn, fkn)
    gaps = [abs((r["msb"] + 1 - r["frac"]) - r["e_prod"]) for r in ins if not r["zero"] and not r["p_zero"]]
    assert max(gaps) > 64
