"""A ``d``-element vector of per-row values held in ``k`` lanes of LUT RAM (``d/k`` words each):
written one row per cycle in row order, read a beat (``k`` consecutive rows) per cycle. The
scaled cores' per-row results (``sk``, ``sq``, the row exponents) were ``d``-wide register vectors
whose beat selects were their routed critical paths (a 4:1 select's inputs spread over the chip);
a lane's words sit in a few distributed-RAM cells (``TRELLIS_DPR16X4`` on ECP5), read through one
registered address.

Row ``r`` lives in lane ``r mod k`` at word ``r div k``, so beat ``b`` is word ``b`` of every
lane. ``w_next`` is high the cycle before a value arrives on ``w_data`` (the rows' valid a cycle
ahead, as ``DeltaPass.o_valid_next`` gives it); ``w_restart`` points the next value at row 0."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["RowLanes"]


class RowLanes(wiring.Component):
    """``width``-bit values for ``d`` rows in ``k`` lanes. Ports: ``w_next``, ``w_restart``,
    ``w_data`` (the write side) and ``r_addr`` (a beat index, meant to come from a register) with
    ``r_data`` (its ``k`` rows, combinational from the RAM: register them). A write and a read of
    the same word in one cycle read the old value."""

    def __init__(self, width: int, d: int, k: int):
        if width < 1 or k < 1 or d < k or d % k:
            raise ValueError(f"RowLanes needs width >= 1 and d a multiple of k >= 1 (width={width}, d={d}, k={k})")
        self.width, self.d, self.k, self.B = width, d, k, d // k
        super().__init__({
            "w_next": In(1), "w_restart": In(1), "w_data": In(unsigned(width)),
            "r_addr": In(range(max(self.B, 2))), "r_data": Out(unsigned(width)).array(k),
        })

    def elaborate(self, platform):
        m = Module()
        k, B = self.k, self.B
        # where the next value goes: a one-hot lane and a word counter, a cycle ahead of the data
        hot = Signal(k, name="lane_hot", init=1)
        word = Signal(range(max(B, 2)), name="word")
        with m.If(self.w_restart):
            m.d.sync += [hot.eq(1), word.eq(0)]
        with m.Elif(self.w_next):
            m.d.sync += hot.eq(hot.rotate_left(1))
            with m.If(hot[k - 1]):
                m.d.sync += word.eq(Mux(word == B - 1, 0, word + 1))
        we = Signal(k, name="lane_we")  # each lane's write enable a flip-flop of its own
        wa = Signal(range(max(B, 2)), name="lane_wa", reset_less=True)
        m.d.sync += [we.eq(hot & self.w_next.replicate(k)), wa.eq(word)]
        for j in range(k):
            mem = Memory(shape=unsigned(self.width), depth=max(B, 2), init=[])
            m.submodules[f"lane{j}"] = mem
            wp = mem.write_port()
            m.d.comb += [wp.en.eq(we[j]), wp.addr.eq(wa), wp.data.eq(self.w_data)]
            rp = mem.read_port(domain="comb")
            m.d.comb += [rp.addr.eq(self.r_addr), self.r_data[j].eq(rp.data)]
        return m
