# amaranth: UnusedElaboratable=no
"""Gated DeltaNet on the baseline core (``BaselineCore("gated-deltanet", ...)``, ``rtl/baselines.py``)
against the bit-exact fixed-point model ``gated_deltanet_fixed``: every output, the final ``S``
and the status counters, on random decays with values that quantise to 0, near 0 and exactly 1,
under random gaps and backpressure, late tokens and saturating streams (Amaranth's simulator)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from specmem.golden.fixed.deltanet import deltanet_fixed
from specmem.golden.fixed.gated_deltanet import gated_deltanet_fixed
from specmem.rtl.baselines import BaselineCore
from specmem.rtl.testing import run_simulation, stream_put

HOST = ("k", "v", "q", "beta", "g")  # quantised on the host


def make_stream(seed, T, d, *, saturating=False):
    """Random k, v, q, beta; decays uniform in (0, 1] with tokens at exactly 1, near 0 (one LSB
    of g and below half of one, which quantises to 0) and near 1."""
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal((T, d)) for n in ("k", "v", "q")}
    x["beta"] = rng.uniform(0.1, 1.0, T)
    x["beta"][0] = 1.0
    g = np.maximum(rng.uniform(0.0, 1.0, T), 1e-6)
    g[rng.random(T) < 0.3] = 1.0
    g[rng.random(T) < 0.15] = 0.995
    g[2 % T] = 1e-9  # below half an LSB at every preset (2^-28 at legacy-wide): g = 0, the state is erased
    g[5 % T] = 0.01  # one LSB at legacy-int8
    x["g"] = g
    if saturating:  # one-hot keys (kn saturates at +1); values flipping sign under a slow decay (e saturates)
        x["k"][::2] = 0.0
        x["k"][::2, 1] = 3.0
        x["v"] = 3.0 * np.abs(x["v"]) * (-1.0) ** (np.arange(T)[:, None] // 2)
        x["beta"][:] = 1.0
        x["k"][3] = 0.0  # a zero key: the ||k|| clamp
        x["g"] = np.where(x["g"] < 0.5, 1.0 - x["g"] / 8, x["g"])
    return x


def golden(x, preset="legacy-int8", **params):
    g = gated_deltanet_fixed(x["k"], x["v"], x["q"], x["beta"], x["g"], preset=preset, **params)
    F = g["fmt"]
    return g, {n: F[n].quantize(x[n])[0] for n in x}


def token_beats(Xq, k, M):
    """k, v, q in d/k beats each, then (beta, g) packed k per beat: scalar j in beat j // k,
    lane j % k. g's lane carries its unsigned UQ1.(M-1) bits (read as a signed M-bit lane here)."""
    T, d = Xq["k"].shape
    out = []
    for t in range(T):
        for n in ("k", "v", "q"):
            out += [[int(v) for v in Xq[n][t, b * k:(b + 1) * k]] for b in range(d // k)]
        g = int(Xq["g"][t])
        scal = [int(Xq["beta"][t]), g - (1 << M) if g >> (M - 1) else g]
        scal += [0] * (-len(scal) % k)
        out += [scal[b * k:(b + 1) * k] for b in range(len(scal) // k)]
    return out


def expected_saturations(g):
    return sum(c for name, c in g["sat"].items() if name not in HOST)


def read_state(ctx, mem, d, k):
    dk = d // k
    return np.array([[ctx.get(mem.banks[j % k].data[i * dk + j // k]) for j in range(d)] for i in range(d)])


def run_core(Xq, k, preset="legacy-int8", *, idle=0.0, stall=0.0, seed=0, gap=0, **params):
    T, d = Xq["k"].shape
    dk = d // k
    dut = BaselineCore("gated-deltanet", d, k, preset, **params)
    beats = token_beats(Xq, k, dut.fmt["k"].width)
    bpt = dut.beats_per_token
    assert len(beats) == T * bpt
    out, last_cycles, res = [], [], {}
    clock = {"n": 0}
    rng_src, rng_snk = random.Random(seed), random.Random(seed + 1)

    async def source(ctx):
        for n, b in enumerate(beats):
            await stream_put(ctx, dut.x_in, b, rng=rng_src, idle=idle)
            if gap and n % bpt == bpt - 1:
                for _ in range(gap):
                    await ctx.tick()

    async def sink(ctx):
        while len(out) < T * dk:
            ready = rng_snk.random() >= stall
            ctx.set(dut.o_out.ready, ready)
            _, _, valid, p = await ctx.tick().sample(dut.o_out.valid, dut.o_out.payload)
            clock["n"] += 1
            if ready and valid:
                out.append([int(v) for v in p.o])
                if p.last:
                    last_cycles.append(clock["n"])
                assert bool(p.last) == (len(out) % dk == 0), "o_out.last misplaced"
        ctx.set(dut.o_out.ready, 0)
        while ctx.get(dut.busy):
            await ctx.tick()
        res["s"] = read_state(ctx, dut.smem, d, k)
        res["tokens"] = ctx.get(dut.tokens)
        res["saturations"] = ctx.get(dut.saturations)

    per_token = dut.cycle_budget()["total"] + 4 * bpt + 60
    run_simulation(dut, source, sink, deadline_cycles=int(per_token * T * (1 + 2 * stall + 2 * idle)) + gap * T + 2000)
    res["o"] = np.array(out).reshape(T, d)
    res["last_cycles"] = last_cycles
    res["dut"] = dut
    return res


def check(res, g):
    np.testing.assert_array_equal(res["o"], g["o_raw"], err_msg="outputs o_raw")
    np.testing.assert_array_equal(res["s"], g["s_raw"], err_msg="final state S")
    assert res["tokens"] == g["o_raw"].shape[0]
    assert res["saturations"] == expected_saturations(g), (res["saturations"], g["sat"])


def test_stream_has_the_decay_edge_cases():
    x = make_stream(1, 16, 8)
    _, Xq = golden(x)
    G = Xq["g"]
    assert (G == 0).any() and (G == 1).any() and (G == 128).any() and ((G > 1) & (G < 128)).any()


@pytest.mark.parametrize("k", [2, 1])
def test_core_bit_exact_gaps_backpressure(k):
    """k = 2: (beta, g) in one beat; k = 1: two scalar beats."""
    d, T = 8 if k == 2 else 4, 16
    g, Xq = golden(make_stream(1 + k, T, d))
    res = run_core(Xq, k, idle=0.3, stall=0.4, seed=3)
    assert res["dut"].beats_per_token == 3 * d // k + (1 if k == 2 else 2)
    check(res, g)


def test_core_bit_exact_saturating():
    d, k, T = 8, 2, 24
    params = {"in_range": 1.0}
    g, Xq = golden(make_stream(2, T, d, saturating=True), **params)
    for name in ("kn", "e"):
        assert g["sat"][name] > 0, name
    res = run_core(Xq, k, idle=0.2, stall=0.3, seed=4, **params)
    check(res, g)


def test_core_late_tokens():
    """Tokens arriving after the previous pass: write-only passes (with the decay) and read-only passes."""
    d, k, T = 8, 2, 6
    g, Xq = golden(make_stream(3, T, d))
    res = run_core(Xq, k, gap=120, seed=5)
    check(res, g)


def test_unit_decay_core_equals_deltanet_model():
    """g = 1 on every token: the gated core's outputs and state are DeltaNet's model's."""
    d, k, T = 8, 4, 10
    x = make_stream(7, T, d)
    x["g"] = np.ones(T)
    g, Xq = golden(x)
    dn = deltanet_fixed(x["k"], x["v"], x["q"], x["beta"], "legacy-int8")
    res = run_core(Xq, k, idle=0.1, stall=0.2, seed=9)
    np.testing.assert_array_equal(res["o"], dn["o_raw"])
    np.testing.assert_array_equal(res["s"], dn["s_raw"])


@pytest.mark.parametrize("d,k", [(16, 4), pytest.param(32, 8, marks=pytest.mark.slow)])
def test_core_cycles_per_token_steady_state(d, k):
    """Full-rate source, ready sink: every token after the first takes ``cycle_budget()['total']``;
    the decay costs at most 4 cycles a token over DeltaNet (its products by g in the row pipeline)."""
    T = 6
    g, Xq = golden(make_stream(6, T, d))
    res = run_core(Xq, k, seed=7)
    check(res, g)
    steps = np.diff(res["last_cycles"])
    budget = res["dut"].cycle_budget()
    assert 0 <= budget["total"] - BaselineCore("deltanet", d, k).cycle_budget()["total"] <= 4
    assert np.all(steps == budget["total"]), (steps, budget)
    print(f"gated-deltanet cycles per token at d={d}, k={k}: {steps.tolist()}; floor d²/k={budget['floor']}")


@pytest.mark.slow
@pytest.mark.parametrize("d,k,preset,T", [(8, 2, "legacy-int16", 16), (8, 2, "legacy-wide", 16),
                                          (4, 4, "legacy-int8", 16), (12, 3, "legacy-int8", 16),
                                          (8, 2, "legacy-int8", 300)])
def test_core_bit_exact_sweep(d, k, preset, T):
    g, Xq = golden(make_stream(40 + d + k + T, T, d), preset)
    res = run_core(Xq, k, preset, idle=0.2, stall=0.3, seed=d * k)
    check(res, g)


def test_generated_top_lints_clean(tmp_path):
    from specmem.rtl.generate import generate, lint

    m = generate("gated-deltanet", 8, 2, "legacy-int8", tmp_path)
    res = lint(m["paths"]["verilog"])
    assert res.clean, res.output
    ports = {p["name"]: p for p in m["ports"]}
    for name, direction, width in [("s_axis_tdata", "input", 16), ("m_axis_tdata", "output", 32),
                                   ("status_saturations", "output", 32)]:
        assert ports[name]["direction"] == direction and ports[name]["width"] == width, name
    on_disk = json.loads((tmp_path / "specmem_gated_deltanet.json").read_text())
    s_axis = on_disk["streams"]["s_axis"]
    assert s_axis["beats_per_token"] == 13 and s_axis["tensors"] == ["k", "v", "q", "beta", "g"]
    assert on_disk["formats"]["tensors"]["g"]["q"] == "UQ1.7"
    assert on_disk["cycles_per_token"]["floor_d2_over_k"] == 32
