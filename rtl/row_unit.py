"""The annihilation core v2's row pipeline: one row of ``U`` per cycle through the rank-two row
update of token ``t`` and, on the rows as written, the co-accumulation of the next token's
``a = Uᵀx`` and the exact Gram ``G = UᵀU`` (``algorithms.md`` §1, "a third way";
``golden/fixed/annihilation.py``, ``gram="coaccumulate"``).

Per row ``i`` (``k`` lanes, every register advancing while ``en`` is high)::

    U_i ─▶ narrow to u_mul ─▶ Um_i·a (k DSPs) ─▶ adder tree ─▶ narrow to r ─▶ r_i
    r_i·p (k DSPs) ─▶ round by the token's shift ─┐
    Um_ij·q (k DSPs) ─▶ round (constant shift) ───┼─▶ U_i + both ─▶ saturate to u ─▶ column j <- x_i
    U_i (delayed) ─────────────────────────────────┘                                   │
    U'_i ─▶ narrow to u_mul ─▶ Um'_i·x'_i (k DSPs), Um'_il·Um'_im (k(k+1)/2 DSPs) ─▶ accumulators

exactly the golden model's operations (:func:`specmem.golden.fixed.annihilation.row_update`):
``r_i = narrow_r(Um_i·a)``, ``U'_i = sat_u(U_i + round(r_i p) + round(Um_ij q))`` with column ``j``
overwritten by ``x_i`` (``upd``), or only the column write (warm-up, eviction), or nothing; then
``a' += Um'_iᵀ x'_i`` and ``G' += Um'_iᵀ Um'_i`` (upper triangle, exact).

Per-token controls (``a``, ``p``, ``p_shift``, ``q``, ``upd``, ``wsel``) are inputs the caller holds
constant while a pass is in the pipeline (the sequencer decodes them once per token into
registers); with ``travelling_controls=True`` they are sampled with each row instead and travel
down the pipeline beside it to the stage that uses them, so passes of different memories (heads)
can follow each other with no gap (about ``k·(2·w_p + w_a)·st_r`` more flip-flops). ``first`` on
a row clears the accumulators before adding it. Every stage is one register after at most one
carry chain or a few LUT levels (``hardware.md``, "Timing discipline"); the multipliers are
:class:`~specmem.rtl.dsp.LaneMultiplier`\\ s.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.formats import formats_for

from .delay_line import DELAY_STYLES, DelayLine
from .dsp import LaneMultiplier, check_dsp
from .fixed import round_shift
from .params import check_dims
from .pipeline import stage_register
from .saturate import SaturatingNarrow, fits_signed
from .shift import RoundShiftVar

__all__ = ["RowUnit"]

#: a delay line goes to block RAM (``delays`` not ``registers``) from this many stages and bits
RAM_MIN_STAGES, RAM_MIN_BITS = 6, 96


class RowUnit(wiring.Component):
    """Row pipeline of the annihilation core v2 for ``d`` rows, ``k`` lanes, one golden preset.

    Members (widths from the preset's formats): per-token ``a[k]``, ``p[k]``, ``p_shift``
    (``fr + fp - fu``: the right shift of ``r_i p`` into ``u``), ``q[k]``, ``upd``, ``wsel``
    (one-hot column to overwrite with ``x``, or 0); per row ``i_valid``, ``i_u[k]``, ``i_x``,
    ``i_xn`` (the next token's element), ``i_first``; out ``o_valid``, ``o_u[k]`` (the row as
    written, :attr:`latency` after ``i_u``), ``o_r`` (``r_i``, for ``y``), ``sat_u`` (saturated
    writes, counted), ``sat_um`` and ``sat_r`` (saturations of ``Um_i`` in passes with the control
    ``cnt``, and of ``r_i`` in passes with ``upd``: the model's ``u_mul`` and ``r``), ``acc_a[k]``
    and ``acc_g[k(k+1)/2]`` (the running sums, final
    :attr:`acc_latency` advancing cycles after the last row's ``i_u``; ``acc_done`` pulses in the
    first advancing cycle they are, for a row entered with ``i_last``). With
    ``travelling_controls`` ``acc_a``/``acc_g`` are snapshots taken at each ``i_last`` row, held
    until the next (the running sums go on with the next pass).

    ``snapshot=False`` (with travelling controls) leaves the snapshot to the caller, who keeps one
    per memory anyway: ``acc_a``/``acc_g`` then show the sums' next values, whose low
    ``acc_split`` bits are final in the cycle ``acc_lo_we`` is high and whose high bits are final
    in the cycle ``acc_hi_we`` is (the next advancing one); ``acc_done`` follows as before.

    ``delays``: ``registers`` (every delay in flip-flops: the reference) or a block-RAM style of
    :class:`~specmem.rtl.delay_line.DelayLine`, which puts the long, wide data delays (``U_i`` to
    its sum, ``x_i``, ``r_i``, the travelling ``p``, ``q``, ``wsel``, ``p_shift``) in ring buffers;
    after elaboration ``ram_lines`` lists them as ``(name, width, stages)``. Same cycles, same bits.
    ``p_window``: ``(lo, hi)``, the ``p_shift`` values a clamped ``p`` takes
    (:func:`~specmem.golden.fixed.annihilation.p_shift_window`): the shift of ``r_i p`` is then a
    constant one plus a right shift of ``hi - min(lo, 0)`` at most (no left shifter); shifts
    outside the window are the caller's error.
    """

    def __init__(self, d: int, k: int, preset: str = "int18", *, dsp: str = "registered",
                 travelling_controls: bool = False, delays: str = "registers", p_window=None,
                 snapshot: bool = True):
        check_dims(d, k, divides=False)
        if delays not in DELAY_STYLES:
            raise ValueError(f"delays: must be one of {', '.join(DELAY_STYLES)}, got {delays!r}")
        self.d, self.k, self.preset, self.delays = d, k, preset, delays
        self.travelling_controls = bool(travelling_controls)
        self.snapshot = bool(snapshot) or not self.travelling_controls
        self.ram_lines = []   # (name, width, n) of each delay line put in block RAM
        self.fmt = F = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
        self.mul_latency = check_dsp(dsp, 18, 18)
        self.dsp = dsp
        fu, fm, fr, fq, fx = F["u"].frac, F["u_mul"].frac, F["r"].frac, F["q"].frac, F["x"].frac
        self.wu, self.wm, self.wr = F["u"].width, F["u_mul"].width, F["r"].width
        self.wa, self.wp, self.wq, self.wx = F["a"].width, F["p"].width, F["q"].width, F["x"].width
        for n, w in (("u_mul", self.wm), ("a", self.wa), ("r", self.wr), ("p", self.wp), ("q", self.wq),
                     ("x", self.wx)):
            check_dsp(dsp, w, 18)
        self.sh_um = fu - fm                  # U -> u_mul
        self.sh_r = fm + F["a"].frac - fr     # Um·a -> r
        self.sh_q = fm + fq - fu              # Um_ij q -> u
        self.x_to_u = fu - fx
        if min(self.sh_um, self.x_to_u) < 0:
            raise ValueError(f"preset: {preset!r} has u_mul or x finer than u; the row unit needs u to hold both")
        self.wt = self.wu + 2                 # r p clamped here: any value beyond saturates U' the same way
        t2 = (1 << (self.wm + self.wq - 2)) >> max(self.sh_q, 0) << max(-self.sh_q, 0)
        if t2 >= (1 << self.wu):
            raise ValueError(f"preset: {preset!r} rounds Um_ij q to up to 2^{t2.bit_length() - 1}, beyond u's "
                             f"{self.wu}-bit range; the row unit's clamp of r_i p assumes it stays below")
        self.max_left = self.wt
        # a clamped p (the model's p_window): p_shift in [lo, hi] is a constant left shift of r_i p by
        # max(0, -lo), then a right shift of 0 .. hi + max(0, -lo) (4 bits for a 16-value window)
        self.p_window = None if p_window is None else tuple(int(v) for v in p_window)
        if self.p_window is not None:
            lo, hi = self.p_window
            if not (lo <= hi and hi - lo < 64 and hi > -self.wt):
                raise ValueError(f"p_window: (lo, hi) with lo <= hi, hi - lo < 64, hi > -{self.wt}, got {p_window!r}")
            self.pre_left = max(0, -lo)
            self.max_right = hi + self.pre_left
        self.tree_levels = max(1, (k - 1).bit_length())
        L = self.mul_latency
        # the stage (advancing cycles after i_u) at which each value is registered
        self.st_r = 3 + L + self.tree_levels + 2            # r_i: in, narrow (2), multiply, tree, narrow (2)
        # U_i + round(r p) (clamped by a SaturatingNarrow) + round(Um_ij q)
        self.st_sum = self.st_r + L + RoundShiftVar.latency + SaturatingNarrow.latency + 2
        self.latency = self.st_sum + SaturatingNarrow.latency + 1  # saturate, then the column write
        self.acc_latency = self.latency + 2 + L + 3         # narrow, multiply, register, low half, high half
        self.n_gram = k * (k + 1) // 2
        wacc = 2 * 18 + max(1, d.bit_length()) + 1
        self.acc_width = wacc
        self.acc_split = wacc // 2   # the accumulators' low half: bits [0, acc_split)
        strobes = {} if self.snapshot else {"acc_lo_we": Out(1), "acc_hi_we": Out(1)}
        super().__init__({
            **strobes,
            "en": In(1),
            "a": In(data.ArrayLayout(signed(self.wa), k)),
            "p": In(data.ArrayLayout(signed(self.wp), k)),
            "p_shift": In(signed(8)),
            "q": In(data.ArrayLayout(signed(self.wq), k)),
            "upd": In(1),
            "wsel": In(k),
            "i_valid": In(1),
            "i_first": In(1),
            "i_last": In(1),
            "i_u": In(data.ArrayLayout(signed(self.wu), k)),
            "i_x": In(signed(self.wx)),
            "i_xn": In(signed(self.wx)),
            "o_valid": Out(1),
            "o_u": Out(data.ArrayLayout(signed(self.wu), k)),
            "o_r": Out(signed(self.wr)),
            "sat_u": Out(32),
            "cnt": In(1),
            "sat_um": Out(32),
            "sat_r": Out(32),
            "acc_a": Out(data.ArrayLayout(signed(wacc), k)),
            "acc_g": Out(data.ArrayLayout(signed(wacc), self.n_gram)),
            "acc_done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        k, en, L = self.k, self.en, self.mul_latency
        self.ram_lines = []
        rnd = self.fmt["u"].rounding

        reg = stage_register(m, en)

        def delay(value, shape, n, name):
            for s in range(n):
                value = reg(value, shape, f"{name}_d{s}")
            return value

        def line(value, shape, n, name):
            """``delay`` of a data word (never a valid bit: RAM contents are not reset); long and
            wide ones in a block-RAM ring buffer with a fabric output register (``delays``)"""
            w = len(Value.cast(value))
            if self.delays == "registers" or n < RAM_MIN_STAGES or w * n < RAM_MIN_BITS:
                return delay(value, shape, n, name)
            dl = DelayLine(w, n, self.delays, fabric_out=True)
            m.submodules[f"{name}_line"] = dl
            self.ram_lines.append((name, w, n))
            out = Signal(shape, name=f"{name}_dl")
            m.d.comb += [dl.en.eq(en), dl.i.eq(Value.cast(value)), Value.cast(out).eq(dl.o)]
            return out

        def line_lanes(values, shape, n, name):
            """``line`` of ``k`` lanes as one word (one pair of pointers, fewer, wider RAMs)"""
            word = line(Cat(*values), unsigned(sum(len(Value.cast(v)) for v in values)), n, name)
            w = len(Value.cast(values[0]))
            return [word[l * w:(l + 1) * w].as_signed() if shape.signed else word[l * w:(l + 1) * w]
                    for l in range(len(values))]

        def narrow(xs, shift, width, name, flags=None):
            """round (one carry chain), then a registered sign-extension saturation: 2 stages;
            ``flags`` (a list) receives the registered overflow bits, aligned with the outputs"""
            rs = [reg(round_shift(m, x, shift, rnd, f"{name}_r{i}"), signed(len(x) + 1), f"{name}_rr{i}")
                  for i, x in enumerate(xs)]
            hi, lo = Const((1 << (width - 1)) - 1, signed(width)), Const(-(1 << (width - 1)), signed(width))
            if flags is not None:
                flags.extend(reg(~fits_signed(x, width), 1, f"{name}_ov{i}") for i, x in enumerate(rs))
            return [reg(Mux(fits_signed(x, width), x[:width].as_signed(), Mux(x[-1], lo, hi)), signed(width),
                        f"{name}_s{i}") for i, x in enumerate(rs)]

        def count(flags, valid, name):
            """a 32-bit counter of the set ``flags`` in rows with ``valid``: registered sum, then add"""
            n = reg(sum(flags), range(len(flags) + 1), f"{name}_n")
            vn = reg(valid, 1, f"{name}_v")
            c = Signal(32, name=name)
            with m.If(en & vn):
                m.d.sync += c.eq(c + n)
            return c

        def mul(a, b, name):
            mm = LaneMultiplier(len(a), len(b), self.dsp)
            m.submodules[name] = mm
            m.d.comb += [mm.a.eq(a), mm.b.eq(b), mm.en.eq(en)]
            return mm.p

        taps = {}

        def ctl(name, stage):
            """The control ``name`` as seen by the row at ``stage`` (registers after its entry):
            the input itself when controls are held, else its copy that entered with that row
            (delayed from the latest earlier tap; multi-bit ones through ``line``)."""
            value = getattr(self, name)
            if not self.travelling_controls:
                return value
            have = taps.setdefault(name, {0: value})
            if stage not in have:
                base = max(t for t in have if t < stage)
                if len(Value.cast(value)) > 1:
                    have[stage] = line(have[base], value.shape(), stage - base, f"ctl_{name}_{base}_{stage}")
                else:
                    have[stage] = delay(have[base], value.shape(), stage - base, f"ctl_{name}_{base}_{stage}")
            return have[stage]

        # 1. inputs
        v = reg(self.i_valid, 1, "s1_v")
        first = reg(self.i_first & self.i_valid, 1, "s1_first")
        U = [reg(self.i_u[l], signed(self.wu), f"s1_u{l}") for l in range(k)]
        x = reg(self.i_x, signed(self.wx), "s1_x")
        xn = reg(self.i_xn, signed(self.wx), "s1_xn")
        # 2. Um, r_i = narrow(Um·a); cj = Um_ij selected by the one-hot wsel
        um_ov = []
        Um = narrow(U, self.sh_um, self.wm, "um", um_ov)
        # the model counts u_mul's and r's saturations once per full token (Um and r before the update)
        m.d.comb += self.sat_um.eq(count(um_ov, delay(v, 1, 2, "um_v") & ctl("cnt", 3), "sat_um_c"))
        a_c = ctl("a", 3)
        prods = [mul(Um[l], a_c[l], f"mul_a{l}") for l in range(k)]
        lvl = 0
        while len(prods) > 1:
            lvl += 1
            nxt = [reg(prods[j] + prods[j + 1], signed(max(len(prods[j]), len(prods[j + 1])) + 1), f"t{lvl}_{j // 2}")
                   for j in range(0, len(prods) - 1, 2)]
            if len(prods) % 2:
                nxt.append(reg(prods[-1], prods[-1].shape(), f"t{lvl}_odd"))
            prods = nxt
        dot = prods[0] if k > 1 else reg(prods[0], prods[0].shape(), "t1_0")
        r_ov = []
        r = narrow([dot], self.sh_r, self.wr, "rn", r_ov)[0]
        m.d.comb += self.sat_r.eq(count(r_ov, delay(v, 1, self.st_r - 1, "rn_v") & ctl("upd", self.st_r), "sat_r_c"))
        wsel3 = ctl("wsel", 3)
        cj = reg(_or_all([Um[l].as_unsigned() & wsel3[l].replicate(self.wm) for l in range(k)]),
                 unsigned(self.wm), "cj")
        # Um_ij q is formed as late as its sum needs it: cj and q wait (in one line each), not k products
        st_q = self.st_r + RoundShiftVar.latency + SaturatingNarrow.latency - 1
        cj = line(cj.as_signed(), signed(self.wm), st_q - 4, "cj")
        # 3. r_i p (token shift), Um_ij q (constant shift)
        p_c, q_c = ctl("p", self.st_r), ctl("q", st_q)
        rp = [mul(r, p_c[l], f"mul_p{l}") for l in range(k)]
        cq = [mul(cj, q_c[l], f"mul_q{l}") for l in range(k)]
        if self.p_window is None:
            rsv = RoundShiftVar(k, len(rp[0]), max_left=self.max_left, rounding=rnd)
            m.d.comb += rsv.i_shift.eq(ctl("p_shift", self.st_r + L))
            m.d.comb += [rsv.i_data[l].eq(rp[l]) for l in range(k)]
        else:
            pre = self.pre_left
            rsv = RoundShiftVar(k, len(rp[0]) + pre, max_left=0, max_right=self.max_right, rounding=rnd)
            m.d.comb += rsv.i_shift.eq(ctl("p_shift", self.st_r + L) + pre)
            m.d.comb += [rsv.i_data[l].eq(rp[l] << pre) for l in range(k)]
        m.submodules.rsv = rsv
        m.d.comb += [rsv.en.eq(en), rsv.i_valid.eq(1)]
        t2 = [round_shift(m, c, self.sh_q, rnd, f"cq_r{l}") for l, c in enumerate(cq)]
        # the clamp of round(r_i p) to wt bits: its own registered input, sign-extension test and
        # mux (no count: a clamped term saturates U' the same way, and that write is what counts)
        clamp = SaturatingNarrow(k, len(rsv.o_data[0]), self.wt)
        m.submodules.clamp = clamp
        m.d.comb += [clamp.en.eq(en), clamp.i_valid.eq(0)]
        m.d.comb += [clamp.i_data[l].eq(rsv.o_data[l]) for l in range(k)]
        t1 = [clamp.o_data[l] for l in range(k)]
        t2 = [reg(t, signed(self.wu), f"t2c_{l}") for l, t in enumerate(t2)]
        # U_i, x_i and the row's valid bit aligned with the sum, the saturation and the write
        S = self.st_sum
        Ud = line_lanes(U, signed(self.wu), S - 2, "ud")
        s1 = [reg(t1[l] + t2[l], signed(self.wt + 1), f"sum1_{l}") for l in range(k)]
        s2 = [reg(s1[l] + Ud[l], signed(self.wt + 2), f"sum2_{l}") for l in range(k)]
        Ud3 = [delay(u, signed(self.wu), SaturatingNarrow.latency + 1, f"ud3_{l}") for l, u in enumerate(Ud)]
        xd = line(x, signed(self.wx), self.latency - 2, "xd")
        sat = SaturatingNarrow(k, self.wt + 2, self.wu)
        m.submodules.sat = sat
        vd = delay(v, 1, S - 1, "vd")
        m.d.comb += [sat.en.eq(en), sat.i_valid.eq(vd & ctl("upd", S))]
        m.d.comb += [sat.i_data[l].eq(s2[l]) for l in range(k)]
        m.d.comb += self.sat_u.eq(sat.count)
        # 4. the row as written
        xu = (xd << self.x_to_u)
        wsel_w, upd_w = ctl("wsel", self.latency - 1), ctl("upd", self.latency - 1)
        new = [reg(Mux(wsel_w[l], xu, Mux(upd_w, sat.o_data[l], Ud3[l])), signed(self.wu), f"w{l}")
               for l in range(k)]
        vo = delay(vd, 1, self.latency - S, "vo")
        rd = line(r, signed(self.wr), self.latency - self.st_r, "rd")
        m.d.comb += [self.o_valid.eq(vo), self.o_r.eq(rd)]
        m.d.comb += [self.o_u[l].eq(new[l]) for l in range(k)]
        # 5. co-accumulation of a' = Um'ᵀ x' and G' = Um'ᵀ Um' over the rows as written. Each product
        #    is registered in the fabric beside its accumulator (the DSP-to-accumulator route gets a
        #    cycle of its own), and each accumulator is two carry chains: the low half adds the
        #    product's low bits and registers its carry, the high half adds the product's high bits
        #    and that carry one cycle later.
        firstd = delay(first, 1, self.latency + 2 + L, "fd")
        lastd = delay(reg(self.i_last & self.i_valid, 1, "s1_last"), 1, self.latency + 2 + L, "ld")
        vacc = delay(vo, 1, 2 + L + 1, "va")
        xnd = line(xn, signed(self.wx), self.latency + 2 - 1, "xnd")
        Um2 = narrow(new, self.sh_um, self.wm, "um2")
        pa = [mul(Um2[l], xnd, f"mul_x{l}") for l in range(k)]
        pg = [mul(Um2[l], Um2[n], f"mul_g{l}_{n}") for l in range(k) for n in range(l, k)]
        h = self.acc_width // 2
        hw = self.acc_width - h
        v_hi = reg(vacc, 1, "acc_vhi")
        f_hi = reg(firstd, 1, "acc_fhi")
        l_hi = reg(lastd & vacc, 1, "acc_lhi")
        done = Signal(name="acc_done_r")
        with m.If(en):
            m.d.sync += done.eq(l_hi & v_hi)
        m.d.comb += self.acc_done.eq(done & en)
        if not self.snapshot:
            m.d.comb += [self.acc_lo_we.eq(en & vacc & lastd), self.acc_hi_we.eq(en & v_hi & l_hi)]
        for dst, ps, tag in ((self.acc_a, pa, "a"), (self.acc_g, pg, "g")):
            for i, pr in enumerate(ps):
                prr = reg(pr, signed(self.acc_width), f"acc_p{tag}{i}")  # sign-extended to the sum's width
                lo = Signal(unsigned(h), name=f"acc_{tag}{i}_lo")
                cy = Signal(1, name=f"acc_{tag}{i}_cy")
                phi = Signal(signed(hw), name=f"acc_{tag}{i}_ph")
                hi = Signal(signed(hw), name=f"acc_{tag}{i}_hi")
                lo_sum = Signal(unsigned(h + 1), name=f"acc_{tag}{i}_ls")
                m.d.comb += lo_sum.eq(Mux(firstd, prr[:h], lo + prr[:h]))
                with m.If(en & vacc):
                    m.d.sync += [lo.eq(lo_sum[:h]), cy.eq(lo_sum[h]), phi.eq(prr[h:].as_signed())]
                hi_new = Mux(f_hi, phi + cy, hi + phi + cy)
                with m.If(en & v_hi):
                    m.d.sync += hi.eq(hi_new)
                if not self.travelling_controls:
                    m.d.comb += dst[i].eq(Cat(lo, hi).as_signed())
                    continue
                if not self.snapshot:   # the caller takes the halves (one bank per memory)
                    m.d.comb += dst[i].eq(Cat(lo_sum[:h], hi_new).as_signed())
                    continue
                # passes back to back: the low half of the next pass's first row lands one cycle
                # before the high half of this pass's last row, so the sums are snapshot half by half
                snap_lo = Signal(unsigned(h), name=f"acc_{tag}{i}_slo")
                snap_hi = Signal(signed(hw), name=f"acc_{tag}{i}_shi")
                with m.If(en & vacc & lastd):
                    m.d.sync += snap_lo.eq(lo_sum[:h])
                with m.If(en & v_hi & l_hi):
                    m.d.sync += snap_hi.eq(hi_new)
                m.d.comb += dst[i].eq(Cat(snap_lo, snap_hi).as_signed())
        return m


def _or_all(terms):
    out = terms[0]
    for t in terms[1:]:
        out = out | t
    return out
