"""Linear attention with ELU+1 in the scaled ``int8`` format
(``golden/fixed/scaled/linear_attention.linear_attention_scaled``) on the pipelined blocks of the
scaled delta-rule cores, bit-exact with the model.

Per token ``t`` (the model's order, rounding for rounding):

* **front end**, off the loop, one token ahead: ``kf = elu1(k)``, then ``qf = elu1(q)`` on one
  :class:`~specmem.rtl.elu.BlockElu1` (vectors back to back); as ``kf``'s beats come out, ``z <-
  align(z + kf)`` (a :class:`~specmem.rtl.align.StreamAlignBlock` to 32 bits, ``z`` in ``d``
  registers); as ``qf``'s beats come out, ``C = kfᵀ qf`` (``k`` multipliers, a registered tree);
  as the new ``z``'s beats come out, ``den = zᵀ qf`` (exact, ``k`` multipliers of 32 x ``M`` bits);
  then ``den = max(den, eps)`` (``eps 2^fden`` from a table on the exponent) and ``rden =
  1/den`` on the pipelined scalar unit;
* **pass** (:class:`~specmem.rtl.delta_pass.DeltaPass`, ``d²/k`` cycles): token ``t - 1``'s write
  ``S += v kfᵀ`` of every row and, as each written row streams out, token ``t``'s read ``sq = S
  qf``. The pass's second read (``sk``) is fed zeros: its multipliers have a constant operand;
* **output chain**, beside the next pass: ``num = align(sq + v C)`` to ``Wo`` bits, then ``o =
  block(num rden)`` (``k`` multipliers and a streaming normaliser) into the output buffer.

Unlike the delta rules, the write needs nothing the read produces (``bh`` is ``v``), so the next
pass starts as soon as this one is done: the output chain's feed of ``sq`` (``d/k`` beats, with
``v`` copied for it) runs beside the next pass's fill, before that pass's first row can rewrite
``sq``'s buffer. Cycles per token are ``d²/k`` plus the pass's fill, or the front end's latency
where that is longer (small ``d``): :meth:`LinearAttentionScaledCore.cycles_per_token`.

A flush (a token slot with ``i_flush`` set) runs a write-only pass whose written rows come out on
the ``s_*`` ports: the state for a read-out, bit for bit the model's ``s_raw`` / ``s_frac``. The
normaliser ``z`` comes out on the ``z_*`` ports at the flush (``d/k`` beats of ``k`` 32-bit
mantissas and its exponent, from the cycle the flush is taken): the model's ``z_raw`` / ``z_frac``.

Interfaces: a token as ``3 d/k`` beats on ``i_valid`` / ``i_ready``
(:func:`~specmem.rtl.beats.token_input`): ``k``'s, ``v``'s and ``q``'s ``d/k`` beats of ``k``
``M``-bit mantissas (``i_data``), each vector's exponent ``i_frac`` with its first beat; or a
flush, one beat with ``i_flush`` set in a token's first slot; the output as ``d/k`` beats of ``k``
``Wo``-bit elements with its exponent, ``o_valid`` / ``o_ready``; the read-outs ``s_*`` and ``z_*``;
``tokens``, ``sat`` counters and the sticky ``err`` (a block's contract broken, an input beyond
the ELU's window, ``eps``'s floor beyond 62 bits, where the model's integers end).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scaled.linear_attention import Z_BITS

from .align import StreamAlignBlock
from .beat_banks import BeatBanks
from .beats import token_input, vector_readout
from .block_norm import StreamBlockNormaliser
from .delta_pass import DeltaPass
from .delay_line import short_delay_style
from .elu_front import elu_front_blocks, elu_front_end, rden_output
from .eps_floor import eps_floor_table
from .pipeline import free_register, register_chain, select_levels, select_pipe, stage_register, staggered
from .reset_tree import ResetTree
from .presets import check_scaled_core
from .row_lanes import RowLanes
from .saturate import COUNT_WIDTH
from .scalar_unit import ScalarOp

__all__ = ["LinearAttentionScaledCore", "eps_floor_table", "LINEAR_EPS"]

#: the model's default ``eps`` (``linear_attention_scaled``)
LINEAR_EPS = 1e-4


class LinearAttentionScaledCore(wiring.Component):
    """Linear attention in a scaled preset on ``k`` lanes, state ``d x d``; see the module
    docstring. ``preset``: a scaled preset name; ``ram``: the block-RAM style of the state and of
    the alignments' and the ELU's waits (``behavioural`` or ``ecp5``); ``exp_width``: signed
    exponent bits; ``eps``: the normaliser's floor (the model's ``eps``, a generic: a table);
    ``dsp``: the scalar unit's Newton multiplier (``registered`` or ``ecp5``, ``rtl/dsp.py``)."""

    def __init__(self, d: int, k: int, preset: str = "int8", *, ram: str = "behavioural", exp_width: int = 12,
                 eps: float = LINEAR_EPS, dsp: str = "registered"):
        p = check_scaled_core(d, k, preset, eps)
        self.d, self.k, self.B, self.preset, self.exp_width = d, k, d // k, preset, exp_width
        self.M, self.Ws, self.Wo = p.mul_bits, p.state_bits, p.out_bits
        self.eps = float(eps)
        M, B, EW = self.M, self.B, exp_width
        self.su = p.scalar_unit()
        self.P = P = self.su.out_bits
        self.pass_ = DeltaPass(d, k, self.Ws, M, exp_width=EW, ram=ram, dsp=dsp)
        DW = self.dot_width = self.pass_.dot_width
        self.dsp = dsp
        elu_front_blocks(self, p, ram=ram, dsp=dsp)  # den_width, floor_width, the eps table, elu, align_z, unit
        self.align_o = StreamAlignBlock(k, B, ((DW, True), (M + DW, False)), self.Wo, exp_width=EW, delay_style=ram)
        self.norm_o = StreamBlockNormaliser(k, B, self.Wo + P, self.Wo, frac_width=EW, delay_style=short_delay_style(ram))
        super().__init__({
            "i_valid": In(1), "i_ready": Out(1), "i_flush": In(1),
            "i_data": In(data.ArrayLayout(signed(M), k)), "i_frac": In(signed(EW)),
            "o_valid": Out(1), "o_ready": In(1), "o_first": Out(1), "o_last": Out(1),
            "o_data": Out(data.ArrayLayout(signed(self.Wo), k)), "o_frac": Out(signed(EW)),
            "s_valid": Out(1), "s_first": Out(1), "s_data": Out(data.ArrayLayout(signed(self.Ws), k)),
            "s_frac": Out(signed(EW)),
            "z_valid": Out(1), "z_first": Out(1), "z_data": Out(data.ArrayLayout(signed(Z_BITS), k)),
            "z_frac": Out(signed(EW)),
            "tokens": Out(32), "sat": Out(COUNT_WIDTH), "err": Out(1),
        })

    def pass_cycles(self) -> int:
        """Cycles from one pass's start to the next's when the front end and the output never
        hold it: the sequencer's start (2), the pass's prep, its rows up to the last row's
        results (``(d - 1) B + latency``), ``done`` (1) and the return to idle (1)."""
        pa = self.pass_
        return 2 + pa.prep_cycles + (self.d - 1) * self.B + pa.latency + 2

    def front_end_cycles(self) -> int:
        """Cycles from a token taken to the next taken when the front end is the limit (it takes
        the next token once the pass has taken this one's results): the token's ``3 d/k`` beats,
        the ELU's feed registers (3),
        the ELU, ``z``'s beat select (``fe_select`` registers) and alignment to its last beat,
        ``qf``'s beat select beside it (``fe_select - 1`` more), ``den``'s products, tree and sum,
        the floor (3) and the request (1), the reciprocal, ``fe_done`` and the hand-over (3),
        ``i_ready``'s register (1)."""
        lv = max(0, (self.k - 1).bit_length())
        return (3 * self.B - 1 + 3 + self.elu.latency + 2 * self.fe_select - 1 + self.align_z.latency + self.B - 1
                + 3 + lv + 4 + self.unit.latency[ScalarOp.RECIP] + 4)

    def cycles_per_token(self) -> int:
        """Cycles per token at full rate: the pass or, at small ``d``, the front end."""
        return max(self.pass_cycles(), self.front_end_cycles())

    def elaborate(self, platform):
        m = Module()  # the core's own logic; every block beside it on a reset branch of its own
        tree = ResetTree("ecp5" if self.pass_.ram == "ecp5" else "registers")
        d, k, B, M, EW, Wo, P = self.d, self.k, self.B, self.M, self.exp_width, self.Wo, self.P
        DW, NW, FW = self.dot_width, self.den_width, self.floor_width
        reg = free_register(m)  # data, qualified by a valid tag
        tag = stage_register(m, 1)  # valid, first, last: reset, so a reset leaves no beat in flight

        def vreg(name, shape=signed(M), reset=False):
            """``d`` registers; without ``reset`` data written before it is read (no reset net)."""
            return [Signal(shape, name=f"{name}{i}", reset_less=not reset) for i in range(d)]

        el, az, su, pa, ao, no = self.elu, self.align_z, self.unit, self.pass_, self.align_o, self.norm_o
        for name, block in (("elu", el), ("align_z", az), ("unit", su), ("pass_", pa), ("align_o", ao), ("norm_o", no)):
            tree.add(name, block)
        m.d.comb += [el.en.eq(1), az.en.eq(1), ao.en.eq(1), no.en.eq(1)]
        err = Signal(name="err_r")
        m.d.comb += self.err.eq(err | el.o_err | az.o_err | ao.o_err | no.o_err)

        # -- front end: one token ahead into the "next" registers; k, then q through the ELU
        fe_busy, next_full, next_flush = Signal(name="fe_busy"), Signal(name="next_full"), Signal(name="next_flush")
        # k and q one after the other in LUT RAM, fed to the front end's unit from the read bank
        fe_kq = tree.add("fe_kq", BeatBanks(M, 2 * d, k))
        fe_fk, fe_fq = Signal(signed(EW), name="fe_fk"), Signal(signed(EW), name="fe_fq")
        nx_v, nx_kf, nx_qf = vreg("nx_v"), vreg("nx_kf"), vreg("nx_qf")
        nx_fv, nx_fkf, nx_fqf = (Signal(signed(EW), name=n) for n in ("nx_fv", "nx_fkf", "nx_fqf"))
        nx_c = Signal(signed(DW), name="nx_c")
        nx_rm, nx_rf = Signal(signed(P), name="nx_rm"), Signal(signed(len(su.o.payload.f)), name="nx_rf")
        in_flush, in_last, stray = token_input(m, self, [(fe_kq, fe_fk), (nx_v, nx_fv), (fe_kq, fe_fq)], k,
                                               ~fe_busy & ~next_full)
        with m.If(stray):
            m.d.sync += err.eq(1)
        with m.If(in_flush):
            m.d.sync += [next_full.eq(1), next_flush.eq(1)]
        with m.If(in_last):
            m.d.sync += [fe_busy.eq(1), next_flush.eq(0)]
        m.d.comb += fe_kq.flip.eq(in_last)
        fe = elu_front_end(m, self, (fe_kq, fe_fk, fe_fq), in_last, reg, tag, err, vreg,
                           SimpleNamespace(kf=nx_kf, qf=nx_qf, fkf=nx_fkf, fqf=nx_fqf, rm=nx_rm, rf=nx_rf), with_c=True)
        z, fz, c_acc, fe_done = fe.z, fe.fz, fe.c_acc, fe.done
        with m.If(fe_done):
            m.d.sync += [nx_c.eq(c_acc), fe_busy.eq(0), next_full.eq(1)]

        # -- the token sequencer: pass, then the feed of sq to the output chain
        # the vectors have no reset (a reset net to d M flip-flops each); after a reset the first
        # pass writes nothing (kf_zero -> knw_zero -> the pass's i_wzero), as if v and kf were zero
        cur_v, kf, qf, knw, bh = vreg("cur_v"), vreg("kf"), vreg("qf"), vreg("knw"), vreg("bh")
        kf_zero, knw_zero = Signal(init=1, name="kf_zero"), Signal(init=1, name="knw_zero")
        m.d.comb += pa.i_wzero.eq(knw_zero)
        cur_fv, fkf, fqf, fknw, fbh = (Signal(signed(EW), name=n, reset_less=True)
                                       for n in ("cur_fv", "fkf", "fqf", "fknw", "fbh"))
        cval = Signal(signed(DW), name="c")
        rm, rf = Signal(signed(P), name="rm"), Signal(signed(len(nx_rf)), name="rf")
        cur_flush = Signal(name="cur_flush")
        for port, vec in ((pa.i_bh, bh), (pa.i_knw, knw), (pa.i_qn, qf)):
            m.d.comb += [port[i].eq(vec[i]) for i in range(d)]
        m.d.comb += [pa.i_kn[i].eq(0) for i in range(d)]
        m.d.comb += [pa.i_fknw.eq(fknw), pa.i_fbh.eq(fbh), pa.i_fkn.eq(0), pa.i_fqn.eq(fqf)]
        # the rows' sq and exponent in lanes of LUT RAM, read by the output chain's feed
        rows_o = tree.add("rows_o", RowLanes(DW + EW, d, k))
        row_restart = Signal(name="row_restart")
        m.d.comb += [rows_o.w_next.eq(pa.o_valid_next), rows_o.w_restart.eq(row_restart),
                     rows_o.w_data.eq(Cat(pa.o_sq, pa.o_rf))]
        o_pending = Signal(name="o_pending")
        feed = Signal(range(B + 1), name="o_feed")
        tokens = Signal(32, name="tokens_r")
        m.d.comb += [self.tokens.eq(tokens), self.sat.eq(pa.count)]
        go = Signal(name="pass_go")
        m.d.sync += go.eq(0)
        m.d.comb += pa.start.eq(go)
        # the output chain's per-token values, held from the feed's start to the next feed
        ch_c, ch_fvc = Signal(signed(DW), name="ch_c"), Signal(signed(EW), name="ch_fvc")
        ch_fq = Signal(signed(EW), name="ch_fq")
        ch_rm, ch_rf = Signal(signed(P), name="ch_rm"), Signal(signed(len(nx_rf)), name="ch_rf")
        fsm_idle = Signal(name="seq_idle")
        ov = vreg("ov")  # v for the output chain's feed (cur_v moves on with the next pass)

        feed_go = Signal(name="feed_go")  # the feed's registers load the cycle after it is decided
        m.d.sync += feed_go.eq(0)

        def start_feed():
            m.d.sync += [o_pending.eq(1), feed_go.eq(1)]

        with m.If(feed_go):
            m.d.sync += [feed.eq(B), ch_c.eq(cval), ch_fvc.eq(cur_fv + fkf + fqf), ch_fq.eq(fqf),
                         ch_rm.eq(rm), ch_rf.eq(rf)]
            m.d.sync += [ov[i].eq(cur_v[i]) for i in range(d)]

        # the take, decided in IDLE, in the four cycles after it, a group of registers per cycle
        # from its own enable flip-flop (pipeline.staggered): the previous token's write (v and kf
        # to bh and knw: the pass's prep reads them from its fifth cycle), then v (the front end
        # refills nx_v from d/k cycles on) and the scalars, kf after knw has its old value, and qf
        take_now, take_is_flush = Signal(name="take_now"), Signal(name="take_flush_now")
        (t_w, _), (t_v, z_v), (t_k, z_k), (t_q, z_q) = staggered(m, take_now, take_is_flush, 4, "take")
        with m.If(t_w):
            m.d.sync += [fknw.eq(fkf), fbh.eq(cur_fv)]
            m.d.sync += [knw[i].eq(kf[i]) for i in range(d)] + [bh[i].eq(cur_v[i]) for i in range(d)]
            m.d.sync += knw_zero.eq(kf_zero)
        with m.If(t_v & ~z_v):
            m.d.sync += [cur_fv.eq(nx_fv), cval.eq(nx_c), rm.eq(nx_rm), rf.eq(nx_rf), tokens.eq(tokens + 1)]
            m.d.sync += [cur_v[i].eq(nx_v[i]) for i in range(d)]
        with m.If(t_k):
            m.d.sync += [fkf.eq(Mux(z_k, 0, nx_fkf)), kf_zero.eq(0)]  # a flush's kf is zeros, written
            m.d.sync += [kf[i].eq(Mux(z_k, 0, nx_kf[i])) for i in range(d)]
        with m.If(t_q):
            m.d.sync += fqf.eq(Mux(z_q, 0, nx_fqf))
            m.d.sync += [qf[i].eq(Mux(z_q, 0, nx_qf[i])) for i in range(d)]

        # the next pass's first row reaches sq's buffer after the feed has read every beat of it
        assert 2 + pa.prep_cycles + pa.latency > B + 2
        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                m.d.comb += fsm_idle.eq(1)
                with m.If(next_full & ~pa.busy):
                    m.d.sync += [next_full.eq(0), cur_flush.eq(next_flush), go.eq(1)]
                    m.d.comb += row_restart.eq(1)
                    m.d.comb += [take_now.eq(1), take_is_flush.eq(next_flush)]
                    m.next = "TAKE"
            with m.State("TAKE"):  # the pass takes go and the token's registers their values
                m.next = "PASS"
            with m.State("PASS"):
                with m.If(pa.done):
                    with m.If(cur_flush):
                        m.next = "IDLE"
                    with m.Elif(~o_pending):
                        start_feed()
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "HOLD"
            with m.State("HOLD"):  # the previous output must be out before this chain makes one
                with m.If(~o_pending):
                    start_feed()
                    m.next = "IDLE"
        with m.If(feed != 0):
            m.d.sync += feed.eq(feed - 1)

        # -- output chain: num = align(sq + v C), o = block(num rden)
        # the beats read by a counter that counts up: ov's through registered 4:1 selects
        # (select_pipe), sq's and rf's from the lanes as many cycles later; then the products
        ob = Signal(range(max(B, 2)), name="feed_beat")
        with m.If(feed == 0):
            m.d.sync += ob.eq(0)
        with m.Else():
            m.d.sync += ob.eq(ob + 1)
        Lb = select_levels(B)
        fv1 = register_chain(m, feed != 0, 1, Lb, "of1_v")

        def feed_beat(vec, shape, name):
            return [select_pipe(m, [vec[b * k + j] for b in range(B)], ob, shape, f"{name}{j}") for j in range(k)]

        v1 = feed_beat(ov, signed(M), "of1_v")
        m.d.comb += rows_o.r_addr.eq(ob)
        o1 = [register_chain(m, rows_o.r_data[j], DW + EW, Lb, f"of1_sr{j}", reset_less=True) for j in range(k)]
        s1 = [x[:DW].as_signed() for x in o1]
        r1 = [x[DW:].as_signed() for x in o1]
        with m.If(rden_output(m, self, fv1, s1, [r + ch_fq for r in r1], v1, ch_c, ch_fvc, ch_rm, ch_rf, tag,
                              ("of2_v", "of2_s", "of2_r", "of2_vc"))):
            m.d.sync += o_pending.eq(0)

        # -- z's read-out: its beats from the cycle a flush is taken (the next token's z comes out
        # of the ELU and the alignment later than that)
        assert el.latency + az.latency > B
        take_flush = Signal(name="take_flush")
        m.d.comb += take_flush.eq(next_full & next_flush & ~pa.busy & fsm_idle)
        vector_readout(m, ("z", self), z, fz, take_flush, k, ("z_rd", "z_beat_rd"))

        # -- the state read-out: the rows a flush pass writes
        m.d.comb += [self.s_valid.eq(pa.o_wvalid & cur_flush), self.s_first.eq(pa.o_wfirst),
                     self.s_frac.eq(pa.o_wfrac)]
        m.d.comb += [self.s_data[j].eq(pa.o_wdata[j]) for j in range(k)]
        with m.If(tree.quiet):  # no beat in or out while a reset is pending
            m.d.comb += [self.i_ready.eq(0), self.o_valid.eq(0), self.s_valid.eq(0), self.z_valid.eq(0)]
        return tree.build(m)
