"""A ``d``-element vector written and read as beats of ``k`` elements, double-buffered in ``k``
lanes of LUT RAM: one bank is filled beat by beat while the other is read, and a take flips
them. The scaled cores' per-token vectors were ``d``-wide register pairs (the front end's copy and
the current token's), taken by a ``d``-wide copy whose enable and whose beat selects reached
across the chip; here the take is two pointer flip-flops and a beat is one registered address into
a few distributed-RAM cells per lane.

With ``banks = N > 2`` the write bank steps round a ring of ``N`` at each flip and the reader
names its bank (``r_bank``): a vector can stay readable for ``N - 1`` flips (the cores with
heads read a token's ``v`` in its chain after the next token's take).

With ``w_lanes`` or ``r_lanes`` (divisors ``c`` of ``k`` with ``k/c`` a power of two) a side
moves ``c`` elements a beat over ``d/c`` beats: a write enables one group of ``c`` lanes (a
one-hot register beside the word counter); a read takes word ``addr div (k/c)`` of every lane and
selects its group by ``addr``'s low bits (a ``k/c``:1 select after the RAM). The scaled VLA
core's chain runs on fewer lanes than its passes and reads the token's ``k``-lane input this way.

Lane ``j`` holds element ``b k + j`` of beat ``b`` at word ``bank 2^ceil(log2 B) + b``."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
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
    the cycle of a flip goes to the old write bank. ``banks > 2``: ``flip`` moves the write
    bank to the next of the ring (``w_bank``, from 0 after reset) and ``r_bank`` picks the bank
    read. ``w_lanes``, ``r_lanes``: the elements a write or read beat moves (default ``k``; see the
    module docstring): ``w_data[w_lanes]`` over ``d/w_lanes`` beats, ``r_addr`` a beat of
    ``r_lanes`` elements, ``r_data[r_lanes]``."""

    def __init__(self, width: int, d: int, k: int, banks: int = 2, *, w_lanes: int | None = None,
                 r_lanes: int | None = None):
        if width < 1 or k < 1 or d < k or d % k:
            raise ValueError(f"BeatBanks needs width >= 1 and d a multiple of k >= 1 (width={width}, d={d}, k={k})")
        if isinstance(banks, bool) or not isinstance(banks, int) or banks < 2:
            raise ValueError(f"banks: must be an integer >= 2, got {banks!r}")
        self.width, self.d, self.k, self.B, self.banks = width, d, k, d // k, banks
        wl, rl = (k if x is None else x for x in (w_lanes, r_lanes))
        for name, c in (("w_lanes", wl), ("r_lanes", rl)):
            if isinstance(c, bool) or not isinstance(c, int) or c < 1 or k % c or (k // c) & (k // c - 1):
                raise ValueError(f"{name}: must divide k = {k} by a power of two, got {c!r}")
        self.w_lanes, self.r_lanes = wl, rl
        extra = {"r_bank": In(range(banks)), "w_bank": Out(range(banks))} if banks > 2 else {}
        super().__init__({**extra,
            "w_en": In(1), "w_data": In(unsigned(width)).array(wl), "flip": In(1),
            "r_addr": In(range(max(d // rl, 2))), "r_data": Out(unsigned(width)).array(rl),
        })

    def elaborate(self, platform):
        m = Module()
        B, N = self.B, self.banks
        k, wl, rl = self.k, self.w_lanes, self.r_lanes
        gw, gr = k // wl, k // rl  # lane groups a write, a read beat spans
        abits = max(1, (B - 1).bit_length())
        bbits = max(1, (N - 1).bit_length())
        wbank = Signal(range(N), name="w_bank")  # with two banks the read bank is the other one
        beat = Signal(range(max(B, 2)), name="w_beat")
        advance = self.w_en
        if gw > 1:  # write beats of wl lanes: the group's one-hot; the word advances after the last
            hot = Signal(gw, name="w_group", init=1)
            with m.If(self.flip):
                m.d.sync += hot.eq(1)
            with m.Elif(self.w_en):
                m.d.sync += hot.eq(hot.rotate_left(1))
            advance = self.w_en & hot[gw - 1]
        with m.If(self.flip):
            m.d.sync += [wbank.eq(Mux(wbank == N - 1, 0, wbank + 1)), beat.eq(0)]
        with m.Elif(advance):
            m.d.sync += beat.eq(Mux(beat == B - 1, 0, beat + 1))
        rbank = ~wbank[0] if N == 2 else self.r_bank
        if N > 2:
            m.d.comb += self.w_bank.eq(wbank)
        rsh = (gr - 1).bit_length()  # the read address's group bits
        rbank_bits = rbank[:bbits] if N > 2 else rbank
        rdata = []
        for j in range(k):
            mem = Memory(shape=unsigned(self.width), depth=(1 << bbits) << abits, init=[])
            m.submodules[f"lane{j}"] = mem
            wp = mem.write_port()
            wen = self.w_en if gw == 1 else self.w_en & hot[j // wl]
            m.d.comb += [wp.en.eq(wen), wp.addr.eq(Cat(beat[:abits], wbank[:bbits])), wp.data.eq(self.w_data[j % wl])]
            rp = mem.read_port(domain="comb")
            if gr == 1:
                m.d.comb += [rp.addr.eq(Cat(self.r_addr[:abits], rbank_bits)), self.r_data[j].eq(rp.data)]
            else:
                m.d.comb += rp.addr.eq(Cat(self.r_addr[rsh:rsh + abits], rbank_bits))
                rdata.append(rp.data)
        for j in range(rl if gr > 1 else 0):
            m.d.comb += self.r_data[j].eq(Array(rdata[g * rl + j] for g in range(gr))[self.r_addr[:rsh]])
        return m
