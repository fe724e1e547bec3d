"""Pipelined rounding shift by a run-time amount: ``k`` lanes, one shift per beat (or, with
``per_lane``, one per lane: terms whose exponent differs per element), bit-exact with
``specmem.golden.fixed.fxtype.round_shift`` (``rne``, ``half_up`` or ``floor``).

The pipelined cores narrow products whose binary point is a per-token block exponent (the
annihilation row update's ``round(r_i p)``, VLA's scaled reads). :func:`~specmem.rtl.fixed.round_shift_var`
does that as one combinational barrel shifter plus a rounding carry chain (about 10 logic levels
at 36 bits); this block splits it by the timing discipline of ``hardware.md``:

0. register the lanes and the shift;
1. register the lanes again and decode the shift once (one compare chain per side, no negation): right
   amount ``rs = clamp(s, 0, W + 1)`` as ``8·rc + rf``; left amount ``clamp(-s, 1, max_left)``
   as ``1 + ls`` with ``ls = ~s`` (``= -s - 1``) as ``8·lc + lf``;
2. coarse shift by ``8·rc`` keeping one guard bit below the result (``(2v) >> 8·rc``), the OR of
   each 8-bit group of the bits that shift drops, thermometer masks of ``rc`` and ``rf``, and
   the coarse left shift by ``8·lc + 1``;
3. fine shift by ``rf``: the quotient, the rounding bit, the sticky OR (the groups selected by the
   ``rc`` mask and the guard-side bits selected by the ``rf`` mask), and the fine left shift;
4. the rounding increment on the low half of the quotient (a carry chain of half the width),
   and the high half with and without a carry;
5. the carry-out picks the high half (a mux), or the left-shifted value: the output register.

With ``keep`` the block produces only the low ``keep`` bits of the result (two's complement,
wrapping): a caller that knows its results fit (the alignment's terms are at most ``2^C``) gets a
quotient and increment ``keep`` bits wide instead of ``in_width + 1``, and a coarse value ``keep +
8`` bits wide (the fine shift and the rounding bit read no higher). There is no left path: the
value enters as ``v · 2^max_left`` and is shifted right by ``s + max_left`` (a funnel shift; the
decode adds the constant beside its compares), so a left shift is a right shift that drops only
zeros. Stages 4-5 are one ``keep``-bit increment and the output register. The result's low bits do
not depend on the bits dropped, so it equals the full shifter's output modulo ``2^keep`` for
every input.

``o_data`` follows ``i_data`` by :attr:`RoundShiftVar.latency` (6) advancing cycles; every
register advances while ``en`` is high. Right shifts beyond ``W + 1`` give the result of
``W + 1`` (only the sign is left), or beyond ``max_right`` (when given: a narrower shifter for a
caller that bounds its shifts) that of ``max_right``; left shifts are clamped to ``max_left`` (the caller saturates
next and passes a ``max_left`` past its saturation threshold, as for ``round_shift_var``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .pipeline import stage_register

__all__ = ["RoundShiftVar"]

_ROUNDING = ("rne", "half_up", "floor")


class RoundShiftVar(wiring.Component):
    """``k`` signed ``in_width``-bit lanes times ``2**-shift``, rounded; see the module docstring.

    Members: ``en``, ``i_valid``, ``i_data`` (``k`` x ``signed(in_width)``), ``i_shift``
    (``signed(shift_width)``; ``k`` of them with ``per_lane``: each lane its own shift, decoded in
    its own copy of stages 0-1, for terms whose exponent differs per element), ``o_valid``,
    ``o_data`` (``k`` x ``signed(out_width)``, with ``out_width = in_width + max(max_left, 1) + 1``,
    or ``keep``: the result's low ``keep`` bits).
    """

    latency = 6

    def __init__(self, k: int, in_width: int, *, max_left: int, shift_width: int = 8, rounding: str = "rne",
                 max_right: int | None = None, per_lane: bool = False, keep: int | None = None):
        for name, v, lo in (("k", k, 1), ("in_width", in_width, 2), ("max_left", max_left, 0),
                            ("shift_width", shift_width, 2), ("max_right", in_width + 1 if max_right is None
                                                              else max_right, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if rounding not in _ROUNDING:
            raise ValueError(f"rounding: must be one of {_ROUNDING}, got {rounding!r}")
        if max_left > (1 << (shift_width - 1)):
            raise ValueError(f"max_left: a {shift_width}-bit shift reaches at most {1 << (shift_width - 1)} "
                             f"to the left, got {max_left}")
        self.k, self.in_width, self.max_left = k, in_width, max_left
        self.max_right = in_width + 1 if max_right is None else min(max_right, in_width + 1)
        self.shift_width, self.rounding = shift_width, rounding
        self.per_lane = bool(per_lane)
        full = in_width + max(max_left, 1) + 1
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or not 2 <= keep <= full):
            raise ValueError(f"keep: must be an integer between 2 and the full width {full}, got {keep!r}")
        self.keep = keep
        self.out_width = full if keep is None else keep
        super().__init__({
            "en": In(1),
            "i_valid": In(1),
            "i_data": In(data.ArrayLayout(signed(in_width), k)),
            "i_shift": In(data.ArrayLayout(signed(shift_width), k) if per_lane else signed(shift_width)),
            "o_valid": Out(1),
            "o_data": Out(data.ArrayLayout(signed(self.out_width), k)),
        })

    def elaborate(self, platform):
        m = Module()
        k, W, en = self.k, self.in_width, self.en
        smax = self.max_right
        K = self.keep
        # with keep, left shifts go through the right shifter (the value enters fl bits up)
        left, fl = (self.max_left, 0) if K is None else (0, self.max_left)
        rc_max = (smax + fl) >> 3

        reg = stage_register(m, en)

        # 1. lanes and the shift, decoded once (or once per lane): one compare chain per side, no
        #    negation (the left amount is kept as ~s = -s - 1, plus a constant one-bit shift)
        ml = max(left, 1)
        lc_max = (ml - 1) >> 3
        rs_w = max(1, (smax + fl).bit_length())

        def decode(shift, tag):
            """Stage-1 registers of one shift: right coarse/fine, sign, left coarse/fine."""
            s = reg(shift, shift.shape(), f"s0_s{tag}")  # the decode starts from a register
            neg_s = s[-1]
            rs = Mux(neg_s, 0, Mux(s > smax, smax, s)) if not fl else Mux(s < -fl, 0, Mux(s > smax, smax + fl, s + fl))
            ls = Mux(s < -ml, ml - 1, (~s)[:max(1, (ml - 1).bit_length())])
            rs1 = Signal(unsigned(rs_w), name=f"s0_rs{tag}")
            ls1 = Signal(unsigned(max(1, (ml - 1).bit_length())), name=f"s0_ls{tag}")
            m.d.comb += [rs1.eq(rs), ls1.eq(ls)]
            return (reg(rs1[3:], unsigned(max(1, rc_max.bit_length())), f"s1_rc{tag}"),
                    reg(rs1[:3], unsigned(3), f"s1_rf{tag}"), reg(neg_s, 1, f"s1_neg{tag}"),
                    reg(ls1[3:], unsigned(max(1, lc_max.bit_length())), f"s1_lc{tag}"),
                    reg(ls1[:3], unsigned(3), f"s1_lf{tag}"))

        if self.per_lane:
            ctl1 = [decode(self.i_shift[i], str(i)) for i in range(k)]
        else:
            ctl1 = [decode(self.i_shift, "")] * k
        v1 = reg(reg(self.i_valid, 1, "s0_v"), 1, "s1_v")
        xs = [reg(reg(self.i_data[i], signed(W), f"s0_x{i}"), signed(W), f"s1_x{i}") for i in range(k)]

        # 2. coarse shifts and the dropped groups' ORs
        if fl:
            xs, W = [Cat(Const(0, fl), x).as_signed() for x in xs], W + fl
        cw = W + 1  # (2v): one guard bit below v
        # with keep, the coarse value's low K + 8 bits: the fine shift reads bits 1 + rf .. K + rf
        narrow_c = K is not None and K + 8 < cw
        coarse, groups, lcoarse = [], [], []
        for i, x in enumerate(xs):
            rc, lc = ctl1[i][0], ctl1[i][3]
            g = Cat(Const(0, 1), x).as_signed()
            ext = Cat(x, x[-1].replicate(8 * rc_max + 8))  # v with sign bits, for the group ORs
            cs = g >> Cat(Const(0, 3), rc)
            coarse.append(reg(cs[:K + 8], unsigned(K + 8), f"s2_c{i}") if narrow_c else reg(cs, signed(cw), f"s2_c{i}"))
            ors = [ext[max(0, 8 * c - 9):8 * c - 1].any() for c in range(1, rc_max + 1)]
            groups.append(reg(Cat(*ors) if ors else Const(0, 1), unsigned(max(1, rc_max)), f"s2_g{i}"))
            if left:
                lw = W + 1 + 8 * lc_max
                ls = (x << 1) << Cat(Const(0, 3), lc)
                lcoarse.append(reg(ls, signed(lw), f"s2_l{i}"))
        v2 = reg(v1, 1, "s2_v")

        def decode2(ctl, tag):
            """Stage-2 registers: the fine amounts, the sign and the two thermometer masks."""
            rc, rf, neg, _, lf = ctl
            # tc2[c - 1] = (c <= rc): group c (bits 8c-9 .. 8c-2 of v) is dropped by the coarse shift
            # tf2[b] = (b < rf): guard-side bit b of the coarse value is below the rounding bit
            return (reg(rf, unsigned(3), f"s2_rf{tag}"), reg(neg, 1, f"s2_neg{tag}"),
                    reg(lf, unsigned(3), f"s2_lf{tag}"),
                    reg(Cat(*[rc >= c for c in range(1, rc_max + 1)]) if rc_max else Const(0, 1),
                        unsigned(max(1, rc_max)), f"s2_tc{tag}"),
                    reg(Cat(*[rf > b for b in range(7)]), unsigned(7), f"s2_tf{tag}"))

        ctl2 = [decode2(ctl1[i], str(i)) for i in range(k)] if self.per_lane else [decode2(ctl1[0], "")] * k

        # 3. fine shift, rounding bit and sticky bit
        qw = W + 1 if K is None else K  # a register assignment truncates, or sign-extends a narrower value
        qs, rbs, sts, lfine = [], [], [], []
        for i, c0 in enumerate(coarse):
            rf2, _, lf2, tc2, tf2 = ctl2[i]
            # sign bits above, so every f selects (a narrowed value has its K + 8 bits already)
            c = c0 if narrow_c else Cat(c0, c0[-1].replicate(8)).as_signed()
            q = (c >> 1) >> rf2               # log shifters: three 2:1 levels, not a chain of 8 muxes
            rb = c.bit_select(rf2, 1)
            qs.append(reg(q, signed(qw), f"s3_q{i}"))
            rbs.append(reg(rb, 1, f"s3_rb{i}"))
            sticky = (groups[i] & tc2).any() | (c[:7] & tf2).any()
            sts.append(reg(sticky, 1, f"s3_st{i}"))
            if left:
                lw = W + left
                lfine.append(reg(lcoarse[i] << lf2, signed(lw), f"s3_l{i}"))
        v3 = reg(v2, 1, "s3_v")
        negs = [c[1] for c in ctl2]
        neg3 = [reg(n, 1, f"s3_neg{i}") for i, n in enumerate(negs)] if self.per_lane else [reg(negs[0], 1, "s3_neg")] * k

        # 4. the rounding increment on the low half (a short carry chain), both candidates of the high half
        h = (qw + 1) // 2
        outs = []
        for i in range(k):
            if self.rounding == "floor":
                inc = Const(0, 1)
            elif self.rounding == "half_up":
                inc = rbs[i]
            else:
                inc = rbs[i] & (sts[i] | qs[i][0])
            if K is not None:  # one K-bit increment, wrapping (the caller keeps the low bits)
                lo, hi, hi1 = reg(qs[i] + inc, signed(qw), f"s4_r{i}"), None, None
            else:
                lo = reg(qs[i][:h] + inc, unsigned(h + 1), f"s4_lo{i}")
                hi = reg(qs[i][h:].as_signed(), signed(qw - h), f"s4_hi{i}")
                hi1 = reg(qs[i][h:].as_signed() + 1, signed(qw - h + 1), f"s4_hp{i}")
            lf4 = reg(lfine[i], lfine[i].shape(), f"s4_l{i}") if left else None
            outs.append((lo, hi, hi1, lf4))
        v4 = reg(v3, 1, "s4_v")
        neg4 = [reg(n, 1, f"s4_neg{i}") for i, n in enumerate(neg3)] if self.per_lane else [reg(neg3[0], 1, "s4_neg")] * k

        # 5. the carry selects the high half; or the left-shifted value
        for i, (lo, hi, hi1, lf4) in enumerate(outs):
            right = lo if K is not None else Cat(lo[:h], Mux(lo[h], hi1, hi)).as_signed()
            out = Mux(neg4[i], lf4, right) if left else right
            od = Signal(signed(self.out_width), name=f"o_data{i}", reset_less=True)  # data: o_valid qualifies it
            with m.If(en):
                m.d.sync += od.eq(out)
            m.d.comb += self.o_data[i].eq(od)
        with m.If(en):
            m.d.sync += self.o_valid.eq(v4)
        return m
