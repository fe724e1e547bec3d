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
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.datapath import Datapath

from .fixed import materialise, round_shift_right_parts, saturate, shift_code_table
from .pipeline import stage_register
from .vector_ops import _round_shift_const

__all__ = ["PipelinedElu1"]


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
