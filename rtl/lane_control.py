"""Per-token control values, decoded once into a register and copied into every lane's own
register, so no lane's datapath reads a value that fans out to all ``k`` lanes or an FSM decode.

Timing discipline (``hardware.md``): "per-token control values (shift amounts, masks, enables)
are decoded once per token into registers and copied per lane". A value computed in cycle ``t``
with ``load`` high is in the central register in ``t + 1`` and in every lane's copy in ``t + 2``
(:attr:`latency`); both hold until the next ``load``.

Measured (``python -m specmem.synth_block lane_control --k 16``): Yosys 0.70 merges the ``k``
identical copies back into one register (41 flip-flops for 20 bits x 17 registers + 1), although
the copies carry the ``keep`` attribute: Amaranth puts it on the wire, and ``opt_merge`` merges
the flip-flops that drive the wires. So today the block guarantees a registered, decoded value
(no FSM decode on a datapath path) but not a physically split fan-out; splitting it needs the
attribute on the flip-flop cells (or a vendor flip-flop instance per copy).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["LaneControl"]


class LaneControl(wiring.Component):
    """``layout`` (a ``lib.data`` layout or shape) loaded on ``load``; ``lanes[l]`` is lane ``l``'s copy."""

    def __init__(self, layout, k: int):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k: must be an integer >= 1, got {k!r}")
        self.k, self.layout = k, layout
        self.latency = 2
        super().__init__({
            "load": In(1),
            "i": In(layout),
            "lanes": Out(data.ArrayLayout(layout, k)),
        })

    def elaborate(self, platform):
        m = Module()
        central = Signal(self.layout, name="central")
        moved = Signal(name="moved")   # the central register changed last cycle: refresh the copies
        m.d.sync += moved.eq(self.load)
        with m.If(self.load):
            m.d.sync += central.eq(self.i)
        for lane in range(self.k):
            copy = Signal(self.layout, name=f"lane{lane}", attrs={"keep": 1})
            with m.If(moved):
                m.d.sync += copy.eq(central)
            m.d.comb += self.lanes[lane].eq(copy)
        return m
