# amaranth: UnusedElaboratable=no
"""``rtl/token_chain.py`` (the annihilation core v2's per-token chain) against the golden
:func:`token_chain`: every output (orthogonal flag, eviction column, ``a_n``, ``j``, ``s``, ``q``,
``p`` and its exponent, ``rsqrt(n²)``) and the token's saturation count, on the accumulators of
real model runs, on random Gram matrices and on edge cases (``a' = 0`` with tied columns,
``n² <= 0``), with random backpressure."""

import random

import numpy as np
import pytest

from specmem.golden.fixed.annihilation import annihilation_fixed, token_chain
from specmem.golden.fixed.datapath import Datapath
from specmem.rtl.testing import run_simulation, stream_put
from specmem.rtl.token_chain import TokenChain


def _from_runs(tc, seed, n):
    """(a', G', ptr) at the tokens of a model run on Gaussian inputs (memory full, input nonzero)."""
    d, k, F = tc.d, tc.k, tc.fmt
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n + k, d))
    ref = annihilation_fixed(x, k, tc.preset, history=True)
    dp = Datapath(F, trace=False)
    X = dp.quantize("x", x)
    out = []
    for t in range(k, n + k):
        Um = dp.narrow("u_mul", ref["u_hist"][t - 1], F["u"].frac)
        out.append((Um.T @ X[t], Um.T @ Um, int(rng.integers(k))))
    return out


def _random_grams(tc, seed, n):
    """Random rows at the multiplier view's range: G = UmᵀUm exact, a = Umᵀx."""
    d, k, F = tc.d, tc.k, tc.fmt
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        bits = int(rng.integers(3, F["u_mul"].width))
        Um = rng.integers(-(1 << (bits - 1)), 1 << (bits - 1), size=(d, k))
        xw = int(rng.integers(2, F["x"].width + 1))
        x = rng.integers(-(1 << (xw - 1)), 1 << (xw - 1), size=d)
        out.append((Um.T @ x, Um.T @ Um, int(rng.integers(k))))
    return out


def _edge_cases(tc):
    k = tc.k
    G = np.diag(np.arange(k, 0, -1) * 1000).astype(np.int64)
    G[k - 1, k - 1] = G[k - 2, k - 2]  # the two smallest columns tie
    cases = [(np.zeros(k, np.int64), G, p) for p in range(k)]  # a' = 0: orthogonal, evict from ptr
    a = np.zeros(k, np.int64)
    a[k // 2] = -3
    cases.append((a, G, 0))  # one-hot a, negative sign: ahat = -1 fits
    cases.append((-a, G, 0))  # positive: ahat = +1 saturates (counted)
    cases.append((np.full(k, 5, np.int64), G, 1))  # all |a| tie: j is the first
    return cases


def _run(tc, cases, *, seed=0):
    k = tc.k
    got = []

    async def bench(ctx):
        rng = random.Random(seed)
        for a, G, ptr in cases:
            payload = {"a": [int(v) for v in a], "g": [int(G[l, n]) for l in range(k) for n in range(l, k)],
                       "ptr": ptr}
            await stream_put(ctx, tc.i, payload, rng=rng, idle=0.3)
            t0 = 0
            while True:
                ctx.set(tc.o.ready, rng.random() >= 0.3)
                _, _, valid, ready, o = await ctx.tick().sample(tc.o.valid, tc.o.ready, tc.o.payload)
                t0 += 1
                if valid and ready:
                    break
            ctx.set(tc.o.ready, 0)
            got.append({"orth": o.orth, "evict_j": o.evict_j, "j": o.j, "s_neg": o.s_neg, "fp": o.fp,
                        "ysc_m": o.ysc_m, "ysc_f": o.ysc_f, "sat": o.sat, "cycles": t0,
                        "a_n": [o.a_n[l] for l in range(k)], "q": [o.q[l] for l in range(k)],
                        "p": [o.p[l] for l in range(k)]})

    run_simulation(tc, bench, deadline_cycles=400 * (len(cases) + 1))
    return got


def _check(tc, cases, got):
    for n, ((a, G, ptr), o) in enumerate(zip(cases, got)):
        dp = Datapath(tc.fmt, trace=True)
        ref = token_chain(dp, np.asarray(a)[None], np.asarray(G)[None], np.array([ptr]), p_window=tc.p_window)
        where = f"case {n}"
        assert o["orth"] == ref["orth"][0], where
        if ref["orth"][0]:
            assert o["evict_j"] == ref["evict_j"][0], where
            continue
        assert o["a_n"] == list(ref["a_n"][0]), where
        assert o["j"] == ref["j"][0] and o["s_neg"] == (ref["s"][0] < 0), where
        assert o["q"] == list(ref["q"][0]) and o["p"] == list(ref["p"][0]) and o["fp"] == ref["fp"][0], where
        assert (o["ysc_m"], o["ysc_f"]) == (ref["ysc_m"][0], ref["ysc_f"][0]), where
        assert o["sat"] == sum(dp.sat.get(name, 0) for name in ("ahat", "q", "t", "p")), where


@pytest.mark.parametrize("preset,d,k,norm_lanes", [("int18", 16, 4, 4), ("int8", 16, 4, None),
                                                    ("int16", 12, 3, 3), ("int18", 16, 8, None),
                                                    ("int18", 16, 8, 2), ("int8", 16, 4, 1), ("int16", 12, 3, 2),
                                                    ("int8", 16, 8, 3), ("int8", 16, 16, 2)])
def test_chain_matches_golden(preset, d, k, norm_lanes):
    tc = TokenChain(d, k, preset, norm_lanes=norm_lanes)
    cases = _from_runs(tc, 1, 12) + _random_grams(tc, 2, 12) + _edge_cases(tc)
    got = _run(tc, cases, seed=3)
    _check(tc, cases, got)
    full = [o["cycles"] for o, (a, _, _) in zip(got, cases) if not o["orth"]]
    assert full  # most cases are full steps


def _ill_conditioned(tc, n):
    """Rows with singular values (1, s, 1, …) and x weighted (s², 1): the largest |p| (lowest
    p_shift) the formats let through; s from 1/8 to 1/512."""
    d, k, F = tc.d, tc.k, tc.fmt
    A = X = (1 << (F["u_mul"].width - 1)) - 1
    out = []
    for i in range(n):
        sc = 2.0 ** -(3 + i % 7)
        Um = np.zeros((d, k), np.int64)
        for l in range(k):
            Um[l, l] = round(A * sc) if l == 1 else A
        x = np.zeros(d, np.int64)
        x[0], x[1] = round(X * sc * sc * 4), X
        out.append((Um.T @ x, Um.T @ Um, 0))
    return out


@pytest.mark.parametrize("preset,d,k,norm_lanes,window,latch", [
    ("int18", 16, 4, 4, "model", True), ("int18", 16, 4, 2, (3, 18), True), ("int18", 16, 4, None, (-10, 5), False),
    ("int8", 16, 4, None, (-1, 14), True), ("int8", 16, 4, 1, (-20, -5), False), ("int16", 12, 3, 2, (1, 16), True)])
def test_windowed_chain_clamps_like_the_model(preset, d, k, norm_lanes, window, latch):
    """``p_window``: inside it nothing changes; the narrow windows here force clamps both ways
    (left with saturation on the ill-conditioned cases, right with rounding on the usual ones)."""
    from specmem.golden.fixed.annihilation import p_shift_window

    F = TokenChain(d, k, preset).fmt
    win = p_shift_window(F, k) if window == "model" else window
    tc = TokenChain(d, k, preset, norm_lanes=norm_lanes, p_window=win, latch_inputs=latch)  # held by _run
    cases = _from_runs(tc, 1, 6) + _random_grams(tc, 2, 10) + _ill_conditioned(tc, 7) + _edge_cases(tc)
    got = _run(tc, cases, seed=5)
    _check(tc, cases, got)
    off = F["r"].frac - F["u"].frac
    shifts = [o["fp"] + off for o in got if not o["orth"]]
    assert all(win[0] <= v <= win[1] for v in shifts)
    if window != "model":   # the clamps were exercised: some results sit on the window's edges
        assert win[0] in shifts or win[1] in shifts


def test_chain_rejects_bad_generics():
    with pytest.raises(ValueError, match="co-accumulated"):
        TokenChain(16, 4, "legacy-int8")
    with pytest.raises(ValueError, match="k: must be <= d"):
        TokenChain(4, 8)
    for bad in (5, 9, 0, True, 2.0):  # serial ones take 1 .. 4 lanes; the wide one is k lanes
        with pytest.raises(ValueError, match="norm_lanes: 1 .. 4 .* or k = 8"):
            TokenChain(16, 8, norm_lanes=bad)
    assert TokenChain(16, 8).norm_lanes == 2 and TokenChain(4, 2).norm_lanes == 2 and TokenChain(4, 1).norm_lanes == 1
