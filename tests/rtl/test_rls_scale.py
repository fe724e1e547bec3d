"""RlsScale against ``golden/fixed/scaled/vla.rls_scale``, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.formats import PRESETS
from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.vla import rls_scale
from specmem.rtl.rls_scale import RlsScale
from specmem.rtl.testing import VectorBeats, run_simulation

SU8 = PRESETS["int8"].scalar_unit()
EPS = 1e-4


def _vectors(rng, n, d, M):
    """``zsm`` and ``un`` pairs: Gaussian at scales from 2^-30 to 2^30 (so ``F = f_un + fz`` runs
    from well below zero, lifted, to past the eps floor's table), some ``zsm`` against ``un`` (a
    negative ``unᵀzsm``: ``delta`` below the floor), some all zero."""
    z = rng.standard_normal((n, d)) * np.ldexp(1.0, rng.integers(-30, 31, n))[:, None]
    u = rng.standard_normal((n, d)) * np.ldexp(1.0, rng.integers(-24, 25, n))[:, None]
    against = rng.random(n) < 0.2
    z[against] = -u[against] * np.ldexp(1.0, rng.integers(-2, 3, int(against.sum())))[:, None]
    z[rng.random(n) < 0.08] = 0
    Z, fz = quantize_block(z, M)
    U, fu = quantize_block(u, M)
    return Z, fz, U, fu


def _run(dut, Z, fz, U, fu, *, stall=0.0, gap=0.0, seed=0, spacing=None, bubble_at=None):
    rng = np.random.default_rng(seed)
    w, B, M = dut.lanes, dut.beats, dut.M
    spacing = dut.interval if spacing is None else spacing
    out, err = VectorBeats(w, B), []

    async def tb(ctx):
        nonlocal bubble_at
        i, b, since = 0, 0, spacing
        while len(out.got) < len(Z):
            en = rng.random() >= stall
            feed = i < len(Z) and (b > 0 or (since >= spacing and rng.random() >= gap))
            if bubble_at == i and b == 1 and en:
                feed, bubble_at = False, None
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            for lane in range(w):
                for port, X in ((dut.i_x, Z), (dut.i_y, U)):
                    val = X[i][b * w + lane] if feed else int(rng.integers(-(1 << (M - 1)), 1 << (M - 1)))
                    ctx.set(port[lane], int(val))
            ctx.set(dut.i_fx, int(fz[i]) if feed and b == 0 else int(rng.integers(-30, 30)))
            ctx.set(dut.i_fy, int(fu[i]) if feed and b == 0 else int(rng.integers(-30, 30)))
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

    run_simulation(dut, tb, deadline_cycles=(4 * (dut.interval + dut.latency)) * len(Z) + 500)
    return out.got, err[0]


@pytest.mark.parametrize("lanes,beats", [(4, 2), (2, 4), (8, 1), (1, 3)])
def test_random_vectors_bit_exact_with_stalls_and_gaps(lanes, beats):
    rng = np.random.default_rng(lanes * 10 + beats)
    d = lanes * beats
    Z, fz, U, fu = _vectors(rng, 40, d, 8)
    got, err = _run(RlsScale(lanes, beats, 8, SU8, eps=EPS), Z, fz, U, fu, stall=0.2, gap=0.3, seed=lanes)
    assert not err
    want, wf = rls_scale(SU8, 8, Z, fz, U, fu, EPS)
    assert [g for g, _ in got] == want.tolist()
    assert [f for _, f in got] == wf.tolist()
    # the paths the stream must have taken: a lifted F, a delta on the floor, one above it
    F = fz + fu
    dacc = np.einsum("bi,bi->b", Z, U)
    assert np.any(F < 0) and np.any(F > 40)
    floor = np.maximum(1, np.rint(np.ldexp(EPS, np.maximum(F, 0))))
    delta = (dacc.astype(object) << np.maximum(-F, 0).astype(object)) + (1 << np.maximum(F, 0)).astype(object)
    assert any(x < f for x, f in zip(delta, floor)) and any(x > f for x, f in zip(delta, floor))


def test_latency_is_declared():
    dut = RlsScale(4, 2, 8, SU8, eps=EPS)
    rng = np.random.default_rng(0)
    Z, fz, U, fu = _vectors(rng, 3, 8, 8)
    starts = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for c in range(3 * dut.interval + dut.latency + 4):
            i, b = divmod(c, dut.interval)
            feed = i < 3 and b < 2
            ctx.set(dut.i_valid, int(feed))
            for lane in range(4):
                ctx.set(dut.i_x[lane], int(Z[i][b * 4 + lane]) if feed else 0)
                ctx.set(dut.i_y[lane], int(U[i][b * 4 + lane]) if feed else 0)
            ctx.set(dut.i_fx, int(fz[i]) if feed else 0)
            ctx.set(dut.i_fy, int(fu[i]) if feed else 0)
            await ctx.tick()
            if ctx.get(dut.o_valid) and ctx.get(dut.o_first):
                starts.append(c + 1)

    run_simulation(dut, tb, deadline_cycles=2000)
    assert starts == [dut.latency + i * dut.interval for i in range(3)]


def test_errors_are_flagged():
    """A vector too soon, a bubble inside one, and a lift past the shifter (``F`` far below zero:
    the model's ``dacc << lift`` leaves 61 bits) each set the sticky ``o_err``."""
    rng = np.random.default_rng(2)
    Z, fz, U, fu = _vectors(rng, 3, 8, 8)
    fz, fu = np.full(3, 5), np.full(3, 6)
    assert _run(RlsScale(4, 2, 8, SU8, eps=EPS), Z, fz, U, fu)[1] == 0
    dut = RlsScale(4, 2, 8, SU8, eps=EPS)
    assert _run(dut, Z, fz, U, fu, spacing=dut.interval - 1)[1] == 1
    assert _run(RlsScale(4, 2, 8, SU8, eps=EPS), Z, fz, U, fu, bubble_at=1)[1] == 1
    dut = RlsScale(4, 2, 8, SU8, eps=EPS)
    low = np.array([5, -(dut.max_lift + 1) - 6, 5])
    assert _run(dut, Z, low, U, fu)[1] == 1
    dut = RlsScale(4, 2, 8, SU8, eps=EPS)  # the largest lift the shifter takes: no flag, the model's bits
    edge = np.array([5, -dut.max_lift - 6, 5])
    got, err = _run(dut, Z, edge, U, fu)
    assert err == 0 and [g for g, _ in got] == rls_scale(SU8, 8, Z, edge, U, fu, EPS)[0].tolist()


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="beats"):
        RlsScale(4, 0, 8, SU8)
    with pytest.raises(ValueError, match="su"):
        RlsScale(4, 2, 8, "int8")
    with pytest.raises(ValueError, match="eps"):
        RlsScale(4, 2, 8, SU8, eps=0.0)


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "rls_scale.v"
    path.write_text(verilog.convert(RlsScale(4, 2, 8, SU8), name="rls_scale"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
