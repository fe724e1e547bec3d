# amaranth: UnusedElaboratable=no
# (components built only to read their generics, or to see them rejected, are never elaborated)
"""DotEngine against a plain NumPy integer dot product: bit-exact, with random idle gaps on the
input and random backpressure on the output (the Amaranth Python simulator)."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.rtl.engine import DotEngine, dot_range, min_signed_width
from specmem.rtl.testing import run_simulation, stream_get, stream_put, stream_sink, stream_source


def _beats(rng, k, max_len, n_segments, a_width, b_width, *, chain=False):
    """Random segments of 1..max_len beats. Returns beats (dicts) and the expected outputs.

    With ``chain`` some segments omit ``first`` (keep accumulating) so a ``last`` emits a
    running sum over several segments; the total run between two ``first`` flags still stays
    within ``max_len`` beats.
    """
    alo, ahi = -(1 << (a_width - 1)), (1 << (a_width - 1)) - 1
    blo, bhi = -(1 << (b_width - 1)), (1 << (b_width - 1)) - 1
    beats, expect, lanes_expect = [], [], []
    acc, lanes, run = 0, np.zeros(k, dtype=np.int64), 0
    for s in range(n_segments):
        n = int(rng.integers(1, max_len + 1))
        clear = not chain or s == 0 or run + n > max_len or rng.random() < 0.5
        if clear:
            acc, lanes, run = 0, np.zeros(k, dtype=np.int64), 0
        else:
            n = min(n, max_len - run)
        kind = rng.random()
        for t in range(n):
            if kind < 0.15:  # extremes: every product at its largest magnitude
                a = np.full(k, alo, dtype=np.int64)
                b = np.full(k, blo if kind < 0.1 else bhi, dtype=np.int64)
            else:
                a = rng.integers(alo, ahi + 1, size=k)
                b = rng.integers(blo, bhi + 1, size=k)
            acc += int(np.dot(a, b))
            lanes = lanes + a * b
            beats.append({"a": a.tolist(), "b": b.tolist(), "first": int(clear and t == 0), "last": int(t == n - 1)})
        run += n
        expect.append(acc)
        lanes_expect.append(lanes.copy())
    return beats, expect, lanes_expect


def _run(dut, beats, n_out, *, seed, idle, stall):
    out = []
    conv = (lambda p: (int(p.sum), [int(x) for x in p.lanes])) if dut.lane_sums else (lambda p: int(p.sum))
    run_simulation(
        dut,
        stream_source(dut.i, beats, seed=seed, idle=idle),
        stream_sink(dut.o, n_out, out, seed=seed + 1, stall=stall, convert=conv),
        deadline_cycles=20 * len(beats) + 100,
    )
    return out


@pytest.mark.parametrize(
    "k,max_len,aw,bw,every,idle,stall,dsp",
    [
        pytest.param(4, 8, 8, 8, 1, 0.0, 0.0, "fabric", id="k4-int8-streaming"),
        pytest.param(4, 8, 8, 8, 1, 0.3, 0.4, "fabric", id="k4-int8-gaps-backpressure"),
        pytest.param(3, 5, 8, 8, 2, 0.2, 0.5, "fabric", id="k3-odd-lanes-reg-every-2"),
        pytest.param(1, 7, 6, 4, 1, 0.2, 0.3, "fabric", id="k1-int6xint4"),
        pytest.param(8, 4, 5, 8, 2, 0.1, 0.6, "fabric", id="k8-int5xint8"),
        pytest.param(4, 8, 8, 8, 1, 0.0, 0.0, "registered", id="k4-int8-dsp-registers-streaming"),
        pytest.param(8, 4, 16, 16, 1, 0.3, 0.5, "registered", id="k8-int16-dsp-registers-backpressure"),
    ],
)
def test_engine_matches_numpy(k, max_len, aw, bw, every, idle, stall, dsp):
    rng = np.random.default_rng(1000 + 10 * k + max_len)
    beats, expect, _ = _beats(rng, k, max_len, 24, aw, bw)
    dut = DotEngine(k, max_len, a_width=aw, b_width=bw, tree_reg_every=every, dsp=dsp)
    out = _run(dut, beats, len(expect), seed=k, idle=idle, stall=stall)
    np.testing.assert_array_equal(np.array(out), np.array(expect))


def test_engine_running_sums_and_lane_sums():
    """Segments without ``first`` keep accumulating; ``lane_sums`` gives each lane's own sum."""
    k, max_len = 4, 12
    rng = np.random.default_rng(7)
    beats, expect, lanes_expect = _beats(rng, k, max_len, 30, 8, 8, chain=True)
    assert any(b["last"] and not b["first"] for b in beats)
    dut = DotEngine(k, max_len, lane_sums=True)
    out = _run(dut, beats, len(expect), seed=3, idle=0.2, stall=0.4)
    np.testing.assert_array_equal(np.array([o[0] for o in out]), np.array(expect))
    np.testing.assert_array_equal(np.array([o[1] for o in out]), np.array(lanes_expect))


def test_engine_lane_bank_without_tree():
    """``reduce=False``: k independent multiply-accumulate lanes, latency 2, no ``sum``."""
    k, max_len = 4, 6
    rng = np.random.default_rng(9)
    beats, _, lanes_expect = _beats(rng, k, max_len, 20, 8, 8, chain=True)
    dut = DotEngine(k, max_len, lane_sums=True, reduce=False)
    assert dut.latency == 2 and "sum" not in dict(dut.out_layout)
    out = []
    run_simulation(
        dut,
        stream_source(dut.i, beats, seed=5, idle=0.2),
        stream_sink(dut.o, len(lanes_expect), out, seed=6, stall=0.4, convert=lambda p: [int(x) for x in p.lanes]),
        deadline_cycles=2000,
    )
    np.testing.assert_array_equal(np.array(out), np.array(lanes_expect))
    with pytest.raises(ValueError, match="reduce: an engine without the adder tree"):
        DotEngine(k, max_len, reduce=False)


@pytest.mark.parametrize("dsp,latency", [("fabric", 4), ("registered", 6)])
def test_engine_full_throughput_and_latency(dsp, latency):
    """With the sink always ready the engine takes one beat per cycle, and a ``last`` beat
    appears on the output exactly ``latency`` cycles after it is accepted (k=4: multiplier
    register(s), two tree levels, accumulator)."""
    k, n = 4, 16
    dut = DotEngine(k, 1, dsp=dsp)
    assert dut.latency == latency
    rng = np.random.default_rng(11)
    a = rng.integers(-128, 128, size=(n, k))
    b = rng.integers(-128, 128, size=(n, k))
    log = {}

    async def source(ctx):
        ctx.set(dut.o.ready, 1)
        for t in range(n):
            ctx.set(dut.i.payload, {"a": a[t].tolist(), "b": b[t].tolist(), "first": 1, "last": 1})
            ctx.set(dut.i.valid, 1)
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            assert ready, "engine stalled with an always-ready sink"
        ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        got, cycle = [], 0
        while len(got) < n:
            _, _, valid, p = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycle += 1
            if valid:
                got.append(int(p.sum))
                log.setdefault("first_cycle", cycle)
        log["got"] = got

    run_simulation(dut, source, sink, deadline_cycles=200)
    np.testing.assert_array_equal(np.array(log["got"]), np.einsum("tk,tk->t", a, b))
    # the beat accepted at edge 1 is visible after edge 1 + latency; the sink samples before edges
    assert log["first_cycle"] == 1 + dut.latency


def test_engine_holds_output_under_backpressure():
    """``o.valid`` stays up and the payload stays put while ``o.ready`` is low; nothing is lost."""
    dut = DotEngine(2, 1)
    seen = []

    async def tb(ctx):
        for v in (3, 5):
            await stream_put(ctx, dut.i, {"a": [v, 1], "b": [1, 1], "first": 1, "last": 1})
        for _ in range(10):  # sink not ready: the engine must stall, not drop
            await ctx.tick()
        assert ctx.get(dut.o.valid)
        assert not ctx.get(dut.i.ready)
        seen.append(int((await stream_get(ctx, dut.o)).sum))
        seen.append(int((await stream_get(ctx, dut.o)).sum))

    run_simulation(dut, tb, deadline_cycles=100)
    assert seen == [4, 6]


def test_engine_accumulator_width():
    # INT8 x INT8, 4 lanes x 16 beats: 64 products of at most 2^14 -> 2^20 needs 22 signed bits
    dut = DotEngine(4, 16)
    lo, hi = dot_range(8, 8, 64)
    assert hi == 64 * 2**14 and dut.acc_width == min_signed_width(lo, hi) == 22
    assert DotEngine(4, 16, acc_width=32).acc_width == 32


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"k": 4, "max_len": 16, "acc_width": 21}, "acc_width: 21 bits cannot hold"),
        ({"k": 0, "max_len": 4}, "k: must be"),
        ({"k": 4, "max_len": 0}, "max_len: must be"),
        ({"k": 4, "max_len": 4, "a_width": 1}, "a_width: must be"),
        ({"k": 4, "max_len": 4, "tree_reg_every": 0}, "tree_reg_every: must be"),
        ({"k": 4, "max_len": 4, "dsp": "xilinx"}, "dsp: must be one of fabric, registered, ecp5"),
        ({"k": 4, "max_len": 4, "a_width": 19, "dsp": "ecp5"}, "dsp: 'ecp5' maps one MULT18X18D per lane"),
    ],
)
def test_engine_rejects_bad_generics(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DotEngine(**kwargs)
