"""The ELU+1 front end shared by the scaled cores that normalise by a running key sum (linear
attention, VLA): ``kf = elu1(k)``, ``qf = elu1(q)`` on one :class:`~specmem.rtl.elu.BlockElu1`
(``k`` then ``q``, back to back), ``z <- align(z + kf)`` as ``kf``'s beats come out (``z`` in
``d`` registers), optionally ``C = kfᵀ qf`` as ``qf``'s come out, ``den = zᵀ qf`` (exact) as
the new ``z``'s come out, the floor ``max(den, eps)`` (a table on ``den``'s exponent,
:func:`~specmem.rtl.eps_floor.eps_floor_table`) and ``rden = 1/den`` on the scalar unit
(``golden/fixed/scaled/linear_attention.elu_features``, rounding for rounding).

It is logic added to the core's own module (no block of its own), so a core built on it keeps
its register names."""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Array, Const, Mux, Signal, signed, unsigned

from specmem.golden.fixed.scaled.linear_attention import Z_BITS

from .align import StreamAlignBlock
from .beats import beat_index, feed_pair, store_beats
from .dsp import operand_product, wide_operand_product
from .elu import BlockElu1
from .eps_floor import eps_floor_table
from .ff import replicas
from .pipeline import register_chain, select_levels, select_pipe
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["tree_sum", "elu_front_blocks", "elu_front_end", "rden_output"]

#: the scalar unit's input: zᵀqf or the floor, which the model holds up to 62 bits
FLOOR_WIDTH = 62


def elu_front_blocks(core, p, *, ram: str, dsp: str, lanes: int | None = None) -> None:
    """The front end's blocks and widths on ``core`` (which has ``d``, ``k``, ``M``,
    ``exp_width``, ``eps``): ``fe_lanes``, ``fe_beats``, ``den_width``, ``floor_width``,
    ``eps_f0``, ``eps_rows``, ``elu``, ``align_z`` and ``unit`` (the reciprocal's scalar unit);
    ``p``: the preset; ``lanes``: the ELU's, ``z``'s and ``den``'s lanes (default ``k``; the
    token's bank is then read ``lanes`` elements a beat, ``BeatBanks(r_lanes=lanes)``)."""
    d, M, EW = core.d, core.M, core.exp_width
    k = core.fe_lanes = core.k if lanes is None else lanes
    B = core.fe_beats = d // k
    core.den_width = Z_BITS + M + max(1, (d - 1).bit_length())
    if core.den_width > FLOOR_WIDTH:
        raise ValueError(f"d: zᵀqf needs {core.den_width} bits at d = {d}; the scalar unit takes {FLOOR_WIDTH}")
    core.floor_width = FLOOR_WIDTH
    core.eps_f0, core.eps_rows = eps_floor_table(core.eps, FLOOR_WIDTH)
    core.elu = BlockElu1(k, B, M, p.exp_lut_bits, rounding=p.rounding, exp_width=EW, delay_style=ram)
    core.align_z = StreamAlignBlock(k, B, ((Z_BITS, False), (M, False)), Z_BITS, exp_width=EW, delay_style=ram)
    core.unit = ScalarUnit(p.scalar_unit(), FLOOR_WIDTH, frac_width=EW, pipelined=True, dsp=dsp)
    core.fe_ff_style = "ecp5" if ram == "ecp5" else "registers"  # the beat counters' copies
    #: cycles of each of the front end's two beat selects (``z``'s, ``qf``'s into ``den``)
    core.fe_select = select_levels(B)


def tree_sum(reg, tag, prods, width, name, flags):
    """A registered pairwise adder tree over ``prods``, its flags beside it (``reg`` for data,
    ``tag`` for flags)."""
    lv = 0
    while len(prods) > 1:
        lv += 1
        prods = [reg(prods[j] + prods[j + 1] if j + 1 < len(prods) else prods[j], signed(width),
                     f"{name}{lv}_t{j // 2}") for j in range(0, len(prods), 2)]
        flags = [tag(f, 1, f"{name}{lv}_f{i}") for i, f in enumerate(flags)]
    return prods[0], flags


def elu_front_end(m, core, kq, in_last, reg, tag, err, vreg, nx, *, with_c: bool):
    """The front end for the token whose ``k`` and ``q`` sit in ``kq`` (``(BeatBanks, fk, fq)``,
    the read bank), started by ``in_last``; ``core`` gives ``k``, ``B``, ``M``, ``exp_width``,
    ``dot_width``, ``den_width``, ``floor_width``, ``eps_f0``, ``eps_rows`` and the blocks
    ``elu``, ``align_z``, ``unit`` (the scalar unit); ``nx``: the registers it fills, ``kf``
    (``None`` without ``with_c``), ``qf``, ``fkf``, ``fqf``, ``rm``, ``rf``. Returns a namespace:
    ``out_q`` (the ELU's next output is ``qf``), ``osel`` (the ELU output's beat), ``z``, ``fz``,
    ``c_acc`` (``C``, with ``with_c``) and ``done`` (a pulse: ``rden`` written). Its beats are
    ``core.fe_lanes`` elements (:func:`elu_front_blocks`)."""
    k, B, M, EW = core.fe_lanes, core.fe_beats, core.M, core.exp_width
    DW, NW, FW = core.dot_width, core.den_width, core.floor_width
    el, az, su = core.elu, core.align_z, core.unit
    fe_kq, fe_fk, fe_fq = kq
    feed_pair(m, el, (fe_kq, fe_fk), (fe_kq, fe_fq), k, B, in_last, reg, tag)  # k, then q, back to back
    out_q = Signal(name="fe_out_q")  # the ELU's next output vector is qf (kf's went first)
    osel = beat_index(m, el, B, "fe_ob")
    L = core.fe_select

    def beat_read(vec, src, sel, shape, name, first):
        """``vec``'s beat ``sel`` (``src``'s current beat) through registered 4:1 selects, ``L``
        cycles later, the first level's index from its own copies of the counter (a ``B``:1 select
        by the counter in one cycle was the scaled VLA core's routed limit, 69.3 MHz)."""
        if first is None:
            nxt = Signal.like(sel, name=f"{name}_sel_next")
            m.d.comb += nxt.eq(Mux(src.o_valid, Mux(src.o_last, 0, sel + 1), sel))
            first = replicas(m, nxt, -(-B // 4), f"{name}_sel", core.fe_ff_style) if B > 1 else None
        return [select_pipe(m, [vec[b * k + j] for b in range(B)], sel, shape, f"{name}{j}", first_sel=first)
                for j in range(k)], first

    def tags(flags, names):
        """Valid, first, last flags through ``L`` registers beside a beat read."""
        for i in range(L):
            flags = [tag(f, 1, f"{n}{i}") for f, n in zip(flags, names)]
        return flags
    with m.If(el.o_valid & el.o_last):
        m.d.sync += out_q.eq(~out_q)
    with m.If(el.o_valid):
        for b in range(B):
            with m.If(osel == b):
                with m.If(out_q):
                    m.d.sync += [nx.qf[b * k + j].eq(el.o_data[j]) for j in range(k)]
                if with_c:
                    with m.Else():
                        m.d.sync += [nx.kf[b * k + j].eq(el.o_data[j]) for j in range(k)]
        with m.If(el.o_first):
            with m.If(out_q):
                m.d.sync += nx.fqf.eq(el.o_frac)
            with m.Else():
                m.d.sync += nx.fkf.eq(el.o_frac)
    # z <- align(z + kf) as kf's beats come out (z's beat read beside them)
    z = vreg("z", signed(Z_BITS), reset=True)
    fz = Signal(signed(EW), name="fz")
    zb, osel_copies = beat_read(z, el, osel, signed(Z_BITS), "z_in_z", None)
    (zv,) = tags([el.o_valid & ~out_q], ["z_in_v"])
    m.d.comb += [az.i_valid.eq(zv), az.i_f0.eq(register_chain(m, fz, signed(EW), L, "z_in_fz", reset_less=True)),
                 az.i_f1.eq(register_chain(m, el.o_frac, signed(EW), L, "z_in_fkf", reset_less=True))]
    m.d.comb += [az.i_x0[j].eq(zb[j]) for j in range(k)]
    m.d.comb += [az.i_x1[j].eq(register_chain(m, el.o_data[j], signed(M), L, f"z_in_kf{j}", reset_less=True))
                 for j in range(k)]
    zsel = store_beats(m, z, az, k, "z_beat")
    with m.If(az.o_valid & az.o_first):
        m.d.sync += fz.eq(az.o_frac)
    c_acc = None
    if with_c:  # C = kf . qf as qf's beats come out beside kf's (read back)
        cv, cf, cl = tags([el.o_valid & out_q, el.o_first, el.o_last], ["c0_v", "c0_f", "c0_l"])
        cq = [register_chain(m, el.o_data[j], signed(M), L, f"c0_q{j}", reset_less=True) for j in range(k)]
        ck, _ = beat_read(nx.kf, el, osel, signed(M), "c0_k", osel_copies)
        cv, cf, cl = tag(cv, 1, "c1_v"), tag(cf, 1, "c1_f"), tag(cl, 1, "c1_l")
        cp = [reg(a * b, signed(2 * M), f"c1_p{j}") for j, (a, b) in enumerate(zip(cq, ck))]
        cs, (cv, cf, cl) = tree_sum(reg, tag, cp, DW, "c", [cv, cf, cl])
        c_acc = Signal(signed(DW), name="c_acc")
        with m.If(cv):
            m.d.sync += c_acc.eq(Mux(cf, 0, c_acc) + cs)
    # den = z . qf as the new z's beats come out (qf's are in: the alignment waits longer than
    # qf takes to follow kf out of the ELU)
    assert az.latency >= B
    dv, df, dl = tags([az.o_valid, az.o_first, az.o_last], ["n0_v", "n0_f", "n0_l"])
    dz = [register_chain(m, az.o_data[j], signed(Z_BITS), L, f"n0_z{j}", reset_less=True) for j in range(k)]
    dq, _ = beat_read(nx.qf, az, zsel, signed(M), "n0_q", None)
    dfr = Signal(signed(EW), name="n0_fr")  # fden = fz + fqf, from the new z's first beat
    with m.If(az.o_valid & az.o_first):
        m.d.sync += dfr.eq(az.o_frac + nx.fqf)
    dv, df, dl = tag(dv, 1, "n1_v"), tag(df, 1, "n1_f"), tag(dl, 1, "n1_l")
    dp = [reg(a * b, signed(Z_BITS + M), f"n1_p{j}") for j, (a, b) in enumerate(zip(dz, dq))]
    ds, (dv, df, dl) = tree_sum(reg, tag, dp, NW, "n", [dv, df, dl])
    den = Signal(signed(NW + 1), name="den_acc")
    with m.If(dv):
        m.d.sync += den.eq(Mux(df, 0, den) + ds)
    # the floor: eps 2^fden from a table (1 below it, beyond it the scalar unit's input passed)
    e1 = tag(dv & dl, 1, "eps1_v")  # den and fden final
    F0, rows = core.eps_f0, core.eps_rows
    e2 = tag(e1, 1, "eps2_v")
    off = reg(dfr - (F0 + 1), signed(EW + 1), "eps_off")
    fden2 = reg(dfr, signed(EW), "eps_fden")
    den2 = reg(den, signed(NW + 1), "eps_den")
    e3 = tag(e2, 1, "eps3_v")
    table = Array(Const(r, FW) for r in rows) if rows else None
    in_tab = (off >= 0) & (off < len(rows))
    floor3 = reg(Mux(in_tab, table[off[:max(1, (len(rows) - 1).bit_length())]], 1) if rows else 1,
                 unsigned(FW), "eps_floor")
    over3 = tag(e2 & (off >= len(rows)), 1, "eps_over")
    fden3, den3 = reg(fden2, signed(EW), "eps_fden3"), reg(den2, signed(NW + 1), "eps_den3")
    e4 = tag(e3, 1, "eps4_v")
    lt4 = reg(den3 < floor3, 1, "eps_lt")  # den >= 0: z and qf are ELU+1 features
    den4, floor4, fden4 = reg(den3, signed(NW + 1), "eps_den4"), reg(floor3, unsigned(FW), "eps_floor4"), \
        reg(fden3, signed(EW), "eps_fden4")
    with m.If(over3):
        m.d.sync += err.eq(1)
    m.d.comb += [su.i.valid.eq(tag(e4, 1, "rq_v")), su.i.payload.op.eq(ScalarOp.RECIP), su.o.ready.eq(1),
                 su.i.payload.x.eq(reg(Mux(lt4, floor4, den4[:NW]), unsigned(FW), "rq_x")),
                 su.i.payload.frac.eq(reg(fden4, signed(EW), "rq_f"))]
    with m.If(su.o.valid):
        m.d.sync += [nx.rm.eq(su.o.payload.m), nx.rf.eq(su.o.payload.f)]
    done = tag(su.o.valid, 1, "fe_done")
    return SimpleNamespace(out_q=out_q, osel=osel, z=z, fz=fz, c_acc=c_acc, done=done)


def rden_output(m, core, valid, sq, sf, x, c, fxc, rm, rf, tag, names, lanes: int | None = None):
    """The output of the rules normalised by ``zᵀqf``: ``num = align(sq + x c)`` on ``core.align_o``
    (``sq`` a beat of the pass's per-row results with their exponents ``sf``, ``x c`` a vector's
    beat times a scalar with exponent ``fxc``), then ``o = block(num rm)`` with exponent ``+ rf`` on
    ``core.norm_o`` into the output buffer, both products on DSP registers (``core.dsp``): ``x c``
    three cycles before the alignment, ``num rm`` two before the normaliser; ``valid``: the beat's
    flag; ``names``: the input registers' names (valid, ``sq``, its exponent, ``x c``).
    ``lanes``: the beats' elements (``align_o``'s lanes; default ``core.k``), the output port's
    beats being ``core.k`` elements. Returns the output buffer's ``read_done``."""
    from .beats import beat_output

    k = core.k if lanes is None else lanes
    DW, M, EW, Wo, P = core.dot_width, core.M, core.exp_width, core.Wo, core.P
    ao, no = core.align_o, core.norm_o
    nv, ns, nf, nx = names
    # x c (x one MULT18X18D wide, c wider) in three cycles on DSP registers; its partners beside it
    v = tag(valid, 1, nv)
    for i in range(2):
        v = tag(v, 1, f"{nv}_d{i + 1}")
    m.d.comb += [ao.i_valid.eq(v), ao.i_f1.eq(fxc)]
    for j in range(k):
        m.d.comb += [ao.i_x0[j].eq(register_chain(m, sq[j], signed(DW), 3, f"{ns}{j}", reset_less=True)),
                     ao.i_f0[j].eq(register_chain(m, sf[j], signed(EW), 3, f"{nf}{j}", reset_less=True)),
                     ao.i_x1[j].eq(wide_operand_product(m, x[j], c, f"{nx}{j}", core.dsp))]
    # num rm in two cycles on a DSP's registers
    m.d.comb += [no.i_valid.eq(tag(tag(ao.o_valid, 1, "on_v0"), 1, "on_v")),
                 no.i_frac.eq(register_chain(m, ao.o_frac + rf, signed(EW), 2, "on_f", reset_less=True))]
    m.d.comb += [no.i_data[j].eq(operand_product(m, ao.o_data[j], rm, f"on_p{j}", core.dsp)) for j in range(k)]
    return beat_output(m, core, no, core.d, core.k, signed(Wo), signed(EW), src_lanes=k)
