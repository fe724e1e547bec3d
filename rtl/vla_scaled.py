"""Variational Linear Attention in the scaled ``int8`` format (``golden/fixed/scaled/vla.vla_scaled``,
``a_form="diag"``) on the pipelined blocks of the scaled delta-rule cores, bit-exact with the
model: the first VLA core whose int8 keeps the memory.

Per token ``t`` (the model's order, rounding for rounding):

* **front end**, off the loop, one token ahead: linear attention's (:mod:`~specmem.rtl.elu_front`:
  ``kf``, ``qf``, ``zk``, ``rden``); ``kh = unit_block(kf)`` as ``kf``'s beats leave the ELU and
  ``un = unit_block(u, u_scale)`` from ``u``'s beats, each on a
  :class:`~specmem.rtl.unit_norm.UnitNormaliser` of its own;
* **two passes in lockstep** (:class:`~specmem.rtl.delta_pass.DeltaPass`, ``d²/k`` cycles each,
  side by side): over ``A_off`` token ``t - 1``'s write ``A_off -= offdiag(w wᵀ)`` and token
  ``t``'s reads ``za = A_off un``, ``aa = A_off kh``; over ``S`` the write ``S += e ahᵀ`` and the
  reads ``sk = S kh``, ``sq = S qf``; the rows' results in lanes of LUT RAM;
* **chain**, three feeds of ``d/k`` beats: (1) ``zsm = align(ad ⊙ un + za)`` into
  :class:`~specmem.rtl.rls_scale.RlsScale` (``w``, with ``cw = wᵀ kh`` as ``w`` streams out) and,
  beside it, ``e = align(v - sk)``; (2) ``alpha = align(ad ⊙ kh + aa - w cw [+ eta kh])`` into a
  unit normaliser (``ah``, with ``c2 = ahᵀ qf`` as it streams out) and ``ad <- align(ad - w ⊙ w
  [+ eta])`` (``Wd`` bits; read before it is rewritten: the alignment is longer than the feed);
  (3) beside the next token's passes, ``num = align(sq + e c2)`` to ``Wo`` bits, ``o =
  block(num rden)`` into the output buffer. ``[+ eta ..]`` on refresh tokens (``(t + 1) %
  refresh_period == 0``, flush slots not counted): zero terms otherwise (a zero never sets an
  alignment's top). ``zsm`` and ``alpha`` share one four-term alignment (their feeds never
  overlap and both round to ``M`` bits; ``zsm`` has zeros in the last two terms) and its
  ``ad ⊙ x`` multipliers (the operand chosen per feed).

``chain_lanes = c`` (a divisor of ``k`` by a power of two; default ``k``) runs the front end and
the chain on ``c`` lanes in ``d/c``-beat feeds: the ELU, ``z``'s alignment, ``den``'s dot product,
the three unit normalisers, the chain's alignments, ``RlsScale``, its dot products and the
output's normaliser are ``c`` lanes wide (their multipliers and registers scale with ``c``, not
``k``: only the passes are ``k`` wide), reading the token's banks, the rows' results and ``v`` at
that width (``BeatBanks(r_lanes=c)``, ``RowLanes`` on ``c`` lanes) and filling the ``k``-lane output
buffer ``c`` elements a beat; the feeds take ``d/c`` cycles.

This is the plain, one-head schedule: the next token's passes start after the chain's ``ah``,
so cycles per token are the passes plus the chain (:meth:`VlaScaledCore.cycles_per_token`,
measured in simulation). ``docs/hardware.md`` ("The scaled VLA core: its budget") counts what heads and
a skewed ``S`` pass take off.

A flush (a token slot with ``i_flush`` set) runs write-only passes whose written rows come out on
``s_*`` (``S``) and ``a_*`` (``A_off``), and ``A``'s diagonal ``ad`` on ``ad_*`` (``d/k`` beats
of ``Wd``-bit mantissas and its exponent, from the cycle the flush is taken): bit for bit the
model's ``s_raw``/``s_frac``, ``a_raw``/``a_frac``, ``a_diag_raw``/``a_diag_frac``.

Interfaces: a token as ``4 d/k`` beats on ``i_valid`` / ``i_ready``
(:func:`~specmem.rtl.beats.token_input`): ``k``'s, ``v``'s, ``q``'s and ``u``'s ``d/k`` beats of
``k`` ``M``-bit mantissas (``i_data``), each vector's exponent ``i_frac`` with its first beat;
or a flush; the output ``o`` as ``d/k`` beats of ``k`` ``Wo``-bit elements with its exponent,
``o_valid`` / ``o_ready``; ``tokens``, ``sat`` (``S``'s), ``sat_a`` (``A_off``'s) and the sticky
``err``. ``lambda0``, ``eps``, ``refresh_period``, ``eta`` and ``u_scale`` are generics.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.vla import LAMBDA0_RANGE
from specmem.golden.vla import _check_params

from .align import StreamAlignBlock
from .beat_banks import BeatBanks
from .beats import beat_index, beat_of, store_beats, token_input, vector_readout
from .block_norm import StreamBlockNormaliser
from .delta_pass import DeltaPass
from .dsp import operand_product, wide_operand_product
from .delay_line import short_delay_style
from .ff import replicas
from .elu_front import elu_front_blocks, elu_front_end, rden_output, tree_sum
from .pipeline import free_register, register_chain, select_levels, select_pipe, stage_register, staggered
from .presets import check_scaled_core
from .reset_tree import ResetTree
from .rls_scale import RlsScale
from .row_lanes import RowLanes
from .saturate import COUNT_WIDTH
from .unit_norm import UnitNormaliser

__all__ = ["VlaScaledCore", "check_vla_scaled"]


def check_vla_scaled(d, k, preset="int8", *, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                     diag_bits=None, chain_lanes=None):
    """The core's parameters checked (``ValueError`` naming the argument) without building it:
    returns ``(preset, Wd, (lambda0, eps, refresh_period, eta, u_scale))``, the model's defaults
    filled in (``u_scale = 1/sqrt(d)``)."""
    p = check_scaled_core(d, k, preset, eps)
    params = _check_params(d, lambda0, eps, refresh_period, eta, u_scale)
    if not LAMBDA0_RANGE[0] <= params[0] <= LAMBDA0_RANGE[1]:
        raise ValueError(f"lambda0: the scaled VLA model is checked for {LAMBDA0_RANGE[0]:g} <= lambda0 <= "
                         f"{LAMBDA0_RANGE[1]:g}, got {params[0]:g}")
    Wd = p.state_bits + 8 if diag_bits is None else diag_bits
    if isinstance(Wd, bool) or not isinstance(Wd, int) or not p.mul_bits <= Wd <= 32:
        raise ValueError(f"diag_bits: must be an integer between M = {p.mul_bits} and 32, got {Wd!r}")
    c = k if chain_lanes is None else chain_lanes
    if isinstance(c, bool) or not isinstance(c, int) or c < 1 or k % c or (k // c) & (k // c - 1):
        raise ValueError(f"chain_lanes: must divide k = {k} by a power of two, got {chain_lanes!r}")
    return p, Wd, params


class VlaScaledCore(wiring.Component):
    """VLA in a scaled preset on ``k`` lanes, states ``d x d``; see the module docstring.

    ``preset``: a scaled preset name; ``ram``: the block-RAM style of the states and of the
    blocks' waits (``behavioural`` or ``ecp5``); ``exp_width``: signed exponent bits; ``dsp``:
    the scalar units' multiplier style (``registered`` or ``ecp5``); ``diag_bits``: ``Wd``, the
    diagonal's mantissa bits (the model's default ``Ws + 8``); the model's parameters as
    :func:`specmem.golden.fixed.scaled.vla.vla_scaled`; ``chain_lanes``: the chain's lanes (see the
    module docstring)."""

    #: cycles from a feed's beat to the shared alignment's terms: ``wide_operand_product``'s (``ad x``,
    #: ``-w cw`` on DSPs), the other terms delayed beside them
    TERM_STAGES = 3

    def __init__(self, d: int, k: int, preset: str = "int8", *, ram: str = "behavioural", exp_width: int = 12,
                 dsp: str = "registered", lambda0: float = 0.1, eps: float = 1e-4, refresh_period: int = 20,
                 eta: float = 1e-3, u_scale: float | None = None, diag_bits: int | None = None,
                 chain_lanes: int | None = None):
        p, Wd, (lambda0, eps, refresh_period, eta, u_scale) = check_vla_scaled(
            d, k, preset, lambda0=lambda0, eps=eps, refresh_period=refresh_period, eta=eta, u_scale=u_scale,
            diag_bits=diag_bits, chain_lanes=chain_lanes)
        self.d, self.k, self.B, self.preset, self.exp_width = d, k, d // k, preset, exp_width
        self.c = c = k if chain_lanes is None else chain_lanes
        self.Bc = Bc = d // c
        self.M, self.Ws, self.Wo = p.mul_bits, p.state_bits, p.out_bits
        self.Wd = Wd
        self.lambda0, self.eps, self.refresh_period, self.eta, self.u_scale = (
            float(lambda0), float(eps), int(refresh_period), float(eta), float(u_scale))
        self.ram, self.dsp = ram, dsp
        M, EW = self.M, exp_width
        self.su = su = p.scalar_unit()
        self.P = P = su.out_bits
        ad0, fad0 = quantize_block(np.full((1, d), 1.0 / self.lambda0), Wd, "lambda0", p.rounding)
        self.ad0, self.fad0 = int(ad0[0, 0]), int(fad0[0])
        eta_s = su.const(self.eta) if self.eta > 0 else None
        self.refresh = bool(self.refresh_period) and eta_s is not None
        self.eta_m, self.eta_f = (int(eta_s.m), int(eta_s.f)) if self.refresh else (0, 0)
        kw = {"exp_width": EW, "ram": ram, "dsp": dsp}
        self.pass_a = DeltaPass(d, k, self.Ws, M, subtract=True, offdiag=True, **kw)
        self.pass_s = DeltaPass(d, k, self.Ws, M, **kw)
        assert self.pass_a.latency == self.pass_s.latency and self.pass_a.prep_cycles == self.pass_s.prep_cycles
        DW = self.dot_width = self.pass_s.dot_width
        elu_front_blocks(self, p, ram=ram, dsp=dsp, lanes=c)  # den_width, floor_width, the eps table, elu, align_z, unit
        un_kw = {"eps": self.eps, "exp_width": EW, "delay_style": ram, "su_dsp": dsp}
        self.unit_k = UnitNormaliser(c, Bc, M, su, **un_kw)
        self.unit_u = UnitNormaliser(c, Bc, M, su, scale=self.u_scale, **un_kw)
        # the chain
        # zsm (feed 1) and alpha (feed 2) on one alignment: zsm's two terms in alpha's first two
        # slots, zeros in the others (a zero never sets the top: the model's bits either way)
        self.align_a = StreamAlignBlock(c, Bc, ((Wd + M, False), (DW, True), (M + DW, False), (M + P + 1, False)), M,
                                        exp_width=EW, delay_style=ram)
        self.rls = RlsScale(c, Bc, M, su, eps=self.eps, exp_width=EW, delay_style=ram, su_dsp=dsp)
        self.align_e = StreamAlignBlock(c, Bc, ((M, False), (DW + 1, True)), M, exp_width=EW, delay_style=ram)
        self.unit_ah = UnitNormaliser(c, Bc, M, su, **un_kw)
        self.align_ad = StreamAlignBlock(c, Bc, ((Wd, False), (2 * M, False), (P + 1, False)), Wd, exp_width=EW,
                                         delay_style=ram)
        assert self.align_ad.latency > Bc + 2  # ad's old beats are fed before its new ones come out
        self.align_o = StreamAlignBlock(c, Bc, ((DW, True), (M + DW, False)), self.Wo, exp_width=EW, delay_style=ram)
        self.norm_o = StreamBlockNormaliser(c, Bc, self.Wo + P, self.Wo, frac_width=EW,
                                            delay_style=short_delay_style(ram))
        vec = lambda w: data.ArrayLayout(signed(w), k)  # noqa: E731
        super().__init__({
            "i_valid": In(1), "i_ready": Out(1), "i_flush": In(1), "i_data": In(vec(M)), "i_frac": In(signed(EW)),
            "o_valid": Out(1), "o_ready": In(1), "o_first": Out(1), "o_last": Out(1), "o_data": Out(vec(self.Wo)),
            "o_frac": Out(signed(EW)),
            "s_valid": Out(1), "s_first": Out(1), "s_data": Out(vec(self.Ws)), "s_frac": Out(signed(EW)),
            "a_valid": Out(1), "a_first": Out(1), "a_data": Out(vec(self.Ws)), "a_frac": Out(signed(EW)),
            "ad_valid": Out(1), "ad_first": Out(1), "ad_data": Out(vec(Wd)), "ad_frac": Out(signed(EW)),
            "tokens": Out(32), "sat": Out(COUNT_WIDTH), "sat_a": Out(COUNT_WIDTH), "err": Out(1),
        })

    def loop_cycles(self) -> int:
        """Cycles from one pass's start to the next's at full rate: the passes (prep, the rows up
        to the last row's results and ``done``: ``prep + (d - 1) d/k + latency + 2``); feed (1):
        its start (1), the counter's valid through the selects' ``Lb`` levels and three registers
        into ``zsm``'s alignment (its ``ad x`` and ``-w cw`` products on DSPs), a register into :class:`~specmem.rtl.rls_scale.RlsScale`, ``w``'s
        ``d/c`` beats, ``cw``'s registered products, tree and sum (``3 + lv``, ``lv = log2 c``)
        and the next feed's start (1); feed (2) likewise into ``alpha``'s alignment, the unit
        normaliser, ``ah``'s beats and ``c2``'s dot product; then the sequencer's return to idle,
        the take and the start (2). Checked in simulation at (d, k) = (4, 2), (8, 4), (8, 2) and
        with ``c = k/2``."""
        pa, B, Bc = self.pass_s, self.B, self.Bc
        Lb, lv = select_levels(Bc), max(0, (self.c - 1).bit_length())
        passes = pa.prep_cycles + (self.d - 1) * B + pa.latency + 2
        AL = self.TERM_STAGES
        feed1 = 1 + Lb + AL + self.align_a.latency + 1 + self.rls.latency + Bc - 1 + 3 + lv + 1
        feed2 = Lb + AL + self.align_a.latency + self.unit_ah.latency + Bc - 1 + 3 + lv
        return passes + feed1 + feed2 + 2

    def cycles_per_token(self) -> int:
        """Cycles per token at full rate: :meth:`loop_cycles` (the front end, ``4 d/k`` input beats,
        ``2 d/c`` ELU beats and about 130 cycles of ELU, alignment, reciprocal and unit normalisers,
        runs beside the passes and the chain, which are longer at every shape; the Amaranth tests
        measure it, at ``c = k/4`` too)."""
        return self.loop_cycles()

    def elaborate(self, platform):
        m = Module()  # the core's own logic; every block beside it on a reset branch of its own
        tree = ResetTree("ecp5" if self.ram == "ecp5" else "registers")
        d, k, M, EW, P, Wd = self.d, self.k, self.M, self.exp_width, self.P, self.Wd
        c, Bc = self.c, self.Bc  # the chain's lanes and beats
        DW = self.dot_width
        reg = free_register(m)  # data, qualified by a valid tag
        tag = stage_register(m, 1)  # valid, first, last: reset, so a reset leaves no beat in flight

        def vreg(name, shape=signed(M), reset=False):
            """``d`` registers; without ``reset`` data written before it is read (no reset net)."""
            return [Signal(shape, name=f"{name}{i}", reset_less=not reset) for i in range(d)]

        def sreg(name, shape=signed(EW)):
            return Signal(shape, name=name, reset_less=True)

        blocks = {n: getattr(self, n) for n in ("elu", "align_z", "unit", "unit_k", "unit_u", "pass_a", "pass_s",
                                                 "align_a", "rls", "align_e", "unit_ah", "align_ad",
                                                 "align_o", "norm_o")}
        for name, block in blocks.items():
            tree.add(name, block)
            if hasattr(block, "en"):
                m.d.comb += block.en.eq(1)
        pa, ps = self.pass_a, self.pass_s
        err = Signal(name="err_r")
        m.d.comb += self.err.eq(err | Cat(*[b.o_err for b in blocks.values() if hasattr(b, "o_err")]).any())

        # -- front end: one token ahead into the "next" registers
        fe_busy, next_full, next_flush = Signal(name="fe_busy"), Signal(name="next_full"), Signal(name="next_flush")
        fe_kq = tree.add("fe_kq", BeatBanks(M, 2 * d, k, r_lanes=c))
        u_bank = tree.add("u_bank", BeatBanks(M, d, k, r_lanes=c))
        v_banks = tree.add("v_banks", BeatBanks(M, d, k, r_lanes=c))
        fe_fk, fe_fq, fe_fu = (Signal(signed(EW), name=n) for n in ("fe_fk", "fe_fq", "fe_fu"))
        nx = SimpleNamespace(kf=None, qf=vreg("nx_qf"), fkf=sreg("nx_fkf"), fqf=sreg("nx_fqf"),
                             rm=sreg("nx_rm", signed(P)), rf=sreg("nx_rf", signed(len(self.unit.o.payload.f))))
        nx_kh, nx_un = vreg("nx_kh"), vreg("nx_un")
        nx_fkh, nx_fun, nx_fv = sreg("nx_fkh"), sreg("nx_fun"), sreg("nx_fv")
        in_flush, in_last, stray = token_input(
            m, self, [(fe_kq, fe_fk), (v_banks, nx_fv), (fe_kq, fe_fq), (u_bank, fe_fu)], k, ~fe_busy & ~next_full)
        with m.If(stray):
            m.d.sync += err.eq(1)
        with m.If(in_flush):
            m.d.sync += [next_full.eq(1), next_flush.eq(1)]
        with m.If(in_last):
            m.d.sync += [fe_busy.eq(1), next_flush.eq(0)]
        m.d.comb += [fe_kq.flip.eq(in_last), u_bank.flip.eq(in_last)]
        fe = elu_front_end(m, self, (fe_kq, fe_fk, fe_fq), in_last, reg, tag, err, vreg, nx, with_c=False)
        el, uk, uu = self.elu, self.unit_k, self.unit_u
        # kh = unit(kf) as kf's beats leave the ELU
        m.d.comb += [uk.i_valid.eq(tag(el.o_valid & ~fe.out_q, 1, "kh_in_v")),
                     uk.i_frac.eq(reg(el.o_frac, signed(EW), "kh_in_f"))]
        m.d.comb += [uk.i_data[j].eq(reg(el.o_data[j], signed(M), f"kh_in_d{j}")) for j in range(c)]
        store_beats(m, nx_kh, uk, c, "kh_beat")
        with m.If(uk.o_valid & uk.o_first):
            m.d.sync += nx_fkh.eq(uk.o_frac)
        # un = unit(u, u_scale) from u's beats, fed from its bank after the token's last beat
        uf = Signal(range(Bc + 1), name="u_feed")
        with m.If(in_last):
            m.d.sync += uf.eq(Bc)
        with m.Elif(uf != 0):
            m.d.sync += uf.eq(uf - 1)
        ua = reg((Bc - uf)[:max(1, (Bc - 1).bit_length())], range(max(Bc, 2)), "u_addr")
        m.d.comb += u_bank.r_addr.eq(ua)
        uv1 = tag(uf != 0, 1, "u_v1")
        m.d.comb += [uu.i_valid.eq(tag(uv1, 1, "u_v2")), uu.i_frac.eq(reg(fe_fu, signed(EW), "u_in_f"))]
        m.d.comb += [uu.i_data[j].eq(reg(u_bank.r_data[j].as_signed(), signed(M), f"u_in_d{j}")) for j in range(c)]
        store_beats(m, nx_un, uu, c, "un_beat")
        with m.If(uu.o_valid & uu.o_first):
            m.d.sync += nx_fun.eq(uu.o_frac)
        ok = [Signal(name=f"fe_ok_{n}") for n in ("r", "k", "u")]
        for flag, ev in zip(ok, (fe.done, uk.o_valid & uk.o_last, uu.o_valid & uu.o_last)):
            with m.If(ev):
                m.d.sync += flag.eq(1)
        with m.If(Cat(*ok).all()):
            m.d.sync += [f.eq(0) for f in ok] + [fe_busy.eq(0), next_full.eq(1)]

        # -- the token's registers, the passes
        un, kh, qf = vreg("un"), vreg("kh"), vreg("qf")
        f_un, f_kh, f_qf, cur_fv = sreg("f_un"), sreg("f_kh"), sreg("f_qf"), sreg("cur_fv")
        rm, rf = sreg("rm", signed(P)), sreg("rf", signed(len(nx.rf)))
        w, e, ah = vreg("w"), vreg("e"), vreg("ah")
        fw, fe_, fah = sreg("fw"), sreg("fe"), sreg("fah")
        ad = [Signal(signed(Wd), name=f"ad{i}", init=self.ad0) for i in range(d)]
        fad = Signal(signed(EW), name="fad", init=self.fad0)
        wzero = Signal(name="wzero", init=1)  # the next passes write nothing (after a reset, a flush)
        m.d.comb += [pa.i_wzero.eq(wzero), ps.i_wzero.eq(wzero)]
        for port, vec in ((pa.i_bh, w), (pa.i_knw, w), (pa.i_kn, un), (pa.i_qn, kh),
                          (ps.i_bh, e), (ps.i_knw, ah), (ps.i_kn, kh), (ps.i_qn, qf)):
            m.d.comb += [port[i].eq(vec[i]) for i in range(d)]
        m.d.comb += [pa.i_fbh.eq(fw), pa.i_fknw.eq(fw), pa.i_fkn.eq(f_un), pa.i_fqn.eq(f_kh),
                     ps.i_fbh.eq(fe_), ps.i_fknw.eq(fah), ps.i_fkn.eq(f_kh), ps.i_fqn.eq(f_qf)]
        rows_a = tree.add("rows_a", RowLanes(2 * DW + EW, d, c))  # za, aa, rof
        rows_s = tree.add("rows_s", RowLanes(2 * DW + EW, d, c))  # sk, sq, rsf
        row_restart = Signal(name="row_restart")
        for lanes, pp in ((rows_a, pa), (rows_s, ps)):
            m.d.comb += [lanes.w_next.eq(pp.o_valid_next), lanes.w_restart.eq(row_restart),
                         lanes.w_data.eq(Cat(pp.o_sk, pp.o_sq, pp.o_rf))]
        tokens = Signal(32, name="tokens_r")
        m.d.comb += [self.tokens.eq(tokens), self.sat.eq(ps.count), self.sat_a.eq(pa.count)]
        go = Signal(name="pass_go")
        m.d.sync += go.eq(0)
        m.d.comb += [pa.start.eq(go), ps.start.eq(go)]
        refresh, rcount = Signal(name="refresh"), Signal(range(max(self.refresh_period, 2)), name="refresh_count")
        cur_flush = Signal(name="cur_flush")
        take_now, take_flush = Signal(name="take_now"), Signal(name="take_flush_now")
        m.d.comb += v_banks.flip.eq(take_now)
        # the take in the four cycles after it, a group of registers per cycle from its own enable
        # flip-flop (pipeline.staggered: one enable on 3 d M flip-flops is a wide route): the
        # scalars, then un, kh and qf (the passes read them from their read stage on)
        (t_s, z_s), *t_vecs = staggered(m, take_now, take_flush, 4, "take")
        with m.If(t_s & ~z_s):
            m.d.sync += [f_un.eq(nx_fun), f_kh.eq(nx_fkh), f_qf.eq(nx.fqf), cur_fv.eq(nx_fv), rm.eq(nx.rm),
                         rf.eq(nx.rf), tokens.eq(tokens + 1)]
            if self.refresh:
                last_r = rcount == self.refresh_period - 1
                m.d.sync += [refresh.eq(last_r), rcount.eq(Mux(last_r, 0, rcount + 1))]
        for (t_v, z_v), (r, n) in zip(t_vecs, ((un, nx_un), (kh, nx_kh), (qf, nx.qf))):
            with m.If(t_v & ~z_v):
                m.d.sync += [r[i].eq(n[i]) for i in range(d)]

        # -- the sequencer: the passes, the chain's feeds, the output's feed
        Lb = select_levels(Bc)
        feed = Signal(range(Bc + 1), name="feed")  # beats of the current feed left
        fb = Signal(range(max(Bc, 2)), name="feed_beat")
        fb_next = Signal.like(fb, name="feed_beat_next")
        m.d.comb += fb_next.eq(Mux(feed == 0, 0, fb + 1))
        m.d.sync += fb.eq(fb_next)
        with m.If(feed != 0):
            m.d.sync += feed.eq(feed - 1)
        # copies of the beat counter, one per select tree and per first-level group of four (the
        # counter's fan-out into every vector's selects was the routed critical path at c = 2)
        ff_style = "ecp5" if self.ram == "ecp5" else "registers"
        groups = -(-Bc // 4)

        def fb_copy(name, n=1, bits=None):
            return replicas(m, fb_next if bits is None else fb_next[:bits], n, name, ff_style)
        phase = Signal(range(3), name="feed_phase")  # 0: zsm and e, 1: alpha and ad, 2: the output
        fv = [register_chain(m, (feed != 0) & (phase == p), 1, Lb, f"f{p}_v") for p in range(3)]
        o_pending = Signal(name="o_pending")
        # the chain's values, latched as its steps end
        cw, c2 = Signal(signed(DW), name="cw"), Signal(signed(DW), name="c2")
        w_done, e_done, cw_done, ah_done, c2_done, ad_done = (Signal(name=n) for n in (
            "w_done", "e_done", "cw_done", "ah_done", "c2_done", "ad_done"))
        ch_c2, ch_fec, ch_fqf = sreg("ch_c2", signed(DW)), sreg("ch_fec"), sreg("ch_fqf")
        ch_rm, ch_rf = sreg("ch_rm", signed(P)), sreg("ch_rf", signed(len(nx.rf)))
        with m.FSM(init="IDLE", name="seq"):
            with m.State("IDLE"):
                with m.If(next_full & ~pa.busy & ~ps.busy):
                    m.d.sync += [next_full.eq(0), cur_flush.eq(next_flush), go.eq(1)]
                    m.d.comb += [row_restart.eq(1), take_now.eq(1), take_flush.eq(next_flush)]
                    m.next = "TAKE"
            with m.State("TAKE"):
                m.next = "PASS"
            with m.State("PASS"):
                with m.If(ps.done):
                    with m.If(cur_flush):
                        m.d.sync += wzero.eq(1)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [feed.eq(Bc), phase.eq(0)]
                        m.d.sync += [f.eq(0) for f in (w_done, e_done, cw_done, ah_done, c2_done, ad_done)]
                        m.next = "W"
            with m.State("W"):  # w, cw and e
                with m.If(w_done & cw_done & e_done & (feed == 0)):
                    m.d.sync += [feed.eq(Bc), phase.eq(1)]
                    m.next = "AH"
            with m.State("AH"):  # ah, c2 and ad
                with m.If(ah_done & c2_done & ad_done & (feed == 0) & ~o_pending):
                    m.d.sync += [feed.eq(Bc), phase.eq(2), o_pending.eq(1), wzero.eq(0), ch_c2.eq(c2),
                                 ch_fec.eq(fe_ + fah + f_qf), ch_fqf.eq(f_qf), ch_rm.eq(rm), ch_rf.eq(rf)]
                    m.next = "IDLE"

        def vec_beat(vec, shape, name):
            """The feed's beat of a register vector, ``Lb`` cycles after the counter."""
            return [select_pipe(m, [vec[b * c + j] for b in range(Bc)], fb_copy(f"{name}{j}_ix")[0], shape, f"{name}{j}",
                                first_sel=fb_copy(f"{name}{j}_ig", groups, 2) if groups > 1 else None)
                    for j in range(c)]

        def lane_beat(lanes, name, width):
            m.d.comb += lanes.r_addr.eq(fb_copy(f"{name}_ix")[0])
            return [register_chain(m, lanes.r_data[j], width, Lb, f"{name}{j}", reset_less=True) for j in range(c)]

        ra = lane_beat(rows_a, "fa", 2 * DW + EW)
        rs = lane_beat(rows_s, "fs", 2 * DW + EW)
        za, aa, rof = [x[:DW].as_signed() for x in ra], [x[DW:2 * DW].as_signed() for x in ra], \
            [x[2 * DW:].as_signed() for x in ra]
        sk, sq, rsf = [x[:DW].as_signed() for x in rs], [x[DW:2 * DW].as_signed() for x in rs], \
            [x[2 * DW:].as_signed() for x in rs]
        m.d.comb += v_banks.r_addr.eq(fb_copy("fv_ix")[0])
        vb = [register_chain(m, v_banks.r_data[j].as_signed(), signed(M), Lb, f"fv{j}", reset_less=True)
              for j in range(c)]
        adb, unb, khb = vec_beat(ad, signed(Wd), "f_ad"), vec_beat(un, signed(M), "f_un"), vec_beat(kh, signed(M), "f_kh")
        wb, eb = vec_beat(w, signed(M), "f_w"), vec_beat(e, signed(M), "f_e")

        # the shared alignment: (1) zsm = align(ad un + za); (2) alpha = align(ad kh + aa - w cw
        # [+ eta kh]); `second` (feed 2's) is held from its feed's start past its last output
        aa_, ae, rl, ua, aad = self.align_a, self.align_e, self.rls, self.unit_ah, self.align_ad
        second = Signal(name="a_second")
        m.d.sync += second.eq(phase == 1)
        on = refresh if self.refresh else Const(0)
        v1, v2 = tag(fv[0], 1, "z1_v"), tag(fv[1], 1, "a1_v")
        fx = Mux(second, f_kh, f_un)
        # its terms three cycles after the beat: ad x and -w cw on DSPs (wide_operand_product: a
        # multiply into the alignment's input register was the routed limit at c = 2), the others
        # through registers beside them
        AL = self.TERM_STAGES

        def late(value, shape, name):
            return register_chain(m, value, shape, AL, name, reset_less=True)

        m.d.comb += [aa_.i_valid.eq(register_chain(m, v1 | v2, 1, AL - 1, "a1_v")),
                     aa_.i_f0.eq(late(fad + fx, signed(EW), "a1_f0")),
                     aa_.i_f2.eq(late(2 * fw + f_kh, signed(EW), "a1_f2")),
                     aa_.i_f3.eq(late(f_kh + self.eta_f, signed(EW), "a1_f3"))]
        for j in range(c):
            xs, nw = Signal(signed(M), name=f"a1_xs{j}"), Signal(signed(M + 1), name=f"a1_nw{j}")
            m.d.comb += [xs.eq(Mux(second, khb[j], unb[j])), nw.eq(Mux(second, -wb[j], 0))]
            m.d.comb += [aa_.i_x0[j].eq(wide_operand_product(m, xs, adb[j], f"a1_adx{j}", self.dsp)),
                         aa_.i_x1[j].eq(late(Mux(second, aa[j], za[j]), signed(DW), f"a1_x1{j}")),
                         aa_.i_f1[j].eq(late(rof[j] + fx, signed(EW), f"a1_f1{j}")),
                         aa_.i_x2[j].eq(wide_operand_product(m, nw, cw, f"a1_wcw{j}", self.dsp)),
                         aa_.i_x3[j].eq(late(Mux(second & on, khb[j] * self.eta_m, 0), signed(M + P + 1), f"a1_x3{j}"))]
        # (1) w = rls_scale(zsm, un); e = align(v - sk)
        m.d.comb += [ae.i_valid.eq(v1), ae.i_f0.eq(reg(cur_fv, signed(EW), "e1_f0"))]
        for j in range(c):
            m.d.comb += [ae.i_x0[j].eq(reg(vb[j], signed(M), f"e1_x0{j}")),
                         ae.i_x1[j].eq(reg(-sk[j], signed(DW + 1), f"e1_x1{j}")),
                         ae.i_f1[j].eq(reg(rsf[j] + f_kh, signed(EW), f"e1_f1{j}"))]
        zi = beat_index(m, aa_, Bc, "a_beat")
        m.d.comb += [rl.i_valid.eq(tag(aa_.o_valid & ~second, 1, "w0_v")),
                     rl.i_fx.eq(reg(aa_.o_frac, signed(EW), "w0_fx")), rl.i_fy.eq(f_un)]
        m.d.comb += [rl.i_x[j].eq(reg(aa_.o_data[j], signed(M), f"w0_x{j}")) for j in range(c)]
        m.d.comb += [rl.i_y[j].eq(reg(beat_of(un, zi, j, c), signed(M), f"w0_y{j}")) for j in range(c)]
        store_beats(m, w, rl, c, "w_beat")
        with m.If(rl.o_valid & rl.o_first):
            m.d.sync += fw.eq(rl.o_frac)
        with m.If(rl.o_valid & rl.o_last):
            m.d.sync += w_done.eq(1)
        store_beats(m, e, ae, c, "e_beat")
        with m.If(ae.o_valid & ae.o_first):
            m.d.sync += fe_.eq(ae.o_frac)
        with m.If(ae.o_valid & ae.o_last):
            m.d.sync += e_done.eq(1)

        def stream_dot(src, vec, name, out, done):
            """``out = srcᵀ vec`` as ``src``'s beats stream out (``vec``'s beat beside them)."""
            idx = beat_index(m, src, Bc, f"{name}_beat")
            fl = [tag(src.o_valid, 1, f"{name}0_v"), tag(src.o_first, 1, f"{name}0_f"), tag(src.o_last, 1, f"{name}0_l")]
            a = [reg(src.o_data[j], signed(M), f"{name}0_a{j}") for j in range(c)]
            b = [reg(beat_of(vec, idx, j, c), signed(M), f"{name}0_b{j}") for j in range(c)]
            fl = [tag(f, 1, f"{name}1_{i}") for i, f in enumerate(fl)]
            prods = [reg(x * y, signed(2 * M), f"{name}1_p{j}") for j, (x, y) in enumerate(zip(a, b))]
            s, (sv, sf, sl) = tree_sum(reg, tag, prods, DW, name, fl)
            with m.If(sv):
                m.d.sync += out.eq(Mux(sf, 0, out) + s)
            with m.If(sv & sl):
                m.d.sync += done.eq(1)

        stream_dot(rl, kh, "cw", cw, cw_done)

        # (2) ah = unit_block(alpha); ad <- align(ad - w w [+ eta])
        # (its terms two cycles after the beat: -w w on a DSP's registers, the others beside it)
        m.d.comb += [aad.i_valid.eq(tag(v2, 1, "d1_v")),
                     aad.i_f0.eq(register_chain(m, fad, signed(EW), 2, "d1_f0", reset_less=True)),
                     aad.i_f1.eq(register_chain(m, 2 * fw, signed(EW), 2, "d1_f1", reset_less=True)),
                     aad.i_f2.eq(self.eta_f)]
        for j in range(c):
            nw = Signal(signed(M + 1), name=f"d1_nw{j}")
            m.d.comb += nw.eq(-wb[j])
            m.d.comb += [aad.i_x0[j].eq(register_chain(m, adb[j], signed(Wd), 2, f"d1_x0{j}", reset_less=True)),
                         aad.i_x1[j].eq(operand_product(m, nw, wb[j], f"d1_ww{j}", self.dsp)),
                         aad.i_x2[j].eq(register_chain(m, Mux(on, self.eta_m, 0), signed(P + 1), 2, f"d1_x2{j}",
                                                       reset_less=True))]
        m.d.comb += [ua.i_valid.eq(aa_.o_valid & second), ua.i_frac.eq(aa_.o_frac)]
        m.d.comb += [ua.i_data[j].eq(aa_.o_data[j]) for j in range(c)]
        store_beats(m, ah, ua, c, "ah_beat")
        with m.If(ua.o_valid & ua.o_first):
            m.d.sync += fah.eq(ua.o_frac)
        with m.If(ua.o_valid & ua.o_last):
            m.d.sync += ah_done.eq(1)
        stream_dot(ua, qf, "c2", c2, c2_done)
        store_beats(m, ad, aad, c, "ad_beat")
        with m.If(aad.o_valid & aad.o_first):
            m.d.sync += fad.eq(aad.o_frac)
        with m.If(aad.o_valid & aad.o_last):
            m.d.sync += ad_done.eq(1)

        # (3) num = align(sq + e c2), o = block(num rden), beside the next token's passes
        # (the next pass's first row reaches the rows' lanes after the feed has read them)
        assert 2 + ps.prep_cycles + ps.latency > Bc + 2
        with m.If(rden_output(m, self, fv[2], sq, [r + ch_fqf for r in rsf], eb, ch_c2, ch_fec, ch_rm, ch_rf, tag,
                              ("o1_v", "o1_x0", "o1_f0", "o1_x1"), lanes=c)):
            m.d.sync += o_pending.eq(0)

        # -- read-outs at a flush: the rows its passes write, and ad from the cycle it is taken
        for port, pp in (("s", ps), ("a", pa)):
            m.d.comb += [getattr(self, f"{port}_valid").eq(pp.o_wvalid & cur_flush),
                         getattr(self, f"{port}_first").eq(pp.o_wfirst), getattr(self, f"{port}_frac").eq(pp.o_wfrac)]
            m.d.comb += [getattr(self, f"{port}_data")[j].eq(pp.o_wdata[j]) for j in range(k)]
        vector_readout(m, ("ad", self), ad, fad, take_now & take_flush, k, ("ad_rd", "ad_rd_beat"))
        with m.If(tree.quiet):  # no beat in or out while a reset is pending
            m.d.comb += [self.i_ready.eq(0), self.o_valid.eq(0), self.s_valid.eq(0), self.a_valid.eq(0),
                         self.ad_valid.eq(0)]
        return tree.build(m)
