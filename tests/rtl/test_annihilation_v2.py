# amaranth: UnusedElaboratable=no
"""``rtl/annihilation_v2.py`` (the annihilation core v2 on the row unit and the token chain) against
the golden model (``annihilation_fixed``, ``gram="coaccumulate"``, evicting orthogonal inputs):
every ``y`` bit of every token and the counters, on streams with warm-up, zero tokens, evictions
and full steps, with idle gaps on the input and backpressure on the output."""

import random

import numpy as np
import pytest

from specmem.golden.fixed.annihilation import annihilation_fixed
from specmem.golden.fixed.datapath import Datapath
from specmem.rtl.annihilation_v2 import AnnihilationCoreV2
from specmem.rtl.testing import run_simulation, stream_put
from specmem.sim.model import V2_SAT_TENSORS as V2_SAT
from specmem.sim import stimulus  # streams with evictions and round-robin ties (shared with the Verilator bench)


def _stream(seed, T, d, k):
    return stimulus.evictions(seed, T, d, k)


def _unit_stream(seed, T, d, k):
    return stimulus.units(seed, T, d)


def _run(core, X, *, idle=0.0, stall=0.0, gap=0, seed=0, collisions=None, trace=None):
    d, k, B = core.d, core.k, core.beats
    ys, marks = [], []

    async def source(ctx):
        rng = random.Random(seed)
        for t in range(len(X)):
            for _ in range(rng.randrange(gap + 1)):  # tokens that arrive late: the core must wait (A pass)
                await ctx.tick()
            for b in range(B):
                await stream_put(ctx, core.x_in, [int(v) for v in X[t, b * k:(b + 1) * k]], rng=rng, idle=idle)

    async def sink(ctx):
        rng = random.Random(seed + 1)
        cycle = 0
        for _ in range(len(X) * B):
            while True:
                ready = rng.random() >= stall
                ctx.set(core.y_out.ready, ready)
                _, _, valid, pl = await ctx.tick().sample(core.y_out.valid, core.y_out.payload)
                cycle += 1
                if ready and valid:
                    break
            ys.append(([pl.y[l] for l in range(k)], pl.last))
            marks.append(cycle)
        ctx.set(core.y_out.ready, 0)
        for _ in range(4 * d + 400):  # the last pass drains after its y beats have left
            if not ctx.get(core.busy):
                break
            await ctx.tick()
        got["counters"] = {n: ctx.get(getattr(core, n)) for n in ("tokens", "orth_count", "orth_flag", "count",
                                                                  "saturations")}

    async def ram_monitor(ctx):
        """A read and a write of one address at one edge: the DP16KD leaves it undefined."""
        ram = core.uram
        async for _, _, ren, wen, ra, wa in ctx.tick().sample(ram.rd_en, ram.wr_en, ram.rd_addr, ram.wr_addr):
            if ren and wen and ra == wa:
                collisions.append(wa)

    async def handshakes(ctx):
        """Per cycle: busy, and the x and y beats transferred so far (for the busy contract)."""
        nx = ny = 0
        async for _, _, busy, xv, xr, yv, yr in ctx.tick().sample(core.busy, core.x_in.valid, core.x_in.ready,
                                                                   core.y_out.valid, core.y_out.ready):
            nx, ny = nx + (xv and xr), ny + (yv and yr)
            trace.append((busy, nx, ny))

    got = {}
    procs = ([ram_monitor] if collisions is not None else []) + ([handshakes] if trace is not None else [])
    run_simulation(core, source, sink, processes=procs,
                   deadline_cycles=len(X) * (d + 800) + 2000)
    return ys, marks, got["counters"]


@pytest.mark.parametrize("preset,d,k,idle,stall,gap,stream,norm_lanes", [
    ("int18", 16, 4, 0.0, 0.0, 0, _stream, None),
    ("int18", 16, 4, 0.3, 0.3, 300, _stream, 4),  # the wide normalisers
    ("int8", 8, 2, 0.0, 0.2, 0, _stream, None),
    ("int18", 16, 4, 0.0, 0.0, 0, _unit_stream, None),
    ("int18", 16, 4, 0.2, 0.2, 50, _stream, 1),
])
def test_core_v2_matches_golden(preset, d, k, idle, stall, gap, stream, norm_lanes):
    core = AnnihilationCoreV2(d, k, preset, norm_lanes=norm_lanes)
    T = 40
    x = stream(5, T, d, k)
    ref = annihilation_fixed(x, k, preset, gram="coaccumulate", orth_policy="evict")
    X = Datapath(core.fmt, trace=False).quantize("x", x)
    ys, marks, counters = _run(core, X, idle=idle, stall=stall, gap=gap, seed=11)
    B = core.beats
    for t in range(T):
        for b in range(B):
            y, last = ys[t * B + b]
            assert y == list(ref["y_raw"][t, b * k:(b + 1) * k]), f"token {t} beat {b}"
            assert last == (b == B - 1)
    assert ref["orth"].sum() >= 2 and np.any(ref["y_raw"] != 0)
    sat = sum(ref["sat"][n] for n in V2_SAT)
    assert counters == {"tokens": T, "orth_count": int(ref["orth"].sum()), "orth_flag": 1,
                        "count": int(ref["count"]), "saturations": sat}


@pytest.mark.parametrize("preset,d,k,heads,chains,idle,stall,gap", [
    pytest.param("int18", 16, 4, 2, 1, 0.0, 0.0, 0, marks=pytest.mark.slow),
    ("int18", 16, 4, 3, 2, 0.2, 0.3, 120),
    ("int8", 8, 2, 3, 1, 0.0, 0.0, 0),
    pytest.param("int18", 16, 4, 3, 3, 0.0, 0.0, 0, marks=pytest.mark.slow),
])
def test_heads_are_independent_memories_on_one_datapath(preset, d, k, heads, chains, idle, stall, gap):
    """H memories interleaved token by token (stream order: time step, then head): each head's
    y and the summed counters equal H independent runs of the model, with one chain unit or more
    (tokens of different heads in flight on different units)."""
    core = AnnihilationCoreV2(d, k, preset, heads=heads, chains=chains)
    T = 24
    x = np.stack([(_stream if h % 2 == 0 else _unit_stream)(5 + h, T, d, k) for h in range(heads)])
    ref = annihilation_fixed(x, k, preset, gram="coaccumulate", orth_policy="evict")
    X = Datapath(core.fmt, trace=False).quantize("x", x)   # [H, T, d]
    order = X.transpose(1, 0, 2).reshape(T * heads, d)      # token n = t H + h
    collisions = []
    ys, marks, counters = _run(core, order, idle=idle, stall=stall, gap=gap, seed=13, collisions=collisions)
    assert collisions == [], "the state RAM was read and written at one address in one cycle (CLEAR included)"
    B = core.beats
    for t in range(T):
        for h in range(heads):
            n = t * heads + h
            got = [v for b in range(B) for v in ys[n * B + b][0]]
            assert got == list(ref["y_raw"][h, t]), f"head {h} token {t}"
    assert ref["orth"].sum() >= 4 and np.any(ref["y_raw"] != 0)
    sat = sum(ref["sat"][n] for n in V2_SAT)
    assert counters == {"tokens": T * heads, "orth_count": int(ref["orth"].sum()), "orth_flag": 1,
                        "count": int(ref["count"][0]), "saturations": sat}


@pytest.mark.parametrize("preset,d,k,heads", [("int8", 8, 2, 1), ("int18", 16, 4, 2)])
def test_busy_covers_every_accepted_token_until_its_y_beats_leave(preset, d, k, heads):
    """``busy`` low means the core holds no work: every token whose beats have all been accepted
    has had all its y beats written to the output FIFO, so with an always-ready sink they have
    all left within the FIFO's two cycles. Idle gaps between tokens make ``busy`` fall mid-stream."""
    core = AnnihilationCoreV2(d, k, preset, heads=heads)
    X = Datapath(core.fmt, trace=False).quantize("x", _stream(3, 12 * heads, d, k))
    trace = []
    _run(core, X, gap=200, seed=5, trace=trace)
    B = core.beats
    idle = [c for c, (busy, _, _) in enumerate(trace) if not busy]
    assert len(idle) > 100, "the stream must leave the core idle between tokens"
    for c in idle:
        done = (trace[c - 1][1] // B) * B if c else 0  # beats accepted at earlier edges
        later = trace[min(c + 2, len(trace) - 1)][2]
        assert later >= done, f"cycle {c}: busy low with {done - later} y beats of accepted tokens still to come"


def test_saturations_of_um_and_r_are_counted():
    """Inputs at the top of x's range drive U to its limits: the model saturates ``Um`` (u_mul) and
    ``r`` as well as the writes, and the core's counter holds all of them (with ``y`` bit-exact)."""
    d, k, T = 16, 4, 40
    core = AnnihilationCoreV2(d, k, "int18")
    x = _stream(0, T, d, k) * 100
    ref = annihilation_fixed(x, k, "int18", gram="coaccumulate", orth_policy="evict")
    assert ref["sat"]["u_mul"] > 0 and ref["sat"]["r"] > 0, "the stream must saturate Um and r"
    X = Datapath(core.fmt, trace=False).quantize("x", x)
    ys, _, counters = _run(core, X)
    got = np.array([[v for b in range(core.beats) for v in ys[t * core.beats + b][0]] for t in range(T)])
    assert np.array_equal(got, ref["y_raw"])
    assert counters["saturations"] == sum(ref["sat"][n] for n in V2_SAT)


@pytest.mark.parametrize("key", [
    (16, 4, "int18", 1, 1, 4),
    pytest.param((16, 4, "int18", 1, 1, 2), marks=pytest.mark.slow),
    pytest.param((16, 4, "int18", 3, 2, 2), marks=pytest.mark.slow),
    pytest.param((16, 4, "int18", 2, 1, 2), marks=pytest.mark.slow),
    pytest.param((16, 4, "int18", 1, 1, 1), marks=pytest.mark.slow),
])
def test_measured_cycles_table_is_reproduced(key):
    """``V2_MEASURED_CYCLES`` (the manifest's cycles per token) is what ``measure_cycles_v2``
    measures now: full tokens back to back, every period of heads x chain units the same."""
    from specmem.rtl.top import V2_MEASURED_CYCLES
    from specmem.synth import measure_cycles_v2

    d, k, preset, heads, chains, lanes = key
    got = measure_cycles_v2(d, k, preset, heads=heads, chains=chains, norm_lanes=lanes)
    assert got["constant"], got["periods"]
    assert got["full_steady_state"] == pytest.approx(V2_MEASURED_CYCLES[key], abs=0.01)


def test_measure_cycles_v2_refuses_an_empty_measurement():
    from specmem.synth import measure_cycles_v2

    with pytest.raises(ValueError, match="full_tokens"):
        measure_cycles_v2(16, 4, full_tokens=0)
