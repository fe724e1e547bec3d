"""UnitNormaliser against ``golden/fixed/scaled/deltanet.unit_block``, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.deltanet import L2_EPS
from specmem.golden.fixed.formats import PRESETS
from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.deltanet import unit_block
from specmem.rtl.unit_norm import UnitNormaliser, eps_table
from specmem.rtl.testing import VectorBeats, run_simulation

SU8 = PRESETS["int8"].scalar_unit()


def _vectors(rng, n, d, M, *, tiny=0.3, zero=0.1):
    """Gaussian block vectors at scales from 1 down to 2^-30 (so eps2 > 1 and the ROM rows are
    used, with the norm above and below eps2), some all zero, some with one element set."""
    x = rng.standard_normal((n, d))
    scale = np.where(rng.random(n) < tiny, np.ldexp(1.0, -rng.integers(12, 31, n)), 1.0)
    x = x * scale[:, None]
    one = rng.random(n) < 0.1
    x[one, 1:] = 0
    x[rng.random(n) < zero] = 0
    return quantize_block(x, M, "x")


def _run(dut, raws, fracs, *, stall=0.0, gap=0.0, seed=0, spacing=None, bubble_at=None):
    """Feed each vector as consecutive beats, first beats ``spacing`` (default ``interval``) or
    more accepted cycles apart, random stalls; collect ``(elements, frac)`` and ``o_err``. With
    ``bubble_at = i`` an idle cycle goes inside vector ``i`` (the contract broken)."""
    rng = np.random.default_rng(seed)
    w, B, M = dut.lanes, dut.beats, dut.M
    spacing = dut.interval if spacing is None else spacing
    out, err = VectorBeats(w, B), []

    async def tb(ctx):
        nonlocal bubble_at
        i, b, since = 0, 0, spacing
        while len(out.got) < len(raws):
            en = rng.random() >= stall
            feed = i < len(raws) and (b > 0 or (since >= spacing and rng.random() >= gap))
            if bubble_at == i and b == 1 and en:
                feed, bubble_at = False, None
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            for lane in range(w):
                val = raws[i][b * w + lane] if feed else int(rng.integers(-(1 << (M - 1)), 1 << (M - 1)))
                ctx.set(dut.i_data[lane], int(val))
            ctx.set(dut.i_frac, int(fracs[i]) if feed and b == 0 else int(rng.integers(-30, 30)))
            await ctx.tick()
            if en:
                since += 1
                if feed:
                    if b == 0:
                        since = 1
                    b += 1
                    if b == B:
                        i, b = i + 1, 0
                out.take(ctx, dut)
        err.append(ctx.get(dut.o_err))

    run_simulation(dut, tb, deadline_cycles=(4 * (dut.interval + dut.latency)) * len(raws) + 500)
    return out.got, err[0]


def _check(dut, raws, fracs, **kw):
    got, err = _run(dut, raws, fracs, **kw)
    assert not err
    want, wf = unit_block(SU8, dut.M, np.array(raws, dtype=np.int64), np.array(fracs, dtype=np.int64), L2_EPS,
                          scale=dut.scale)
    assert [g for g, _ in got] == want.tolist()
    assert [f for _, f in got] == wf.tolist()


def test_eps_table_matches_the_model_floor():
    """eps2 is 1 up to F0 and the ROM rows are the model's eps2 and rsqrt of it."""
    F0, F1, rows = eps_table(SU8)
    assert F0 == 20 and len(rows) == F1 - F0 and F1 >= 40
    e2 = [int(np.maximum(1, np.rint(np.ldexp(L2_EPS ** 2, 2 * f)))) for f in range(F0 - 3, F1 + 1)]
    assert e2[:4] == [1, 1, 1, 1] and e2[4:] == [r[0] for r in rows] and rows[0][0] > 1
    r = SU8.rsqrt(np.array([rows[5][0]]), 2 * (F0 + 6))
    assert (int(r.m[0]), int(r.f[0])) == rows[5][1:]


@pytest.mark.parametrize("lanes,beats", [(4, 4), (8, 2), (3, 2), (1, 3)])
def test_random_vectors_bit_exact_with_stalls_and_gaps(lanes, beats):
    rng = np.random.default_rng(lanes * 10 + beats)
    raws, fracs = _vectors(rng, 30, lanes * beats, 8)
    assert np.any(fracs > 20) and np.any(fracs < 20)  # both sides of eps2's floor
    _check(UnitNormaliser(lanes, beats, 8, SU8), raws.tolist(), fracs.tolist(), stall=0.2, gap=0.3, seed=lanes)


@pytest.mark.parametrize("scale", [1 / np.sqrt(32), 0.3, 0.25, 3.0])
def test_scaled_unit_vectors_bit_exact(scale):
    """VLA's ``un = block(u rsqrt(..) u_scale)``: ``r`` times ``su.const(scale)`` rounded to ``P``
    bits (the model's ``unit_block(..., scale)``), with tiny vectors (the ROM's rows scaled too),
    stalls and gaps; the latency and delay grow by the multiply and its normaliser."""
    rng = np.random.default_rng(int(scale * 100))
    raws, fracs = _vectors(rng, 30, 8, 8)
    assert np.any(fracs > 20)
    dut = UnitNormaliser(4, 2, 8, SU8, scale=scale)
    assert dut.delay == UnitNormaliser(4, 2, 8, SU8).delay + 2 + dut.scale_norm.latency
    _check(dut, raws.tolist(), fracs.tolist(), stall=0.2, gap=0.3, seed=3)
    plain = unit_block(SU8, 8, raws, fracs, L2_EPS)
    scaled = unit_block(SU8, 8, raws, fracs, L2_EPS, scale=scale)
    assert plain[0].tolist() != scaled[0].tolist() or plain[1].tolist() != scaled[1].tolist()


def test_the_rom_rows_win_and_lose():
    """Vectors whose norm is just below and just above eps2 at several exponents past F0: both
    branches of max(n2, eps2), every vector through the pipeline back to back."""
    F0, F1, rows = eps_table(SU8)
    raws, fracs, below = [], [], []
    for f in range(F0 + 1, min(F1, F0 + 12) + 1):
        e2 = rows[f - F0 - 1][0]
        for target in (e2 - 1, e2, e2 + 1):
            v, rest = [0] * 8, target
            for j in range(8):  # greedy sum of squares: exact for these targets, or as close as 8 lanes get
                v[j] = min(int(np.sqrt(rest)), 127) * (-1) ** j
                rest -= v[j] ** 2
            raws.append(v)
            fracs.append(f)
            below.append(target - rest < e2)
    assert 0 < sum(below) < len(below)
    _check(UnitNormaliser(4, 2, 8, SU8), raws, fracs)


def test_block_ram_wait_and_compact_scalar_unit():
    rng = np.random.default_rng(3)
    raws, fracs = _vectors(rng, 12, 16, 8)
    _check(UnitNormaliser(4, 4, 8, SU8, delay_style="behavioural", su_pipelined=False), raws.tolist(),
           fracs.tolist(), stall=0.2, seed=3)


@pytest.mark.parametrize("scale", [None, 0.3])
def test_latency_is_declared(scale):
    dut = UnitNormaliser(4, 2, 8, SU8, scale=scale)
    rng = np.random.default_rng(0)
    raws, fracs = _vectors(rng, 3, 8, 8, tiny=0.0, zero=0.0)
    outs = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for c in range(3 * dut.interval + dut.latency + 4):
            i, b = divmod(c, dut.interval)
            feed = i < 3 and b < 2
            ctx.set(dut.i_valid, int(feed))
            for lane in range(4):
                ctx.set(dut.i_data[lane], int(raws[i][b * 4 + lane]) if feed else 0)
            ctx.set(dut.i_frac, int(fracs[i]) if feed else 0)
            await ctx.tick()
            if ctx.get(dut.o_valid) and ctx.get(dut.o_first):
                outs.append(c + 1)

    run_simulation(dut, tb, deadline_cycles=2000)
    assert outs == [dut.latency + i * dut.interval for i in range(3)]


def test_errors_are_flagged():
    """A vector too soon after the previous one, a bubble inside a vector, an exponent past F1."""
    rng = np.random.default_rng(2)
    raws, fracs = _vectors(rng, 3, 8, 8, tiny=0.0, zero=0.0)
    raws, fracs = raws.tolist(), fracs.tolist()
    dut = UnitNormaliser(4, 2, 8, SU8)
    assert _run(dut, raws, fracs)[1] == 0
    dut = UnitNormaliser(4, 2, 8, SU8)
    assert _run(dut, raws, fracs, spacing=dut.interval - 1)[1] == 1
    dut = UnitNormaliser(4, 2, 8, SU8)
    assert _run(dut, raws, [fracs[0], dut.F1 + 1, fracs[2]])[1] == 1
    dut = UnitNormaliser(4, 2, 8, SU8)
    assert _run(dut, raws, fracs, bubble_at=1)[1] == 1


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="beats"):
        UnitNormaliser(4, 0, 8, SU8)
    with pytest.raises(ValueError, match="su"):
        UnitNormaliser(4, 2, 8, "int8")
    with pytest.raises(ValueError, match="delay_style"):
        UnitNormaliser(4, 2, 8, SU8, delay_style="flops")
    for bad in (0.0, -1.0, float("inf"), True, "0.5"):
        with pytest.raises(ValueError, match="scale"):
            UnitNormaliser(4, 2, 8, SU8, scale=bad)


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "unit_norm.v"
    path.write_text(verilog.convert(UnitNormaliser(4, 2, 8, SU8), name="unit_norm"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
