"""A delay of ``n`` advancing cycles for a wide data word: either ``n`` stage registers (the plain
reference) or a ring buffer in block RAM read through its output register
(:class:`~specmem.rtl.bram.RegisteredRAM`), which moves ``n · width`` flip-flops into
``ceil(width / 18)`` ``DP16KD``: the whole annihilation core v2 was bound by flip-flops, most of
them delay lines. With ``fabric_out`` the last stage is a fabric register, so the RAM's
clock-to-out and its route get a cycle of their own.

A third style, ``lutram``, is for the short, wide waits (a block normaliser's ``beats + 4``
stages): a ring buffer in distributed RAM (an Amaranth ``Memory`` with an asynchronous read port,
which Yosys maps to ECP5 ``TRELLIS_DPR16X4``: 16 words of 4 bits in half a PFU's LUTs) read into
one output register, so ``n · width`` flip-flops become ``width`` flip-flops and about
``ceil(width / 4) · ceil(n / 16)`` RAM cells, where a block RAM would spend a 1024-word primitive
per 18 bits on a 16-word wait.

All styles behave as a shift register whose every stage loads while ``en`` is high: ``o`` shows the
``i`` sampled ``n`` advancing cycles ago and holds while ``en`` is low. The ring buffer writes ``i``
at ``wa`` each advancing cycle and reads ``ra = wa - (n - 2)``: the RAM's two read registers are
the last two stages (so ``n >= 3``), and ``ra`` never equals ``wa`` (no read-write collision). Its
contents are not reset, so a delay line carries data only: valid bits stay in registers.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .bram import BRAM_READ_LATENCY, BRAM_STYLES, RegisteredRAM

__all__ = ["DelayLine", "DELAY_STYLES", "LINE_STYLES", "MIN_RAM_DELAY", "short_delay_style"]

#: ``registers`` (the reference) and the block-RAM styles of :class:`RegisteredRAM`
DELAY_STYLES = ("registers",) + BRAM_STYLES
#: every style of :class:`DelayLine`: those and distributed RAM
LINE_STYLES = DELAY_STYLES + ("lutram",)
#: the shortest delay a ring buffer can give: its two read registers plus one RAM cycle
MIN_RAM_DELAY = BRAM_READ_LATENCY + 1
#: the shortest distributed-RAM delay: one RAM cycle and the output register
MIN_LUTRAM_DELAY = 2


def short_delay_style(style: str) -> str:
    """The style of a block's short waits when its long ones are ``style``: ``lutram`` beside a
    block-RAM style, ``registers`` (the plain reference) beside ``registers``."""
    return "registers" if style == "registers" else "lutram"


class DelayLine(wiring.Component):
    """``o`` is ``i`` delayed by ``n`` advancing cycles (``en`` high); ``style`` one of
    :data:`LINE_STYLES`; ``fabric_out``: the last of the ``n`` stages a fabric register (block-RAM
    styles). Members: ``en: In(1)``, ``i: In(width)``, ``o: Out(width)``."""

    def __init__(self, width: int, n: int, style: str = "registers", *, fabric_out: bool = False):
        for name, v, lo in (("width", width, 1), ("n", n, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if style not in LINE_STYLES:
            raise ValueError(f"style: must be one of {', '.join(LINE_STYLES)}, got {style!r}")
        if style == "lutram":
            if n < MIN_LUTRAM_DELAY:
                raise ValueError(f"n: a distributed-RAM delay line needs n >= {MIN_LUTRAM_DELAY}, got {n}")
            if fabric_out:
                raise ValueError("fabric_out: the distributed-RAM style's last stage is a fabric register already")
            self.width, self.n, self.style, self.fabric_out, self.ram = width, n, style, False, None
            # a power of two >= n words: the pointers wrap by themselves, and the read address
            # (n - 1 behind the write) never meets the write address
            self.depth = max(2, 1 << (n - 1).bit_length())
            super().__init__({"en": In(1), "i": In(width), "o": Out(width)})
            return
        self.fabric_out = bool(fabric_out) and style != "registers"
        nr = n - self.fabric_out    # the stages the RAM gives
        if style != "registers" and nr < MIN_RAM_DELAY:
            raise ValueError(f"n: a block-RAM delay line needs n >= {MIN_RAM_DELAY + self.fabric_out}"
                             f"{' (one stage is the fabric output register)' if self.fabric_out else ''}, got {n}")
        self.width, self.n, self.style = width, n, style
        # a power of two > nr - 2 words: the pointers wrap by themselves
        self.depth = max(2, 1 << (nr - 2).bit_length()) if style != "registers" else 0
        self._nr = nr
        self.ram = RegisteredRAM(self.depth, width, style) if style != "registers" else None
        super().__init__({"en": In(1), "i": In(width), "o": Out(width)})

    @property
    def primitives(self) -> int:
        """``DP16KD`` instances (the ``ecp5`` style only)."""
        return -(-self.width // 18) if self.style == "ecp5" else 0

    @property
    def flip_flops(self) -> int:
        """Flip-flops outside the RAM: the stages, or the two pointers (and the output register)."""
        if self.style == "registers":
            return self.n * self.width
        if self.style == "lutram":
            return 2 * (self.depth.bit_length() - 1) + self.width
        return 2 * (self.depth.bit_length() - 1) + self.fabric_out * self.width

    def elaborate(self, platform):
        m = Module()
        if self.style == "registers":
            v = self.i
            for s in range(self.n):
                r = Signal(self.width, name=f"d{s}")
                with m.If(self.en):
                    m.d.sync += r.eq(v)
                v = r
            m.d.comb += self.o.eq(v)
            return m
        if self.style == "lutram":
            aw = self.depth.bit_length() - 1
            m.submodules.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
            wp, rp = mem.write_port(), mem.read_port(domain="comb")
            wa = Signal(aw, name="wa")
            ra = Signal(aw, name="ra", init=(-(self.n - 1)) % self.depth)
            out = Signal(self.width, name="out")
            with m.If(self.en):
                m.d.sync += [wa.eq(wa + 1), ra.eq(ra + 1), out.eq(rp.data)]
            m.d.comb += [wp.addr.eq(wa), wp.data.eq(self.i), wp.en.eq(self.en), rp.addr.eq(ra), self.o.eq(out)]
            return m
        ram = self.ram
        m.submodules.ram = ram
        aw = ram.addr_width
        wa = Signal(aw, name="wa")
        ra = Signal(aw, name="ra", init=(-(self._nr - 2)) % self.depth)
        with m.If(self.en):
            m.d.sync += [wa.eq(wa + 1), ra.eq(ra + 1)]
        m.d.comb += [ram.wr_addr.eq(wa), ram.wr_data.eq(self.i), ram.wr_en.eq(self.en),
                     ram.rd_addr.eq(ra), ram.rd_en.eq(self.en), ram.rd_oce.eq(self.en)]
        if not self.fabric_out:
            m.d.comb += self.o.eq(ram.rd_data)
            return m
        out = Signal(self.width, name="out")
        with m.If(self.en):
            m.d.sync += out.eq(ram.rd_data)
        m.d.comb += self.o.eq(out)
        return m
