"""A skid buffer: an ``amaranth.lib.stream`` register slice whose ``ready`` towards the source is
a register (``hardware.md``, "Timing discipline": no combinational path from a sink's ready
back to the source).

Two words of storage: the output register and one spare. The source sees ``ready`` high while
the spare is empty; a word that arrives in the cycle the sink stalls goes to the spare, and the
spare drains first. Full rate when the sink is always ready; one cycle of latency; words leave
in order, none lost or duplicated, whatever the two sides do.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Members: ``i: In(stream.Signature(layout))``, ``o: Out(stream.Signature(layout))``."""

    def __init__(self, layout):
        self.layout = layout
        super().__init__({"i": In(stream.Signature(layout)), "o": Out(stream.Signature(layout))})

    def elaborate(self, platform):
        m = Module()
        spare = Signal(self.layout, name="spare")
        spare_v = Signal(name="spare_valid")
        m.d.comb += self.i.ready.eq(~spare_v)
        take = ~self.o.valid | self.o.ready  # the output register is free at the clock edge
        with m.If(take):
            with m.If(spare_v):
                m.d.sync += [self.o.payload.eq(spare), self.o.valid.eq(1), spare_v.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & ~spare_v):
            m.d.sync += [spare.eq(self.i.payload), spare_v.eq(1)]
        return m
