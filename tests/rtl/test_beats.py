"""``rtl/beats.token_input`` against a plain model of its contract: tokens of three vectors taken
as beats with random gaps and a random ``ready`` (``i_ready`` its register, cleared by a token's
last beat or a flush), flushes in a token's first slot, stray flushes
inside a token (taken as data, flagged); every register, exponent and returned pulse checked every
cycle. ``vector_readout`` likewise: a vector changing every cycle, read out beat by beat through
the port's register after random starts (restarts mid-read-out included)."""

import random
from types import SimpleNamespace

import pytest
from amaranth.hdl import Module, Signal, signed

from specmem.rtl.beats import token_input, vector_readout
from specmem.rtl.testing import run_simulation


@pytest.mark.parametrize("d, k", [(8, 4), (12, 3), (4, 4), (6, 1)])
def test_token_input_fills_each_vector_beat_by_beat(d, k):
    rng = random.Random(d * 10 + k)
    B, nv = d // k, 3
    m = Module()
    core = SimpleNamespace(d=d, i_valid=Signal(name="i_valid"), i_ready=Signal(name="i_ready"),
                           i_flush=Signal(name="i_flush"), i_frac=Signal(signed(6), name="i_frac"),
                           i_data=[Signal(signed(8), name=f"i_data{j}") for j in range(k)])
    ready = Signal(name="ready")
    vectors = [([Signal(signed(8), name=f"v{v}_{i}") for i in range(d)], Signal(signed(6), name=f"f{v}"))
               for v in range(nv)]
    flush, last, stray = token_input(m, core, vectors, k, ready)
    ref_regs = [[0] * d for _ in range(nv)]
    ref_frac = [0] * nv
    counts = {"flush": 0, "last": 0, "stray": 0}

    async def bench(ctx):
        slot, reg_ready = 0, True  # i_ready: ready registered, cleared by a token's last beat or a flush
        for _ in range(3000):
            valid, rdy = rng.random() < 0.8, rng.random() < 0.85
            fl = rng.random() < (0.2 if slot == 0 else 0.03)
            data = [rng.randrange(-128, 128) for _ in range(k)]
            frac = rng.randrange(-32, 32)
            ctx.set(core.i_valid, valid)
            ctx.set(ready, rdy)
            ctx.set(core.i_flush, fl)
            ctx.set(core.i_frac, frac)
            for s, x in zip(core.i_data, data):
                ctx.set(s, x)
            assert ctx.get(core.i_ready) == reg_ready
            take = valid and reg_ready
            want = {"flush": take and fl and slot == 0, "stray": take and fl and slot != 0,
                    "last": take and not fl and slot == nv * B - 1}
            for name, sig in (("flush", flush), ("last", last), ("stray", stray)):
                assert ctx.get(sig) == want[name], (name, slot)
                counts[name] += want[name]
            reg_ready = rdy and not want["last"] and not want["flush"]
            if take and not want["flush"]:
                v, b = divmod(slot, B)
                ref_regs[v][b * k:(b + 1) * k] = data
                if b == 0:
                    ref_frac[v] = frac
                slot = (slot + 1) % (nv * B)
            await ctx.tick()
            for v, (regs, fr) in enumerate(vectors):
                assert [ctx.get(r) for r in regs] == ref_regs[v], (v, slot)
                assert ctx.get(fr) == ref_frac[v]

    run_simulation(m, bench)
    assert min(counts.values()) >= 5, counts


@pytest.mark.parametrize("d, k", [(8, 4), (12, 3), (4, 4), (5, 1)])
def test_vector_readout_registers_each_beat_read_the_cycle_before(d, k):
    """Beat ``i`` after a start holds the vector as it was ``i + 1`` cycles after the start and
    reaches the port one cycle later; ``first`` on beat 0; a start mid-read-out restarts it."""
    rng = random.Random(d * 10 + k)
    B = d // k
    m = Module()
    vec = [Signal(signed(9), name=f"vec{i}") for i in range(d)]
    frac = Signal(signed(6), name="frac")
    start = Signal(name="start")
    core = SimpleNamespace(x_valid=Signal(name="x_valid"), x_first=Signal(name="x_first"),
                           x_frac=Signal(signed(6), name="x_frac"),
                           x_data=[Signal(signed(9), name=f"x_data{j}") for j in range(k)])
    vector_readout(m, ("x", core), vec, frac, start, k, ("x_rd", "x_rd_beat"))
    seen = {"beats": 0, "restarts": 0}

    async def bench(ctx):
        rd = 0  # beats left to read, as the contract counts them
        for _ in range(2000):
            values = [rng.randrange(-256, 256) for _ in range(d)]
            fr = rng.randrange(-32, 32)
            go = rng.random() < 0.12
            for s, x in zip(vec, values):
                ctx.set(s, x)
            ctx.set(frac, fr)
            ctx.set(start, go)
            want = (rd != 0, rd == B, values[(B - rd) * k:(B - rd + 1) * k] if rd else None, fr)
            seen["restarts"] += go and rd != 0
            rd = B if go else max(rd - 1, 0)
            await ctx.tick()
            assert ctx.get(core.x_valid) == want[0]
            if want[0]:
                seen["beats"] += 1
                assert ctx.get(core.x_first) == want[1]
                assert [ctx.get(x) for x in core.x_data] == want[2]
                assert ctx.get(core.x_frac) == want[3]

    run_simulation(m, bench)
    assert seen["beats"] >= 100 and seen["restarts"] >= 5, seen
