# amaranth: UnusedElaboratable=no
"""``rtl/reset_tree.ResetTree``: every block reset together from a branch of its own, one cycle
after ``rst``; ``quiet`` over the reset and that cycle; on ECP5 the branches stay separate
flip-flops through Yosys (which merges identical registers)."""

from __future__ import annotations

import json

import pytest
from amaranth.back import verilog
from amaranth.hdl import Cat, ClockDomain, Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from specmem.rtl.reset_tree import ResetTree
from specmem.rtl.testing import run_simulation


class _Counters(Elaboratable):
    """A counter with a reset and one without."""

    def __init__(self):
        self.count = Signal(8)
        self.free = Signal(8, reset_less=True)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.count.eq(self.count + 1), self.free.eq(self.free + 1)]
        return m


class _Core(wiring.Component):
    """The core's own counter and two blocks', behind a tree."""

    def __init__(self, style="registers"):
        self.style = style
        self.own, self.blocks = _Counters(), [_Counters(), _Counters()]
        super().__init__({"quiet": Out(1), "counts": Out(24)})

    def elaborate(self, platform):
        tree = ResetTree(self.style)
        m = Module()
        m.submodules.own = self.own  # the core's own logic: on the ctl branch
        for i, b in enumerate(self.blocks):
            tree.add(f"b{i}", b)
        m.d.comb += [self.quiet.eq(tree.quiet), self.counts.eq(Cat(self.own.count, *(b.count for b in self.blocks)))]
        return tree.build(m)


@pytest.mark.parametrize("start,length", [(5, 1), (9, 3)])
def test_every_block_resets_together_one_cycle_late(start, length):
    dut = _Core()
    top = Module()
    top.domains.sync = cd = ClockDomain("sync")
    top.submodules.dut = dut
    counters = [dut.own] + dut.blocks
    rows = []

    async def tb(ctx):
        for t in range(start + length + 6):
            ctx.set(cd.rst, start <= t < start + length)
            rows.append(([ctx.get(c.count) for c in counters], [ctx.get(c.free) for c in counters],
                         ctx.get(dut.quiet)))
            await ctx.tick()

    run_simulation(top, tb, deadline_cycles=100)
    for t, (counts, frees, quiet) in enumerate(rows):
        # registers are cleared at the edges ending cycles start + 1 .. start + length
        want = t if t <= start + 1 else max(0, t - (start + length + 1))
        assert counts == [want] * 3, (t, counts)
        assert frees == [t] * 3  # reset-less registers keep counting
        assert quiet == (start <= t <= start + length), t


def test_branches_are_separate_flip_flops_after_yosys(tmp_path):
    """Yosys's opt_merge folds identical registers (``rtl/lane_control.py``); the ECP5 branches are
    TRELLIS_FF cells and come out of synth_ecp5 as one reset net per block (and the core's own)."""
    from specmem.synth import _run_tool

    text = verilog.convert(_Core("ecp5"), name="tree_top", emit_src=False)
    assert text.count("TRELLIS_FF ") == 4  # the gate, ctl and two blocks
    (tmp_path / "top.v").write_text(text)
    _run_tool("yosys", ["-q", "-p", "read_verilog top.v; synth_ecp5 -top tree_top; write_json net.json"], cwd=tmp_path,
             timeout=600)
    cells = json.loads((tmp_path / "net.json").read_text())["modules"]["tree_top"]["cells"].values()
    lsr = {tuple(c["connections"]["LSR"]) for c in cells if c["type"] == "TRELLIS_FF"} - {("0",)}
    assert len(lsr) == 3, lsr  # ctl's and the two blocks' branches: each its own net


def test_a_block_name_is_taken_once():
    tree = ResetTree()
    tree.add("a", _Counters())
    with pytest.raises(ValueError, match="taken"):
        tree.add("a", _Counters())
    with pytest.raises(ValueError, match="taken"):
        tree.add("ctl", _Counters())
    with pytest.raises(ValueError, match="style"):
        ResetTree("xilinx")
