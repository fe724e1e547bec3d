"""Unit vectors of block vectors (``golden/fixed/scaled/deltanet.unit_block``) as a streaming
pipeline: the delta rules' ``kn`` and ``qn``, the per-token front end that runs off the loop.

A block vector ``(raw, frac)`` arrives as ``beats`` consecutive beats of ``lanes`` ``M``-bit
elements. The model forms ``n2 = sum raw²`` exactly, takes ``max(n2, eps2)`` with
``eps2 = max(1, rint(eps² 2^(2 frac)))``, ``r = rsqrt(n2, 2 frac)`` on the scalar unit (``P``-bit
mantissa ``r.m``, exponent ``r.f``) and returns ``block(raw r.m, frac + r.f)``.

Here: per lane the square (one ``M x M`` product), a registered adder tree over the lanes, the sum
over the beats; then ``eps2``, which is 1 for every ``frac`` up to a bound ``F0`` (``F0`` = 20 at
``eps`` = 1e-6) and otherwise a constant of ``frac``: for ``F0 < frac <= F1`` a ROM holds ``eps2``
and the rsqrt of ``eps2`` itself (``rsqrt(max(n2, eps2))`` is that constant whenever ``eps2``
wins, so the scalar unit never needs ``eps2``'s width), and ``frac > F1`` (``eps2`` past 62 bits,
where the model's int64 arithmetic ends) sets ``o_err``. The scalar unit
(:class:`~specmem.rtl.scalar_unit.ScalarUnit`, advancing with ``en`` so its latency is counted
in the same cycles as the pipeline's) takes one request per vector. Meanwhile the beats wait in a
delay line; as a vector's first beat leaves it, the vector's ``r`` is latched, and each beat is
multiplied by ``r.m`` (registered operands and product) and normalised to ``M`` bits by a
:class:`~specmem.rtl.block_norm.StreamBlockNormaliser` with ``frac + r.f``.

With ``scale`` (a positive constant: VLA's ``u_scale``, the model's ``unit_block(..., scale)``)
``r`` is multiplied by ``su.const(scale)`` before it is used: the ``P x P`` product registered and
rounded back to ``P`` bits by a one-element :class:`~specmem.rtl.block_norm.BlockNormaliser`
(``su.mul``), ``2 + latency`` cycles more on the delay line; the ROM rows go through it too.

Contract: a vector's beats in consecutive ``en`` cycles, ``frac`` with its first beat, and
consecutive vectors' first beats at least :attr:`UnitNormaliser.interval` ``en`` cycles apart
(the scalar unit's one request at a time; the delta rules need two vectors per token, hundreds of
cycles apart). A bubble inside a vector, a vector too soon, or ``frac > F1`` sets the sticky
``o_err``.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Array, Const, EnableInserter, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.deltanet import L2_EPS
from specmem.golden.fixed.scalar_unit import ScalarUnit as GoldenScalarUnit

from .block_norm import BlockNormaliser, StreamBlockNormaliser
from .delay_line import DELAY_STYLES, MIN_RAM_DELAY, short_delay_style
from .dsp import operand_product
from .pipeline import hold_register, stage_register, tag_chain
from .scaled_beats import scale_beats, vector_framing
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["UnitNormaliser", "eps_table"]

#: register stages from the completed norm to the scalar unit's request (ROM read, compare, issue)
CONTROL_STAGES = 3
_INT64_EPS2 = 62  # eps2 must stay below 2^62: the model's int64 arithmetic


def eps_table(su: GoldenScalarUnit, eps: float = L2_EPS):
    """``(F0, F1, rows)``: ``eps2(frac) = 1`` for ``frac <= F0``; for ``F0 < frac <= F1`` the rows
    ``(eps2, m, f)`` with ``(m, f) = rsqrt(eps2, 2 frac)`` (the model's ``unit_block`` floor)."""
    def eps2(f):
        return int(np.maximum(1, np.rint(np.ldexp(eps * eps, 2 * f))))

    F0 = 0
    while eps2(F0 + 1) == 1:
        F0 += 1
    while eps2(F0) > 1:
        F0 -= 1
    rows, f = [], F0 + 1
    while eps2(f) < (1 << _INT64_EPS2):
        e2 = eps2(f)
        r = su.rsqrt(np.array([e2], dtype=np.int64), 2 * f)
        rows.append((e2, int(r.m[0]), int(r.f[0])))
        f += 1
    return F0, f - 1, rows


class UnitNormaliser(wiring.Component):
    """``unit_block`` on block vectors of ``lanes x beats`` ``M``-bit elements; see the module docstring.

    ``su``: the golden scalar unit (the preset's: ``P``-bit rsqrt); members ``en``, ``i_valid``,
    ``i_data`` (``lanes`` x ``signed(M)``), ``i_frac``; ``o_valid``, ``o_first``, ``o_last``,
    ``o_data`` (``lanes`` x ``signed(M)``), ``o_frac``, ``o_err``. ``latency``: cycles from a
    vector's first beat in to its first beat out; ``interval``: the fewest cycles between
    vectors' first beats. ``scale``: ``None``, or a positive float the rsqrt is multiplied by (the
    module docstring)."""

    def __init__(self, lanes: int, beats: int, M: int, su: GoldenScalarUnit, *, eps: float = L2_EPS,
                 exp_width: int = 10, delay_style: str = "registers", su_pipelined: bool = True,
                 su_dsp: str = "registered", scale: float | None = None):
        for name, v, lo in (("lanes", lanes, 1), ("beats", beats, 1), ("M", M, 3), ("exp_width", exp_width, 7)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if not isinstance(su, GoldenScalarUnit):
            raise ValueError(f"su: expected a golden ScalarUnit, got {su!r}")
        if not (isinstance(eps, float) and eps > 0):
            raise ValueError(f"eps: must be a positive float, got {eps!r}")
        if delay_style not in DELAY_STYLES:
            raise ValueError(f"delay_style: must be one of {', '.join(DELAY_STYLES)}, got {delay_style!r}")
        if scale is not None and not (isinstance(scale, (int, float)) and not isinstance(scale, bool)
                                      and np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale: must be None or a positive finite number, got {scale!r}")
        self.scale = None if scale is None else float(scale)
        self.lanes, self.beats, self.M, self.su, self.eps = lanes, beats, M, su, eps
        self.exp_width, self.delay_style = exp_width, delay_style
        self.P = su.out_bits
        self.F0, self.F1, self.rows = eps_table(su, eps)
        self.sq_width = 2 * M - 1  # x² <= 2^(2M-2), unsigned
        self.tree_levels = max(0, (lanes - 1).bit_length())
        self.norm_width = self.sq_width + max(0, (lanes * beats - 1).bit_length())
        #: ``su_dsp``: the style of the scalar unit's Newton multiplier, the squares and ``x r.m`` (``registered`` or ``ecp5``: each
        #: product in a MULT18X18D's own registers)
        self.su_dsp = su_dsp
        self.unit = ScalarUnit(su, self.norm_width, frac_width=exp_width + 2, pipelined=su_pipelined, dsp=su_dsp)
        su_lat = self.unit.latency[ScalarOp.RSQRT]
        #: register stages from a beat in to the norm accumulator's input
        self.norm_depth = 2 + self.tree_levels
        # first beat in -> last beat at the accumulator -> accumulated -> controls -> accepted by
        # the scalar unit -> its result -> captured: the first beat leaves the delay line then
        self.delay = beats + self.norm_depth + CONTROL_STAGES + su_lat + 1
        if self.scale is not None:  # r times the constant: the product, the normaliser, the capture
            fw = self.unit.out_layout["f"].shape.width
            self.scale_norm = BlockNormaliser(1, 2 * self.P, self.P, frac_width=fw + 1)
            self.delay += 2 + self.scale_norm.latency
        if delay_style != "registers" and self.delay < MIN_RAM_DELAY:
            raise ValueError(f"delay_style: a block-RAM delay needs {MIN_RAM_DELAY} stages, this shape waits {self.delay}")
        self.interval = max(beats, su_lat + 2)
        self.mul_width = M + self.P
        self.norm = StreamBlockNormaliser(lanes, beats, self.mul_width, M, frac_width=exp_width,
                                          delay_style=short_delay_style(delay_style))
        self.latency = self.delay + 2 + self.norm.latency
        EW = exp_width
        super().__init__({"en": In(1), "i_valid": In(1), "i_data": In(data.ArrayLayout(signed(M), lanes)),
                          "i_frac": In(signed(EW)), "o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
                          "o_data": Out(data.ArrayLayout(signed(M), lanes)), "o_frac": Out(signed(EW)),
                          "o_err": Out(1)})

    def elaborate(self, platform):
        m = Module()
        w, B, M, EW, P, en = self.lanes, self.beats, self.M, self.exp_width, self.P, self.en
        NW = self.norm_width
        reg = stage_register(m, en)

        def tags(v, first, last, n, tag):
            return tag_chain(reg, v, first, last, n, tag)

        held = hold_register(m, en)  # a vector's latched values: no reset past one bit

        # framing; the vector's exponent held from its first beat; vectors too close together
        first_in, last_in, err = vector_framing(m, en, self.i_valid, B, self.interval)
        fr = Signal(signed(EW), name="fvec")
        with m.If(en & self.i_valid & first_in):
            m.d.sync += fr.eq(self.i_frac)
        fv = Mux(first_in, self.i_frac, fr)

        # the norm: squares, a tree over the lanes, the sum over the beats
        # each square on a DSP's own registers (``su_dsp``): between fabric registers it was the
        # routed critical path of the scaled DeltaNet core with two heads (stop 46, 97.6 MHz)
        sq = [operand_product(m, self.i_data[i], self.i_data[i], f"sq{i}", self.su_dsp, en=en)[:self.sq_width]
              for i in range(w)]
        lv = 0
        while len(sq) > 1:
            lv += 1
            sq = [reg(sq[j] + sq[j + 1] if j + 1 < len(sq) else sq[j], unsigned(NW), f"tr{lv}_{j // 2}")
                  for j in range(0, len(sq), 2)]
        va, fa, la = tags(self.i_valid, first_in, last_in, self.norm_depth, "nt")
        f_n = fv
        for i in range(self.norm_depth):
            f_n = reg(f_n, signed(EW), f"nf{i}")
        n2 = Signal(unsigned(NW), name="n2")
        nf = Signal(signed(EW), name="n2_frac")
        done = Signal(name="n2_done")
        with m.If(en):
            m.d.sync += done.eq(va & la)
            with m.If(va):
                m.d.sync += n2.eq(Mux(fa, 0, n2) + sq[0])
                with m.If(fa):
                    m.d.sync += nf.eq(f_n)

        # controls: the ROM row (or eps2 = 1), the compare, the request
        rows = self.rows
        idx_w = max(1, (len(rows) - 1).bit_length()) if rows else 1
        rom_e2 = Array(Const(min(e2, (1 << NW)), unsigned(NW + 1)) for e2, _, _ in rows) if rows else None
        fw = self.unit.out_layout["f"].shape.width
        rom_m = Array(Const(mm, signed(P)) for _, mm, _ in rows) if rows else None
        rom_f = Array(Const(ff, signed(fw)) for _, _, ff in rows) if rows else None
        c1_v = reg(done, 1, "c1_v")
        c1_n2 = reg(n2, unsigned(NW), "c1_n2")
        c1_f = reg(nf, signed(EW), "c1_f")
        c1_mid = reg((nf > self.F0) & (nf <= self.F1), 1, "c1_mid")
        c1_bad = reg(nf > self.F1, 1, "c1_bad")
        c1_idx = reg((nf - (self.F0 + 1))[:idx_w], unsigned(idx_w), "c1_idx")
        c2_v = reg(c1_v, 1, "c2_v")
        c2_n2 = reg(c1_n2, unsigned(NW), "c2_n2")
        c2_f = reg(c1_f, signed(EW), "c2_f")
        c2_mid = reg(c1_mid, 1, "c2_mid")
        c2_bad = reg(c1_bad, 1, "c2_bad")
        if rows:
            c2_e2 = reg(rom_e2[c1_idx], unsigned(NW + 1), "c2_e2")
            c2_m = reg(rom_m[c1_idx], signed(P), "c2_rm")
            c2_rf = reg(rom_f[c1_idx], signed(fw), "c2_rf")
        c3_v = reg(c2_v, 1, "c3_v")
        c3_x = reg(Mux(c2_n2 == 0, 1, c2_n2), unsigned(NW), "c3_x")  # max(n2, 1): eps2 = 1 below F0
        c3_f2 = reg(c2_f * 2, signed(EW + 2), "c3_f2")
        c3_rom = reg(c2_mid & (c2_n2 < c2_e2), 1, "c3_rom") if rows else Const(0, 1)
        c3_bad = reg(c2_bad, 1, "c3_bad")
        if rows:
            c3_m = reg(c2_m, signed(P), "c3_rm")
            c3_rf = reg(c2_rf, signed(fw), "c3_rf")

        su = self.unit
        m.submodules.su = EnableInserter(en)(su)
        m.d.comb += [su.i.valid.eq(c3_v), su.i.payload.x.eq(c3_x), su.i.payload.frac.eq(c3_f2),
                     su.i.payload.op.eq(ScalarOp.RSQRT), su.o.ready.eq(1)]
        with m.If(en & c3_v & ~su.i.ready):
            m.d.sync += err.eq(1)
        with m.If(en & c3_bad & c3_v):
            m.d.sync += err.eq(1)
        use_rom = held(c3_rom, 1, c3_v, "use_rom")
        if rows:
            rom_mh = held(c3_m, signed(P), c3_v, "rom_m")
            rom_fh = held(c3_rf, signed(fw), c3_v, "rom_f")
        r_m = Signal(signed(P), name="r_m")
        r_f = Signal(signed(fw), name="r_f")
        with m.If(en & su.o.valid):
            if rows:
                m.d.sync += [r_m.eq(Mux(use_rom, rom_mh, su.o.payload.m)), r_f.eq(Mux(use_rom, rom_fh, su.o.payload.f))]
            else:
                m.d.sync += [r_m.eq(su.o.payload.m), r_f.eq(su.o.payload.f)]

        if self.scale is not None:  # r <- su.mul(r, const(scale)): the product, then P bits again
            c = self.su.const(self.scale)
            sv = reg(en & su.o.valid, 1, "sc_v")  # r_m, r_f hold the new r
            sp = reg(r_m * int(c.m), signed(2 * P), "sc_p")
            sf = reg(r_f + int(c.f), signed(fw + 1), "sc_f")
            m.submodules.scale_norm = sn = self.scale_norm
            m.d.comb += [sn.en.eq(en), sn.i_valid.eq(reg(sv, 1, "sc_v2")), sn.i_data[0].eq(sp), sn.i_frac.eq(sf)]
            r_m, r_f = Signal(signed(P), name="rs_m"), Signal(signed(fw + 1), name="rs_f")
            with m.If(en & sn.o_valid):
                m.d.sync += [r_m.eq(sn.o_data[0]), r_f.eq(sn.o_frac)]

        # the beats wait for their vector's r; then x r.m and the block normaliser
        scale_beats(m, self, [self.i_data[i] for i in range(w)], fv, first_in, last_in, r_m, r_f, err,
                    reg=reg, held=held, tags=tags)
        return m
