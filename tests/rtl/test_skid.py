"""The skid buffer (``rtl/skid.py``): every word once and in order under random idle gaps and
backpressure, full rate with a ready sink, and ``ready`` towards the source a register."""

from __future__ import annotations

import pytest
from amaranth.hdl import unsigned

from specmem.rtl.skid import SkidBuffer
from specmem.rtl.testing import run_simulation, stream_sink, stream_source


@pytest.mark.parametrize("idle,stall", [(0.0, 0.0), (0.3, 0.0), (0.0, 0.5), (0.4, 0.4), (0.1, 0.8)])
def test_words_in_order_under_gaps_and_backpressure(idle, stall):
    dut = SkidBuffer(unsigned(12))
    words = [(i * 2654435761) & 0xFFF for i in range(400)]
    out = []
    run_simulation(dut, stream_source(dut.i, words, seed=1, idle=idle),
                   stream_sink(dut.o, len(words), out, seed=2, stall=stall, convert=int),
                   deadline_cycles=10 * len(words) + 100)
    assert out == words


def test_full_rate_and_registered_ready():
    dut = SkidBuffer(unsigned(8))
    n = 50
    seen = {"cycles": 0, "ready_moved": 0}

    async def tb(ctx):
        ctx.set(dut.o.ready, 1)
        got = []
        for i in range(n + 2):
            ctx.set(dut.i.valid, i < n)
            ctx.set(dut.i.payload, i % 256)
            before = ctx.get(dut.i.ready)
            ctx.set(dut.o.ready, 0)  # the sink's ready moves inside the cycle: the source's must not
            seen["ready_moved"] += ctx.get(dut.i.ready) != before
            ctx.set(dut.o.ready, 1)
            _, _, valid, p = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            if valid:
                got.append(int(p))
        seen["got"] = got

    run_simulation(dut, tb, deadline_cycles=200)
    assert seen["ready_moved"] == 0
    assert seen["got"] == list(range(n))  # n words in n + 1 cycles: one a cycle after the first
