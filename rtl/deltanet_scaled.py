"""DeltaNet and Gated DeltaNet in the scaled ``int8`` format
(``golden/fixed/scaled/deltanet.deltanet_scaled``) on the pipelined blocks: the first cores whose
int8 keeps the memory (block vectors, a row-BFP state).

Per token ``t`` (the model's order, rounding for rounding):

* **front end**, off the loop, one token ahead: ``kn = unit_block(k)``, then ``qn =
  unit_block(q)`` on the same :class:`~specmem.rtl.unit_norm.UnitNormaliser` (``q`` fed its
  ``interval`` after ``k``: one unit's squares, products and scalar unit for both), ``C = knᵀ qn``
  (exact, ``k`` multipliers and a registered tree as ``qn``'s beats come out beside ``kn``'s);
* **pass** (:class:`~specmem.rtl.delta_pass.DeltaPass`, ``d²/k`` cycles): token ``t - 1``'s write
  ``Ŝ += bh knᵀ`` of every row and, as each written row streams out, token ``t``'s reads
  ``sk = Ŝ kn``, ``sq = Ŝ qn`` with the rows' read exponents, into two ``d``-entry buffers;
* **chain**: ``e = align(v - sk)`` (:class:`~specmem.rtl.align.StreamAlignBlock`), ``be =
  block(beta e)`` (``k`` multipliers, :class:`~specmem.rtl.block_norm.StreamBlockNormaliser`),
  written into the ``bh`` register for the next pass and, beat for beat, ``o = align(sq + be C)``
  (``k`` multipliers, a second alignment to ``Wo`` bits) into the output buffer.

DeltaNet's ``bh`` is ``be``. **Gated DeltaNet** (``gated=True``, the model with ``g``) keeps ``S =
gamma Ŝ`` with the state's exponents in ``S``'s frame (:mod:`~specmem.rtl.decay`): the front end
also runs ``gamma <- gamma g`` and ``recip(gamma)`` (:class:`~specmem.rtl.decay.DecayScale`); the
pass adds the change of ``gamma``'s exponent to every row's as it writes it; the chain multiplies
``sk`` and ``sq`` by ``gamma``'s mantissa (on the feed's existing registers, no cycle added) and
forms ``bh = block(be rg)`` (``k`` multipliers and a second normaliser: ``1 + latency`` cycles
more per token). The state read out is ``Ŝ``'s mantissas with ``S``'s row exponents, and
``s_gamma`` is ``gamma``'s mantissa: ``S = s_gamma s_data 2^-s_frac``; ``s_gamma_f`` (a 32-bit
count of the exponent changes, used by nothing inside) gives ``gamma``'s exponent, so
``s_frac - s_gamma_f`` are the model's ``Ŝ`` row exponents.

The last token's write happens in the next pass, so a *flush*
(a token slot with ``i_flush`` set) runs a write-only pass whose written rows come out on the
``s_*`` ports: the state for a read-out, bit for bit the model's ``s_raw`` / ``s_frac``.

Cycles per token: ``prep + d²/k + latency`` of the pass, then the chain (``e``'s alignment and
``be``'s normaliser) before the next pass, whose writes need the whole ``bh``: 136 cycles beyond
``d²/k`` at d = 64, k = 8. The front end, ``o``'s alignment and the output run beside them. That
misses ``1.05 d²/k + 32`` by the chain, so the core takes **heads** (``heads = H``):
``H`` independent memories on the one datapath (:class:`~specmem.rtl.delta_pass.DeltaPass` with
``H`` states), the token slots theirs in turn (slot ``t H + h`` is head ``h``'s token ``t``; a
flush slot counts, so a read-out of every state is ``H`` flushes). A head's registers (``kn``,
``qn``, ``knw``, ``bh``, its scalars) are rewritten only after its chain; the passes of the
other heads run back to back meanwhile (one pass's prep under the last beats of the one before),
so one head's chain hides under the next head's pass: ``d²/k + 1`` cycles per token slot when
the chain is shorter than a pass (257 at d = 32, k = 4 against the target's 300.8), measured by
:meth:`DeltaNetScaledCore.cycles_per_token`. ``v`` is kept in a ring of three banks (a token's
``v`` is read in its chain after the next token's take) and the rows' results in two (the chain
reads one pass's while the next pass writes); a take waits while two passes have chains
pending. Gated DeltaNet's heads each keep their own ``gamma`` (the decay unit's, per head, the
front end's slot counter naming the head) and frame: the pass's exponent shift and ``bh``'s
exponent are per head, the rows' ``-gamma``, ``gamma`` multiplies take the row's head's
(:class:`~specmem.rtl.delta_pass.DeltaPass`'s ``o_head``), the chain copies its head's ``rg``,
and a read-out's ``s_gamma``, ``s_gamma_f`` are the written rows' head's.

Interfaces: a token as ``3 d/k`` beats on ``i_valid`` / ``i_ready`` (:func:`~specmem.rtl.beats.token_input`):
``k``'s, ``v``'s and ``q``'s ``d/k`` beats of ``k`` ``M``-bit mantissas (``i_data``), each
vector's exponent ``i_frac`` with its first beat; ``i_beta`` (an ``M``-bit mantissa) with
``i_fbeta``, and Gated DeltaNet's ``i_g``, ``i_fg`` (``g``'s ``P``-bit mantissa and exponent,
``golden/fixed/scaled/deltanet.scalar_in``) with the token's last beat; or a flush, one beat
with ``i_flush`` set in a token's first slot; the output ``o`` as ``d/k`` beats of ``k``
``Wo``-bit elements with its exponent, ``o_valid`` / ``o_ready`` (backpressure holds the next chain, never loses a token); ``sat`` and
``tokens`` counters.
"""

from __future__ import annotations

from contextlib import nullcontext

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.deltanet import L2_EPS

from .align import StreamAlignBlock
from .beat_banks import BeatBanks
from .beats import beat_index, beat_output, feed_pair, store_beats, token_input
from .block_norm import StreamBlockNormaliser
from .decay import DecayScale
from .delta_pass import DeltaPass
from .dsp import PipelinedMultiplier, operand_product, wide_operand_product
from .delay_line import short_delay_style
from .pipeline import free_register, register_chain, select_levels, staggered, stage_register
from .reset_tree import ResetTree
from .presets import check_scaled_core
from .row_lanes import RowLanes
from .saturate import COUNT_WIDTH
from .unit_norm import UnitNormaliser

__all__ = ["DeltaNetScaledCore"]

#: Gated DeltaNet: bits of the counter that reports ``gamma``'s exponent (the sum of the tokens'
#: ``delta``) for a read-out; nothing inside the core uses it (it wraps after 2^31 / log2(1/g) tokens)
GAMMA_F_WIDTH = 32


class DeltaNetScaledCore(wiring.Component):
    """DeltaNet (or, with ``gated``, Gated DeltaNet) in a scaled preset on ``k`` lanes, state ``d x
    d``; see the module docstring.

    ``preset``: a scaled preset name (``int8``: ``M`` = 8, ``Ws`` = 16, ``Wo`` = 16, a 12-bit
    scalar unit); ``ram``: the block-RAM style of the state and of the alignments' and the unit
    normaliser's waits (``behavioural`` or ``ecp5``; those delay lines would otherwise be most of
    the flip-flops); ``exp_width``: signed exponent bits; ``eps``: the unit vectors' norm floor
    (the model's ``eps``, a generic: the unit normaliser's ROM); ``dsp``: the scalar units'
    multiplier style (``registered``, or ``ecp5``: the product in a MULT18X18D's registers);
    ``heads``: independent memories interleaved on the datapath (the module docstring)."""

    def __init__(self, d: int, k: int, preset: str = "int8", *, ram: str = "behavioural", exp_width: int = 12,
                 gated: bool = False, eps: float = L2_EPS, dsp: str = "registered", heads: int = 1):
        p = check_scaled_core(d, k, preset, eps)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads: must be an integer >= 1, got {heads!r}")
        self.heads = heads
        eps = float(eps)
        self.d, self.k, self.B, self.preset, self.exp_width = d, k, d // k, preset, exp_width
        self.gated, self.ram = bool(gated), ram
        self.M, self.Ws, self.Wo = p.mul_bits, p.state_bits, p.out_bits
        M, B, EW = self.M, self.B, exp_width
        self.su = p.scalar_unit()
        self.P = P = self.su.out_bits
        self.pass_ = DeltaPass(d, k, self.Ws, M, exp_width=EW, ram=ram, rescale=self.gated, dsp=dsp, heads=heads)
        DW = self.pass_.dot_width
        self.dot_width = DW
        #: registered steps between the chain's counter and e's alignment (the beat select's
        #: levels, then -sk)
        self.feed_stages = select_levels(self.B) + 1
        GW = P if self.gated else 0  # sk, sq times gamma's mantissa
        self.eps = eps
        self.dsp = dsp
        self.unit = UnitNormaliser(k, B, M, self.su, eps=eps, exp_width=EW, delay_style=ram, su_dsp=dsp)
        self.align_e = StreamAlignBlock(k, B, ((M, False), (DW + GW + 1, True)), M, exp_width=EW, delay_style=ram)
        self.norm_be = StreamBlockNormaliser(k, B, 2 * M, M, frac_width=EW, delay_style=short_delay_style(ram))
        self.align_o = StreamAlignBlock(k, B, ((DW + GW, True), (M + DW, False)), self.Wo, exp_width=EW,
                                        delay_style=ram)
        extra = {}
        if self.gated:
            self.decay = DecayScale(self.su, exp_width=EW, dsp=dsp, heads=heads)
            self.norm_bh = StreamBlockNormaliser(k, B, M + P, M, frac_width=EW, delay_style=short_delay_style(ram))
            # the pass's sk and sq per row times -gamma and gamma, 18 x 18 pieces and a registered sum
            self.sk_gamma = PipelinedMultiplier(DW, P + 1, dsp)
            self.sq_gamma = PipelinedMultiplier(DW, P, dsp)
            assert self.sq_gamma.latency == self.sk_gamma.latency  # one row counter for both
            extra = {"i_g": In(signed(P)), "i_fg": In(signed(EW)), "s_gamma": Out(signed(P)),
                     "s_gamma_f": Out(signed(GAMMA_F_WIDTH))}
        super().__init__({**extra,
            "i_valid": In(1), "i_ready": Out(1), "i_flush": In(1),
            "i_data": In(data.ArrayLayout(signed(M), k)), "i_frac": In(signed(EW)),
            "i_beta": In(signed(M)), "i_fbeta": In(signed(EW)),
            "o_valid": Out(1), "o_ready": In(1), "o_first": Out(1), "o_last": Out(1),
            "o_data": Out(data.ArrayLayout(signed(self.Wo), k)), "o_frac": Out(signed(EW)),
            "s_valid": Out(1), "s_first": Out(1), "s_data": Out(data.ArrayLayout(signed(self.Ws), k)),
            "s_frac": Out(signed(EW)),
            "tokens": Out(32), "sat": Out(COUNT_WIDTH), "err": Out(1),
        })

    def front_end_cycles(self) -> int:
        """Cycles from one token's consumption to the next's when the front end is the limit
        (small ``d``): the token's ``3 d/k`` beats, the unit normaliser's ``k`` then ``q`` (``q``
        fed ``interval`` cycles after ``k``, its ``d/k`` beats, the unit's latency), ``C``'s
        products, tree and sum, and the hand-over (6 registers and the sequencer's take in all),
        and ``i_ready``'s register (1); counted from the blocks and checked in simulation at (d, k)
        = (2, 2), (2, 1), (4, 4)."""
        lv = max(0, (self.k - 1).bit_length())
        return 3 * self.B + self.unit.interval + self.B + self.unit.latency + lv + 7

    def cycles_per_token(self) -> int:
        """Cycles per token at full rate: :meth:`loop_cycles` or, at small ``d``, the front end's;
        with heads, cycles per token slot (all heads together): the passes back to back (the
        pass's ``pass_interval`` and the cycle of the registered start), unless a head's loop
        (its next take waits for its chain) or the two row banks (a take waits for the chain two
        passes back) or the front end is longer."""
        if self.heads == 1:
            return max(self.loop_cycles(), self.front_end_cycles())
        return max(self.pass_.pass_interval + 1, -(-self.loop_cycles() // min(self.heads, 2)), self.front_end_cycles())

    def loop_cycles(self) -> int:
        """Cycles from one pass's start to the next's when the front end and the output never
        hold it: the sequencer's start (2), the pass's prep, its rows up to the last row's
        results (``(d - 1) B + latency``) and ``done`` (1), the hold and the chain's first beat
        (2), the feed's registers (:attr:`feed_stages`), ``e``'s alignment, ``beta e``'s product (1), its normaliser to ``bh``'s last beat
        (``latency + B - 1``) and the return to idle (1); gated, ``bh = block(be rg)`` after it (its
        product on a DSP's registers, 2, and its normaliser's latency) and the pass's last row through the multiply by
        ``-gamma`` (:class:`~specmem.rtl.dsp.PipelinedMultiplier`'s latency)."""
        pa, ae, nb = self.pass_, self.align_e, self.norm_be
        bh = 2 + self.norm_bh.latency + self.sk_gamma.latency if self.gated else 0
        return (2 + pa.prep_cycles + (self.d - 1) * self.B + pa.latency + 1 + 2 + self.feed_stages + ae.latency + 1
                + nb.latency + self.B - 1 + 1 + bh)

    def elaborate(self, platform):
        m = Module()  # the core's own logic; every block beside it on a reset branch of its own
        tree = ResetTree("ecp5" if self.ram == "ecp5" else "registers")
        d, k, B, M, EW, Wo = self.d, self.k, self.B, self.M, self.exp_width, self.Wo
        DW = self.dot_width
        reg = free_register(m)  # data, qualified by a valid tag
        tag = stage_register(m, 1)  # valid, first, last: reset, so a reset leaves no beat in flight

        def vreg(name, shape=signed(M), reset=False):
            """``d`` registers; without ``reset`` data written before it is read (no reset net)."""
            return [Signal(shape, name=f"{name}{i}", reset_less=not reset) for i in range(d)]

        un = self.unit
        pa, ae, nb, ao = self.pass_, self.align_e, self.norm_be, self.align_o
        for name, block in (("unit", un), ("pass_", pa), ("align_e", ae), ("norm_be", nb), ("align_o", ao)):
            tree.add(name, block)
        m.d.comb += [un.en.eq(1), ae.en.eq(1), nb.en.eq(1), ao.en.eq(1)]
        err = Signal()
        gated, P = self.gated, self.P
        if gated:
            dc, nbh = self.decay, self.norm_bh
            tree.add("decay", dc), tree.add("norm_bh", nbh)
            m.d.comb += nbh.en.eq(1)
        m.d.comb += self.err.eq(err | un.o_err | ae.o_err | nb.o_err | ao.o_err | (nbh.o_err | pa.err if gated else 0))

        # -- front end: one token ahead into the "next" registers; k, then q on the same unit
        fe_busy, next_full, next_flush = Signal(name="fe_busy"), Signal(name="next_full"), Signal(name="next_flush")
        # k and q one after the other in LUT RAM, fed to the front end's unit from the read bank
        fe_kq = tree.add("fe_kq", BeatBanks(M, 2 * d, k))
        fe_fk, fe_fq = Signal(signed(EW), name="fe_fk"), Signal(signed(EW), name="fe_fq")
        # v in two banks of LUT RAM: the front end fills one while the chain's feed reads the other
        # (heads: a ring of three, a token's v read in its chain after the next token's take)
        v_banks = tree.add("v_banks", BeatBanks(M, d, k, banks=3 if self.heads > 1 else 2))
        nx_kn, nx_qn = vreg("nx_kn"), vreg("nx_qn")
        nx_fv, nx_fkn, nx_fqn = (Signal(signed(EW), name=n, reset_less=True) for n in ("nx_fv", "nx_fkn", "nx_fqn"))
        nx_beta, nx_fb = Signal(signed(M), name="nx_beta", reset_less=True), Signal(signed(EW), name="nx_fb", reset_less=True)
        nx_c = Signal(signed(DW), name="nx_c", reset_less=True)
        in_flush, in_last, stray = token_input(m, self, [(fe_kq, fe_fk), (v_banks, nx_fv), (fe_kq, fe_fq)], k,
                                               ~fe_busy & ~next_full)
        with m.If(stray):
            m.d.sync += err.eq(1)
        with m.If(in_flush):
            m.d.sync += [next_full.eq(1), next_flush.eq(1)]
        H = self.heads
        if gated and H > 1:  # the head of the slot coming in: its gamma is the decay unit's
            fe_head = Signal(range(H), name="fe_head")
            with m.If(in_flush | in_last):
                m.d.sync += fe_head.eq(Mux(fe_head == H - 1, 0, fe_head + 1))
            m.d.comb += dc.i_head.eq(reg(fe_head, range(H), "g_head"))
        with m.If(in_last):
            m.d.sync += [fe_busy.eq(1), next_flush.eq(0), nx_beta.eq(self.i_beta), nx_fb.eq(self.i_fbeta)]
        m.d.comb += fe_kq.flip.eq(in_last)
        feed_pair(m, un, (fe_kq, fe_fk), (fe_kq, fe_fq), k, un.interval, in_last, reg, tag)  # k, then q
        out_q = Signal(name="fe_out_q")  # the unit's next output vector is qn (kn's went first)
        osel = beat_index(m, un, B, "fe_ob")
        with m.If(un.o_valid):
            with m.If(un.o_last):
                m.d.sync += out_q.eq(~out_q)
            for b in range(B):
                with m.If(osel == b):
                    with m.If(out_q):
                        m.d.sync += [nx_qn[b * k + j].eq(un.o_data[j]) for j in range(k)]
                    with m.Else():
                        m.d.sync += [nx_kn[b * k + j].eq(un.o_data[j]) for j in range(k)]
            with m.If(un.o_first):
                with m.If(out_q):
                    m.d.sync += nx_fqn.eq(un.o_frac)
                with m.Else():
                    m.d.sync += nx_fkn.eq(un.o_frac)
        # C = kn . qn as qn's beats come out beside kn's: kn's beats kept in LUT RAM as they come out
        # and read back by the beat counter (a B:1 select of nx_kn into the product's operand register
        # was Gated DeltaNet's critical path), the products, a registered tree, the sum over the beats
        kb = tree.add("kn_beats", BeatBanks(M, d, k))
        kn_out = un.o_valid & ~out_q
        m.d.comb += [kb.w_en.eq(kn_out), kb.flip.eq(kn_out & un.o_last), kb.r_addr.eq(osel)]
        m.d.comb += [kb.w_data[j].eq(un.o_data[j]) for j in range(k)]
        cv, cf, cl = (tag(un.o_valid & out_q, 1, "c0_v"), tag(un.o_first, 1, "c0_f"), tag(un.o_last, 1, "c0_l"))
        cv, cf, cl = tag(cv, 1, "c1_v"), tag(cf, 1, "c1_f"), tag(cl, 1, "c1_l")
        cp = [operand_product(m, un.o_data[j], kb.r_data[j].as_signed(), f"c1_p{j}", self.dsp) for j in range(k)]
        lv = 0
        while len(cp) > 1:
            lv += 1
            cp = [reg(cp[j] + cp[j + 1] if j + 1 < len(cp) else cp[j], signed(DW), f"c{lv + 1}_t{j // 2}")
                  for j in range(0, len(cp), 2)]
            cv, cf, cl = tag(cv, 1, f"c{lv + 1}_v"), tag(cf, 1, f"c{lv + 1}_f"), tag(cl, 1, f"c{lv + 1}_l")
        c_acc = Signal(signed(DW), name="c_acc", reset_less=True)
        with m.If(cv):
            m.d.sync += c_acc.eq(Mux(cf, 0, c_acc) + cp[0])
        fe_done = tag(cv & cl, 1, "fe_done")
        if gated:  # gamma, its exponent's change and 1/gamma for the next token, beside the unit
            nx_gam, nx_rg = Signal(signed(P), name="nx_gam"), Signal(signed(P), name="nx_rg")
            nx_delta, nx_rgf = Signal(signed(EW), name="nx_delta"), Signal(signed(EW), name="nx_rgf")
            g_pend, fe_ok = Signal(name="g_pend"), Signal(name="fe_ok")
            # the request registered (g with the token's last beat): the unit's take is not decided
            # from the input handshake in the same cycle; it is idle here (g_pend holds the front end)
            m.d.comb += [dc.i_valid.eq(tag(in_last, 1, "g_req")), dc.i_g.eq(reg(self.i_g, signed(P), "g_in")),
                         dc.i_fg.eq(reg(self.i_fg, signed(EW), "g_fin"))]
            with m.If(in_last):
                m.d.sync += g_pend.eq(1)
            with m.If(dc.o_valid):
                m.d.sync += [g_pend.eq(0), nx_gam.eq(dc.o_gam), nx_delta.eq(dc.o_delta), nx_rg.eq(dc.o_rg),
                             nx_rgf.eq(dc.o_rgf)]
            with m.If(fe_done):
                m.d.sync += fe_ok.eq(1)
            fe_ready = (fe_done | fe_ok) & ~g_pend  # both halves of the front end finished
            with m.If(fe_ready):
                m.d.sync += fe_ok.eq(0)
        else:
            fe_ready = fe_done
        with m.If(fe_ready):
            m.d.sync += [nx_c.eq(c_acc), fe_busy.eq(0), next_full.eq(1)]

        # -- the token sequencer: a pass, then its chain; each head's current token's registers
        # (heads: the token slots go to the heads in turn; a head's registers are rewritten only
        # after its chain, while the other heads' passes run)
        # the vectors have no reset (a reset net to d M flip-flops each); after a reset a head's
        # first pass writes nothing (kn_zero -> knw_zero -> the pass's i_wzero), as if kn were zero

        def per_head(make):
            return [make("" if H == 1 else f"h{h}_") for h in range(H)]

        def on_head(sel, h):
            """The statements for head ``h`` when ``sel`` names it (always, for one head)."""
            return m.If(sel == h) if H > 1 else nullcontext()

        kn, qn, knw, bh = (per_head(lambda p, n=n: vreg(p + n)) for n in ("kn", "qn", "knw", "bh"))
        kn_zero = per_head(lambda p: Signal(init=1, name=p + "kn_zero"))
        knw_zero = per_head(lambda p: Signal(init=1, name=p + "knw_zero"))
        m.d.comb += [pa.i_wzero[h].eq(knw_zero[h]) for h in range(H)]
        cur_fv, fkn, fqn, fknw, fbh = (per_head(lambda p, n=n: Signal(signed(EW), name=p + n, reset_less=True))
                                       for n in ("cur_fv", "fkn", "fqn", "fknw", "fbh"))
        beta = per_head(lambda p: Signal(signed(M), name=p + "beta", reset_less=True))
        fb = per_head(lambda p: Signal(signed(EW), name=p + "fb", reset_less=True))
        cval = per_head(lambda p: Signal(signed(DW), name=p + "c", reset_less=True))
        hflush = per_head(lambda p: Signal(name=p + "cur_flush"))  # the head's pass is a flush's
        for port, vec in ((pa.i_bh, bh), (pa.i_knw, knw), (pa.i_kn, kn), (pa.i_qn, qn)):
            m.d.comb += [port[h * d + i].eq(vec[h][i]) for h in range(H) for i in range(d)]
        if gated:  # each head's current token's gamma; the pass's frame change and bh's exponent in the new frame
            gam = per_head(lambda p: Signal(signed(P), name=p + "gam"))
            ngam = per_head(lambda p: Signal(signed(P + 1), name=p + "ngam"))
            rg = per_head(lambda p: Signal(signed(P), name=p + "rg"))
            rgf, fsh, fbhp = (per_head(lambda p, n=n: Signal(signed(EW), name=p + n)) for n in ("rgf", "fshift", "fbh_p"))
            gamf = per_head(lambda p: Signal(signed(GAMMA_F_WIDTH), name=p + "gamma_f", init=int(self.su.const(1.0).f)))
        for port, val in ((pa.i_fknw, fknw), (pa.i_fkn, fkn), (pa.i_fqn, fqn)) + (
                ((pa.i_fbh, fbhp), (pa.i_fshift, fsh)) if gated else ((pa.i_fbh, fbh),)):
            m.d.comb += [port.eq(val[0])] if H == 1 else [port[h].eq(val[h]) for h in range(H)]
        if gated:  # the read-out's gamma: the written row's head's
            whead = (lambda vals: vals[0]) if H == 1 else (lambda vals: Array(vals)[pa.o_whead])
            m.d.comb += [self.s_gamma.eq(whead(gam)), self.s_gamma_f.eq(whead(gamf))]
        if gated:  # -gamma sk and gamma sq per row as the rows come out (two multipliers, not 2 k)
            skm, sqm = self.sk_gamma, self.sq_gamma
            tree.add("sk_gamma", skm), tree.add("sq_gamma", sqm)
            rhead = (lambda vals: vals[0]) if H == 1 else (lambda vals: Array(vals)[pa.o_head])  # the row's head's
            m.d.comb += [skm.a.eq(pa.o_sk), skm.b.eq(rhead(ngam)), skm.en.eq(1), sqm.a.eq(pa.o_sq),
                         sqm.b.eq(rhead(gam)), sqm.en.eq(1)]
            row_v = register_chain(m, pa.o_valid, 1, skm.latency - 1, "grow_v")  # a cycle ahead
            row_rf = register_chain(m, pa.o_rf, signed(EW), skm.latency, "grow_rf", reset_less=True)
            sk_in, sq_in = skm.p, sqm.p
            pass_done = register_chain(m, pa.done, 1, skm.latency, "gdone")
        else:
            row_v = pa.o_valid_next
            row_rf, sk_in, sq_in, pass_done = pa.o_rf, pa.o_sk, pa.o_sq, pa.done
        # the rows' results in lanes of LUT RAM: sk and rf for the feed, sq and rf for the output chain
        SW, QW = len(sk_in), len(sq_in)
        # (heads: two banks, a pass's rows in the one its chain reads while the next pass writes the other)
        rows_e = tree.add("rows_e", RowLanes(SW + EW, d * min(H, 2), k))
        rows_o = tree.add("rows_o", RowLanes(QW + EW, d * min(H, 2), k))
        row_restart = Signal(name="row_restart")  # one head: every pass's rows from row 0
        for lanes, value in ((rows_e, Cat(sk_in, row_rf)), (rows_o, Cat(sq_in, row_rf))):
            m.d.comb += [lanes.w_next.eq(row_v), lanes.w_restart.eq(row_restart), lanes.w_data.eq(value)]
        o_pending = Signal(name="o_pending")
        e_feed = Signal(range(B + 1), name="e_feed")
        tokens = Signal(32, name="tokens_r")
        m.d.comb += [self.tokens.eq(tokens), self.sat.eq(pa.count)]
        go = Signal(name="pass_go")
        m.d.sync += go.eq(0)
        m.d.comb += pa.start.eq(go)
        # the take, decided in IDLE, in the four cycles after it, a group of registers per cycle
        # from its own enable flip-flop (pipeline.staggered): the scalars first, knw (the pass's prep
        # reads it from its fifth cycle), then kn after knw has its old value, and qn (both read from
        # the pass's read stage on); v's banks flip as the take is decided (the front end writes the
        # next token's v from d/k cycles on, the feed reads this one's in the chain)
        take_now, take_flush = Signal(name="take_now"), Signal(name="take_flush_now")
        m.d.comb += v_banks.flip.eq(take_now)
        t_head = Signal(range(max(H, 2)), name="t_head")  # the head of the next slot
        tk_head = Signal(range(max(H, 2)), name="tk_head")  # the head of the slot being taken
        if H > 1:
            m.d.comb += pa.i_head.eq(tk_head)
        counted = []
        for h in range(H):  # each head's staggered enables its own flip-flops (no head decode at a copy)
            (t_v, z_v), (t_kw, _), (t_k, z_k), (t_q, z_q) = staggered(
                m, take_now & (t_head == h) if H > 1 else take_now, take_flush, 4, "take" if H == 1 else f"h{h}_take")
            counted.append(t_v & ~z_v)
            with m.If(t_v):
                m.d.sync += fknw[h].eq(fkn[h])
                if gated:  # a flush writes the last token's update in its own frame
                    shift = Mux(z_v, 0, nx_delta)
                    m.d.sync += [fsh[h].eq(shift), fbhp[h].eq(fbh[h] + shift)]
                    with m.If(~z_v):
                        m.d.sync += [gam[h].eq(nx_gam), ngam[h].eq(-nx_gam), rg[h].eq(nx_rg), rgf[h].eq(nx_rgf),
                                     gamf[h].eq(gamf[h] + nx_delta)]
                with m.If(~z_v):
                    m.d.sync += [cur_fv[h].eq(nx_fv), beta[h].eq(nx_beta), fb[h].eq(nx_fb), cval[h].eq(nx_c)]
            with m.If(t_kw):
                m.d.sync += [knw[h][i].eq(kn[h][i]) for i in range(d)]
                m.d.sync += knw_zero[h].eq(kn_zero[h])
            # a flush's kn counts as zero (kn_zero: the head's next pass writes nothing) and its
            # reads go unused (no chain), so kn and qn load only a token's (no flag to d M muxes)
            with m.If(t_k):
                m.d.sync += kn_zero[h].eq(z_k)
            with m.If(t_k & ~z_k):
                m.d.sync += [fkn[h].eq(nx_fkn)] + [kn[h][i].eq(nx_kn[i]) for i in range(d)]
            with m.If(t_q & ~z_q):
                m.d.sync += [fqn[h].eq(nx_fqn)] + [qn[h][i].eq(nx_qn[i]) for i in range(d)]
        with m.If(Cat(*counted).any()):
            m.d.sync += tokens.eq(tokens + 1)
        # a head is free from its chain's end (or its flush pass's) to its next take
        free = per_head(lambda p: Signal(init=1, name=p + "head_free"))
        pdone = per_head(lambda p: Signal(name=p + "pass_done"))  # its pass is done, its chain not begun
        c_head = Signal(range(max(H, 2)), name="c_head")  # the head whose chain is next
        d_head = Signal(range(max(H, 2)), name="d_head")  # the head of the next pass to finish
        wrap = lambda x: Mux(x == H - 1, 0, x + 1)
        outstanding = Signal(range(4), name="outstanding")  # passes taken, their chains not ended
        took, ended = Signal(name="took"), Signal(name="chain_ended")
        m.d.sync += outstanding.eq(outstanding + took - ended)
        # one head: the pass after the chain (free); heads: as soon as the pass is ready, its rows'
        # bank free (at most two passes between take and chain end)
        can = (~pa.busy if H == 1 else pa.ready & (outstanding < 2)) & Array(free)[t_head]
        with m.FSM(init="IDLE", name="take_fsm"):
            with m.State("IDLE"):
                with m.If(next_full & can):
                    m.d.sync += [next_full.eq(0), go.eq(1), tk_head.eq(t_head), t_head.eq(wrap(t_head))]
                    for h in range(H):
                        with on_head(t_head, h):
                            m.d.sync += [free[h].eq(0), hflush[h].eq(next_flush)]
                    m.d.comb += [row_restart.eq(H == 1), took.eq(1)]
                    m.d.comb += [take_now.eq(1), take_flush.eq(next_flush)]
                    m.next = "TAKE"
            with m.State("TAKE"):  # the pass takes go and the token's registers their values
                m.next = "IDLE"
        with m.If(pass_done):
            m.d.sync += d_head.eq(wrap(d_head))
            for h in range(H):
                with on_head(d_head, h):
                    m.d.sync += pdone[h].eq(1)
        # the chain's bank of v (heads: a ring of three, the chain's token's) and of the rows
        c_vbank = Signal(range(3), name="c_vbank")
        c_rbank = Signal(name="c_rbank")
        if H > 1:
            m.d.comb += v_banks.r_bank.eq(c_vbank)

        def chain_end():
            m.d.comb += ended.eq(1)
            m.d.sync += [c_head.eq(wrap(c_head)), c_vbank.eq(Mux(c_vbank == 2, 0, c_vbank + 1)), c_rbank.eq(~c_rbank)]
            for h in range(H):
                with on_head(c_head, h):
                    m.d.sync += [free[h].eq(1), pdone[h].eq(0)]

        # the chain's per-token values: one head's registers, or a copy of the chain's head's
        if H == 1:
            ch_fv, ch_beta, ch_fb, ch_c, ch_fkn, ch_fqn = cur_fv[0], beta[0], fb[0], cval[0], fkn[0], fqn[0]
            if gated:
                ch_rg, ch_rgf = rg[0], rgf[0]
        else:
            ch = [(cur_fv, signed(EW), "ch_fv"), (beta, signed(M), "ch_beta"), (fb, signed(EW), "ch_fb"),
                  (cval, signed(DW), "ch_c"), (fkn, signed(EW), "ch_fkn"), (fqn, signed(EW), "ch_fqn")]
            if gated:
                ch += [(rg, signed(P), "ch_rg"), (rgf, signed(EW), "ch_rgf")]
            ch_regs = [Signal(shape, name=n, reset_less=True) for _, shape, n in ch]
            ch_fv, ch_beta, ch_fb, ch_c, ch_fkn, ch_fqn = ch_regs[:6]
            if gated:
                ch_rg, ch_rgf = ch_regs[6:]
        with m.FSM(init="C_IDLE", name="chain_fsm"):
            with m.State("C_IDLE"):
                cur_done, cur_fl = Array(pdone)[c_head], Array(hflush)[c_head]
                if H > 1:  # the chain's head's values, copied every idle cycle (its registers are
                    # rewritten only after its chain; a copy on the start condition was Gated
                    # DeltaNet's two-head limit at 100.6 MHz)
                    m.d.sync += [r.eq(Array(vals)[c_head]) for r, (vals, _, _) in zip(ch_regs, ch)]
                with m.If(cur_done & cur_fl):  # a flush: no chain (bh stays: the next pass writes bh knᵀ with kn = 0)
                    chain_end()
                with m.Elif(cur_done & ~o_pending):  # the previous output must be out before this chain makes one
                    m.d.sync += [o_pending.eq(1), e_feed.eq(B)]
                    m.next = "CHAIN"
            with m.State("CHAIN"):
                with m.If(e_feed != 0):
                    m.d.sync += e_feed.eq(e_feed - 1)
                last = nbh if gated else nb  # bh's last beat
                with m.If(last.o_valid & last.o_last):
                    chain_end()
                    m.next = "C_IDLE"

        # -- chain: e = align(v - sk), be = block(beta e) into bh, o = align(sq + be C)
        # the feed in registered steps: the beat read by a counter that counts up from the LUT RAM
        # lanes (v's banks, the rows' sk and rf) into registers, select_levels(B) of them (the
        # cycle budget's feed_stages), then -sk and rf + fkn (a carry chain each); its flags reset
        eb = Signal(range(max(B, 2)), name="e_beat")
        ebr = Signal(range(max(2 * B, 2)), name="e_row_beat")  # the beat in the rows' lanes (their bank's)
        with m.If(e_feed == 0):
            m.d.sync += [eb.eq(0), ebr.eq(Mux(c_rbank, B, 0) if H > 1 else 0)]
        with m.Else():
            m.d.sync += [eb.eq(eb + 1), ebr.eq(ebr + 1)]
        Lb = select_levels(B)
        ev1 = register_chain(m, e_feed != 0, 1, Lb, "ef1_v")

        def lane_beat(lanes, sel, name):  # a beat of the lanes, as many cycles after sel as select_pipe's
            m.d.comb += lanes.r_addr.eq(sel)
            return [register_chain(m, lanes.r_data[j], lanes.width, Lb, f"{name}{j}", reset_less=True)
                    for j in range(k)]

        v1 = [x.as_signed() for x in lane_beat(v_banks, eb, "ef1_v")]
        e1 = lane_beat(rows_e, ebr if H > 1 else eb, "ef1_sr")
        s1 = [x[:SW].as_signed() for x in e1]
        r1 = [x[SW:].as_signed() for x in e1]
        ev2 = tag(ev1, 1, "ef2_v")
        m.d.comb += [ae.i_valid.eq(ev2), ae.i_f0.eq(ch_fv)]
        for j in range(k):
            m.d.comb += [ae.i_x0[j].eq(reg(v1[j], signed(M), f"ef2_v{j}")),
                         ae.i_x1[j].eq(reg(s1[j], signed(DW + P + 1), f"ef2_s{j}") if gated
                                       else reg(-s1[j], signed(DW + 1), f"ef2_s{j}")),
                         ae.i_f1[j].eq(reg(r1[j] + ch_fkn, signed(EW), f"ef2_r{j}"))]
        bv = tag(ae.o_valid, 1, "be_v")
        bp = [reg(ae.o_data[j] * ch_beta, signed(2 * M), f"be_p{j}") for j in range(k)]
        bfr = reg(ae.o_frac + ch_fb, signed(EW), "be_fr")
        m.d.comb += [nb.i_valid.eq(bv), nb.i_frac.eq(bfr)]
        m.d.comb += [nb.i_data[j].eq(x) for j, x in enumerate(bp)]
        if gated:  # bh = block(be rg) in S's frame (rgf carries gamma's exponent)
            # be rg on a DSP's registers (operand_product: two cycles; the product between fabric
            # registers was Gated DeltaNet's 88.9 MHz limit)
            m.d.comb += [nbh.i_valid.eq(tag(tag(nb.o_valid, 1, "bh_v0"), 1, "bh_v")),
                         nbh.i_frac.eq(reg(reg(nb.o_frac + ch_rgf, signed(EW), "bh_fr0"), signed(EW), "bh_fr"))]
            m.d.comb += [nbh.i_data[j].eq(operand_product(m, nb.o_data[j], ch_rg, f"bh_p{j}", self.dsp))
                         for j in range(k)]
            src_bh = nbh
        else:
            src_bh = nb
        for h in range(H):  # into the chain's head's bh
            with on_head(c_head, h):
                store_beats(m, bh[h], src_bh, k, "bh_beat" if H == 1 else f"h{h}_bh_beat")
                with m.If(src_bh.o_valid & src_bh.o_first):
                    m.d.sync += fbh[h].eq(src_bh.o_frac)
        # o's terms: sq's beat with per-row exponents, be C with one exponent
        ov1 = tag(nb.o_valid, 1, "o1_v")
        # the beat be's normaliser puts out is the feed's counter a fixed number of cycles later
        # (every block of the chain runs without stalls): sq's and rf's beats read from the rows'
        # lanes by it, not by a B:1 select on the stream's own first flag
        osel = register_chain(m, ebr if H > 1 else eb, len(ebr) if H > 1 else len(eb),
                              self.feed_stages + ae.latency + 1 + nb.latency + 1 - Lb, "o_beat_sel", reset_less=True)
        o1 = lane_beat(rows_o, osel, "o1_qr")
        sq1 = [x[:QW].as_signed() for x in o1]
        sf1 = [x[QW:].as_signed() for x in o1]
        fbc1 = Signal(signed(EW), name="o1_fbc")  # be's exponent + fkn + fqn, held from its first beat
        fbc_now = nb.o_frac + ch_fkn + ch_fqn
        with m.If(nb.o_valid & nb.o_first):
            m.d.sync += fbc1.eq(fbc_now)
        # be C three cycles on (C is wider than a DSP: dsp.wide_operand_product), sq's terms beside it
        bc3 = [wide_operand_product(m, nb.o_data[j], ch_c, f"o2_bc{j}", self.dsp) for j in range(k)]
        ov3 = tag(tag(ov1, 1, "o2_v"), 1, "o3_v")
        sq3 = [reg(reg(x, signed(len(sq_in)), f"o2_sq{j}"), signed(len(sq_in)), f"o3_sq{j}") for j, x in enumerate(sq1)]
        sf3 = [reg(reg(x + ch_fqn, signed(EW), f"o2_sf{j}"), signed(EW), f"o3_sf{j}") for j, x in enumerate(sf1)]
        m.d.comb += [ao.i_valid.eq(ov3), ao.i_f1.eq(fbc1)]
        for j in range(k):
            m.d.comb += [ao.i_x0[j].eq(sq3[j]), ao.i_f0[j].eq(sf3[j]), ao.i_x1[j].eq(bc3[j])]

        # -- the output buffer, read out as beats with backpressure
        with m.If(beat_output(m, self, ao, d, k, signed(Wo), signed(EW))):
            m.d.sync += o_pending.eq(0)

        # -- the state read-out: the rows a flush pass writes
        w_flush = hflush[0] if H == 1 else Array(hflush)[pa.o_whead]  # the written row's head's pass
        m.d.comb += [self.s_valid.eq(pa.o_wvalid & w_flush), self.s_first.eq(pa.o_wfirst),
                     self.s_frac.eq(pa.o_wfrac)]
        m.d.comb += [self.s_data[j].eq(pa.o_wdata[j]) for j in range(k)]
        with m.If(tree.quiet):  # no beat in or out while a reset is pending
            m.d.comb += [self.i_ready.eq(0), self.o_valid.eq(0), self.s_valid.eq(0)]
        return tree.build(m)
