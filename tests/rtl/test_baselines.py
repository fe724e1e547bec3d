# amaranth: UnusedElaboratable=no
"""Linear attention and DeltaNet on the VLA core's pieces (``rtl/baselines.py``) against the
bit-exact fixed-point models ``linear_attention_fixed`` and ``deltanet_fixed``: every output, the
final ``S`` and the status counters, under random gaps and backpressure, late tokens (unfused
passes), saturating streams and a reset in the middle of a token (Amaranth's simulator)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from amaranth.hdl import Cat

from specmem.golden.fixed.deltanet import deltanet_fixed
from specmem.golden.fixed.linear_attention import linear_attention_fixed
from specmem.rtl.baselines import BaselineCore
from specmem.rtl.generate import generate, lint
from specmem.rtl.testing import axis_view, run_simulation, stream_get, stream_put, with_sync_reset
from specmem.rtl.top import BaselineTop

HOST = ("k", "v", "q", "beta")  # quantised on the host


def make_stream(algo, seed, T, d, *, saturating=False):
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal((T, d)) for n in ("k", "v", "q")}
    if algo == "deltanet":
        x["beta"] = rng.uniform(0.1, 1.0, T)
        x["beta"][0] = 1.0
    if saturating:
        if algo == "linear":  # with in_range = 1: kf saturates, S grows past its range
            x["k"] = np.abs(x["k"]) * 2 + 1
            x["v"] = np.abs(x["v"]) * 3 + 1
        else:  # one-hot keys (kn saturates at +1), large values (e saturates)
            x["k"][::2] = 0.0
            x["k"][::2, 1] = 3.0
            x["v"] *= 3.0
            x["k"][3] = 0.0  # a zero key: the ||k|| clamp
    return x


def golden(algo, x, preset="legacy-int8", **params):
    if algo == "linear":
        g = linear_attention_fixed(x["k"], x["v"], x["q"], preset=preset, **params)
    else:
        g = deltanet_fixed(x["k"], x["v"], x["q"], x["beta"], preset=preset, **params)
    F = g["fmt"]
    Xq = {n: F[n].quantize(x[n])[0] for n in x}
    return g, Xq


def token_beats(algo, Xq, k):
    T, d = Xq["k"].shape
    out = []
    for t in range(T):
        for n in ("k", "v", "q"):
            out += [[int(v) for v in Xq[n][t, b * k:(b + 1) * k]] for b in range(d // k)]
        if algo == "deltanet":
            out.append([int(Xq["beta"][t])] + [0] * (k - 1))
    return out


def expected_saturations(g):
    return sum(c for name, c in g["sat"].items() if name not in HOST)


def read_state(ctx, mem, d, k):
    dk = d // k
    return np.array([[ctx.get(mem.banks[j % k].data[i * dk + j // k]) for j in range(d)] for i in range(d)])


def run_core(algo, Xq, k, preset="legacy-int8", *, idle=0.0, stall=0.0, seed=0, gap=0, **params):
    T, d = Xq["k"].shape
    dk = d // k
    dut = BaselineCore(algo, d, k, preset, **params)
    beats = token_beats(algo, Xq, k)
    bpt = dut.beats_per_token
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


ALGOS = ("linear", "deltanet")


@pytest.mark.parametrize("algo", ALGOS)
def test_core_bit_exact_gaps_backpressure(algo):
    d, k, T = 8, 2, 12
    g, Xq = golden(algo, make_stream(algo, 1, T, d))
    res = run_core(algo, Xq, k, idle=0.3, stall=0.4, seed=3)
    check(res, g)


@pytest.mark.parametrize("algo", ALGOS)
def test_core_bit_exact_fabric_multipliers(algo):
    """``dsp="fabric"``: one register per multiplier instead of three, so every pipeline is two
    cycles shorter; outputs, state and counters stay bit-exact and the budget still holds."""
    d, k, T = 16, 4, 8
    g, Xq = golden(algo, make_stream(algo, 11, T, d))
    res = run_core(algo, Xq, k, seed=13, dsp="fabric")
    check(res, g)
    steps = np.diff(res["last_cycles"])
    budget = res["dut"].cycle_budget()
    assert res["dut"].lat["write_mul"] == 1 and np.all(steps == budget["total"]), (steps, budget)


@pytest.mark.parametrize("algo,sats", [("linear", ("kf", "qf", "s", "s_mul")), ("deltanet", ("kn", "e"))])
def test_core_bit_exact_saturating(algo, sats):
    d, k, T = 8, 2, 24
    params = {"in_range": 1.0}
    g, Xq = golden(algo, make_stream(algo, 2, T, d, saturating=True), **params)
    for name in sats:
        assert g["sat"][name] > 0, name
    res = run_core(algo, Xq, k, idle=0.2, stall=0.3, seed=4, **params)
    check(res, g)


@pytest.mark.parametrize("algo", ALGOS)
def test_core_late_tokens(algo):
    """Tokens arriving after the previous pass: write-only and read-only passes."""
    d, k, T = 8, 2, 5
    g, Xq = golden(algo, make_stream(algo, 3, T, d))
    res = run_core(algo, Xq, k, gap=120, seed=5)
    check(res, g)


@pytest.mark.parametrize("algo,d,k", [("linear", 16, 4), ("linear", 8, 2), ("deltanet", 16, 4), ("deltanet", 8, 4),
                                      pytest.param("linear", 32, 4, marks=pytest.mark.slow),
                                      pytest.param("deltanet", 32, 8, marks=pytest.mark.slow)])
def test_core_cycles_per_token_steady_state(algo, d, k):
    """Full-rate source, ready sink: every token after the first takes ``cycle_budget()['total']``
    (d²/k + 9 with overlapped passes; at d = 8, k = 4 the pass is too short to overlap and a token
    costs the whole pipeline; the front end keeps up at these sizes)."""
    T = 6
    g, Xq = golden(algo, make_stream(algo, 6, T, d))
    res = run_core(algo, Xq, k, seed=7)
    check(res, g)
    steps = np.diff(res["last_cycles"])
    budget = res["dut"].cycle_budget()
    assert np.all(steps == budget["total"]), (steps, budget)
    print(f"{algo} cycles per token at d={d}, k={k}: {steps.tolist()}; floor d²/k={budget['floor']}")


def _word(beat, w):
    return sum((e & ((1 << w) - 1)) << (w * l) for l, e in enumerate(beat))


def test_deltanet_top_axis_reset_mid_stream():
    d, k = 8, 2
    dk = d // k
    ga, XA = golden("deltanet", make_stream("deltanet", 10, 5, d))
    gb, XB = golden("deltanet", make_stream("deltanet", 11, 4, d))
    top = BaselineTop("deltanet", d, k)
    dut, rst = with_sync_reset(top)
    s_axis = axis_view(top, "s_axis")
    xw, ow = top.x_width, top.o_width
    bpt = top.core.beats_per_token
    cut = 2 * bpt + dk + 1  # inside the v beats of token 2 of stream A
    phase = {"after_reset": False, "in_reset": False}
    got = {"a": [], "b": []}
    res = {}
    rng_src, rng_snk = random.Random(31), random.Random(32)

    async def source(ctx):
        for n, b in enumerate(token_beats("deltanet", XA, k)[:cut]):
            await stream_put(ctx, s_axis, _word(b, xw) | (int(n % bpt == bpt - 1) << (k * xw)), rng=rng_src, idle=0.3)
        for _ in range(rng_src.randrange(1, 40)):
            await ctx.tick()
        phase["in_reset"] = True  # the sink takes no beat while reset is high (a void handshake)
        await ctx.tick()
        ctx.set(rst, 1)
        phase["after_reset"] = True
        await ctx.tick()
        await ctx.tick()
        ctx.set(rst, 0)
        phase["in_reset"] = False
        for n, b in enumerate(token_beats("deltanet", XB, k)):
            await stream_put(ctx, s_axis, _word(b, xw) | (int(n % bpt == bpt - 1) << (k * xw)), rng=rng_src, idle=0.3)

    view = type("View", (), {})()
    view.valid, view.ready = top.m_axis_tvalid, top.m_axis_tready
    view.payload = Cat(top.m_axis_tdata, top.m_axis_tlast)

    def decode(word):
        lanes = [(word >> (l * ow)) & ((1 << ow) - 1) for l in range(k)]
        return [v - (1 << ow) if v >> (ow - 1) else v for v in lanes], (word >> (k * ow)) & 1

    async def sink(ctx):
        while len(got["b"]) < len(XB["k"]) * dk:
            if phase["in_reset"]:
                ctx.set(view.ready, 0)
                await ctx.tick()
                continue
            ready = rng_snk.random() >= 0.4
            ctx.set(view.ready, ready)
            _, _, valid, p = await ctx.tick().sample(view.valid, view.payload)
            if ready and valid:
                got["b" if phase["after_reset"] else "a"].append(decode(p))
        ctx.set(view.ready, 0)
        while ctx.get(top.status_busy):
            await ctx.tick()
        res["s"] = read_state(ctx, top.core.smem, d, k)
        for name in ("tokens", "saturations", "framing_errors"):
            res[name] = ctx.get(getattr(top, f"status_{name}"))

    run_simulation(dut, source, sink, deadline_cycles=10_000)
    oa = ga["o_raw"].reshape(-1, k)
    assert len(got["a"]) <= 2 * dk
    for n, (lanes, last) in enumerate(got["a"]):
        assert lanes == oa[n].tolist() and last == (n % dk == dk - 1), f"pre-reset beat {n}"
    ob = np.array([lanes for lanes, _ in got["b"]]).reshape(-1, d)
    np.testing.assert_array_equal(ob, gb["o_raw"], err_msg="outputs after reset")
    np.testing.assert_array_equal(res["s"], gb["s_raw"], err_msg="final S after reset")
    assert res["tokens"] == 4 and res["framing_errors"] == 0
    assert res["saturations"] == expected_saturations(gb)


@pytest.mark.parametrize("algo", ALGOS)
def test_generated_baseline_top_lints_clean(algo, tmp_path):
    m = generate(algo, 8, 2, "legacy-int8", tmp_path)
    res = lint(m["paths"]["verilog"])
    assert res.clean, res.output
    ports = {p["name"]: p for p in m["ports"]}
    for name, direction, width in [
        ("s_axis_tdata", "input", 16), ("s_axis_tlast", "input", 1), ("m_axis_tdata", "output", 32),
        ("m_axis_tlast", "output", 1), ("status_tokens", "output", 32), ("status_framing_errors", "output", 32),
    ]:
        assert ports[name]["direction"] == direction and ports[name]["width"] == width, name
    on_disk = json.loads((tmp_path / f"specmem_{algo}.json").read_text())
    assert on_disk["streams"]["s_axis"]["beats_per_token"] == (12 if algo == "linear" else 13)
    assert on_disk["cycles_per_token"]["floor_d2_over_k"] == 32


def test_rejects_bad_generics():
    with pytest.raises(ValueError, match="algo: must be one of"):
        BaselineCore("lattice", 8, 2)
    with pytest.raises(ValueError, match="d: must be a multiple of k"):
        BaselineCore("linear", 9, 2)
    with pytest.raises(ValueError, match="eps: must be > 0"):
        BaselineCore("deltanet", 8, 2, eps=0.0)
    with pytest.raises(ValueError, match="^preset: the RTL implements legacy-int8"):
        BaselineCore("linear", 8, 2, "int8")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("d,k,preset", [(8, 2, "legacy-int16"), (8, 2, "legacy-wide"), (4, 1, "legacy-int8"),
                                        (4, 4, "legacy-int8"), (12, 3, "legacy-int8"), (16, 4, "legacy-int8")])
def test_core_bit_exact_sweep(algo, d, k, preset):
    g, Xq = golden(algo, make_stream(algo, 40 + d + k, 16, d), preset)
    res = run_core(algo, Xq, k, preset, idle=0.2, stall=0.3, seed=d * k)
    check(res, g)
