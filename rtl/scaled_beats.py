"""The streaming vector units' shared framing and output: a vector's beats counted with the
spacing its unit's scalar request needs, and the beats scaled by a per-vector ``r`` and
block-normalised once ``r`` is known (:class:`~specmem.rtl.unit_norm.UnitNormaliser`'s
``x / ||x||`` and :class:`~specmem.rtl.rls_scale.RlsScale`'s ``zsm / sqrt(delta)``)."""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal, signed

from .delay_line import DelayLine
from .dsp import operand_product

__all__ = ["vector_framing", "scale_beats"]


def vector_framing(m, en, valid, beats: int, interval: int):
    """A vector as ``beats`` consecutive ``en`` cycles with ``valid``; vectors' first beats at least
    ``interval`` ``en`` cycles apart. Returns ``(first, last, err)``: the next beat is a vector's
    first / last, and the sticky contract flag (a bubble inside a vector, a vector too soon)."""
    cnt = Signal(range(max(beats, 2)), name="cnt")
    first_in, last_in = cnt == 0, cnt == beats - 1
    err = Signal(name="err")
    since = Signal(range(interval + 1), init=interval, name="since")  # en cycles since the last first beat
    with m.If(en):
        m.d.sync += since.eq(Mux(valid & first_in, 1, Mux(since == interval, since, since + 1)))
        with m.If(valid):
            m.d.sync += cnt.eq(Mux(last_in, 0, cnt + 1))
            with m.If(first_in & (since < interval)):
                m.d.sync += err.eq(1)
        with m.Elif(cnt != 0):
            m.d.sync += err.eq(1)
    return first_in, last_in, err


def scale_beats(m, unit, xs, fx, first_in, last_in, r_m, r_f, err, *, reg, held, tags):
    """The vector's beats ``xs`` (``unit.lanes`` ``unit.M``-bit elements, exponent ``fx``) wait
    ``unit.delay`` cycles in a ``DelayLine`` (``unit.delay_style``) for their ``r`` (``r_m``,
    ``r_f``: registers holding the vector's ``r`` by then), are multiplied by ``r.m`` on
    ``dsp.operand_product`` (``unit.su_dsp``; a first beat takes the new ``r.m``) and block
    normalised by ``unit.norm`` with ``fx + r.f``, onto ``unit``'s ``o_*`` ports (``o_err``: ``err``
    or the normaliser's). ``reg``, ``held``, ``tags``: the unit's stage, hold and tag registers."""
    w, M, EW, P, en = unit.lanes, unit.M, unit.exp_width, unit.P, unit.en
    m.submodules.wait = dl = DelayLine(M * w + EW, unit.delay, unit.delay_style)
    m.d.comb += [dl.en.eq(en), dl.i.eq(Cat(*xs, fx))]
    vd, fd, ld = tags(unit.i_valid, first_in, last_in, unit.delay, "dl")
    dxs = [dl.o[M * i:M * (i + 1)].as_signed() for i in range(w)]
    dfx = dl.o[M * w:].as_signed()
    cur_m = held(r_m, signed(P), vd & fd, "cur_m")
    cur_f = Mux(vd & fd, r_f, held(r_f, signed(len(r_f)), vd & fd, "cur_f"))
    m1_f = reg(dfx + cur_f, signed(EW), "m1_f")
    v1, f1, l1 = tags(vd, fd, ld, 1, "m1")
    # x r.m on a DSP's registers (the product between fabric registers, a DSP used
    # combinationally, limited the DeltaNet core at 109.8 MHz)
    rm_now = Mux(vd & fd, r_m, cur_m)
    prods = [operand_product(m, x, rm_now, f"pr{i}", unit.su_dsp, en=en) for i, x in enumerate(dxs)]
    m2_f = reg(m1_f, signed(EW), "m2_f")
    v2, f2, l2 = tags(v1, f1, l1, 1, "m2")

    m.submodules.norm = nb = unit.norm
    m.d.comb += [nb.en.eq(en), nb.i_valid.eq(v2), nb.i_frac.eq(m2_f)]
    m.d.comb += [nb.i_data[i].eq(p) for i, p in enumerate(prods)]
    m.d.comb += [unit.o_valid.eq(nb.o_valid), unit.o_first.eq(nb.o_first), unit.o_last.eq(nb.o_last),
                 unit.o_frac.eq(nb.o_frac), unit.o_err.eq(err | nb.o_err)]
    m.d.comb += [unit.o_data[i].eq(nb.o_data[i]) for i in range(w)]
