# amaranth: UnusedElaboratable=no
"""The annihilation core and its AXI4-Stream top against the bit-exact fixed-point model
``specmem.golden.fixed.annihilation.annihilation_fixed``: every output ``y``, the final state
``U``, and the status counters, under random idle gaps, random backpressure and a reset in the
middle of a stream (Amaranth's Python simulator, d=16, k=4 by default)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.annihilation import annihilation_fixed
from specmem.rtl.annihilation import AnnihilationCore
from specmem.rtl.testing import axis_view, run_simulation, stream_get, stream_put, with_sync_reset
from specmem.rtl.top import AnnihilationTop


# ------------------------------------------------------------------------------------------
# stimulus and oracle


def make_stream(seed, T, d, k, *, orth_at=None, zero_at=(), big_at=(), scale=1.0):
    """Gaussian tokens; ``orth_at``: that token is orthogonal to the warm-up tokens (disjoint
    supports), so ``a = Uᵀx`` is exactly zero; ``zero_at``: all-zero tokens; ``big_at``: tokens
    scaled by 3 (saturations in ``x``, ``u_mul``, ``r``, ...)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d)) * scale
    if orth_at is not None:
        x[:k, d // 2:] = 0
        x[orth_at, :d // 2] = 0
    for t in zero_at:
        x[t] = 0
    for t in big_at:
        x[t] *= 3
    return x


def make_correlated(seed, T, d):
    """Large tokens close to one sign pattern (alternating sign): the stored columns align, so
    ``r = U a`` overflows its format and saturates (and x saturates on the host)."""
    rng = np.random.default_rng(seed)
    base = 3.5 * np.sign(rng.standard_normal(d))
    x = base + 0.8 * rng.standard_normal((T, d))
    x[1::2] *= -1
    return x


def golden(x, k, preset="legacy-int8"):
    g = annihilation_fixed(x, k, preset)
    X, _ = g["fmt"]["x"].quantize(x)
    return g, X


def token_beats(X, k):
    """Token ``t`` element ``i`` -> beat ``t*d/k + i//k``, lane ``i % k``."""
    T, d = X.shape
    return [[int(v) for v in X[t, b * k:(b + 1) * k]] for t in range(T) for b in range(d // k)]


def expected_saturations(g):
    return sum(n for name, n in g["sat"].items() if name != "x")  # x is quantised on the host


# ------------------------------------------------------------------------------------------
# core runner


def run_core(X, k, preset="legacy-int8", *, idle=0.0, stall=0.0, seed=0, gap=0):
    """Stream the quantised tokens ``X`` through an AnnihilationCore; return outputs, final U,
    status, and the cycle at which each output token's last beat was taken."""
    T, d = X.shape
    dut = AnnihilationCore(d, k, preset)
    beats = token_beats(X, k)
    n_out = T * d // k
    out, last_cycles, res = [], [], {}
    clock = {"n": 0}
    rng_src, rng_snk = random.Random(seed), random.Random(seed + 1)

    async def source(ctx):
        for n, b in enumerate(beats):
            await stream_put(ctx, dut.x_in, b, rng=rng_src, idle=idle)
            if gap and n % (d // k) == d // k - 1:
                for _ in range(gap):
                    await ctx.tick()

    async def sink(ctx):
        while len(out) < n_out:
            ready = rng_snk.random() >= stall
            ctx.set(dut.y_out.ready, ready)
            _, _, valid, p = await ctx.tick().sample(dut.y_out.valid, dut.y_out.payload)
            clock["n"] += 1
            if ready and valid:
                out.append([int(v) for v in p.y])
                if p.last:
                    last_cycles.append(clock["n"])
                assert bool(p.last) == (len(out) % (d // k) == 0), "y_out.last misplaced"
        ctx.set(dut.y_out.ready, 0)
        while ctx.get(dut.busy):
            await ctx.tick()
        res["u"] = np.array([[ctx.get(dut.mem.banks[l].data[i]) for l in range(k)] for i in range(d)])
        for name in ("tokens", "saturations", "orth_count", "orth_flag", "count"):
            res[name] = ctx.get(getattr(dut, name))

    run_simulation(dut, source, sink, deadline_cycles=400 * T + 50 * gap * T + 1000)
    res["y"] = np.array(out).reshape(T, d)
    res["last_cycles"] = last_cycles
    res["dut"] = dut
    return res


def check(res, g):
    np.testing.assert_array_equal(res["y"], g["y_raw"], err_msg="outputs y")
    np.testing.assert_array_equal(res["u"], g["u_raw"], err_msg="final state U")
    assert res["tokens"] == g["y_raw"].shape[0]
    assert res["count"] == g["count"]
    assert res["orth_count"] == int(np.sum(g["orth"]))
    assert res["orth_flag"] == bool(np.any(g["orth"]))
    assert res["saturations"] == expected_saturations(g), (res["saturations"], g["sat"])


# ------------------------------------------------------------------------------------------
# tests


def test_core_bit_exact_with_gaps_and_backpressure():
    """Warm-up, zero tokens, an orthogonal token (skip and flag) and full steps, with random idle
    gaps on the input and random backpressure on the output."""
    d, k, T = 16, 4, 14
    x = make_stream(1, T, d, k, orth_at=4, zero_at=(6, 9), big_at=(7, 11))
    g, X = golden(x, k)
    assert g["orth"][4] and not g["orth"][5:].any()
    res = run_core(X, k, idle=0.3, stall=0.4, seed=3)
    check(res, g)


def test_core_bit_exact_saturating():
    """Aligned large tokens: r saturates in the G pass (counted once per element, as the model
    counts it), under gaps and backpressure."""
    d, k, T = 16, 4, 10
    g, X = golden(make_correlated(1, T, d), k)
    assert g["sat"]["r"] > 0
    res = run_core(X, k, idle=0.2, stall=0.3, seed=4)
    check(res, g)


def test_core_standalone_a_pass():
    """Tokens that arrive only after the previous row pass started: the A pass cannot be fused
    and runs on its own; results are the same."""
    d, k, T = 16, 4, 8
    x = make_stream(2, T, d, k)
    g, X = golden(x, k)
    res = run_core(X, k, gap=150, seed=5)
    check(res, g)


@pytest.mark.parametrize("d,k,preset", [
    pytest.param(16, 4, "legacy-int8", id="d16-k4-int8"),
    pytest.param(32, 8, "legacy-int8", id="d32-k8-int8", marks=pytest.mark.slow),
    pytest.param(16, 4, "legacy-int16", id="d16-k4-int16", marks=pytest.mark.slow),
])
def test_core_cycles_per_token_steady_state(d, k, preset):
    """Source at full rate, sink always ready: full tokens in steady state take exactly
    ``cycles_full`` cycles each (compared with the floor d and the two-pass floor 2d)."""
    T = k + 8
    x = make_stream(4, T, d, k)
    g, X = golden(x, k, preset)
    res = run_core(X, k, preset, seed=7)
    check(res, g)
    steps = np.diff(res["last_cycles"])
    steady = steps[k - 1:]  # every full token (the first one's A pass is fused into warm-up)
    budget = res["dut"].cycle_budget()
    assert np.all(steady == budget["total"]), (steps, budget)
    assert np.all(steps[:k - 1] == d + 8), steps  # warm-up: one row pass, next token fused
    print(f"cycles per token at d={d}, k={k}, {preset}: warm-up {steps[:k - 1].tolist()}, "
          f"full {steady.tolist()}; floor d={d}, 2d={2 * d}; budget {budget}")


def _axis_decode(word, k, w):
    lanes = [(word >> (l * w)) & ((1 << w) - 1) for l in range(k)]
    return [v - (1 << w) if v >> (w - 1) else v for v in lanes], (word >> (k * w)) & 1


def test_top_axis_reset_mid_stream():
    """AXI4-Stream top: random gaps and backpressure on both streams; a synchronous reset in the
    middle of a token of stream A; stream B after the reset matches the model run on B alone,
    and what came out before the reset is a prefix of the model's output for A."""
    d, k = 16, 4
    xa = make_stream(10, 9, d, k, zero_at=(6,), big_at=(5,))
    xb = make_stream(11, 7, d, k, orth_at=4)
    ga, XA = golden(xa, k)
    gb, XB = golden(xb, k)
    top = AnnihilationTop(d, k)
    dut, rst = with_sync_reset(top)
    s_axis, m_axis = axis_view(top, "s_axis"), axis_view(top, "m_axis")
    yw = top.core.fmt["y"].width
    bpt = d // k
    cut = 5 * bpt + 2  # reset after beat 2 of token 5 of stream A
    phase = {"after_reset": False}
    got = {"a": [], "b": []}
    res = {}
    rng_src, rng_snk = random.Random(21), random.Random(22)

    def word(beat, last):
        v = 0
        for l, e in enumerate(beat):
            v |= (e & 0xFF) << (8 * l)
        return v | (int(last) << (8 * k))

    async def source(ctx):
        for n, b in enumerate(token_beats(XA, k)[:cut]):
            await stream_put(ctx, s_axis, word(b, n % bpt == bpt - 1), rng=rng_src, idle=0.3)
        for _ in range(rng_src.randrange(1, 40)):
            await ctx.tick()
        ctx.set(rst, 1)
        phase["after_reset"] = True
        await ctx.tick()
        await ctx.tick()
        ctx.set(rst, 0)
        for n, b in enumerate(token_beats(XB, k)):
            await stream_put(ctx, s_axis, word(b, n % bpt == bpt - 1), rng=rng_src, idle=0.3)

    async def sink(ctx):
        while len(got["b"]) < len(XB) * bpt:
            p = await stream_get(ctx, m_axis, rng=rng_snk, stall=0.4)
            got["b" if phase["after_reset"] else "a"].append(_axis_decode(p, k, yw))
        while ctx.get(top.status_busy):
            await ctx.tick()
        res["u"] = np.array([[ctx.get(top.core.mem.banks[l].data[i]) for l in range(k)] for i in range(d)])
        for name in ("tokens", "saturations", "orth_count", "orth_flag", "count", "framing_errors"):
            res[name] = ctx.get(getattr(top, f"status_{name}"))

    run_simulation(dut, source, sink, deadline_cycles=10_000)

    ya = ga["y_raw"].reshape(-1, k)
    assert len(got["a"]) <= cut  # nothing beyond what the model produced from the beats sent
    for n, (lanes, last) in enumerate(got["a"]):
        assert lanes == ya[n].tolist(), f"pre-reset beat {n}"
        assert last == (n % bpt == bpt - 1)
    yb = np.array([lanes for lanes, _ in got["b"]]).reshape(len(XB), d)
    np.testing.assert_array_equal(yb, gb["y_raw"], err_msg="outputs after reset")
    assert [last for _, last in got["b"]] == [int(n % bpt == bpt - 1) for n in range(len(got["b"]))]
    np.testing.assert_array_equal(res["u"], gb["u_raw"], err_msg="final state after reset")
    assert res["tokens"] == len(XB) and res["framing_errors"] == 0
    assert res["orth_count"] == 1 and res["orth_flag"] == 1 and res["count"] == k
    assert res["saturations"] == expected_saturations(gb)


def test_top_counts_framing_errors():
    d, k = 16, 4
    x = make_stream(12, 2, d, k)
    _, X = golden(x, k)
    top = AnnihilationTop(d, k)
    s_axis, m_axis = axis_view(top, "s_axis"), axis_view(top, "m_axis")
    res = {}

    async def source(ctx):
        for n, b in enumerate(token_beats(X, k)):
            v = sum((e & 0xFF) << (8 * l) for l, e in enumerate(b))
            last = n == 1  # wrong twice: early on beat 1, missing on beat 3; right on token 1
            if n >= 4:
                last = n % 4 == 3
            await stream_put(ctx, s_axis, v | (int(last) << (8 * k)))

    async def sink(ctx):
        for _ in range(2 * d // k):
            await stream_get(ctx, m_axis)
        while ctx.get(top.status_busy):
            await ctx.tick()
        res["errors"] = ctx.get(top.status_framing_errors)
        res["tokens"] = ctx.get(top.status_tokens)

    run_simulation(top, source, sink, deadline_cycles=2000)
    assert res == {"errors": 2, "tokens": 2}


@pytest.mark.parametrize("kwargs,match", [
    ({"d": 18, "k": 4}, "d: must be a multiple of k"),
    ({"d": 4, "k": 8}, "k: must be <= d"),
    ({"d": 16, "k": 0}, "k: must be an integer >= 1"),
    ({"d": 16, "k": 4, "preset": "int3"}, "preset"),
    ({"d": 16, "k": 4, "preset": "int8"}, "^preset: the RTL implements legacy-int8"),
])
def test_core_rejects_bad_generics(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AnnihilationCore(**kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("d,k,preset,T", [
    pytest.param(16, 4, "legacy-int8", 80, id="d16-k4-int8-long"),
    pytest.param(12, 3, "legacy-int8", 30, id="d12-k3-int8-odd-lanes"),
    pytest.param(32, 8, "legacy-int8", 30, id="d32-k8-int8"),
    pytest.param(16, 4, "legacy-int16", 30, id="d16-k4-int16"),
    pytest.param(16, 2, "legacy-wide", 20, id="d16-k2-wide"),
    pytest.param(4, 1, "legacy-int8", 12, id="d4-k1"),
    pytest.param(8, 8, "legacy-int8", 16, id="d8-k8-k-equals-d"),
])
def test_core_bit_exact_sweep(d, k, preset, T):
    x = make_stream(100 + d + k, T, d, k, orth_at=k, zero_at=(T // 3,), big_at=(T // 2, T // 2 + 1))
    g, X = golden(x, k, preset)
    res = run_core(X, k, preset, idle=0.2, stall=0.3, seed=d * k)
    check(res, g)
