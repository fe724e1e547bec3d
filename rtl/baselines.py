"""Linear attention (ELU+1), DeltaNet and Gated DeltaNet as further programs of the VLA core's
pieces, bit-exact with ``specmem.golden.fixed.linear_attention.linear_attention_fixed``,
``specmem.golden.fixed.deltanet.deltanet_fixed`` and
``specmem.golden.fixed.gated_deltanet.gated_deltanet_fixed``.

All three rules keep one ``d x d`` state ``S`` and need no vector chain between tokens: every per-token
scalar comes from the front end, and every per-row result is formed as the row leaves the dot
engines. So a token costs one fused pass (token ``t``'s rank-one write, token ``t+1``'s read)
and its pipeline tail: ``d²/k + L + 5`` cycles in steady state (:meth:`BaselineCore.cycle_budget`).

* **linear**: a token is ``3 d/k`` beats (``k``, ``v``, ``q``). Front end: ``kf = elu1(k)``,
  ``qf = elu1(q)``, ``z += kf`` (exact, saturating), ``den = max(zᵀqf, eps)`` and its reciprocal,
  ``kq = normalize(kfᵀqf)``. Pass: ``S += round(v_i kf_j)``, ``S qf`` of the next token; per row
  ``o_i = narrow((sq_i + round(v_i kq)) / den)``.
* **deltanet**: a token is ``3 d/k + 1`` beats (``k``, ``v``, ``q``, then one beat whose lane 0
  is ``beta`` in its format, the other lanes ignored). Front end: ``kn``, ``qn`` (``x rsqrt
  max(||x||², eps²)``), ``c = normalize(knᵀqn)``. Pass: ``S += round(be_i kn_j)``, ``S kn`` and
  ``S qn`` of the next token; per row ``e_i = narrow(v_i - sk_i)``, ``be_i = narrow(beta e_i)``,
  ``o_i = narrow(sq_i + round(be_i c))``; ``be`` is kept for the next pass's write.
* **gated-deltanet**: DeltaNet with a per-token decay ``g`` (``UQ1.(M-1)``, unsigned). The token's
  scalars ``(beta, g)`` follow ``q`` packed ``k`` per beat (scalar ``j`` in beat ``j // k``, lane
  ``j % k``): one beat with ``beta`` in lane 0 and ``g`` in lane 1 (its bits read unsigned), two
  beats when ``k = 1``. Pass: ``S <- sat(round(g_w S) + round(be_i kn_j))`` with the written
  token's ``g_w`` (one more multiplier per lane, on the RAM's output register, same pipeline
  depth); per row ``e_i = narrow(v_i - g sk_i)``, ``o_i = narrow(g sq_i + (round(be_i c) << fg))``
  with the read token's ``g``, exact products, one rounding each.

Three token slots: the token being written, the token being read, the token the front end fills.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.deltanet import L2_EPS
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.gated_deltanet import gated_deltanet_formats

from .engine import DotEngine, min_signed_width
from .lanes import lane_helpers
from .fixed import materialise, msb_index, requantize, requantize_var, round_shift, round_shift_var, saturate
from .memory import StateMemory
from .params import check_dims
from .presets import check_rtl_preset
from .scalar_unit import ScalarOp, ScalarUnit
from .vector_ops import bit_len, elu1_hw, iv, iv_neg, iv_union, normalize_hw, su_f_range

__all__ = ["BaselineCore", "BASELINE_ALGOS"]

BASELINE_ALGOS = ("linear", "deltanet", "gated-deltanet")


class BaselineCore(wiring.Component):
    """Linear attention (``algo="linear"``), DeltaNet (``algo="deltanet"``) or Gated DeltaNet
    (``algo="gated-deltanet"``) for dimension ``d`` with ``k`` lanes, one preset; ``eps`` as the
    golden model's (default 1e-4 for linear attention, ``L2_EPS`` for the DeltaNets).

    Members: ``x_in`` (``k`` signed input elements per beat, :attr:`beats_per_token` beats a token),
    ``o_out`` (``o[k]`` in the ``o`` format and ``last``, ``d/k`` beats a token), status ``tokens``,
    ``saturations`` (32-bit) and ``busy``.
    """

    SLOTS = 3

    def __init__(self, algo: str, d: int, k: int, preset: str = "legacy-int8", *, eps: float | None = None,
                 in_range: float | None = None):
        if algo not in BASELINE_ALGOS:
            raise ValueError(f"algo: must be one of {BASELINE_ALGOS}, got {algo!r}")
        check_dims(d, k)
        check_rtl_preset(preset)
        eps = (1e-4 if algo == "linear" else L2_EPS) if eps is None else float(eps)
        if not eps > 0:
            raise ValueError(f"eps: must be > 0, got {eps!r}")
        self.algo, self.d, self.k, self.dk, self.preset = algo, d, k, d // k, preset
        self.params = {"eps": eps, "in_range": in_range}
        self.gated = gated = algo == "gated-deltanet"
        if gated:
            self.fmt = F = gated_deltanet_formats(preset, d, in_range)
        else:
            self.fmt = F = formats_for(algo, preset, d, {"in_range": in_range})
        self.dp = dp = Datapath(F, trace=False)
        self.su_config = cfg = F.scalar_unit
        for name in F.tensors:
            if F[name].saturation != "saturate":
                raise ValueError(f"preset: tensor {name} uses {F[name].saturation}; the RTL implements 'saturate'")
        lin = algo == "linear"
        names = ("k", "v", "q") + (() if lin else ("beta",)) + (("g",) if gated else ())
        if len({F[n].width for n in names}) != 1:
            raise ValueError("preset: the input tensors must share one width (one lane width)")
        dk, P = self.dk, cfg.out_bits
        M = F["k"].width
        fin, fs, fsm = F["k"].frac, F["s"].frac, F["s_mul"].frac
        Wsm = F["s_mul"].width
        #: the per-token scalars after k, v, q (beta, then g), packed k per beat
        self.scalars = () if lin else ("beta", "g") if gated else ("beta",)
        self.scalar_beats = -(-len(self.scalars) // k)
        self.beats_per_token = 3 * dk + self.scalar_beats
        if lin:
            ff = F["kf"].frac
            self.key, self.qry, self.fkey = "kf", "qf", ff
            self.e_sq = DotEngine(k, dk, a_width=Wsm, b_width=F["qf"].width)
            self.pass_engines = (self.e_sq,)
            self.F = fsm + ff
            self.eps_den = int(dp.eps_raw(eps, 2 * ff))
            self.zk_max = F["z"].max_raw
            self.den_max = d * self.zk_max * F["qf"].max_raw
            self.den_bits = bit_len(self.den_max)
            self.den_pre = self.den_bits > 62
            self.kq_max = d * F["kf"].max_raw * F["qf"].max_raw
            r_rden = su_f_range(cfg.recip, 2 * ff, self.eps_den, self.den_max)
            nrm = iv((-(P - 2), bit_len(self.kq_max) - (P - 2)), (0, 1))
            r_kq = iv_union(iv(2 * ff, iv_neg(nrm)), (0, 0))
            r_t = iv(fin - self.F, 2 * ff, iv_neg(nrm))  # nonzero kfᵀqf
            self.ml_t = max(0, -r_t[0])
            self.Wnum = max(self.e_sq.acc_width, M + P + self.ml_t + 1) + 1
            W = cfg.work_bits
            r_dfr = (2 * ff - max(0, self.den_bits - W), 2 * ff)
            ranges = [r_rden, r_kq, r_t, iv(self.F, r_rden), r_dfr]
            self.su_in = min(self.den_bits, W if self.den_pre else 62)
            self.su_frac_w = min_signed_width(min(r_dfr), max(r_dfr))
        else:
            fu = F["kn"].frac
            self.key, self.qry, self.fkey = "kn", "qn", fu
            self.e_sk = DotEngine(k, dk, a_width=Wsm, b_width=F["kn"].width)
            self.e_sq = DotEngine(k, dk, a_width=Wsm, b_width=F["qn"].width)
            self.pass_engines = (self.e_sk, self.e_sq)
            self.F = fsm + fu
            self.eps_n = int(dp.eps_raw(eps * eps, 2 * fin))
            self.n2_max = d * (1 << (2 * (M - 1)))
            r_n = su_f_range(cfg.rsqrt, 2 * fin, self.eps_n, self.n2_max)
            r_sn = iv(r_n, fin - fu)
            self.ml_n = min(max(0, -r_sn[0]), F["kn"].width + 1)
            self.c_max = d * (1 << (2 * (F["kn"].width - 1)))
            nrm = iv((-(P - 2), bit_len(self.c_max) - (P - 2)), (0, 1))
            r_c = iv_union(iv(2 * fu, iv_neg(nrm)), (0, 0))
            r_t = iv(F["e"].frac - self.F, 2 * fu, iv_neg(nrm))
            self.ml_t = max(0, -r_t[0])
            ranges = [r_n, r_sn, r_c, r_t, iv(F["e"].frac - self.F, r_c)]
            self.su_in = bit_len(self.n2_max)
            self.su_frac_w = min_signed_width(2 * fin, 2 * fin)
        self.ew = max(min_signed_width(lo, hi) for lo, hi in ranges) + 1
        self.smem = StateMemory(max(d * dk, 2), k, F["s"].width)
        self.su_fe = ScalarUnit(cfg, self.su_in, frac_width=self.su_frac_w)
        self.x_layout = data.ArrayLayout(signed(M), k)
        self.o_layout = data.StructLayout({"o": data.ArrayLayout(signed(F["o"].width), k), "last": 1})
        super().__init__({
            "x_in": In(stream.Signature(self.x_layout)),
            "o_out": Out(stream.Signature(self.o_layout)),
            "tokens": Out(32),
            "saturations": Out(32),
            "busy": Out(1),
        })

    def cycle_budget(self) -> dict:
        """Cycles per token in steady state (the next token already in its slot, the output sink
        ready): the fused pass, its tail, one cycle to pick the next pass. ``floor`` is ``d²/k``."""
        N = self.d * self.dk
        budget = {"pass": N + 3 + self.e_sq.latency + 1, "next": 1}
        budget["total"] = sum(budget.values())
        budget["floor"] = N
        return budget

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        F, dp, cfg = self.fmt, self.dp, self.su_config
        d, k, dk, N = self.d, self.k, self.dk, self.d * self.dk
        lin = self.algo == "linear"
        S = self.SLOTS
        EW, P = self.ew, cfg.out_bits
        rnd = F["s"].rounding
        M = F["k"].width
        fin, fs, fsm, fkey = F["k"].frac, F["s"].frac, F["s_mul"].frac, self.fkey
        Fr = self.F
        DK2, N2 = max(dk, 2), max(N, 2)

        m.submodules.smem = smem = self.smem
        for n, e in enumerate(self.pass_engines):
            m.submodules[f"e{n}"] = e
            m.d.comb += e.o.ready.eq(1)
        m.submodules.su_fe = sfe = self.su_fe

        vec, rd, sel, saddr, incr = lane_helpers(m, k, dk)

        tokens = Signal(32)
        sats = Signal(32)
        m.d.comb += [self.tokens.eq(tokens), self.saturations.eq(sats)]
        sat_flags = []

        # ======================================================================== token slots
        key_mem, key_w = vec("slot_key", signed(F[self.key].width), S * dk)  # kf / kn (k on arrival)
        qry_mem, qry_w = vec("slot_qry", signed(F[self.qry].width), S * dk)  # qf / qn (q on arrival)
        v_mem, v_w = vec("slot_v", signed(M), S * dk)
        slot_full = Signal(S)
        sc1_m = [Signal(signed(P), name=f"sc1_m{s}") for s in range(S)]  # linear: kq   deltanet: c
        sc1_f = [Signal(signed(EW), name=f"sc1_f{s}") for s in range(S)]
        sc2_m = [Signal(signed(max(P, M)), name=f"sc2_m{s}") for s in range(S)]  # linear: 1/den   deltanet: beta
        sc2_f = [Signal(signed(EW), name=f"sc2_f{s}") for s in range(S)]
        if self.gated:  # the decay g, UQ1.(M-1)
            g_slot = [Signal(unsigned(F["g"].width), name=f"g_slot{s}") for s in range(S)]
        wslot = Signal(range(S))

        # ======================================================================== front end
        phase = Signal(2)
        beat = Signal(range(DK2))
        recv_done = Signal()
        r_v, r_phase, r_beat = Signal(), Signal(2), Signal(range(DK2))
        r_x = Signal(self.x_layout)
        fe_recv, fe_scale = Signal(), Signal()
        last_phase = 2 if lin else 3
        phase_end = Mux(phase == 3, self.scalar_beats - 1, dk - 1)
        x_ok = materialise(m, fe_recv & ~recv_done & ~slot_full.bit_select(wslot, 1), "x_ok")
        m.d.comb += self.x_in.ready.eq(x_ok)
        accept = self.x_in.valid & x_ok
        m.d.sync += r_v.eq(accept)
        with m.If(accept):
            m.d.sync += [r_phase.eq(phase), r_beat.eq(beat), r_x.eq(self.x_in.payload)]
            with m.If(beat == phase_end):
                m.d.sync += [beat.eq(0), phase.eq(Mux(phase == last_phase, 0, phase + 1))]
                with m.If(phase == last_phase):
                    m.d.sync += recv_done.eq(1)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        slot_a = saddr(wslot, r_beat)
        first = r_beat == 0
        r_last = r_v & (r_phase == last_phase) & (r_beat == (self.scalar_beats - 1 if not lin else dk - 1))

        def fe_req(x, frac, op, nxt):
            m.d.comb += [sfe.i.valid.eq(1), sfe.i.payload.x.eq(x), sfe.i.payload.frac.eq(frac),
                         sfe.i.payload.op.eq(op)]
            with m.If(sfe.i.ready):
                m.next = nxt

        def set_slot(regs, value):
            for s in range(S):
                with m.If(wslot == s):
                    m.d.sync += regs[s].eq(value)

        if lin:
            ff = F["kf"].frac
            z_mem, z_w = vec("z", unsigned(F["z"].width), dk)
            zmax = self.zk_max
            fe_clr = Signal(range(DK2))
            z_rd = rd(z_mem, r_beat)
            feat = [elu1_hw(m, r_x[l], F["k"], F["kf"], dp, name=f"elu{l}") for l in range(k)]
            z_sum = [materialise(m, z_rd[l] + feat[l][0].as_unsigned(), f"z_sum{l}") for l in range(k)]
            z_new = [materialise(m, Mux(z_sum[l] > zmax, zmax + 1, z_sum[l]), f"z_new{l}", unsigned(F["z"].width))
                     for l in range(k)]
            z_val = [materialise(m, Mux(z_rd[l] > zmax, zmax, z_rd[l]), f"z_val{l}", unsigned(F["z"].width))
                     for l in range(k)]
            kf_rd = rd(key_mem, slot_a)
            den = Signal(unsigned(self.den_bits))
            kqacc = Signal(signed(bit_len(self.kq_max) + 1))  # >= 0
            with m.If(r_v):
                with m.Switch(r_phase):
                    with m.Case(0):
                        m.d.comb += [key_w.addr.eq(slot_a), key_w.en.eq(1), z_w.addr.eq(r_beat), z_w.en.eq(1)]
                        m.d.comb += [key_w.data[l].eq(feat[l][0]) for l in range(k)]
                        m.d.comb += [z_w.data[l].eq(z_new[l]) for l in range(k)]
                    with m.Case(1):
                        m.d.comb += [v_w.addr.eq(slot_a), v_w.en.eq(1), v_w.data.eq(r_x)]
                    with m.Case(2):
                        m.d.comb += [qry_w.addr.eq(slot_a), qry_w.en.eq(1)]
                        m.d.comb += [qry_w.data[l].eq(feat[l][0]) for l in range(k)]
                        m.d.sync += den.eq(Mux(first, 0, den) + sum(z_val[l] * feat[l][0].as_unsigned() for l in range(k)))
                        m.d.sync += kqacc.eq(Mux(first, 0, kqacc) + sum(
                            kf_rd[l].as_unsigned() * feat[l][0].as_unsigned() for l in range(k)))
            for l in range(k):
                sat_flags.append(r_v & ((r_phase == 0) | (r_phase == 2)) & feat[l][1])
                sat_flags.append(r_v & (r_phase == 0) & (z_sum[l] > zmax))
            kq_m, kq_f = normalize_hw(m, kqacc, 2 * ff, P, EW, "kq")
            den_c = materialise(m, Mux(den < self.eps_den, self.eps_den, den), "den_c")
            if self.den_pre:
                W = cfg.work_bits
                top = msb_index(m, den_c, name="den_msb")
                dsh = materialise(m, Mux(top > W - 1, top - (W - 1), 0), "den_sh", unsigned(bit_len(self.den_bits)))
                den_x, den_fr = materialise(m, den_c >> dsh, "den_x"), materialise(m, 2 * ff - dsh, "den_fr")
            else:
                den_x, den_fr = den_c, Const(2 * ff, signed(self.su_frac_w))
            with m.FSM(init="FE_CLEAR", name="fe"):
                with m.State("FE_CLEAR"):  # z = 0 after reset
                    m.d.comb += [z_w.addr.eq(fe_clr), z_w.en.eq(1)] + [z_w.data[l].eq(0) for l in range(k)]
                    m.d.sync += fe_clr.eq(incr(fe_clr, dk - 1))
                    with m.If(fe_clr == dk - 1):
                        m.next = "FE_RECV"
                with m.State("FE_RECV"):
                    m.d.comb += fe_recv.eq(1)
                    with m.If(r_last):
                        m.next = "FE_DEN_REQ"
                with m.State("FE_DEN_REQ"):
                    fe_req(den_x, den_fr, ScalarOp.RECIP, "FE_DEN_WAIT")
                with m.State("FE_DEN_WAIT"):
                    m.d.comb += sfe.o.ready.eq(1)
                    with m.If(sfe.o.valid):
                        set_slot(sc2_m, sfe.o.payload.m)
                        set_slot(sc2_f, sfe.o.payload.f)
                        set_slot(sc1_m, kq_m)
                        set_slot(sc1_f, kq_f)
                        m.next = "FE_DONE"
                with m.State("FE_DONE"):
                    m.d.sync += [slot_full.bit_select(wslot, 1).eq(1), wslot.eq(incr(wslot, S - 1)), recv_done.eq(0)]
                    m.next = "FE_RECV"
        else:
            fu = F["kn"].frac
            nk2 = Signal(unsigned(bit_len(self.n2_max)))
            nq2 = Signal(unsigned(bit_len(self.n2_max)))
            with m.If(r_v):
                with m.Switch(r_phase):
                    with m.Case(0):
                        m.d.comb += [key_w.addr.eq(slot_a), key_w.en.eq(1), key_w.data.eq(r_x)]
                        m.d.sync += nk2.eq(Mux(first, 0, nk2) + sum(r_x[l] * r_x[l] for l in range(k)))
                    with m.Case(1):
                        m.d.comb += [v_w.addr.eq(slot_a), v_w.en.eq(1), v_w.data.eq(r_x)]
                    with m.Case(2):
                        m.d.comb += [qry_w.addr.eq(slot_a), qry_w.en.eq(1), qry_w.data.eq(r_x)]
                        m.d.sync += nq2.eq(Mux(first, 0, nq2) + sum(r_x[l] * r_x[l] for l in range(k)))
                    with m.Case(3):  # scalar j in beat j // k, lane j % k
                        if self.gated:
                            with m.If(r_beat == 0):
                                set_slot(sc2_m, r_x[0])
                            with m.If(r_beat == 1 // k):
                                set_slot(g_slot, r_x[1 % k].as_unsigned())
                        else:
                            set_slot(sc2_m, r_x[0])
            mk, fk = Signal(signed(P)), Signal(signed(EW))
            mq, fq = Signal(signed(P)), Signal(signed(EW))
            sa = Signal(range(DK2))
            cacc = Signal(signed(bit_len(self.c_max) + 1))
            k_rd = rd(key_mem, saddr(wslot, sa))
            q_rd = rd(qry_mem, saddr(wslot, sa))
            kn_sc = [saturate(m, round_shift_var(m, k_rd[l] * mk, fk + (fin - fu), rnd, max_left=self.ml_n,
                                                 name=f"sc_kn{l}"), F["kn"], name=f"sc_kns{l}") for l in range(k)]
            qn_sc = [saturate(m, round_shift_var(m, q_rd[l] * mq, fq + (fin - fu), rnd, max_left=self.ml_n,
                                                 name=f"sc_qn{l}"), F["qn"], name=f"sc_qns{l}") for l in range(k)]
            for l in range(k):
                sat_flags += [fe_scale & kn_sc[l][1], fe_scale & qn_sc[l][1]]
            c_m, c_f = normalize_hw(m, cacc, 2 * fu, P, EW, "c")
            with m.FSM(init="FE_RECV", name="fe"):
                with m.State("FE_RECV"):
                    m.d.comb += fe_recv.eq(1)
                    with m.If(r_last):
                        m.next = "FE_NK_REQ"
                with m.State("FE_NK_REQ"):
                    fe_req(Mux(nk2 < self.eps_n, self.eps_n, nk2), 2 * fin, ScalarOp.RSQRT, "FE_NK_WAIT")
                with m.State("FE_NK_WAIT"):
                    m.d.comb += sfe.o.ready.eq(1)
                    with m.If(sfe.o.valid):
                        m.d.sync += [mk.eq(sfe.o.payload.m), fk.eq(sfe.o.payload.f)]
                        m.next = "FE_NQ_REQ"
                with m.State("FE_NQ_REQ"):
                    fe_req(Mux(nq2 < self.eps_n, self.eps_n, nq2), 2 * fin, ScalarOp.RSQRT, "FE_NQ_WAIT")
                with m.State("FE_NQ_WAIT"):
                    m.d.comb += sfe.o.ready.eq(1)
                    with m.If(sfe.o.valid):
                        m.d.sync += [mq.eq(sfe.o.payload.m), fq.eq(sfe.o.payload.f), sa.eq(0)]
                        m.next = "FE_SCALE"
                with m.State("FE_SCALE"):  # kn, qn in place; knᵀqn
                    m.d.comb += [fe_scale.eq(1), key_w.addr.eq(saddr(wslot, sa)), key_w.en.eq(1),
                                 qry_w.addr.eq(saddr(wslot, sa)), qry_w.en.eq(1)]
                    m.d.comb += [key_w.data[l].eq(kn_sc[l][0]) for l in range(k)]
                    m.d.comb += [qry_w.data[l].eq(qn_sc[l][0]) for l in range(k)]
                    m.d.sync += cacc.eq(Mux(sa == 0, 0, cacc) + sum(kn_sc[l][0] * qn_sc[l][0] for l in range(k)))
                    m.d.sync += sa.eq(incr(sa, dk - 1))
                    with m.If(sa == dk - 1):
                        m.next = "FE_C"
                with m.State("FE_C"):
                    set_slot(sc1_m, c_m)
                    set_slot(sc1_f, c_f)
                    m.next = "FE_DONE"
                with m.State("FE_DONE"):
                    m.d.sync += [slot_full.bit_select(wslot, 1).eq(1), wslot.eq(incr(wslot, S - 1)), recv_done.eq(0)]
                    m.next = "FE_RECV"
        fe_idle = materialise(m, fe_recv & (phase == 0) & (beat == 0) & ~r_v & ~recv_done, "fe_idle")

        # ======================================================================== core
        pslot = Signal(range(S))   # the token being written (its key, and v for linear attention)
        cslot = Signal(range(S))   # the token being read
        pend = Signal()            # a read token awaits its write
        be_mem, be_w = vec("v_be", signed(F["e"].width) if not lin else signed(M), dk, granular=True)

        wr, rdp, p_on, clear, core_idle = Signal(), Signal(), Signal(), Signal(), Signal()
        pn = Signal(range(N2))
        pia, pil, pc = Signal(range(DK2)), Signal(range(max(k, 2))), Signal(range(DK2))
        m.d.comb += [smem.rd_addr.eq(pn), smem.rd_en.eq(p_on)]
        with m.If(p_on | clear):
            m.d.sync += [pn.eq(incr(pn, N - 1)), pc.eq(incr(pc, dk - 1))]
            with m.If(pc == dk - 1):
                m.d.sync += pil.eq(incr(pil, k - 1))
                with m.If(pil == k - 1):
                    m.d.sync += pia.eq(incr(pia, dk - 1))
            with m.If(pn == N - 1):
                m.d.sync += p_on.eq(0)

        # S1: S read; the written token's row value (v_i or be_i) and key lane
        s1_v, s1_n, s1_ia, s1_il, s1_c = (Signal(name="s1_v"), Signal(range(N2), name="s1_n"),
                                         Signal(range(DK2), name="s1_ia"), Signal(range(max(k, 2)), name="s1_il"),
                                         Signal(range(DK2), name="s1_c"))
        m.d.sync += [s1_v.eq(p_on), s1_n.eq(pn), s1_ia.eq(pia), s1_il.eq(pil), s1_c.eq(pc)]
        if lin:
            row_w, frow = sel(rd(v_mem, saddr(pslot, s1_ia)), s1_il, signed(M), "row_w"), fin
        else:
            row_w, frow = sel(rd(be_mem, s1_ia), s1_il, signed(F["e"].width), "row_w"), F["e"].frac
        key_lane = rd(key_mem, saddr(pslot, s1_c))
        s2_v, s2_n, s2_c = Signal(name="s2_v"), Signal(range(N2), name="s2_n"), Signal(range(DK2), name="s2_c")
        s2_S = [Signal(signed(F["s"].width), name=f"s2_S{l}") for l in range(k)]
        s2_p = [Signal(signed(len(row_w) + len(key_lane[0])), name=f"s2_p{l}") for l in range(k)]
        m.d.sync += [s2_v.eq(s1_v), s2_n.eq(s1_n), s2_c.eq(s1_c)]
        m.d.sync += [s2_S[l].eq(smem.rd_data[l]) for l in range(k)]
        m.d.sync += [s2_p[l].eq(row_w * key_lane[l]) for l in range(k)]
        if self.gated:  # g S of the written token, on the RAM's output register
            fg = F["g"].frac
            g_w = Signal(unsigned(F["g"].width), name="g_w")  # registered: pslot settles a cycle before a pass
            m.d.sync += g_w.eq(Array(g_slot)[pslot])
            s2_gS = [Signal(signed(F["s"].width + F["g"].width + 1), name=f"s2_gS{l}") for l in range(k)]
            m.d.sync += [s2_gS[l].eq(smem.rd_data[l] * g_w) for l in range(k)]

        # S2: S + round(row_i key_j), one saturation
        s3_v, s3_n, s3_c = Signal(name="s3_v"), Signal(range(N2), name="s3_n"), Signal(range(DK2), name="s3_c")
        s3_S = [Signal(signed(F["s"].width), name=f"s3_S{l}") for l in range(k)]
        m.d.sync += [s3_v.eq(s2_v), s3_n.eq(s2_n), s3_c.eq(s2_c)]
        for l in range(k):
            ts = round_shift(m, s2_p[l], frow + fkey - fs, rnd, name=f"ws{l}")
            old = round_shift(m, s2_gS[l], fg, rnd, name=f"wg{l}") if self.gated else s2_S[l]
            ns_, os_ = saturate(m, old + ts, F["s"], name=f"ws_sat{l}")
            m.d.sync += s3_S[l].eq(Mux(wr, ns_, s2_S[l]))
            sat_flags.append(s2_v & wr & os_)

        # S3: write back; narrow; engines (the read token's vectors)
        with m.If(clear):
            m.d.comb += [smem.wr_addr.eq(pn), smem.wr_en.eq((1 << k) - 1)] + [smem.wr_data[l].eq(0) for l in range(k)]
        with m.Else():
            m.d.comb += [smem.wr_addr.eq(s3_n), smem.wr_en.eq(Mux(s3_v & wr, (1 << k) - 1, 0))]
            m.d.comb += [smem.wr_data[l].eq(s3_S[l]) for l in range(k)]
        qry_p = rd(qry_mem, saddr(cslot, s3_c))
        key_p = rd(key_mem, saddr(cslot, s3_c))
        feed = s3_v & rdp
        for e in self.pass_engines:
            m.d.comb += [e.i.valid.eq(feed), e.i.payload.first.eq(s3_c == 0), e.i.payload.last.eq(s3_c == dk - 1)]
        for l in range(k):
            sm, so = requantize(m, s3_S[l], fs, F["s_mul"], name=f"sm{l}")
            sat_flags.append(feed & so)
            m.d.comb += [self.e_sq.i.payload.a[l].eq(sm), self.e_sq.i.payload.b[l].eq(qry_p[l])]
            if not lin:
                m.d.comb += [self.e_sk.i.payload.a[l].eq(sm), self.e_sk.i.payload.b[l].eq(key_p[l])]

        # rows out of the engines: the output o_i (and DeltaNet's be_i)
        orow, oia, oil = Signal(range(max(d, 2))), Signal(range(DK2)), Signal(range(max(k, 2)))
        rows_done = Signal()
        row_v = self.e_sq.o.valid
        v_row = sel(rd(v_mem, saddr(cslot, oia)), oil, signed(M), "v_row")
        sq = self.e_sq.o.payload.sum
        s1m = Signal(signed(P))
        s1f = Signal(signed(EW))
        s2m = Signal(signed(max(P, M)))
        s2f = Signal(signed(EW))
        m.d.comb += [s1m.eq(Array(sc1_m)[cslot]), s1f.eq(Array(sc1_f)[cslot]),
                     s2m.eq(Array(sc2_m)[cslot]), s2f.eq(Array(sc2_f)[cslot])]
        if lin:  # o = narrow((sq + round(v kq)) / den)
            t = round_shift_var(m, v_row * s1m, s1f + (fin - Fr), rnd, max_left=self.ml_t, name="o_t")
            num = materialise(m, sq + t, "o_num")
            o_val, o_ovf = requantize_var(m, num * s2m, s2f + Fr, F["o"], name="o_q")
            sat_flags.append(row_v & o_ovf)
        else:  # e = narrow(v - sk); be = narrow(beta e); o = narrow(sq + round(be c))
            fe_, fb = F["e"].frac, F["beta"].frac
            sk = self.e_sk.o.payload.sum
            if self.gated:  # the read token's g: e = narrow(v - g sk), o = narrow(g sq + (round(be c) << fg))
                g_c = Signal(unsigned(F["g"].width), name="g_c")  # registered: rows leave the engines later
                m.d.sync += g_c.eq(Array(g_slot)[cslot])
                e_val, e_ovf = requantize(m, (v_row << (Fr + fg - fin)) - sk * g_c, Fr + fg, F["e"], name="e_q")
            else:
                e_val, e_ovf = requantize(m, (v_row << (Fr - fin)) - sk, Fr, F["e"], name="e_q")
            be_val, be_ovf = requantize(m, e_val * s2m[:M].as_signed(), fe_ + fb, F["e"], name="be_q")
            t = round_shift_var(m, be_val * s1m, s1f + (fe_ - Fr), rnd, max_left=self.ml_t, name="o_t")
            if self.gated:
                o_val, o_ovf = requantize(m, sq * g_c + (t << fg), Fr + fg, F["o"], name="o_q")
            else:
                o_val, o_ovf = requantize(m, sq + t, Fr, F["o"], name="o_q")
            sat_flags += [row_v & e_ovf, row_v & be_ovf, row_v & o_ovf]
            m.d.comb += [be_w.addr.eq(oia), be_w.en.eq(Mux(row_v, 1 << oil, 0))]
            m.d.comb += [be_w.data[l].eq(be_val) for l in range(k)]
        with m.If(row_v):
            m.d.sync += [orow.eq(incr(orow, d - 1)), oil.eq(incr(oil, k - 1))]
            with m.If(oil == k - 1):
                m.d.sync += oia.eq(incr(oia, dk - 1))
            with m.If(orow == d - 1):
                m.d.sync += rows_done.eq(1)

        # output: rows gathered into k-lane beats, a FIFO of two tokens
        # (4 entries at least: a two-entry buffered FIFO has a zero-width inner pointer)
        odepth = max(2 * dk, 4)
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(width=self.o_layout.size, depth=odepth)
        obeat = [Signal(signed(F["o"].width), name=f"obeat{l}") for l in range(k - 1)]
        ofull = Signal(self.o_layout)
        m.d.comb += [ofull.o[l].eq(obeat[l]) for l in range(k - 1)]
        m.d.comb += [ofull.o[k - 1].eq(o_val), ofull.last.eq(orow == d - 1)]
        with m.If(row_v):
            for l in range(k - 1):
                with m.If(oil == l):
                    m.d.sync += obeat[l].eq(o_val)
        m.d.comb += [ofifo.w_data.eq(ofull.as_value()), ofifo.w_en.eq(row_v & (oil == k - 1))]
        m.d.comb += [self.o_out.valid.eq(ofifo.r_rdy), self.o_out.payload.eq(ofifo.r_data), ofifo.r_en.eq(self.o_out.ready)]
        room = ofifo.level <= odepth - dk
        pass_done = materialise(m, ~p_on & ~s1_v & ~s2_v & ~s3_v & (~rdp | rows_done), "pass_done")

        def start_pass(write, read):
            m.d.sync += [wr.eq(write), rdp.eq(read), p_on.eq(1), pn.eq(0), pia.eq(0), pil.eq(0), pc.eq(0),
                         rows_done.eq(0), orow.eq(0), oia.eq(0), oil.eq(0)]

        with m.FSM(init="CLEAR", name="core"):
            with m.State("CLEAR"):  # S = 0 (RAM survives reset)
                m.d.comb += clear.eq(1)
                with m.If(pn == N - 1):
                    m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += core_idle.eq(1)
                with m.If(slot_full.bit_select(cslot, 1) & room):
                    start_pass(0, 1)
                    m.next = "PASS"
            with m.State("PASS"):
                with m.If(pass_done):
                    with m.If(wr):
                        m.d.sync += slot_full.bit_select(pslot, 1).eq(0)
                    with m.If(rdp):
                        m.d.sync += [pend.eq(1), pslot.eq(cslot), cslot.eq(incr(cslot, S - 1)), tokens.eq(tokens + 1)]
                    with m.Else():
                        m.d.sync += pend.eq(0)
                    m.next = "NEXT"
            with m.State("NEXT"):  # fused pass if the next token is in; else write alone
                with m.If(slot_full.bit_select(cslot, 1)):
                    with m.If(room):
                        start_pass(pend, 1)
                        m.next = "PASS"
                with m.Elif(pend):
                    start_pass(1, 0)
                    m.next = "PASS"
                with m.Else():
                    m.next = "IDLE"

        m.d.comb += self.busy.eq(~core_idle | ~fe_idle | (slot_full != 0) | pend | ofifo.r_rdy)
        m.d.sync += sats.eq(sats + sum(sat_flags))
        return m
