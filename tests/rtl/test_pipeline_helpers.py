# amaranth: UnusedElaboratable=no
"""``rtl/pipeline.py``'s timing helpers: ``select_pipe`` (the registered 4:1 select tree gives
``items[sel]`` exactly ``select_levels(n)`` cycles after ``sel``, items and ``sel`` random every
cycle, for sizes that fill the tree and sizes that leave a short last group) and ``staggered``."""

import random

import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from specmem.rtl.pipeline import select_levels, select_pipe


@pytest.mark.parametrize("n, levels", [(1, 1), (2, 1), (3, 1), (4, 1), (5, 2), (8, 2), (16, 2), (17, 3),
                                       (32, 3), (64, 3), (65, 4)])
def test_select_pipe_is_the_indexed_item_levels_cycles_later(n, levels):
    assert select_levels(n) == levels
    rng = random.Random(n)
    m = Module()
    items = [Signal(signed(9), name=f"it{i}") for i in range(n)]
    sel = Signal(range(max(n, 2)), name="sel")
    out = select_pipe(m, items, sel, signed(9), "t")
    sent, checked = [], 0

    async def bench(ctx):
        nonlocal checked
        for _ in range(300):
            vals = [rng.randrange(-256, 256) for _ in range(n)]
            s = rng.randrange(n)
            for it, v in zip(items, vals):
                ctx.set(it, v)
            ctx.set(sel, s)
            sent.append(vals[s])
            await ctx.tick()
            if len(sent) >= levels:
                assert ctx.get(out) == sent[-levels], (n, len(sent))
                checked += 1

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert checked >= 290


def test_staggered_enables_follow_the_start_one_cycle_apart_with_its_flag():
    """``pipeline.staggered``: enable ``i`` is high exactly ``i`` cycles after ``start`` (one cycle
    each), carrying ``flag`` as it was at ``start``, for starts back to back and apart."""
    from specmem.rtl.pipeline import staggered

    m = Module()
    start, flag = Signal(name="start"), Signal(name="flag")
    outs = staggered(m, start, flag, 4, "t")
    starts = [1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    flags = [1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    seen = []

    async def bench(ctx):
        for s, f in zip(starts, flags):
            ctx.set(start, s)
            ctx.set(flag, f)
            await ctx.tick()
            seen.append([(ctx.get(e), ctx.get(fl)) for e, fl in outs])

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for c in range(len(starts)):
        for i in range(4):
            src = c - i
            want_en = starts[src] if src >= 0 else 0
            assert seen[c][i][0] == want_en, (c, i)
            if want_en:
                assert seen[c][i][1] == flags[src], (c, i)
