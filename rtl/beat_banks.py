"""A ``d``-element vector written and read as beats of ``k`` elements, double-buffered in ``k``
lanes of LUT RAM: one bank is filled beat by beat while the other is read, and a take flips
them. The scaled cores' per-token vectors were ``d``-wide register pairs (the front end's copy and
the current token's), taken by a ``d``-wide copy whose enable and whose beat selects reached
across the chip; here the take is two pointer flip-flops and a beat is one registered address into
a few distributed-RAM cells per lane.

Lane ``j`` holds element ``b k + j`` of beat ``b`` at word ``bank B + b``."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["BeatBanks"]


class BeatBanks(wiring.Component):
    """``width``-bit elements, ``d`` per vector, two banks. Ports: ``w_en`` with ``w_data[k]`` (the
    next beat of the write bank, beats in order; the beat counter wraps after ``d/k``),
    ``flip`` (the bank just written becomes the read bank, the other one the write bank, and the
    write starts again at beat 0), ``r_addr`` (a beat of the read bank, meant to come from a
    register) with ``r_data[k]`` (combinational from the RAM: register them). A beat written in
    the cycle of a flip goes to the old write bank."""

    def __init__(self, width: int, d: int, k: int):
        if width < 1 or k < 1 or d < k or d % k:
            raise ValueError(f"BeatBanks needs width >= 1 and d a multiple of k >= 1 (width={width}, d={d}, k={k})")
        self.width, self.d, self.k, self.B = width, d, k, d // k
        super().__init__({
            "w_en": In(1), "w_data": In(unsigned(width)).array(k), "flip": In(1),
            "r_addr": In(range(max(self.B, 2))), "r_data": Out(unsigned(width)).array(k),
        })

    def elaborate(self, platform):
        m = Module()
        B = self.B
        abits = max(1, (B - 1).bit_length())
        wbank = Signal(name="w_bank")  # the read bank is the other one
        beat = Signal(range(max(B, 2)), name="w_beat")
        with m.If(self.flip):
            m.d.sync += [wbank.eq(~wbank), beat.eq(0)]
        with m.Elif(self.w_en):
            m.d.sync += beat.eq(Mux(beat == B - 1, 0, beat + 1))
        for j in range(self.k):
            mem = Memory(shape=unsigned(self.width), depth=2 << abits, init=[])
            m.submodules[f"lane{j}"] = mem
            wp = mem.write_port()
            m.d.comb += [wp.en.eq(self.w_en), wp.addr.eq(Cat(beat[:abits], wbank)), wp.data.eq(self.w_data[j])]
            rp = mem.read_port(domain="comb")
            m.d.comb += [rp.addr.eq(Cat(self.r_addr[:abits], ~wbank)), self.r_data[j].eq(rp.data)]
        return m
