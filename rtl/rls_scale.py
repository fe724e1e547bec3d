"""VLA's rank-one downdate vector as a streaming pipeline (``golden/fixed/scaled/vla.rls_scale``):
``w = block(zsm rsqrt(delta))`` with ``delta = max(1 + unᵀ zsm, eps)``, so that ``A - zsm zsmᵀ /
delta = A - w wᵀ``; the step of the scaled VLA core's chain between ``zsm`` and the next ``A``
write (``docs/hardware.md``, "The scaled VLA core: its budget").

``zsm`` and ``un`` arrive side by side as ``beats`` beats of ``lanes`` ``M``-bit elements (``i_x``,
``i_y``), their exponents ``i_fx``, ``i_fy`` with the first beat. The model forms ``dacc = unᵀ
zsm`` exactly at the binary point ``F = fy + fx``, lifts a negative ``F`` to 0 (``dacc`` shifted
left by ``-F``), adds ``2^F`` (the ``1``), takes ``max(delta, max(1, rint(eps 2^F)))`` and
``rd = rsqrt(delta, F)`` on the scalar unit, then ``w = block(zsm rd.m, fx + rd.f)``.

Here, as in :class:`~specmem.rtl.unit_norm.UnitNormaliser` (whose structure this follows, with a
dot product in place of the squares): per lane the product ``x y``, a registered adder tree, the
sum over the beats; then :attr:`RlsScale.CONTROL_STAGES` registered steps (``F``, the lift, the
left shift in two steps, ``2^F`` and the add, the floor from a table on ``F``
(:func:`~specmem.rtl.eps_floor.eps_floor_table`) and its compare, the request) into a pipelined
:class:`~specmem.rtl.scalar_unit.ScalarUnit` with a 62-bit input (the model's int64); meanwhile
``zsm``'s beats wait in a delay line, are multiplied by ``rd.m`` and normalised to ``M`` bits by a
:class:`~specmem.rtl.block_norm.StreamBlockNormaliser` with ``fx + rd.f``.

Where the model's integers would leave the hardware's widths the sticky ``o_err`` rises (the
output is then not the model's): a lift that takes ``dacc`` past 61 bits, ``F`` past 61 (``2^F``
past the scalar unit's input) or a floor past 62 bits. At the scaled model's accepted ``lambda0``
(``1e-2 .. 1e8``) none is reached: ``F`` stays below 52 (``docs/fixed-point.md``).

Contract: a vector's beats in consecutive ``en`` cycles, and consecutive vectors' first beats at
least :attr:`RlsScale.interval` ``en`` cycles apart (the scalar unit takes one request at a time);
a bubble inside a vector or a vector too soon sets ``o_err``.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, EnableInserter, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scalar_unit import ScalarUnit as GoldenScalarUnit

from .block_norm import StreamBlockNormaliser
from .delay_line import DELAY_STYLES, MIN_RAM_DELAY, short_delay_style
from .eps_floor import eps_floor_table
from .pipeline import hold_register, stage_register, tag_chain
from .scaled_beats import scale_beats, vector_framing
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["RlsScale"]

#: bits of ``delta`` (the scalar unit's input; the model's int64 arithmetic)
DELTA_BITS = 62


class RlsScale(wiring.Component):
    """``w = block(zsm rsqrt(max(1 + unᵀ zsm, eps)))`` on block vectors of ``lanes x beats``
    ``M``-bit elements; see the module docstring.

    ``su``: the golden scalar unit (``P``-bit rsqrt); ``eps``: the model's ``eps`` (a table);
    members ``en``, ``i_valid``, ``i_x`` (``zsm``), ``i_y`` (``un``), ``i_fx``, ``i_fy``;
    ``o_valid``, ``o_first``, ``o_last``, ``o_data``, ``o_frac``, ``o_err``. ``latency``: cycles
    from a vector's first beat in to its first beat out; ``interval``: the fewest cycles between
    vectors' first beats."""

    #: registered steps from the completed dot product to the scalar unit's request
    CONTROL_STAGES = 6

    def __init__(self, lanes: int, beats: int, M: int, su: GoldenScalarUnit, *, eps: float = 1e-4,
                 exp_width: int = 12, delay_style: str = "registers", su_dsp: str = "registered"):
        for name, v, lo in (("lanes", lanes, 1), ("beats", beats, 1), ("M", M, 3), ("exp_width", exp_width, 7)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if not isinstance(su, GoldenScalarUnit):
            raise ValueError(f"su: expected a golden ScalarUnit, got {su!r}")
        if not (isinstance(eps, float) and eps > 0):
            raise ValueError(f"eps: must be a positive float, got {eps!r}")
        if delay_style not in DELAY_STYLES:
            raise ValueError(f"delay_style: must be one of {', '.join(DELAY_STYLES)}, got {delay_style!r}")
        self.lanes, self.beats, self.M, self.su, self.eps = lanes, beats, M, su, eps
        self.exp_width, self.delay_style = exp_width, delay_style
        self.P = su.out_bits
        self.tree_levels = max(0, (lanes - 1).bit_length())
        #: ``dacc``: every product below ``2^(2M-2)`` in magnitude, ``lanes beats`` of them
        self.dot_width = 2 * M + max(1, (lanes * beats - 1).bit_length())
        #: the largest lift that keeps ``dacc 2^lift`` below ``2^61``
        self.max_lift = DELTA_BITS - self.dot_width
        self.F0, self.floor_rows = eps_floor_table(eps, DELTA_BITS)
        self.su_dsp = su_dsp  # the scalar unit's multipliers and x rd.m: registered or ecp5 (rtl/dsp.py)
        self.unit = ScalarUnit(su, DELTA_BITS, frac_width=exp_width + 2, pipelined=True, dsp=su_dsp)
        su_lat = self.unit.latency[ScalarOp.RSQRT]
        self.norm_depth = 2 + self.tree_levels
        self.delay = beats + self.norm_depth + self.CONTROL_STAGES + su_lat + 1
        if delay_style != "registers" and self.delay < MIN_RAM_DELAY:
            raise ValueError(f"delay_style: a block-RAM delay needs {MIN_RAM_DELAY} stages, this shape waits {self.delay}")
        self.interval = max(beats, su_lat + 2)
        self.mul_width = M + self.P
        self.norm = StreamBlockNormaliser(lanes, beats, self.mul_width, M, frac_width=exp_width,
                                          delay_style=short_delay_style(delay_style))
        self.latency = self.delay + 2 + self.norm.latency
        EW = exp_width
        vec = data.ArrayLayout(signed(M), lanes)
        super().__init__({"en": In(1), "i_valid": In(1), "i_x": In(vec), "i_y": In(vec), "i_fx": In(signed(EW)),
                          "i_fy": In(signed(EW)), "o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
                          "o_data": Out(vec), "o_frac": Out(signed(EW)), "o_err": Out(1)})

    def elaborate(self, platform):
        m = Module()
        w, B, M, EW, P, en = self.lanes, self.beats, self.M, self.exp_width, self.P, self.en
        DW, DB = self.dot_width, DELTA_BITS
        reg = stage_register(m, en)
        held = hold_register(m, en)

        def tags(v, first, last, n, tag):
            return tag_chain(reg, v, first, last, n, tag)

        # framing; the vectors' exponents held from the first beat; vectors too close together
        first_in, last_in, err = vector_framing(m, en, self.i_valid, B, self.interval)
        fxr = Signal(signed(EW), name="fx_r")
        fsum = Signal(signed(EW + 1), name="fsum_r")
        with m.If(en & self.i_valid & first_in):
            m.d.sync += [fxr.eq(self.i_fx), fsum.eq(self.i_fx + self.i_fy)]
        fx = Mux(first_in, self.i_fx, fxr)
        fs = Mux(first_in, self.i_fx + self.i_fy, fsum)

        # dacc = y . x: products, a tree over the lanes, the sum over the beats (exact)
        xs = [reg(self.i_x[i], signed(M), f"x{i}") for i in range(w)]
        ys = [reg(self.i_y[i], signed(M), f"y{i}") for i in range(w)]
        pr = [reg(x * y, signed(2 * M), f"p{i}") for i, (x, y) in enumerate(zip(xs, ys))]
        lv = 0
        while len(pr) > 1:
            lv += 1
            pr = [reg(pr[j] + pr[j + 1] if j + 1 < len(pr) else pr[j], signed(DW), f"tr{lv}_{j // 2}")
                  for j in range(0, len(pr), 2)]
        va, fa, la = tags(self.i_valid, first_in, last_in, self.norm_depth, "nt")
        f_n = fs
        for i in range(self.norm_depth):
            f_n = reg(f_n, signed(EW + 1), f"nf{i}")
        dacc = Signal(signed(DW), name="dacc")
        nf = Signal(signed(EW + 1), name="dacc_frac")
        done = Signal(name="dacc_done")
        with m.If(en):
            m.d.sync += done.eq(va & la)
            with m.If(va):
                m.d.sync += dacc.eq(Mux(fa, 0, dacc) + pr[0])
                with m.If(fa):
                    m.d.sync += nf.eq(f_n)

        # controls (CONTROL_STAGES registers): F and the lift; the shift in two steps and the
        # floor's row; 2^F and the add; the floor compare; the request
        rows, F0 = self.floor_rows, self.F0
        c1_v = reg(done, 1, "c1_v")
        c1_neg = reg(nf < 0, 1, "c1_neg")
        c1_F = reg(Mux(nf < 0, 0, nf), signed(EW + 1), "c1_F")
        c1_lift = reg(Mux(nf < 0, -nf, 0), unsigned(EW + 1), "c1_lift")
        c1_d = reg(dacc, signed(DW), "c1_d")
        lb = max(1, (self.max_lift).bit_length())  # lift bits the shifter takes
        half = (lb + 1) // 2
        c2_v = reg(c1_v, 1, "c2_v")
        c2_bad = reg((c1_lift > self.max_lift) | (c1_F > DB - 1), 1, "c2_bad")
        c2_d = reg(c1_d << c1_lift[:half], signed(DW + (1 << half) - 1), "c2_d")
        c2_hi = reg(c1_lift[half:lb], unsigned(max(1, lb - half)), "c2_hi")
        c2_F = reg(c1_F, signed(EW + 1), "c2_F")
        idx_w = max(1, (len(rows) - 1).bit_length()) if rows else 1
        off = c1_F - (F0 + 1)
        c2_in_tab = reg((off >= 0) & (off < len(rows)), 1, "c2_in_tab") if rows else Const(0, 1)
        c2_over = reg(off >= len(rows), 1, "c2_over")
        if rows:
            table = Array(Const(r, DB) for r in rows)
            c2_row = reg(table[off[:idx_w]], unsigned(DB), "c2_row")
        c3_v = reg(c2_v, 1, "c3_v")
        c3_bad = reg(c2_bad | c2_over, 1, "c3_bad")
        c3_d = reg((c2_d << (c2_hi << half))[:DB + 1], signed(DB + 1), "c3_d")
        c3_one = reg(Const(1, DB) << c2_F[:6], unsigned(DB), "c3_one")
        c3_F = reg(c2_F, signed(EW + 1), "c3_F")
        c3_floor = reg(Mux(c2_in_tab, c2_row, 1) if rows else 1, unsigned(DB), "c3_floor")
        c4_v = reg(c3_v, 1, "c4_v")
        c4_bad = reg(c3_bad, 1, "c4_bad")
        c4_delta = reg(c3_d + c3_one, signed(DB + 2), "c4_delta")
        c4_F, c4_floor = reg(c3_F, signed(EW + 1), "c4_F"), reg(c3_floor, unsigned(DB), "c4_floor")
        c5_v = reg(c4_v, 1, "c5_v")
        c5_bad = reg(c4_bad, 1, "c5_bad")
        c5_lt = reg(c4_delta < c4_floor, 1, "c5_lt")
        c5_delta, c5_floor = reg(c4_delta[:DB], unsigned(DB), "c5_delta"), reg(c4_floor, unsigned(DB), "c5_floor")
        c5_F = reg(c4_F, signed(EW + 1), "c5_F")
        c6_v = reg(c5_v, 1, "c6_v")
        c6_x = reg(Mux(c5_lt, c5_floor, c5_delta), unsigned(DB), "c6_x")
        c6_F = reg(c5_F, signed(EW + 2), "c6_F")
        with m.If(en & c5_v & c5_bad):
            m.d.sync += err.eq(1)

        su = self.unit
        m.submodules.su = EnableInserter(en)(su)
        m.d.comb += [su.i.valid.eq(c6_v), su.i.payload.x.eq(c6_x), su.i.payload.frac.eq(c6_F),
                     su.i.payload.op.eq(ScalarOp.RSQRT), su.o.ready.eq(1)]
        with m.If(en & c6_v & ~su.i.ready):
            m.d.sync += err.eq(1)
        fw = self.unit.out_layout["f"].shape.width
        r_m = Signal(signed(P), name="r_m")
        r_f = Signal(signed(fw), name="r_f")
        with m.If(en & su.o.valid):
            m.d.sync += [r_m.eq(su.o.payload.m), r_f.eq(su.o.payload.f)]

        # zsm's beats wait for rd; then x rd.m and the block normaliser
        scale_beats(m, self, [self.i_x[i] for i in range(w)], fx, first_in, last_in, r_m, r_f, err,
                    reg=reg, held=held, tags=tags)
        return m
