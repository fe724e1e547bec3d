"""``rtl/lane_control.py``: loaded values reach every lane's copy two cycles later and hold."""

import random

import pytest
from amaranth.back import verilog
from amaranth.hdl import signed
from amaranth.lib import data
from amaranth.sim import Simulator

from specmem.rtl.lane_control import LaneControl

LAYOUT = data.StructLayout({"shift": signed(6), "mask": 4, "enable": 1})


def test_copies_follow_loads_with_latency_two():
    k = 5
    dut = LaneControl(LAYOUT, k)
    rng = random.Random(1)
    history, errors = [], []

    async def bench(ctx):
        expect_central = expect_lanes = None
        pending = []   # values in flight: (cycle it reaches the lanes, value)
        for cyc in range(400):
            load = rng.random() < 0.3
            val = {"shift": rng.randint(-32, 31), "mask": rng.randrange(16), "enable": rng.randrange(2)}
            ctx.set(dut.load, load)
            ctx.set(dut.i, val)
            await ctx.tick()
            if load:
                pending.append((cyc + 2, val))
            while pending and pending[0][0] <= cyc + 1:
                expect_lanes = pending.pop(0)[1]
            if expect_lanes is not None:
                for lane in range(k):
                    got = {f: ctx.get(getattr(dut.lanes[lane], f)) for f in ("shift", "mask", "enable")}
                    if got != expect_lanes:
                        errors.append((cyc, lane, got, expect_lanes))
                history.append(expect_lanes)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(history) > 300 and not errors, errors[:3]


def test_copies_carry_the_keep_attribute():
    """One ``keep`` per lane copy in the Verilog (Yosys 0.70 still merges them: module docstring)."""
    text = verilog.convert(LaneControl(LAYOUT, 4), name="lc")
    assert text.count("(* keep = 32'd1 *)") == 4


def test_bad_k():
    with pytest.raises(ValueError, match="^k:"):
        LaneControl(LAYOUT, 0)
