"""Pipelined block normalisation: the hardware of ``golden/fixed/scaled/bfp.block``.

An ``n``-element vector of ``in_width``-bit integers with one exponent ``frac`` becomes ``M``-bit
mantissas whose largest magnitude has its top bit just below the sign bit (one more shift if
round-half-even would carry into it), and ``frac - shift``; bit-exact with ``block()``.

Timing discipline (``hardware.md``): no stage holds more than a short chain.

1. register the inputs, take magnitudes;
2. OR-reduce the magnitudes four at a time, one register level per 4:1 (``msb(max |x|)`` equals
   ``msb(OR |x|)``, and an OR tree is one LUT level per stage);
3. the priority encoder gives ``shift = msb - (M - 2)`` (0 for an all-zero vector);
4. every lane rounds with ``shift`` and with ``shift + 1`` in parallel and flags whether the
   first reached ``2^(M-1)`` in magnitude (the carry ``block()`` tests on the largest element;
   round-half-even is symmetric and monotone in magnitude, so any lane carries iff the largest
   does);
5. OR-reduce the carry flags and select: the output register.

Advances one stage per cycle while ``en`` is high (a pipeline-wide stall); ``latency`` cycles
from input to output. Round-half-even only (the presets' rounding).
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .fixed import msb_index, round_shift_var

__all__ = ["BlockNormaliser"]


def _or_tree_levels(n: int) -> int:
    levels = 0
    while n > 1:
        n = -(-n // 4)
        levels += 1
    return levels


class BlockNormaliser(wiring.Component):
    """``n`` lanes of ``in_width``-bit signed integers -> ``M``-bit block mantissas; ``frac`` is a
    signed ``frac_width``-bit exponent carried beside the vector."""

    def __init__(self, n: int, in_width: int, M: int, frac_width: int = 16, rounding: str = "rne"):
        for name, v, lo in (("n", n, 1), ("in_width", in_width, 2), ("M", M, 3), ("frac_width", frac_width, 4)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if rounding != "rne":
            raise ValueError(f"rounding: the block normaliser implements 'rne' (the presets' rounding), got {rounding!r}")
        self.n, self.in_width, self.M, self.frac_width = n, in_width, M, frac_width
        self.or_levels = _or_tree_levels(n)
        #: cycles from an input accepted (``valid`` and ``en``) to its output
        self.latency = 1 + self.or_levels + 1 + 1 + 1
        super().__init__({
            "en": In(1),
            "i_valid": In(1),
            "i_data": In(data.ArrayLayout(signed(in_width), n)),
            "i_frac": In(signed(frac_width)),
            "o_valid": Out(1),
            "o_data": Out(data.ArrayLayout(signed(M), n)),
            "o_frac": Out(signed(frac_width)),
        })

    def elaborate(self, platform):
        m = Module()
        n, W, M = self.n, self.in_width, self.M
        en = self.en

        def reg(value, shape, name):
            r = Signal(shape, name=name)
            with m.If(en):
                m.d.sync += r.eq(value)
            return r

        def carry(vals, valid, frac, tag):
            """Delay the vector, its valid bit and its exponent by one stage."""
            return ([reg(v, signed(W), f"{tag}_x{i}") for i, v in enumerate(vals)],
                    reg(valid, 1, f"{tag}_v"), reg(frac, signed(self.frac_width), f"{tag}_f"))

        # 1. inputs and magnitudes
        xs, v, f = carry([self.i_data[i] for i in range(n)], self.i_valid, self.i_frac, "s1")
        mags = []
        for i, x in enumerate(xs):
            a = Signal(unsigned(W), name=f"s1_mag{i}")
            m.d.comb += a.eq(Mux(x < 0, -x, x))  # |-2^(W-1)| = 2^(W-1) fits W unsigned bits
            mags.append(a)
        # 2. OR tree, four inputs per level
        level = 0
        while len(mags) > 1:
            level += 1
            nxt = []
            for j in range(0, len(mags), 4):
                acc = mags[j]
                for a in mags[j + 1:j + 4]:
                    acc = acc | a
                nxt.append(reg(acc, unsigned(W), f"or{level}_{j // 4}"))
            mags = nxt
            xs, v, f = carry(xs, v, f, f"or{level}")
        orv = mags[0]
        # 3. shift = msb - (M - 2), 0 for an all-zero vector
        top = msb_index(m, orv, "s3_msb")
        sh_w = max(W.bit_length(), (M - 2).bit_length()) + 2
        sh = reg(Mux(orv == 0, 0, top - (M - 2)), signed(sh_w), "s3_sh")
        xs, v, f = carry(xs, v, f, "s3")
        # 4. round with shift and shift + 1, flag carries
        r0s, r1s, ovs = [], [], []
        lim = Const(1 << (M - 1), unsigned(M + 1))
        for i, x in enumerate(xs):
            r0 = round_shift_var(m, x, sh, "rne", max_left=M - 2, name=f"s4_r0_{i}")
            r1 = round_shift_var(m, x, sh + 1, "rne", max_left=M - 2, name=f"s4_r1_{i}")
            ov = (r0 >= lim) | (r0 <= -lim)
            r0s.append(reg(r0[:M + 1], signed(M + 1), f"s4_a{i}"))
            r1s.append(reg(r1[:M], signed(M), f"s4_b{i}"))
            ovs.append(reg(ov, 1, f"s4_ov{i}"))
        sh4 = reg(sh, signed(sh_w), "s4_sh")
        v4 = reg(v, 1, "s4_v")
        f4 = reg(f, signed(self.frac_width), "s4_f")
        # 5. any carry: take the shift + 1 rounding
        anyov = Signal(name="s5_any")
        m.d.comb += anyov.eq(Const(0, 1) if not ovs else ovs[0])
        acc = ovs[0]
        for o in ovs[1:]:
            acc = acc | o
        m.d.comb += anyov.eq(acc)
        for i in range(n):
            with m.If(en):
                m.d.sync += self.o_data[i].eq(Mux(anyov, r1s[i], r0s[i][:M]))
        with m.If(en):
            m.d.sync += [self.o_valid.eq(v4), self.o_frac.eq(f4 - sh4 - anyov)]
        return m
