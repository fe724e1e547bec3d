"""Linear attention (ELU+1), DeltaNet and Gated DeltaNet as further programs of the VLA core's
pieces, bit-exact with ``specmem.golden.fixed.linear_attention.linear_attention_fixed``,
``specmem.golden.fixed.deltanet.deltanet_fixed`` and
``specmem.golden.fixed.gated_deltanet.gated_deltanet_fixed``.

All three rules keep one ``d x d`` state ``S`` and need no vector chain between tokens: every per-token
scalar comes from the front end, and every per-row result is formed as the row leaves the dot
engines. So a token costs one fused pass (token ``t``'s rank-one write, token ``t+1``'s read).

Pipelined by the timing discipline of ``hardware.md``: every stage is one register after at most
one carry chain or a multiplier's own registers (``dsp``: ``registered``, ``ecp5`` or ``fabric``;
products wider than 18 bits on :class:`~specmem.rtl.dsp.PipelinedMultiplier`), ``S`` is read
through the block RAM's output register (``bram``), the per-row narrowing shifts run on
:class:`~specmem.rtl.shift.RoundShiftVar`, the saturation flags are summed through a registered
tree (:func:`~specmem.rtl.saturate.count_tree`). The pass pipeline (read, products, sum,
saturation, write back, ``s_mul`` rounding and saturation, engines) and the row pipeline after
the engines are deep, but a pass ends once its writes are in: the next token's pass starts
while this token's rows are still in the row pipeline (their slot travels with them), when
``d²/k`` is long enough for the hazards this opens (:attr:`BaselineCore.overlap_rows`). So a
token costs ``d²/k + 6 + Lw`` cycles in steady state (``Lw`` the write multipliers' latency; 265
at d = 32, k = 4), and ``d²/k`` plus the whole pipeline where the pass is too short to overlap
(:meth:`BaselineCore.cycle_budget`).

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

Token slots: the token being written, the token being read, the token the front end fills.
DeltaNet's front end has two parts and four slots: the receiver (``||k||²`` and ``||q||²`` on a
dot engine as the beats arrive, each rsqrt on its own pipelined scalar unit as soon as its sum is
in) and the scaler (``kn``, ``qn`` through pipelined multipliers and shifts, ``knᵀqn`` on a dot
engine, ``c`` on the serial block normaliser); the receiver hands a token over and takes the
next while the scaler works, so the front end keeps up with the pass at d = 16, k = 4.
Linear attention's front end is split the same way (four slots): the receiver (ELU+1, ``z``,
``zᵀqf`` and ``kfᵀqf`` on pipelined multipliers) hands the token to the scalar work (``1/den``
on the pipelined scalar unit, ``kq`` on the block normaliser) and takes the next.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.deltanet import L2_EPS
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.gated_deltanet import gated_deltanet_formats

from .block_norm import SerialBlockNormaliser
from .dsp import PipelinedMultiplier, check_dsp
from .elu import PipelinedElu1
from .engine import DotEngine, min_signed_width
from .lanes import lane_helpers
from .fixed import materialise, msb_index, round_shift, saturate
from .memory import StateMemory
from .params import check_dims
from .presets import check_rtl_preset
from .saturate import count_tree
from .scalar_unit import ScalarOp, ScalarUnit
from .shift import RoundShiftVar
from .vector_ops import bit_len, iv, iv_neg, iv_union, su_f_range

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


    def __init__(self, algo: str, d: int, k: int, preset: str = "legacy-int8", *, eps: float | None = None,
                 in_range: float | None = None, dsp: str = "registered", bram: str = "behavioural"):
        if algo not in BASELINE_ALGOS:
            raise ValueError(f"algo: must be one of {BASELINE_ALGOS}, got {algo!r}")
        check_dims(d, k)
        check_rtl_preset(preset)
        eps = (1e-4 if algo == "linear" else L2_EPS) if eps is None else float(eps)
        if not eps > 0:
            raise ValueError(f"eps: must be > 0, got {eps!r}")
        self.algo, self.d, self.k, self.dk, self.preset = algo, d, k, d // k, preset
        #: token slots: the token being written, the one being read, the one the front end fills
        #: (DeltaNet: two, one receiving and waiting for its norms, one being scaled)
        self.slots = 4
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
        #: the multipliers' register arrangement (rtl/dsp.py): "registered" (portable input, pipeline
        #: and output registers), "ecp5" (the MULT18X18D's own) or "fabric" (one register after)
        check_dsp(dsp, 2, 2)
        self.dsp = dsp
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
            self.e_sq = DotEngine(k, dk, a_width=Wsm, b_width=F["qf"].width, dsp=self.dsp)
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
            self.Wnum = max(self.e_sq.acc_width, M + P + max(self.ml_t, 1) + 1) + 1  # sq + t, t from RoundShiftVar
            W = cfg.work_bits
            r_dfr = (2 * ff - max(0, self.den_bits - W), 2 * ff)
            ranges = [r_rden, r_kq, r_t, iv(self.F, r_rden), r_dfr]
            self.su_in = min(self.den_bits, W if self.den_pre else 62)
            self.su_frac_w = min_signed_width(min(r_dfr), max(r_dfr))
        else:
            fu = F["kn"].frac
            self.key, self.qry, self.fkey = "kn", "qn", fu
            self.e_sk = DotEngine(k, dk, a_width=Wsm, b_width=F["kn"].width, dsp=self.dsp)
            self.e_sq = DotEngine(k, dk, a_width=Wsm, b_width=F["qn"].width, dsp=self.dsp)
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
            self.e_n = DotEngine(k, dk, a_width=M, b_width=M, dsp=self.dsp)  # ||k||², ||q||²
            self.e_c = DotEngine(k, dk, a_width=F["kn"].width, b_width=F["qn"].width, dsp=self.dsp)  # knᵀqn
        self.ew = max(min_signed_width(lo, hi) for lo, hi in ranges) + 1
        self.lat = self._latencies()
        # The next pass may start before this pass's rows are out when d²/k is long enough that
        # (a) its write reads be_i after this pass's row i wrote it and (b) a slot the write
        # frees is no longer read by the row pipeline; otherwise it waits for the rows.
        N, Le, L = self.d * dk, self.e_sq.latency, self.lat
        self.overlap_rows = N >= Le + L["rows"] + 2 and (lin or N >= dk + Le + L["be_at"] + 2)
        #: S read through the block RAM's output register (rtl/memory.py): "behavioural" or "ecp5"
        self.bram = bram
        self.smem = StateMemory(max(d * dk, 2), k, F["s"].width, out_reg=True, style=bram)
        if lin:
            self.su_fe = ScalarUnit(cfg, self.su_in, frac_width=self.su_frac_w, pipelined=True, dsp=self.dsp,
                                    seed_register=True)
            self.scalar_units = (self.su_fe,)
        else:  # rsqrt ||k||² and rsqrt ||q||² side by side
            self.su_k, self.su_q = (ScalarUnit(cfg, self.su_in, frac_width=self.su_frac_w, pipelined=True,
                                               dsp=self.dsp, seed_register=True) for _ in range(2))
            self.scalar_units = (self.su_k, self.su_q)
        self.x_layout = data.ArrayLayout(signed(M), k)
        self.o_layout = data.StructLayout({"o": data.ArrayLayout(signed(F["o"].width), k), "last": 1})
        super().__init__({
            "x_in": In(stream.Signature(self.x_layout)),
            "o_out": Out(stream.Signature(self.o_layout)),
            "tokens": Out(32),
            "saturations": Out(32),
            "busy": Out(1),
        })

    def _latencies(self) -> dict:
        """Cycles of the pipelined multipliers and of the row pipeline (engine output to the
        output register), as :meth:`elaborate` builds them."""
        F, D, M, P = self.fmt, self.dsp, self.fmt["k"].width, self.su_config.out_bits
        lat = PipelinedMultiplier.latency_for
        rw = M if self.algo == "linear" else F["e"].width
        L = {"wk_mul": lat(D, rw, F[self.key].width),
             "gs_mul": lat(D, F["s"].width, F["g"].width + 1) if self.gated else 0}
        L["write_mul"] = max(L["wk_mul"], L["gs_mul"])
        L["scale_mul"] = lat(D, M, P)
        rsv = RoundShiftVar.latency
        if self.algo == "linear":
            L["t_mul"] = lat(D, M, P)
            L["o_mul"] = lat(D, self.Wnum, max(P, M))
            # R1, t's product and shift, sq + t, its product by 1/den and shift, the saturation
            L["rows"] = 1 + L["t_mul"] + rsv + 1 + L["o_mul"] + rsv + 1
        else:
            g = F["g"].width + 1 if self.gated else 0
            L["gk_mul"] = lat(D, self.e_sk.acc_width, g) if self.gated else 0
            L["gq_mul"] = lat(D, self.e_sq.acc_width, g) if self.gated else 0
            L["g_mul"] = max(L["gk_mul"], L["gq_mul"])
            L["be_mul"] = lat(D, F["e"].width, M)
            L["t_mul"] = lat(D, F["e"].width, P)
            # R1, g's products, e (difference, rounding, saturation), be (product, rounding,
            # saturation), t (product, shift), sq + t, its rounding and saturation
            L["be_at"] = 1 + L["g_mul"] + 3 + L["be_mul"] + 2
            L["rows"] = L["be_at"] + L["t_mul"] + rsv + 3
        return L

    def cycle_budget(self) -> dict:
        """Cycles per token in steady state (the next token already in its slot, the output sink
        ready): the fused pass (``N = d²/k`` reads), the write pipeline to the engines, the
        engines, the row pipeline, one cycle to pick the next pass. ``floor`` is ``d²/k``."""
        N = self.d * self.dk
        L = self.lat
        if self.overlap_rows:  # the pass ends when its writes are in
            budget = {"pass": N + 5 + L["write_mul"], "next": 1}
        else:
            budget = {"pass": N + 6 + L["write_mul"] + self.e_sq.latency + L["rows"] + 1, "next": 1}
        budget["total"] = sum(budget.values())
        budget["floor"] = N
        return budget

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        F, dp, cfg = self.fmt, self.dp, self.su_config
        d, k, dk, N = self.d, self.k, self.dk, self.d * self.dk
        lin = self.algo == "linear"
        S = self.slots
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
        if lin:
            m.submodules.su_fe = sfe = self.su_fe

        vec, rd, sel, saddr, incr = lane_helpers(m, k, dk)

        def reg(value, shape, name):
            r = Signal(shape, name=name)
            m.d.sync += r.eq(value)
            return r

        def dly(x, n, name, chain=None):
            for i in range(n):
                x = reg(x, x.shape(), f"{name}_d{i}")
                if chain is not None:
                    chain.append(x)
            return x

        def rreg(value, name):
            value = Value.cast(value)
            return reg(value, value.shape(), name)

        def mul(a, b, name):
            pm = PipelinedMultiplier(len(a), len(b), self.dsp)
            m.submodules[name] = pm
            m.d.comb += [pm.a.eq(a), pm.b.eq(b), pm.en.eq(1)]
            return pm.p

        def as_signed_u(x):  # an unsigned operand as a signed one, one bit wider
            return Cat(x, Const(0, 1)).as_signed()


        tokens = Signal(32)
        sats = Signal(32)
        m.d.comb += [self.tokens.eq(tokens), self.saturations.eq(sats)]
        sat_flags = []

        # ======================================================================== token slots
        key_mem, key_w = vec("slot_key", signed(F[self.key].width), S * dk)  # kf / kn
        qry_mem, qry_w = vec("slot_qry", signed(F[self.qry].width), S * dk)  # qf / qn
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
        fe_recv, fe_scale = Signal(), Signal()  # fe_scale: unread (kept so the measured Verilog stays identical)
        last_phase = 2 if lin else 3
        phase_end = Mux(phase == 3, self.scalar_beats - 1, dk - 1)
        # ready is a register: this cycle's condition, and low after a token's last beat (it may
        # rise a cycle late, never early: only the front end's own progress frees the receiver)
        x_ok = Signal(name="x_ok")
        m.d.comb += self.x_in.ready.eq(x_ok)
        accept = self.x_in.valid & x_ok
        last_in = (phase == last_phase) & (beat == phase_end)
        m.d.sync += x_ok.eq(fe_recv & ~recv_done & ~slot_full.bit_select(wslot, 1) & ~(accept & last_in))
        m.d.sync += [r_v.eq(accept), r_x.eq(self.x_in.payload)]  # r_x is read only with r_v
        with m.If(accept):
            m.d.sync += [r_phase.eq(phase), r_beat.eq(beat)]
            with m.If(beat == phase_end):
                m.d.sync += [beat.eq(0), phase.eq(Mux(phase == last_phase, 0, phase + 1))]
                with m.If(phase == last_phase):
                    m.d.sync += recv_done.eq(1)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        slot_a = saddr(wslot, r_beat)
        first = r_beat == 0

        def fe_req(x, frac, op, nxt):
            m.d.comb += [sfe.i.valid.eq(1), sfe.i.payload.x.eq(x), sfe.i.payload.frac.eq(frac),
                         sfe.i.payload.op.eq(op)]
            with m.If(sfe.i.ready):
                m.next = nxt

        def set_slot(regs, value, slot=wslot):
            for s in range(S):
                with m.If(slot == s):
                    m.d.sync += regs[s].eq(value)

        if lin:
            ff = F["kf"].frac
            z_mem, z_w = vec("z", unsigned(F["z"].width), dk)
            zmax = self.zk_max
            fe_clr = Signal(range(DK2))
            Wz = F["z"].width
            # the registered beat through the pipelined ELU+1 (k and q); the tags and the raw beat
            # (v) ride beside it; z and the slot's kf are read a cycle ahead into registers; the
            # rest happens at the ELU's output (stage F)
            m.submodules.elu = elu = PipelinedElu1(k, F["k"], F["kf"], dp)
            LE = elu.latency
            m.d.comb += [elu.en.eq(1), elu.i_valid.eq(r_v)]
            m.d.comb += [elu.i_data[l].eq(r_x[l]) for l in range(k)]
            f_v = elu.o_valid
            f_phase = dly(r_phase, LE, "f_phase")
            b_pre = dly(r_beat, LE - 1, "f_beat")
            f_beat = dly(b_pre, 1, "f_beatF")
            f_x = reg(r_x, self.x_layout, "f_x_d0")
            for i in range(1, LE):
                f_x = reg(f_x, self.x_layout, f"f_x_d{i}")
            feat = [elu.o_data[l] for l in range(k)]
            z_pre, kf_pre = rd(z_mem, b_pre), rd(key_mem, saddr(wslot, b_pre))
            z_rd = [reg(z_pre[l], unsigned(Wz), f"z_r{l}") for l in range(k)]
            kf_r = [reg(kf_pre[l], kf_pre[l].shape(), f"kf_r{l}") for l in range(k)]
            # z + kf > zmax as kf > zmax - z, the headroom formed a cycle earlier: the compare runs
            # beside the add instead of after it (z holds at most zmax + 1: headroom >= -1)
            z_hr = [reg(zmax - z_pre[l], signed(Wz + 1), f"z_hr{l}") for l in range(k)]
            z_over = [materialise(m, feat[l].as_unsigned() > z_hr[l], f"z_over{l}") for l in range(k)]
            z_sum = [materialise(m, z_rd[l] + feat[l].as_unsigned(), f"z_sum{l}") for l in range(k)]
            z_new = [materialise(m, Mux(z_over[l], zmax + 1, z_sum[l]), f"z_new{l}", unsigned(Wz))
                     for l in range(k)]
            z_val = [materialise(m, Mux(z_rd[l] > zmax, zmax, z_rd[l]), f"z_val{l}", unsigned(Wz))
                     for l in range(k)]
            f_a = saddr(wslot, f_beat)
            with m.If(f_v):
                with m.Switch(f_phase):
                    with m.Case(0):
                        m.d.comb += [key_w.addr.eq(f_a), key_w.en.eq(1), z_w.addr.eq(f_beat), z_w.en.eq(1)]
                        m.d.comb += [key_w.data[l].eq(feat[l]) for l in range(k)]
                        m.d.comb += [z_w.data[l].eq(z_new[l]) for l in range(k)]
                    with m.Case(1):
                        m.d.comb += [v_w.addr.eq(f_a), v_w.en.eq(1), v_w.data.eq(f_x)]
                    with m.Case(2):
                        m.d.comb += [qry_w.addr.eq(f_a), qry_w.en.eq(1)]
                        m.d.comb += [qry_w.data[l].eq(feat[l]) for l in range(k)]
            for l in range(k):
                sat_flags.append(f_v & ((f_phase == 0) | (f_phase == 2)) & elu.o_ovf[l])
                sat_flags.append(f_v & (f_phase == 0) & z_over[l])
            # zᵀqf and kfᵀqf of the q beats: operands registered, pipelined multipliers, a
            # registered adder tree each, one accumulator each
            q_v = reg(f_v & (f_phase == 2), 1, "q_v")
            q_first, q_last = reg(f_beat == 0, 1, "q_first"), reg(f_beat == dk - 1, 1, "q_last")
            qz = [reg(as_signed_u(z_val[l]), signed(Wz + 1), f"qz{l}") for l in range(k)]
            qk = [reg(kf_r[l], kf_r[l].shape(), f"qk{l}") for l in range(k)]
            qq = [reg(feat[l], feat[l].shape(), f"qq{l}") for l in range(k)]
            pz = [mul(qz[l], qq[l], f"fe_mz{l}") for l in range(k)]
            pk = [mul(qk[l], qq[l], f"fe_mk{l}") for l in range(k)]
            LMz = PipelinedMultiplier.latency_for(self.dsp, Wz + 1, len(qq[0]))
            LMk = PipelinedMultiplier.latency_for(self.dsp, len(qk[0]), len(qq[0]))
            LM = max(LMz, LMk)   # the narrower product waits for the wider
            pz = [dly(p, LM - LMz, f"fe_pz{l}") for l, p in enumerate(pz)]
            pk = [dly(p, LM - LMk, f"fe_pk{l}") for l, p in enumerate(pk)]

            def tree(terms, name):
                lv = 0
                while len(terms) > 1:
                    lv += 1
                    terms = [rreg(terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i], f"{name}{lv}_{i // 2}")
                             for i in range(0, len(terms), 2)]
                return terms[0], lv

            sz, TL = tree(pz, "fe_tz")
            sk, _ = tree(pk, "fe_tk")
            a_v, a_first, a_last = (dly(q_v, LM + TL, "fa_v"), dly(q_first, LM + TL, "fa_first"),
                                    dly(q_last, LM + TL, "fa_last"))
            den = Signal(unsigned(self.den_bits))
            kqacc = Signal(signed(bit_len(self.kq_max) + 1))  # >= 0
            den_n = materialise(m, Mux(a_first, 0, den) + sz, "den_n", unsigned(self.den_bits))
            kq_n = materialise(m, Mux(a_first, 0, kqacc) + sk, "kq_n", kqacc.shape())
            sums_in = Signal()  # the token's zᵀqf and kfᵀqf are complete
            with m.If(a_v):
                m.d.sync += [den.eq(den_n), kqacc.eq(kq_n)]
                with m.If(a_last):
                    m.d.sync += sums_in.eq(1)
            # kq = normalize(kfᵀqf) on a one-lane block normaliser, started with the sums
            m.submodules.kq_norm = kq_norm = SerialBlockNormaliser(1, len(kqacc), P, frac_width=EW + 2)
            kq_go = Signal()
            m.d.sync += kq_go.eq(0)
            m.d.comb += [kq_norm.en.eq(1), kq_norm.i_valid.eq(kq_go), kq_norm.i_data[0].eq(kqacc),
                         kq_norm.i_frac.eq(2 * ff)]
            kq_m, kq_f, kq_ok = Signal(signed(P)), Signal(signed(EW)), Signal()
            with m.If(kq_norm.o_valid):
                m.d.sync += [kq_m.eq(kq_norm.o_data[0]), kq_f.eq(Mux(kq_norm.o_data[0] == 0, 0, kq_norm.o_frac)),
                             kq_ok.eq(1)]
            den_c = materialise(m, Mux(den < self.eps_den, self.eps_den, den), "den_c")
            if self.den_pre:
                W = cfg.work_bits
                top = msb_index(m, den_c, name="den_msb")
                dsh = materialise(m, Mux(top > W - 1, top - (W - 1), 0), "den_sh", unsigned(bit_len(self.den_bits)))
                den_x, den_fr = materialise(m, den_c >> dsh, "den_x"), materialise(m, 2 * ff - dsh, "den_fr")
            else:
                den_x, den_fr = den_c, Const(2 * ff, signed(self.su_frac_w))
            den_xr = Signal(den_x.shape(), name="den_xr")
            den_frr = Signal(signed(self.su_frac_w), name="den_frr")
            # the scalar work (1/den on the pipelined scalar unit, kq on its normaliser) of one
            # token while the receiver takes the next into its own slot
            fslot = Signal(range(S))
            fe_pidle = Signal()
            with m.FSM(init="FE_CLEAR", name="fe"):
                with m.State("FE_CLEAR"):  # z = 0 after reset
                    m.d.comb += [z_w.addr.eq(fe_clr), z_w.en.eq(1)] + [z_w.data[l].eq(0) for l in range(k)]
                    m.d.sync += fe_clr.eq(incr(fe_clr, dk - 1))
                    with m.If(fe_clr == dk - 1):
                        m.next = "FE_IDLE"
                with m.State("FE_IDLE"):
                    m.d.comb += [fe_recv.eq(1), fe_pidle.eq(1)]
                    with m.If(sums_in):  # take the token over (eps clamp and pre-truncation registered)
                        m.d.sync += [sums_in.eq(0), kq_go.eq(1), den_xr.eq(den_x), den_frr.eq(den_fr),
                                     fslot.eq(wslot), wslot.eq(incr(wslot, S - 1)), recv_done.eq(0)]
                        m.next = "FE_DEN_REQ"
                with m.State("FE_DEN_REQ"):
                    m.d.comb += fe_recv.eq(1)
                    fe_req(den_xr, den_frr, ScalarOp.RECIP, "FE_DEN_WAIT")
                with m.State("FE_DEN_WAIT"):
                    m.d.comb += [fe_recv.eq(1), sfe.o.ready.eq(1)]
                    with m.If(sfe.o.valid):
                        set_slot(sc2_m, sfe.o.payload.m, fslot)
                        set_slot(sc2_f, sfe.o.payload.f, fslot)
                        m.next = "FE_KQ_WAIT"
                with m.State("FE_KQ_WAIT"):
                    m.d.comb += fe_recv.eq(1)
                    with m.If(kq_ok):
                        set_slot(sc1_m, kq_m, fslot)
                        set_slot(sc1_f, kq_f, fslot)
                        m.d.sync += kq_ok.eq(0)
                        m.next = "FE_DONE"
                with m.State("FE_DONE"):
                    m.d.comb += fe_recv.eq(1)
                    m.d.sync += slot_full.bit_select(fslot, 1).eq(1)
                    m.next = "FE_IDLE"
        else:
            fu = F["kn"].frac
            # k and q as they arrive; kn and qn go to slot_key / slot_qry when scaled
            kraw_mem, kraw_w = vec("slot_kraw", signed(M), S * dk)
            qraw_mem, qraw_w = vec("slot_qraw", signed(M), S * dk)
            with m.If(r_v):
                with m.Switch(r_phase):
                    with m.Case(0):
                        m.d.comb += [kraw_w.addr.eq(slot_a), kraw_w.en.eq(1), kraw_w.data.eq(r_x)]
                    with m.Case(1):
                        m.d.comb += [v_w.addr.eq(slot_a), v_w.en.eq(1), v_w.data.eq(r_x)]
                    with m.Case(2):
                        m.d.comb += [qraw_w.addr.eq(slot_a), qraw_w.en.eq(1), qraw_w.data.eq(r_x)]
                    with m.Case(3):  # scalar j in beat j // k, lane j % k
                        if self.gated:
                            with m.If(r_beat == 0):
                                set_slot(sc2_m, r_x[0])
                            with m.If(r_beat == 1 // k):
                                set_slot(g_slot, r_x[1 % k].as_unsigned())
                        else:
                            set_slot(sc2_m, r_x[0])
            # ||k||² and ||q||² on a dot engine as the beats arrive (k's sum first, then q's);
            # each goes to its own scalar unit as soon as it is in
            m.submodules.e_n = e_n = self.e_n
            m.d.comb += [e_n.i.valid.eq(r_v & ((r_phase == 0) | (r_phase == 2))), e_n.i.payload.first.eq(first),
                         e_n.i.payload.last.eq(r_beat == dk - 1), e_n.o.ready.eq(1)]
            m.d.comb += [e_n.i.payload.a.eq(r_x), e_n.i.payload.b.eq(r_x)]
            n2 = e_n.o.payload.sum.as_unsigned()[:self.su_in]
            clamped = materialise(m, Mux(n2 < self.eps_n, self.eps_n, n2), "n2_clamped")  # max(||x||², eps²)
            n_sel = Signal()  # the next norm is q's
            res = []
            for nm, su, want in (("k", self.su_k, ~n_sel), ("q", self.su_q, n_sel)):
                m.submodules[f"su_{nm}"] = su
                req, x2 = Signal(name=f"n{nm}_req"), Signal(unsigned(self.su_in), name=f"n{nm}2")
                mant, ex, ok = Signal(signed(P), name=f"m{nm}"), Signal(signed(EW), name=f"f{nm}"), Signal(name=f"m{nm}_ok")
                with m.If(e_n.o.valid & want):
                    m.d.sync += [x2.eq(clamped), req.eq(1)]
                m.d.comb += [su.i.valid.eq(req), su.i.payload.x.eq(x2), su.i.payload.frac.eq(2 * fin),
                             su.i.payload.op.eq(ScalarOp.RSQRT), su.o.ready.eq(1)]
                with m.If(req & su.i.ready):
                    m.d.sync += req.eq(0)
                with m.If(su.o.valid):
                    m.d.sync += [mant.eq(su.o.payload.m), ex.eq(su.o.payload.f), ok.eq(1)]
                res.append((mant, ex, ok))
            with m.If(e_n.o.valid):
                m.d.sync += n_sel.eq(~n_sel)
            (mk, fk, mk_ok), (mq, fq, mq_ok) = res

            # the scaler: a token whose norms are in moves here (slot bslot) and frees the receiver
            bslot, b_busy = Signal(range(S)), Signal()
            b_mk, b_fk, b_mq, b_fq = Signal(signed(P)), Signal(signed(EW)), Signal(signed(P)), Signal(signed(EW))
            handoff = materialise(m, recv_done & mk_ok & mq_ok & ~b_busy, "fe_handoff")
            with m.If(handoff):
                m.d.sync += [bslot.eq(wslot), b_busy.eq(1), b_mk.eq(mk), b_fk.eq(fk), b_mq.eq(mq), b_fq.eq(fq),
                             wslot.eq(incr(wslot, S - 1)), recv_done.eq(0), mk_ok.eq(0), mq_ok.eq(0)]
            # kn = sat(round(k mk 2^-(fk + fin - fu))), qn likewise; knᵀqn on a dot engine
            sa, sa_on = Signal(range(DK2)), Signal()
            k_rd = rd(kraw_mem, saddr(bslot, sa))
            q_rd = rd(qraw_mem, saddr(bslot, sa))
            a1_v, a1_a = reg(sa_on, 1, "fa1_v"), reg(sa, range(DK2), "fa1_a")
            a1_k = [reg(k_rd[l], signed(M), f"fa1_k{l}") for l in range(k)]
            a1_q = [reg(q_rd[l], signed(M), f"fa1_q{l}") for l in range(k)]
            Ls = self.lat["scale_mul"]
            sk_rsv = RoundShiftVar(k, M + P, max_left=self.ml_n, shift_width=EW + 2, rounding=rnd)
            sq_rsv = RoundShiftVar(k, M + P, max_left=self.ml_n, shift_width=EW + 2, rounding=rnd)
            m.submodules.kn_rsv, m.submodules.qn_rsv = sk_rsv, sq_rsv
            for rsv, xs, mant, ex, nm in ((sk_rsv, a1_k, b_mk, b_fk, "kn"), (sq_rsv, a1_q, b_mq, b_fq, "qn")):
                m.d.comb += [rsv.en.eq(1), rsv.i_valid.eq(0), rsv.i_shift.eq(reg(ex + (fin - fu), signed(EW + 2),
                                                                                  f"{nm}_sh"))]
                m.d.comb += [rsv.i_data[l].eq(mul(xs[l], mant, f"{nm}_mul{l}")) for l in range(k)]
            a2_v = dly(a1_v, Ls + RoundShiftVar.latency, "fa2_v")
            a2_a = dly(a1_a, Ls + RoundShiftVar.latency, "fa2_a")
            a3_v, a3_a = reg(a2_v, 1, "fa3_v"), reg(a2_a, range(DK2), "fa3_a")
            a3_kn, a3_qn = [], []
            for l in range(k):
                kv, ko = saturate(m, sk_rsv.o_data[l], F["kn"], name=f"sc_kns{l}")
                qv, qo = saturate(m, sq_rsv.o_data[l], F["qn"], name=f"sc_qns{l}")
                a3_kn.append(reg(kv, signed(F["kn"].width), f"fa3_kn{l}"))
                a3_qn.append(reg(qv, signed(F["qn"].width), f"fa3_qn{l}"))
                sat_flags += [a2_v & ko, a2_v & qo]
            with m.If(a3_v):
                m.d.comb += [fe_scale.eq(1), key_w.addr.eq(saddr(bslot, a3_a)), key_w.en.eq(1),
                             qry_w.addr.eq(saddr(bslot, a3_a)), qry_w.en.eq(1)]
                m.d.comb += [key_w.data[l].eq(a3_kn[l]) for l in range(k)]
                m.d.comb += [qry_w.data[l].eq(a3_qn[l]) for l in range(k)]
            m.submodules.e_c = e_c = self.e_c
            m.d.comb += [e_c.i.valid.eq(a3_v), e_c.i.payload.first.eq(a3_a == 0),
                         e_c.i.payload.last.eq(a3_a == dk - 1), e_c.o.ready.eq(1)]
            m.d.comb += [e_c.i.payload.a[l].eq(a3_kn[l]) for l in range(k)]
            m.d.comb += [e_c.i.payload.b[l].eq(a3_qn[l]) for l in range(k)]
            # c = normalize(knᵀqn): the serial block normaliser on one element (its leading one in
            # two steps; one value a token), f = 0 for c = 0
            m.submodules.c_norm = c_norm = SerialBlockNormaliser(1, e_c.acc_width, P, frac_width=EW + 2)
            m.d.comb += [c_norm.en.eq(1), c_norm.i_valid.eq(e_c.o.valid), c_norm.i_data[0].eq(e_c.o.payload.sum),
                         c_norm.i_frac.eq(2 * fu)]
            with m.If(handoff):
                m.d.sync += [sa.eq(0), sa_on.eq(1)]
            with m.Elif(sa_on):
                m.d.sync += sa.eq(incr(sa, dk - 1))
                with m.If(sa == dk - 1):
                    m.d.sync += sa_on.eq(0)
            with m.If(c_norm.o_valid):  # the token is ready for the core
                set_slot(sc1_m, c_norm.o_data[0], bslot)
                set_slot(sc1_f, Mux(c_norm.o_data[0] == 0, 0, c_norm.o_frac), bslot)
                m.d.sync += [slot_full.bit_select(bslot, 1).eq(1), b_busy.eq(0)]
            m.d.comb += fe_recv.eq(1)
        fe_idle = materialise(m, fe_recv & (phase == 0) & (beat == 0) & ~r_v & ~recv_done & ~b_busy & ~n_sel
                              if not lin else fe_pidle & (phase == 0) & (beat == 0) & ~r_v & ~recv_done, "fe_idle")

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

        # The pass and the rows run free (the engines and the output FIFO never stall them):
        # every stage below is one register after at most one carry chain or a multiplier's own
        # registers (hardware.md, "Timing discipline"); control bits travel beside the data.
        # P1: S read (block RAM); the written token's row value (v_i or be_i) and key lane
        s1_v, s1_n, s1_ia, s1_il, s1_c = (Signal(name="s1_v"), Signal(range(N2), name="s1_n"),
                                         Signal(range(DK2), name="s1_ia"), Signal(range(max(k, 2)), name="s1_il"),
                                         Signal(range(DK2), name="s1_c"))
        m.d.sync += [s1_v.eq(p_on), s1_n.eq(pn), s1_ia.eq(pia), s1_il.eq(pil), s1_c.eq(pc)]
        if lin:
            row_w, frow = sel(rd(v_mem, saddr(pslot, s1_ia)), s1_il, signed(M), "row_w"), fin
        else:
            row_w, frow = sel(rd(be_mem, s1_ia), s1_il, signed(F["e"].width), "row_w"), F["e"].frac
        key_lane = rd(key_mem, saddr(pslot, s1_c))
        # P2: the operands registered; S from the RAM's output register
        p2_v, p2_n, p2_c = reg(s1_v, 1, "p2_v"), reg(s1_n, range(N2), "p2_n"), reg(s1_c, range(DK2), "p2_c")
        p2_row = reg(row_w, row_w.shape(), "p2_row")
        p2_key = [reg(key_lane[l], signed(F[self.key].width), f"p2_key{l}") for l in range(k)]
        p2_S = [smem.rd_data[l] for l in range(k)]
        # P3: the products row_i key_j (and g_w S_ij), on pipelined multipliers
        Lw = self.lat["write_mul"]
        prods = [dly(mul(p2_row, p2_key[l], f"wmul{l}"), Lw - self.lat["wk_mul"], f"wp{l}") for l in range(k)]
        if self.gated:  # g S of the written token
            fg = F["g"].frac
            g_w = Signal(unsigned(F["g"].width), name="g_w")  # registered: pslot settles a cycle before a pass
            m.d.sync += g_w.eq(Array(g_slot)[pslot])
            olds = [dly(mul(p2_S[l], as_signed_u(g_w), f"gmul{l}"), Lw - self.lat["gs_mul"], f"gS{l}")
                    for l in range(k)]
        else:
            olds = [dly(p2_S[l], Lw, f"p3_S{l}") for l in range(k)]
        p3_S = [dly(p2_S[l], Lw, f"p3_Sold{l}") for l in range(k)]
        write_valids = [s1_v, p2_v]  # the write's stages: a pass ends when they are empty
        p3_v, p3_n, p3_c = dly(p2_v, Lw, "p3_v", write_valids), dly(p2_n, Lw, "p3_n"), dly(p2_c, Lw, "p3_c")
        # P4: S + round(row_i key_j) (g_w S rounded on its own first)
        p4_sum, p4_S = [], []
        for l in range(k):
            ts = round_shift(m, prods[l], frow + fkey - fs, rnd, name=f"ws{l}")
            old = round_shift(m, olds[l], fg, rnd, name=f"wg{l}") if self.gated else olds[l]
            p4_sum.append(rreg(old + ts, f"p4_sum{l}"))
            p4_S.append(reg(p3_S[l], signed(F["s"].width), f"p4_S{l}"))
        p4_v, p4_n, p4_c = reg(p3_v, 1, "p4_v"), reg(p3_n, range(N2), "p4_n"), reg(p3_c, range(DK2), "p4_c")
        # P5: one saturation; the old value where this pass does not write
        p5_S = []
        for l in range(k):
            ns_, os_ = saturate(m, p4_sum[l], F["s"], name=f"ws_sat{l}")
            p5_S.append(reg(Mux(wr, ns_, p4_S[l]), signed(F["s"].width), f"p5_S{l}"))
            sat_flags.append(p4_v & wr & os_)
        p5_v, p5_n, p5_c = reg(p4_v, 1, "p5_v"), reg(p4_n, range(N2), "p5_n"), reg(p4_c, range(DK2), "p5_c")
        # P6: write back; the new S rounded to s_mul; the read token's vectors read
        with m.If(clear):
            m.d.comb += [smem.wr_addr.eq(pn), smem.wr_en.eq((1 << k) - 1)] + [smem.wr_data[l].eq(0) for l in range(k)]
        with m.Else():
            m.d.comb += [smem.wr_addr.eq(p5_n), smem.wr_en.eq(Mux(p5_v & wr, (1 << k) - 1, 0))]
            m.d.comb += [smem.wr_data[l].eq(p5_S[l]) for l in range(k)]
        p6_r = [rreg(round_shift(m, p5_S[l], fs - fsm, rnd, name=f"smr{l}"), f"p6_r{l}") for l in range(k)]
        qry_p = rd(qry_mem, saddr(cslot, p5_c))
        key_p = rd(key_mem, saddr(cslot, p5_c))
        p6_q = [reg(qry_p[l], signed(F[self.qry].width), f"p6_q{l}") for l in range(k)]
        p6_k = [reg(key_p[l], signed(F[self.key].width), f"p6_k{l}") for l in range(k)]
        p6_v, p6_c = reg(p5_v, 1, "p6_v"), reg(p5_c, range(DK2), "p6_c")
        # P7: saturated to s_mul; the engines take registers only
        p7_sm = []
        for l in range(k):
            sm, so = saturate(m, p6_r[l], F["s_mul"], name=f"sm{l}")
            p7_sm.append(reg(sm, signed(F["s_mul"].width), f"p7_sm{l}"))
            sat_flags.append(p6_v & rdp & so)
        p7_q = [reg(p6_q[l], signed(F[self.qry].width), f"p7_q{l}") for l in range(k)]
        p7_k = [reg(p6_k[l], signed(F[self.key].width), f"p7_k{l}") for l in range(k)]
        p7_v, p7_c = reg(p6_v, 1, "p7_v"), reg(p6_c, range(DK2), "p7_c")
        feed = p7_v & rdp
        for e in self.pass_engines:
            m.d.comb += [e.i.valid.eq(feed), e.i.payload.first.eq(p7_c == 0), e.i.payload.last.eq(p7_c == dk - 1)]
        for l in range(k):
            m.d.comb += [self.e_sq.i.payload.a[l].eq(p7_sm[l]), self.e_sq.i.payload.b[l].eq(p7_q[l])]
            if not lin:
                m.d.comb += [self.e_sk.i.payload.a[l].eq(p7_sm[l]), self.e_sk.i.payload.b[l].eq(p7_k[l])]
        write_valids += [p4_v, p5_v]

        # rows out of the engines (R0): the output o_i (and DeltaNet's be_i), one row per cycle at most
        # (every read pass yields d rows in order, so the row counters and the rows' slot simply
        # wrap; a pass may start while the previous one's rows are in the row pipeline)
        orow, oia, oil = Signal(range(max(d, 2))), Signal(range(DK2)), Signal(range(max(k, 2)))
        rslot = Signal(range(S))  # the slot of the token the rows belong to
        row_v = self.e_sq.o.valid
        with m.If(row_v):
            m.d.sync += [orow.eq(incr(orow, d - 1)), oil.eq(incr(oil, k - 1))]
            with m.If(oil == k - 1):
                m.d.sync += oia.eq(incr(oia, dk - 1))
            with m.If(orow == d - 1):
                m.d.sync += rslot.eq(incr(rslot, S - 1))
        # the row's place travels beside it: tap n is n cycles after R0
        ctl_layout = data.StructLayout({"v": 1, "last": 1, "ia": range(DK2), "il": range(max(k, 2)),
                                        "slot": range(S)})
        ctl0 = Signal(ctl_layout, name="row_ctl0")
        m.d.comb += [ctl0.v.eq(row_v), ctl0.last.eq(orow == d - 1), ctl0.ia.eq(oia), ctl0.il.eq(oil),
                     ctl0.slot.eq(rslot)]
        taps = [ctl0]
        for n in range(self.lat["rows"]):
            taps.append(reg(taps[-1], ctl_layout, f"row_ctl{n + 1}"))
        # R1: sums and v_i registered
        v_row = sel(rd(v_mem, saddr(rslot, oia)), oil, signed(M), "v_row")
        r1_v = reg(v_row, signed(M), "r1_v")
        r1_sq = reg(self.e_sq.o.payload.sum, signed(self.e_sq.acc_width), "r1_sq")

        def scalar(regs, at, name):
            """The row's token's scalar from ``regs``, valid at tap ``at`` (picked by the slot a tap earlier)."""
            return reg(Array(regs)[taps[at - 1].slot], regs[0].shape(), name)
        SW = EW + 2  # the rounding shifts: a scalar exponent plus a constant

        def shift_var(x, shift, max_left, rounding, name):
            """``fixed.round_shift_var`` as the pipelined :class:`RoundShiftVar` (its ``latency`` cycles)."""
            rs = RoundShiftVar(1, len(x), max_left=max_left, shift_width=SW, rounding=rounding)
            m.submodules[name] = rs
            sh = reg(shift, signed(SW), f"{name}_sh")  # constant during the rows
            m.d.comb += [rs.en.eq(1), rs.i_valid.eq(1), rs.i_data[0].eq(x), rs.i_shift.eq(sh)]
            return rs.o_data[0]

        if lin:  # o = narrow((sq + round(v kq)) / den)
            t_at = 1 + self.lat["t_mul"]
            t = shift_var(mul(r1_v, scalar(sc1_m, 1, "s1m"), "t_mul"), scalar(sc1_f, t_at, "s1f") + (fin - Fr),
                          self.ml_t, rnd, "t_rsv")
            n_at = t_at + RoundShiftVar.latency
            num = rreg(dly(r1_sq, n_at - 1, "sq") + t, "o_num")
            assert len(num) == self.Wnum
            o_r = shift_var(mul(num, scalar(sc2_m, n_at + 1, "s2m"), "o_mul"),
                            scalar(sc2_f, n_at + 1 + self.lat["o_mul"], "s2f") + (Fr - F["o"].frac),
                            F["o"].width + 1, F["o"].rounding, "o_rsv")
            o_at = n_at + 1 + self.lat["o_mul"] + RoundShiftVar.latency
        else:  # e = narrow(v - sk); be = narrow(beta e); o = narrow(sq + round(be c))
            fe_, fb = F["e"].frac, F["beta"].frac
            r1_sk = reg(self.e_sk.o.payload.sum, signed(self.e_sk.acc_width), "r1_sk")
            Lg = self.lat["g_mul"]
            if self.gated:  # the read token's g: e = narrow(v - g sk), o = narrow(g sq + (round(be c) << fg))
                g_c = scalar(g_slot, 1, "g_c")
                skg = dly(mul(r1_sk, as_signed_u(g_c), "skg_mul"), Lg - self.lat["gk_mul"], "skg")
                sqg = dly(mul(r1_sq, as_signed_u(g_c), "sqg_mul"), Lg - self.lat["gq_mul"], "sqg")
                e_pre = (dly(r1_v, Lg, "vg") << (Fr + fg - fin)) - skg
                fr_e = Fr + fg
            else:
                sqg, fr_e = r1_sq, Fr
                e_pre = (r1_v << (Fr - fin)) - r1_sk
            e_pre = rreg(e_pre, "e_pre")
            e_r = rreg(round_shift(m, e_pre, fr_e - fe_, F["e"].rounding, name="e_q_r"), "e_r")
            e_val, e_ovf = saturate(m, e_r, F["e"], name="e_q")
            e4 = reg(e_val, signed(F["e"].width), "e4")
            e_at = 4 + Lg
            sat_flags.append(taps[e_at - 1].v & e_ovf)
            bep = mul(e4, scalar(sc2_m, e_at, "s2m")[:M].as_signed(), "be_mul")
            be_r = rreg(round_shift(m, bep, fb, F["e"].rounding, name="be_q_r"), "be_r")
            be_val, be_ovf = saturate(m, be_r, F["e"], name="be_q")
            be6 = reg(be_val, signed(F["e"].width), "be6")
            be_at = e_at + self.lat["be_mul"] + 2
            sat_flags.append(taps[be_at - 1].v & be_ovf)
            bt = taps[be_at]
            m.d.comb += [be_w.addr.eq(bt.ia), be_w.en.eq(Mux(bt.v, 1 << bt.il, 0))]
            m.d.comb += [be_w.data[l].eq(be6) for l in range(k)]
            t_at = be_at + self.lat["t_mul"]
            t = shift_var(mul(be6, scalar(sc1_m, be_at, "s1m"), "t_mul"), scalar(sc1_f, t_at, "s1f") + (fe_ - Fr),
                          self.ml_t, rnd, "t_rsv")
            n_at = be_at + self.lat["t_mul"] + RoundShiftVar.latency
            sq_al = dly(sqg, n_at - 1 - Lg, "sq")
            num = rreg(sq_al + (t << fg) if self.gated else sq_al + t, "o_num")
            o_r = rreg(round_shift(m, num, fr_e - F["o"].frac, F["o"].rounding, name="o_q_r"), "o_r")
            o_at = n_at + 2
        o_val, o_ovf = saturate(m, o_r, F["o"], name="o_q")
        o_fin = reg(o_val, signed(F["o"].width), "o_fin")
        assert o_at + 1 == self.lat["rows"]
        sat_flags.append(taps[o_at].v & o_ovf)
        ot = taps[o_at + 1]
        # read passes whose rows are not all out
        rows_pend, start_read = Signal(2), Signal()
        m.d.sync += rows_pend.eq(rows_pend + start_read - (ot.v & ot.last))

        # output: rows gathered into k-lane beats, a FIFO of two tokens
        # (4 entries at least: a two-entry buffered FIFO has a zero-width inner pointer)
        odepth = max(2 * dk, 4)
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(width=self.o_layout.size, depth=odepth)
        obeat = [Signal(signed(F["o"].width), name=f"obeat{l}") for l in range(k - 1)]
        ofull = Signal(self.o_layout)
        m.d.comb += [ofull.o[l].eq(obeat[l]) for l in range(k - 1)]
        m.d.comb += [ofull.o[k - 1].eq(o_fin), ofull.last.eq(ot.last)]
        with m.If(ot.v):
            for l in range(k - 1):
                with m.If(ot.il == l):
                    m.d.sync += obeat[l].eq(o_fin)
        m.d.comb += [ofifo.w_data.eq(ofull.as_value()), ofifo.w_en.eq(ot.v & (ot.il == k - 1))]
        m.d.comb += [self.o_out.valid.eq(ofifo.r_rdy), self.o_out.payload.eq(ofifo.r_data), ofifo.r_en.eq(self.o_out.ready)]
        # room: output beats not yet promised to a read pass (dk promised when one starts)
        credit = Signal(range(odepth + 1), init=odepth)
        m.d.sync += credit.eq(credit - Mux(start_read, dk, 0) + (ofifo.r_en & ofifo.r_rdy))
        room = credit >= dk
        # a pass ends when its writes are in; with overlap_rows, before its rows are out
        wrote = ~p_on & ~Cat(*write_valids).any()
        pass_done = materialise(m, wrote if self.overlap_rows else wrote & (rows_pend == 0), "pass_done")

        def start_pass(write, read):
            m.d.sync += [wr.eq(write), rdp.eq(read), p_on.eq(1), pn.eq(0), pia.eq(0), pil.eq(0), pc.eq(0)]
            m.d.comb += start_read.eq(read)

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

        sat_count, sat_pending = count_tree(m, sat_flags, name="sat")
        m.d.comb += sats.eq(sat_count)
        m.d.comb += self.busy.eq(~core_idle | ~fe_idle | (slot_full != 0) | pend | ofifo.r_rdy | sat_pending |
                                (rows_pend != 0))
        return m
