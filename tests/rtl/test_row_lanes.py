# amaranth: UnusedElaboratable=no
"""``rtl/row_lanes.RowLanes`` against a plain row vector: rows written in order with random gaps
and restarts (including restarts in the middle of a vector), beats read at random addresses every
cycle, each read checked against the vector as it stood (a write in the same cycle not yet
visible)."""

import random

import pytest

from specmem.rtl.row_lanes import RowLanes
from specmem.rtl.testing import run_simulation


@pytest.mark.parametrize("width, d, k", [(7, 8, 4), (13, 32, 4), (5, 12, 3), (9, 4, 4), (3, 64, 8), (11, 8, 1)])
def test_row_lanes_reads_the_rows_written(width, d, k):
    rng = random.Random(width * 1000 + d * 10 + k)
    dut = RowLanes(width, d, k)
    B = d // k
    ref = [None] * d  # None: never written (not read by the check)
    checked = 0

    async def bench(ctx):
        nonlocal checked
        row, pending = 0, None  # the row the next value goes to; a value due this cycle
        for _ in range(1500):
            addr = rng.randrange(B)
            restart = rng.random() < 0.03
            nxt = not restart and row < d and rng.random() < 0.7
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.w_restart, restart)
            ctx.set(dut.w_next, nxt)
            value = rng.randrange(1 << width)
            ctx.set(dut.w_data, value if pending is not None else rng.randrange(1 << width))
            for j in range(k):
                want = ref[addr * k + j]
                if want is not None:
                    assert ctx.get(dut.r_data[j]) == want, (addr, j)
                    checked += 1
            if pending is not None:  # written at this clock edge
                ref[pending] = value
            pending = row if nxt else None
            if restart:
                row = 0
            elif nxt:
                row += 1
            await ctx.tick()

    run_simulation(dut, bench)
    assert checked > 1000


def test_row_lanes_refuses_a_shape_it_cannot_hold():
    with pytest.raises(ValueError, match="multiple of k"):
        RowLanes(8, 10, 4)
    with pytest.raises(ValueError, match="width >= 1"):
        RowLanes(0, 8, 4)
