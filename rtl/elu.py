"""ELU+1 (``Datapath.elu1``, the feature map of VLA and linear attention) as a pipeline of
:data:`PipelinedElu1.latency` registered stages, bit-exact with the model (its plain reference;
the single-cycle form it replaces, ``rtl/vector_ops.elu1_hw``, is in the history).

Why: the single-cycle form chains an add, a constant multiply, a ROM read, an interpolation
multiply, a run-time shift and a saturation (13-14 LUT levels and two carry chains: the
critical path of the VLA core's front end, 44 ns estimated at d = 32, k = 4; ``hardware.md``,
"Timing discipline"). Stages:

1. ``pos = x > 0``; ``t = -x`` (or 0); ``x + 1`` narrowed to the output (the positive branch);
2. ``p = t log2(e)`` (the constant product);
3. ``n = p >> F``; the two ROM entries at ``phi``'s top bits; the interpolation weight;
4. ``lo - hi``;
5. ``(lo - hi) wgt``;
6. ``val = lo - ((lo - hi) wgt >> Ib)``;
7. ``val 2^-(n + wf - fo)`` truncated, and its rounding increment (``fixed.round_shift_right_parts``;
   with ``coded_shift`` the shift's code comes from tables on ``n`` at stage 6);
8. the rounded value (one add), the branch;
9. one saturation.

Stage 7 once held the shift and the add together: linear attention's critical path at d = 32,
k = 4 (10.3 ns, ``docs/rtl.md``).

:class:`BlockElu1` is the scaled formats' ELU+1 (``golden/fixed/scaled/elu.elu1_block``): block
vectors in, each element's exact feature with its own exponent, one
:class:`~specmem.rtl.align.StreamAlignBlock` to an ``M``-bit block vector out.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.datapath import LOG2E, Datapath, exp2_table
from specmem.golden.fixed.scaled.elu import FRAC_HI, TOP_MAX

from .align import StreamAlignBlock
from .fixed import materialise, round_shift_right_parts, saturate, shift_code_table
from .pipeline import stage_register
from .shift import RoundShiftVar
from .vector_ops import _round_shift_const

__all__ = ["PipelinedElu1", "BlockElu1"]


class PipelinedElu1(wiring.Component):
    """``k`` lanes of ELU+1 from ``in_fx`` into ``out_fx`` (the formats of ``dp``'s preset), every
    register advancing while ``en`` is high. Members: ``en``, ``i_valid``, ``i_data`` (``k`` x
    ``signed(in_fx.width)``); ``o_valid``, ``o_data`` (``k`` x the output format's shape) and
    ``o_ovf`` (``k`` bits: each lane saturated), ``latency`` advancing cycles after the input."""

    latency = 9

    def __init__(self, k: int, in_fx, out_fx, dp: Datapath, *, coded_shift: bool = False):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k: must be an integer >= 1, got {k!r}")
        fi, C, L = in_fx.frac, dp.exp_const_frac, dp.fmt.preset.exp_lut_bits
        if fi + C < L:
            raise ValueError("preset: the elu1 ROM index needs at least exp_lut_bits fraction bits")
        if dp.exp_word_frac - out_fx.frac < 0:
            raise ValueError("preset: elu1's ROM word must have at least as many fraction bits as kf")
        self.k, self.in_fx, self.out_fx, self.dp = k, in_fx, out_fx, dp
        #: stage 7's run-time shift as a ``fixed.ShiftCode`` read at stage 6 from tables on the
        #: exponent (its rounding masks then cost no carry chain in stage 7); off, the plain shift
        #: (the cores synthesised with it generate the same Verilog)
        self.coded_shift = bool(coded_shift)
        out_shape = signed(out_fx.width) if out_fx.signed else unsigned(out_fx.width)
        super().__init__({
            "en": In(1),
            "i_valid": In(1),
            "i_data": In(data.ArrayLayout(signed(in_fx.width), k)),
            "o_valid": Out(1),
            "o_data": Out(data.ArrayLayout(out_shape, k)),
            "o_ovf": Out(k),
        })

    def elaborate(self, platform):
        m = Module()
        dp, in_fx, out_fx = self.dp, self.in_fx, self.out_fx
        fi, fo = in_fx.frac, out_fx.frac
        C, L, Ib, wf = dp.exp_const_frac, dp.fmt.preset.exp_lut_bits, dp.exp_interp_bits, dp.exp_word_frac
        F = fi + C
        rnd = out_fx.rounding
        W = in_fx.width
        reg = stage_register(m, self.en)
        rom = Array(Const(int(v), unsigned(wf + 2)) for v in dp.exp_rom)
        v = self.i_valid
        for i in range(self.latency):
            v = reg(v, 1, f"s{i + 1}_v")
        m.d.comb += self.o_valid.eq(v)
        for l in range(self.k):
            x = materialise(m, self.i_data[l], f"x{l}")
            # 1
            pos = materialise(m, x > 0, f"pos{l}")
            out_pos = _round_shift_const(m, x + (1 << fi), fi - fo, rnd, name=f"p{l}")
            pos1 = reg(pos, 1, f"s1_pos{l}")
            op1 = reg(out_pos, out_pos.shape(), f"s1_op{l}")
            t1 = reg(Mux(pos, 0, -x), unsigned(W), f"s1_t{l}")
            # 2
            p = materialise(m, t1 * int(dp.log2e), f"prod{l}")
            p2 = reg(p, p.shape(), f"s2_p{l}")
            pos2, op2 = reg(pos1, 1, f"s2_pos{l}"), reg(op1, op1.shape(), f"s2_op{l}")
            # 3
            idx = p2[F - L:F]
            low = p2[:F - L]
            wgt = low[F - L - Ib:] if F - L - Ib >= 0 else Cat(Const(0, Ib - (F - L)), low)
            n3 = reg(p2 >> F, unsigned(max(1, len(p2) - F)), f"s3_n{l}")
            lo3 = reg(rom[idx], unsigned(wf + 2), f"s3_lo{l}")
            hi3 = reg(rom[idx + 1], unsigned(wf + 2), f"s3_hi{l}")
            wg3 = reg(wgt, unsigned(Ib), f"s3_wgt{l}")
            pos3, op3 = reg(pos2, 1, f"s3_pos{l}"), reg(op2, op2.shape(), f"s3_op{l}")
            # 4
            dl4 = reg(lo3 - hi3, signed(wf + 3), f"s4_dl{l}")
            lo4, wg4, n4 = reg(lo3, lo3.shape(), f"s4_lo{l}"), reg(wg3, wg3.shape(), f"s4_wgt{l}"), reg(n3, n3.shape(), f"s4_n{l}")
            pos4, op4 = reg(pos3, 1, f"s4_pos{l}"), reg(op3, op3.shape(), f"s4_op{l}")
            # 5
            pr5 = reg(dl4 * wg4, signed(wf + 3 + Ib + 1), f"s5_pr{l}")
            lo5, n5 = reg(lo4, lo4.shape(), f"s5_lo{l}"), reg(n4, n4.shape(), f"s5_n{l}")
            pos5, op5 = reg(pos4, 1, f"s5_pos{l}"), reg(op4, op4.shape(), f"s5_op{l}")
            # 6 (the ROM is decreasing, so lo - hi >= 0 and the floor shift is a plain one)
            val6 = reg(lo5 - (pr5 >> Ib), unsigned(wf + 2), f"s6_val{l}")
            if not self.coded_shift:
                sh6 = reg(n5 + (wf - fo), unsigned(len(n5) + 1 + (wf - fo).bit_length()), f"s6_sh{l}")
            pos6, op6 = reg(pos5, 1, f"s6_pos{l}"), reg(op5, op5.shape(), f"s6_op{l}")
            # 7: the run-time right shift and the rounding increment; 8: their sum, the branch
            if self.coded_shift:  # sh6 decoded at stage 6 from tables on n5 (no add, no mask chain)
                sh6 = shift_code_table(m, n5, lambda n: n + (wf - fo), len(val6), max_left=1, signed_shift=False,
                                       name=f"s6_sc{l}", reg=reg)
            _, _, _, q, inc = round_shift_right_parts(m, val6, sh6, rnd, name=f"neg{l}")
            q7 = reg(q, q.shape(), f"s7_q{l}")
            inc7 = reg(inc if inc is not None else 0, 1, f"s7_inc{l}")
            pos7, op7 = reg(pos6, 1, f"s7_pos{l}"), reg(op6, op6.shape(), f"s7_op{l}")
            neg = q7 + inc7
            sel = Mux(pos7, op7, neg)
            sel8 = reg(sel, sel.shape(), f"s8_sel{l}")
            # 9
            y, ov = saturate(m, sel8, out_fx, name=f"sat{l}")
            y9 = reg(y, y.shape(), f"s9_y{l}")
            ov9 = reg(ov, 1, f"s9_ov{l}")
            m.d.comb += [self.o_data[l].eq(y9), self.o_ovf[l].eq(ov9)]
        return m


class BlockElu1(wiring.Component):
    """ELU+1 of block vectors (``golden/fixed/scaled/elu.elu1_block``) on ``lanes`` lanes, vectors
    of ``beats`` beats, every register advancing while ``en`` is high.

    Per element, in registered steps: the input window (an exponent above ``FRAC_HI`` rounds the
    mantissa to it first, a :class:`~specmem.rtl.shift.RoundShiftVar`); ``x + 1`` exact (a left
    shift of at most ``-frac_lo``, a one-hot ``2^F``, one add); ``p = -x log2(e)``, floored to
    ``n`` and the ROM's index and weight by a two-step right shift; the two ROM entries, their
    difference, the weight's product, the interpolation; the branch, with ``n + C`` as the
    element's exponent. Then one :class:`~specmem.rtl.align.StreamAlignBlock` of that per-element
    term to ``M`` bits. A negative element of a vector with ``frac < frac_lo = M - 1 - TOP_MAX``
    (magnitudes up to ``2^TOP_MAX`` or more: ``exp(x)``'s exponent could pass the exponent range),
    or a positive one with ``frac < -lsh_max`` (its ``x + 1`` wider than the term), sets the sticky
    ``o_err``, as does a bubble inside a vector; zero elements never do (an all-zero vector's
    ``frac`` is 0).

    Members: ``en``, ``i_valid``, ``i_data`` (``lanes`` x ``signed(M)``), ``i_frac`` (the vector's
    exponent, read with every beat); ``o_valid``, ``o_first``, ``o_last``, ``o_data``, ``o_frac``,
    ``o_err``. ``latency``: cycles from a vector's first beat in to its first beat out."""

    def __init__(self, lanes: int, beats: int, M: int, lut_bits: int, *, rounding: str = "rne",
                 exp_width: int = 12, delay_style: str = "registers"):
        for name, v, lo in (("lanes", lanes, 1), ("beats", beats, 1), ("M", M, 4), ("lut_bits", lut_bits, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        self.lanes, self.beats, self.M, self.L, self.rounding = lanes, beats, M, lut_bits, rounding
        self.exp_width = exp_width
        self.C = M + 4  # log2(e)'s and the ROM words' fraction bits (the model's C)
        self.Ib = M  # interpolation weight bits
        self.frac_lo = M - 1 - TOP_MAX
        self.lsh_max = max(0, -self.frac_lo)  # the positive branch's largest left shift
        #: the neg branch's shift of p: left by L + Ib - C - frac, done as a constant left shift by
        #: ``sl`` then a right shift of ``sl - (L + Ib - C) + frac`` (>= 0 inside the window)
        self.sl = max(0, lut_bits + self.Ib - self.C - self.frac_lo)
        self.log2e = int(np.rint(np.ldexp(LOG2E, self.C)))
        self.rom = exp2_table(lut_bits, self.C)
        n_max = ((1 << (M - 1)) * self.log2e) >> max(0, self.C + self.frac_lo)
        if self.C + n_max + 4 >= 1 << (exp_width - 2):
            raise ValueError(f"exp_width: {exp_width} bits cannot hold exp(x)'s exponent (up to {self.C + n_max})")
        self.term_width = max(FRAC_HI + 2, M + self.lsh_max + 2, self.C + 3)
        self.pre = RoundShiftVar(lanes, M, max_left=0, shift_width=max(8, (M + 1).bit_length() + 2), rounding=rounding)
        self.align = StreamAlignBlock(lanes, beats, ((self.term_width, True),), M, exp_width=exp_width,
                                      delay_style=delay_style)
        #: the element pipeline's stages: window (2), the pre-rounding, then 9 (see elaborate)
        self.elem_latency = 2 + RoundShiftVar.latency + 9
        self.latency = self.elem_latency + self.align.latency
        EW = exp_width
        super().__init__({
            "en": In(1), "i_valid": In(1),
            "i_data": In(data.ArrayLayout(signed(M), lanes)), "i_frac": In(signed(EW)),
            "o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
            "o_data": Out(data.ArrayLayout(signed(M), lanes)), "o_frac": Out(signed(EW)), "o_err": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        w, M, EW, C, L, Ib = self.lanes, self.M, self.exp_width, self.C, self.L, self.Ib
        en = self.en
        reg = stage_register(m, en)
        pre, al = self.pre, self.align
        m.submodules.pre, m.submodules.align = pre, al
        m.d.comb += [pre.en.eq(en), al.en.eq(en)]
        lat = 0

        def delay(x, shape, n, tag):
            for i in range(n):
                x = reg(x, shape, f"{tag}_p{i}")
            return x

        # window: f - FRAC_HI (a carry chain), then the pre-rounding shift, the clamped exponent,
        # the out-of-window flag
        v1 = reg(self.i_valid, 1, "w1_v")
        f1 = reg(self.i_frac, signed(EW), "w1_f")
        dlt1 = reg(self.i_frac - FRAC_HI, signed(EW + 1), "w1_dlt")
        lo1 = reg(self.i_frac < self.frac_lo, 1, "w1_lo")  # a negative element's exp(x) out of range
        neg1 = reg(self.i_frac < -self.lsh_max, 1, "w1_neg")  # a positive element's x + 1 too wide
        x1 = [reg(self.i_data[j], signed(M), f"w1_x{j}") for j in range(w)]
        cap = M + 1
        v2 = reg(v1, 1, "w2_v")
        m.d.comb += [pre.i_valid.eq(v2), pre.i_shift.eq(reg(Mux(dlt1 > 0, Mux(dlt1 > cap, cap, dlt1), 0),
                                                          signed(len(pre.i_shift)), "w2_sh"))]
        fc2 = reg(Mux(dlt1 > 0, FRAC_HI, f1), signed(EW), "w2_fc")
        lo2, neg2 = reg(lo1 & v1, 1, "w2_lo"), reg(neg1 & v1, 1, "w2_neg")
        for j in range(w):
            m.d.comb += pre.i_data[j].eq(reg(x1[j], signed(M), f"w2_x{j}"))
        lat = 2 + RoundShiftVar.latency
        fc = delay(fc2, signed(EW), RoundShiftVar.latency, "fc")
        lo = delay(lo2, 1, RoundShiftVar.latency, "lo")
        neg = delay(neg2, 1, RoundShiftVar.latency, "neg")
        # B: the branch, t = -x, the positive branch's exponent F = max(f, 0) and left shift,
        # the neg branch's right shift
        rsh_w = max(1, (self.sl - (L + Ib - C) + FRAC_HI).bit_length())
        Fw = max(1, FRAC_HI.bit_length())
        vb = reg(pre.o_valid, 1, "b_v")
        Fb = reg(Mux(fc < 0, 0, fc), unsigned(Fw), "b_F")
        lshb = reg(Mux(fc < 0, -fc, 0), unsigned(max(1, self.lsh_max.bit_length())), "b_lsh")
        rshb = reg(fc + (self.sl - (L + Ib - C)), unsigned(rsh_w), "b_rsh")
        badb = reg(((Cat(*(pre.o_data[j] < 0 for j in range(w))).any() & lo)
                    | (Cat(*(pre.o_data[j] > 0 for j in range(w))).any() & neg)), 1, "b_bad")
        TW = self.term_width
        outs, fracs = [], []
        for j in range(w):
            x = pre.o_data[j]
            posb = reg(x > 0, 1, f"b_pos{j}")
            tb = reg(Mux(x > 0, 0, -x), unsigned(M), f"b_t{j}")
            xb = reg(x, signed(M + 1), f"b_x{j}")
            # C: p = t log2(e); x << lsh; 2^F
            pc = reg(tb * self.log2e, unsigned(M + self.log2e.bit_length()), f"c_p{j}")
            xsc = reg(xb << lshb, signed(M + 1 + self.lsh_max), f"c_xs{j}")
            onec = reg(Const(1, TW) << Fb, unsigned(TW), f"c_one{j}")
            # D: pos_raw; p's coarse right shift (by 8s); E: the fine one
            pl = pc << self.sl
            PW = len(pl)
            rsc = reg(rshb, unsigned(rsh_w), f"c_rsh{j}")
            posd = reg(xsc + onec, signed(TW), f"d_pos_raw{j}")
            pcd = reg(pl >> Cat(Const(0, 3), rsc[3:]) if rsh_w > 3 else pl, unsigned(PW), f"d_pc{j}")
            rfd = reg(rsc[:3], unsigned(3), f"d_rf{j}")
            q = reg(pcd >> rfd, unsigned(PW), f"e_q{j}")
            posr = posd
            # F: n + C, the ROM entries at the index, the weight
            idx = q[Ib:Ib + L]
            nF = reg(q[Ib + L:] + C, unsigned(max(1, PW - Ib - L) + 1), f"f_nc{j}") if PW > Ib + L \
                else reg(Const(C), unsigned(C.bit_length()), f"f_nc{j}")
            RW = int(self.rom.max()).bit_length()
            rom = Array(Const(int(v), unsigned(RW)) for v in self.rom)
            loF = reg(rom[idx], unsigned(RW), f"f_lo{j}")
            hiF = reg(rom[idx + 1], unsigned(RW), f"f_hi{j}")
            wgF = reg(q[:Ib], unsigned(Ib), f"f_wgt{j}")
            # G: lo - hi (>= 0: the ROM decreases); H: its product with the weight; I: the interpolation
            dlG = reg(loF - hiF, unsigned(RW), f"g_dl{j}")
            loG, wgG = reg(loF, unsigned(RW), f"g_lo{j}"), reg(wgF, unsigned(Ib), f"g_wgt{j}")
            prH = reg(dlG * wgG, unsigned(RW + Ib), f"h_pr{j}")
            loH = reg(loG, unsigned(RW), f"h_lo{j}")
            valI = reg(loH - (prH >> Ib), unsigned(RW), f"i_val{j}")
            # the positive branch, its flag and both exponents beside them
            pos_e = delay(posb, 1, 7, f"pos{j}")
            pr_e = delay(posr, signed(TW), 5, f"praw{j}")
            nc_e = delay(nF, nF.shape(), 3, f"nc{j}")
            F_e = delay(Fb, unsigned(Fw), 7, f"F{j}")
            # J: the branch
            outs.append(reg(Mux(pos_e, pr_e, valI), signed(TW), f"j_x{j}"))
            fracs.append(reg(Mux(pos_e, F_e, nc_e), signed(EW), f"j_f{j}"))
        vj = delay(vb, 1, 8, "v")
        badj = delay(badb, 1, 8, "bad_j")
        assert lat + 9 == self.elem_latency
        m.d.comb += [al.i_valid.eq(vj)]
        m.d.comb += [al.i_x0[j].eq(outs[j]) for j in range(w)] + [al.i_f0[j].eq(fracs[j]) for j in range(w)]
        err = Signal(name="elu_err")
        with m.If(en & badj):
            m.d.sync += err.eq(1)
        m.d.comb += [self.o_valid.eq(al.o_valid), self.o_first.eq(al.o_first), self.o_last.eq(al.o_last),
                     self.o_frac.eq(al.o_frac), self.o_err.eq(err | al.o_err)]
        m.d.comb += [self.o_data[j].eq(al.o_data[j]) for j in range(w)]
        return m
