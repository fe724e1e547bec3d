"""The write of a row-BFP state (``golden/fixed/scaled/bfp.RowBFP.write``) as a streaming pipeline.

A row-BFP state keeps ``Ws``-bit mantissas with one exponent per row. Writing a row replaces it
by ``old + prod`` (the old row and one rank-one product row, ``bh_i kn_j`` in the delta rules),
each term rounded to the row's *new* exponent, then one saturation. The new exponent is chosen
before the row is written, from an upper bound the hardware has in registers: the old row's
stored msb (kept beside the row when it was last written) and the product row's bound ``E_prod``
(``msb(bh_i) + msb(max |kn|) + 2 - f_prod``, the caller's per-row sum). So the row streams
through once, ``lanes`` elements per beat, no row buffer.

Per row (taken with its first beat): ``frac``, ``msb`` and ``zero`` of the old row (its stored
exponent, the msb of its largest magnitude, whether it is all zero), ``e_prod`` and ``p_zero``
(the product row's bound and whether it is all zero), ``f_prod`` (the products' exponent). The
controls, one step per registered stage (timing discipline, ``hardware.md``): ``E_row = msb +
1 - frac``; the difference ``E_row - e_prod`` (its sign is the compare); ``E`` = the larger of the live bounds; ``fnew = Ws -
2 - E`` (the old exponent when both rows are zero); the two shifts ``frac - fnew`` and ``f_prod
- fnew``; their clamp to the shifters' range by a sign-extension test (a right shift past the
word gives what ``W + 1`` gives). They are held per stage while the row's beats pass, so each beat meets its own row's
shifts. Then per lane the two rounding shifts (:class:`~specmem.rtl.shift.RoundShiftVar`), the
sum, and the saturation to ``Ws`` bits with its count
(:class:`~specmem.rtl.saturate.SaturatingNarrow`).

Out: the new row's beats with ``o_frac`` (its new exponent) held over them, and, after its last
beat, ``o_row_valid`` with the new row's ``o_row_msb`` / ``o_row_zero`` (what the caller stores
for the row's next write and its next read's rounding shift).

Shifter ranges: the write's bound guarantees ``frac - fnew >= 3 - Ws`` for a live old row and
``f_prod - fnew >= M + 2 - Ws`` for a live product row whose ``kn`` fills its block
(``golden/fixed/scaled/exponents.py``), so the left shifts are at most ``max_left_old = Ws - 3``
and ``max_left_prod = Ws - M - 2`` (a dead row's shift is anything; its terms are zero).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .pipeline import hold_register, or_all, stage_register, tree4_levels
from .saturate import COUNT_WIDTH, SaturatingNarrow, fits_signed
from .shift import RoundShiftVar

__all__ = ["RowBFPWrite"]

#: register stages of the per-row controls before the shifters (E_row; compare; E; fnew; shifts; clamp)
CONTROL_STAGES = 6


class RowBFPWrite(wiring.Component):
    """``lanes`` lanes of one row-BFP write; see the module docstring.

    ``M``: the operands' width (products are ``2 M``-bit); ``exp_width``: signed exponent bits
    (every exponent and ``E`` within ``±2^(exp_width - 2)``); ``shift_width``: the shifters'
    signed shift bits."""

    def __init__(self, lanes: int, Ws: int, M: int, *, exp_width: int = 12, shift_width: int = 7):
        for name, v, lo in (("lanes", lanes, 1), ("Ws", Ws, 4), ("M", M, 2), ("exp_width", exp_width, 4),
                            ("shift_width", shift_width, 3)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if M > Ws:
            raise ValueError(f"M: the operands are at most as wide as the state (Ws = {Ws}), got {M}")
        self.lanes, self.Ws, self.M, self.exp_width, self.shift_width = lanes, Ws, M, exp_width, shift_width
        self.prod_width = 2 * M
        self.max_left_old = Ws - 3
        self.max_left_prod = max(0, Ws - M - 2)
        if max(self.max_left_old, self.max_left_prod) > (1 << (shift_width - 1)):
            raise ValueError(f"shift_width: {shift_width} bits cannot shift {self.max_left_old} left")
        self.sum_width = max(Ws + self.max_left_old + 1, self.prod_width + self.max_left_prod + 1) + 1
        self.tree_levels = tree4_levels(lanes)
        #: cycles from a beat in to the same beat out
        self.latency = CONTROL_STAGES + RoundShiftVar.latency + 1 + SaturatingNarrow.latency
        #: cycles from a row's last beat out to ``o_row_valid``
        self.row_latency = 4 + self.tree_levels
        EW = exp_width
        super().__init__({
            "en": In(1), "i_valid": In(1), "i_first": In(1), "i_last": In(1),
            "i_old": In(data.ArrayLayout(signed(Ws), lanes)),
            "i_prod": In(data.ArrayLayout(signed(self.prod_width), lanes)),
            "i_frac": In(signed(EW)), "i_msb": In(range(Ws)), "i_zero": In(1),
            "i_e_prod": In(signed(EW)), "i_p_zero": In(1), "i_f_prod": In(signed(EW)),
            "o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
            "o_data": Out(data.ArrayLayout(signed(Ws), lanes)), "o_frac": Out(signed(EW)),
            "count": Out(COUNT_WIDTH),
            "o_row_valid": Out(1), "o_row_msb": Out(range(Ws)), "o_row_zero": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k, Ws, EW, SW, en = self.lanes, self.Ws, self.exp_width, self.shift_width, self.en
        reg = stage_register(m, en)

        held = hold_register(m, en)  # a vector's latched values: no reset past one bit

        # the beats and their tags through the control stages
        olds = [self.i_old[i] for i in range(k)]
        prods = [self.i_prod[i] for i in range(k)]
        v, f, l = self.i_valid, self.i_first, self.i_last
        tags = []
        for s in range(CONTROL_STAGES):
            tags.append((v, f, l))
            olds = [reg(x, signed(Ws), f"c{s}_old{i}") for i, x in enumerate(olds)]
            prods = [reg(x, signed(self.prod_width), f"c{s}_prod{i}") for i, x in enumerate(prods)]
            v, f, l = reg(v, 1, f"c{s}_v"), reg(f, 1, f"c{s}_f"), reg(l, 1, f"c{s}_l")

        def load(s):
            """Stage ``s``'s controls load as the row's first beat enters it."""
            return tags[s][0] & tags[s][1]

        # per-row controls, one step per stage, held over the row
        e_row = held(self.i_msb + 1 - self.i_frac, signed(EW), load(0), "e_row")
        rz = held(self.i_zero, 1, load(0), "r_zero")
        ep = held(self.i_e_prod, signed(EW), load(0), "e_prod")
        pz = held(self.i_p_zero, 1, load(0), "p_zero")
        fr = held(self.i_frac, signed(EW), load(0), "r_frac")
        fp = held(self.i_f_prod, signed(EW), load(0), "p_frac")
        diff = held(e_row - ep, signed(EW + 1), load(1), "e_diff")  # one carry chain; its sign decides
        held1 = [held(x, x.shape(), load(1), f"h1_{x.name}") for x in (e_row, ep, rz, pz, fr, fp)]
        e_row1, ep1, rz1, pz1, fr1, fp1 = held1
        E = held(Mux(rz1, ep1, Mux(pz1 | ~diff[-1], e_row1, ep1)), signed(EW), load(2), "e_max")
        dead = held(rz1 & pz1, 1, load(2), "dead")
        fr2 = held(fr1, signed(EW), load(2), "h2_frac")
        fp2 = held(fp1, signed(EW), load(2), "h2_pfrac")
        fnew = held(Mux(dead, fr2, (Ws - 2) - E), signed(EW), load(3), "fnew")
        fr3 = held(fr2, signed(EW), load(3), "h3_frac")
        fp3 = held(fp2, signed(EW), load(3), "h3_pfrac")
        s_old = held(fr3 - fnew, signed(EW + 1), load(4), "s_old_w")
        s_prod = held(fp3 - fnew, signed(EW + 1), load(4), "s_prod_w")
        fnew4 = held(fnew, signed(EW), load(4), "h4_fnew")
        lo, hi = -(1 << (SW - 1)), (1 << (SW - 1)) - 1

        def clamp(x):
            """``x`` saturated to ``SW`` bits by a sign-extension test (LUTs, no compare chain)."""
            return Mux(fits_signed(x, SW), x[:SW], Mux(x[-1], lo, hi)).as_signed()

        sh_old = held(clamp(s_old), signed(SW), load(5), "sh_old")
        sh_prod = held(clamp(s_prod), signed(SW), load(5), "sh_prod")
        fnew5 = held(fnew4, signed(EW), load(5), "h5_fnew")

        # the two rounding shifts, the sum, the saturation
        m.submodules.sh_old = so = RoundShiftVar(k, Ws, max_left=self.max_left_old, shift_width=SW)
        m.submodules.sh_prod = sp = RoundShiftVar(k, self.prod_width, max_left=self.max_left_prod, shift_width=SW)
        for u, xs, sh in ((so, olds, sh_old), (sp, prods, sh_prod)):
            m.d.comb += [u.en.eq(en), u.i_valid.eq(v), u.i_shift.eq(sh)]
            m.d.comb += [u.i_data[i].eq(x) for i, x in enumerate(xs)]
        # the new exponent rides beside the beats: each stage's copy loads as the row's first beat
        # enters it, so it stays with the row's beats
        fw, ft = fnew5, f
        for s in range(RoundShiftVar.latency):
            fw = held(fw, signed(EW), v & ft, f"r{s}_fnew")
            v, ft, l = reg(v, 1, f"r{s}_v"), reg(ft, 1, f"r{s}_f"), reg(l, 1, f"r{s}_l")
        sums = [reg(so.o_data[i] + sp.o_data[i], signed(self.sum_width), f"sum{i}") for i in range(k)]
        fw = held(fw, signed(EW), v & ft, "sum_fnew")
        v, ft, l = reg(v, 1, "sum_v"), reg(ft, 1, "sum_f"), reg(l, 1, "sum_l")
        m.submodules.sat = sat = SaturatingNarrow(k, self.sum_width, Ws)
        m.d.comb += [sat.en.eq(en), sat.i_valid.eq(v)]
        m.d.comb += [sat.i_data[i].eq(x) for i, x in enumerate(sums)]
        for s in range(SaturatingNarrow.latency):
            fw = held(fw, signed(EW), v & ft, f"n{s}_fnew")
            v, ft, l = reg(v, 1, f"n{s}_v"), reg(ft, 1, f"n{s}_f"), reg(l, 1, f"n{s}_l")
        outs = [sat.o_data[i] for i in range(k)]
        m.d.comb += [self.o_data[i].eq(x) for i, x in enumerate(outs)]
        m.d.comb += [self.o_valid.eq(v), self.o_first.eq(v & ft), self.o_last.eq(v & l), self.o_frac.eq(fw),
                     self.count.eq(sat.count)]

        # the new row's msb: magnitudes, OR over the lanes, OR over the row's beats, leading one
        ones = [reg(x.as_unsigned() ^ x[-1].replicate(Ws), unsigned(Ws), f"m_ones{i}") for i, x in enumerate(outs)]
        sgn = [reg(x[-1], 1, f"m_sgn{i}") for i, x in enumerate(outs)]
        v, ft, l = reg(v, 1, "m1_v"), reg(ft, 1, "m1_f"), reg(l, 1, "m1_l")
        mags = [reg(o + s_, unsigned(Ws), f"m_mag{i}") for i, (o, s_) in enumerate(zip(ones, sgn))]
        v, ft, l = reg(v, 1, "m2_v"), reg(ft, 1, "m2_f"), reg(l, 1, "m2_l")
        lv = 0
        while len(mags) > 1:
            lv += 1
            mags = [reg(or_all(mags[j:j + 4]), unsigned(Ws), f"m_or{lv}_{j // 4}")
                    for j in range(0, len(mags), 4)]
            v, ft, l = reg(v, 1, f"m_t{lv}_v"), reg(ft, 1, f"m_t{lv}_f"), reg(l, 1, f"m_t{lv}_l")
        acc = Signal(unsigned(Ws), name="row_or")
        done = Signal(name="row_done")
        with m.If(en):
            m.d.sync += done.eq(v & l)
            with m.If(v):
                m.d.sync += acc.eq(Mux(ft, 0, acc) | mags[0])
        top = Signal(range(Ws))
        for b in range(Ws):  # leading one: the last assignment wins
            with m.If(acc[b]):
                m.d.comb += top.eq(b)
        with m.If(en):
            m.d.sync += [self.o_row_valid.eq(done), self.o_row_msb.eq(top), self.o_row_zero.eq(acc == 0)]
        return m
