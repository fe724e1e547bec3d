"""Variational Linear Attention (spec §2, Algorithm 1), bit-exact with
``specmem.golden.fixed.vla.vla_fixed``: the same k-lane dot-product engines, scalar unit and
state memories as the annihilation core, programmed for VLA's ``d x d`` states ``A`` and ``S``.

Structure (one token; the names are the FSM states of :class:`VLACore`):

* **Front end** (runs ahead of the core; three token slots: one receiving, one being finished,
  one in the core): the token arrives as ``4 d/k`` beats of ``k`` elements, ``k`` then ``v``
  then ``q`` then ``u``. The receiver forms ``kf = elu1(k)`` and ``qf = elu1(q)`` (the model's
  hardware ELU+1: constant multiply, ROM, interpolation, shift), ``zk += kf`` (exact,
  saturating), ``||kf||²``, ``zkᵀqf``, ``||u||²``, then hands the token over and takes the
  next one while the front end's scalar work runs three scalar-unit operations (``rsqrt
  ||kf||²``, ``rsqrt ||u||²`` times the ``u_scale`` constant, ``1 / zkᵀqf``) and two scale
  passes writing ``kh``, then ``un``, into the slot. The front end has ``fe_lanes`` (``b``)
  lanes of its own, a divisor of ``k``: each beat goes through it in ``k/b`` sub-beats (by
  default ``b`` is the fewest lanes that provably keep up with the core, :meth:`VLACore.fe_bound`).
  One multiplier per front-end lane serves all five products (the norms take turns by beat
  phase; the scale passes stop the receiver while they issue).
* **Fused pass** ``PASS`` over ``A`` and ``S`` (``d²/k`` cycles, one address of ``k`` elements of
  each matrix per cycle): element ``(i, j)`` is read, token ``t``'s rank-one updates are applied
  (``A -= round(w_i w_j) [+ eta on the diagonal]``, ``S += round(e_i ra alpha_n_j)`` with
  ``e_i ra`` formed once per row, one saturation each), the element is written back, narrowed
  to the multiplier format and fed to four ``DotEngine``\\ s that compute token ``t+1``'s
  ``A un``, ``A kh``, ``S kh``, ``S qf`` (one row per ``d/k`` cycles). The write of token ``t``
  and the read of token ``t+1`` are one pass. Per row the results land in small vector banks,
  ``e_i = narrow(v_i - (S kh)_i)`` is formed, and ``max |A un|``, ``max |A kh|`` are kept.
* **Vector chain** of token ``t+1``, two vector passes (``chain="two-pass"`` of the model; ``k``
  lanes, ``d/k`` cycles each, the reductions on two more ``DotEngine``\\ s, the two square roots
  on the core's scalar unit): ``VP1`` zsm = block(A un), ``unᵀzsm``, ``zsmᵀkh``, the extremes
  of zsm and ``max |kh|``; ``DELTA``, ``RD_WAIT`` rsqrt(delta); ``BLK_W`` (w's block
  shift), ``CW`` (``wᵀkh = rd (zsmᵀkh)`` normalised, ``max |w|`` from zsm's extremes), ``S3``,
  ``BOUND`` (``|alpha| <= max |A kh| + round(max |w| |wᵀkh|) [+ round(max |kh| eta)]``), ``SH_AL``
  (alpha_n's block shift from the bound); ``VP2`` w = block(zsm rd), alpha = A kh -
  round(w (wᵀkh)) [+ round(eta kh)], alpha_n = alpha shifted by the bound's exponent,
  ``||alpha_n||²`` and ``alpha_nᵀqf`` (it issues while ``BOUND`` and ``SH_AL`` finish: each
  operand is final when its first element reaches it, ``VP2_LEAD``); ``RA_WAIT`` ra =
  rsqrt(||alpha_n||²). Then ``w``, ``e``, ``alpha_n``, ``ra`` are final (``ah = ra alpha_n`` is
  never formed on its own) and the next fused pass starts in the cycle ``ra`` arrives, while a
  second small FSM (``C2P``, ``C2``: c2 = ra (alpha_nᵀqf); ``VP6`` num = S qf + round(e (ahᵀqf));
  ``BLK_O`` the output block exponent) finishes the token beside it,
  and the output stage streams ``o = block(num / zkᵀqf)`` (``d/k`` beats) in the background.
  The chain's element-wise products have no lane multipliers of their own: VP2 forms ``zsm rd``
  on the A write's multipliers and ``w (wᵀkh)`` on the S write's (idle between passes), VP6 uses
  the output stage's (idle until ``BLK_O``).

If the next token is not complete when a fused pass starts, the pass only writes; that token
then runs a read-only pass of its own. After reset the core writes ``A = I/lambda0``, ``S = 0``
(``CLEAR``, ``d²/k`` cycles) and the front end zeroes ``zk``.

Cycles per token in steady state: ``d²/k`` for the pass plus its pipeline tail plus the chain,
``d²/k + 2 d/k + L + 2 Lv + 2 Ls + 43`` (:meth:`VLACore.cycle_budget`, ``docs/rtl.md``). Latency
of an isolated token, last input beat to first output beat: that plus the front end and the
output tail, ``d²/k + 5 d/k + L + 2 Lv + 4 Ls + Lr + 2 Lm + 2 Lt + 101``
(:meth:`VLACore.latency`).

Every narrowing is the model's (same formats from ``golden/fixed/formats.py``, same rounding
points and order); run-time shifts have their ranges derived from the formats at construction
(:meth:`VLACore.ranges`) and every intermediate is wide enough that no shift or sum wraps.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.vla import _check_params

from .block_norm import SerialBlockNormaliser
from .dsp import PipelinedMultiplier
from .elu import PipelinedElu1
from .engine import DotEngine, min_signed_width
from .lanes import lane_helpers
from .fixed import (ShiftCode, abs_value, materialise, msb_index, requantize, round_shift, round_shift_var, saturate,
                    shift_code)
from .memory import StateMemory
from .pipeline import free_register, reduce_tree, register_chain
from .saturate import count_tree
from .presets import check_rtl_preset
from .scalar_unit import ScalarOp, ScalarUnit
from .shift import RoundShiftVar
from .vector_ops import (BLOCK_SHIFT_STAGES, NORMALIZE_STAGES, abs_max_hw, bit_len, block_shift_hw, iv, iv_neg,
                         iv_scale, iv_union, normalize_hw, su_f_range)

__all__ = ["VLACore"]


def check_fe_lanes(k: int, fe_lanes) -> None:
    """``fe_lanes`` (the front end's lanes) must be ``None`` (the default rule) or a divisor of ``k``;
    checked before anything is constructed."""
    if fe_lanes is not None and (isinstance(fe_lanes, bool) or not isinstance(fe_lanes, int) or fe_lanes < 1
                                 or k % fe_lanes):
        raise ValueError(f"fe_lanes: must be a divisor of k ({k}), got {fe_lanes!r}")


class VLACore(wiring.Component):
    """VLA engine for dimension ``d`` with ``k`` lanes per matrix, one preset.

    Parameters are those of ``vla_fixed`` (``lambda0``, ``eps``, ``refresh_period``, ``eta``,
    ``u_scale`` (None: ``1/sqrt(d)``), ``in_range``); ``k`` divides ``d``.

    Members: ``x_in`` (stream of ``k`` signed input elements per beat; a token is ``d/k`` beats
    of ``k``, then of ``v``, ``q``, ``u``), ``o_out`` (stream of ``o[k]``, the token's block
    exponent ``o_frac`` and ``last``; ``o = o_raw 2^-o_frac`` as ``o_raw``/``o_frac`` of the
    model), status ``tokens``, ``saturations``, ``refreshes`` (32-bit) and ``busy``.
    """

    SLOTS = 3
    #: the output FIFO after the output stage's three stages (room for all in flight: full rate)
    OUT_FIFO_DEPTH = 8
    #: register stages from the S2 registers (A, S read; the write products) to S3 (write back)
    WRITE_STAGES = 5
    #: free-running register stages of each scalar step of the chain (its state lasts one more
    #: cycle, which captures the result): at most one carry chain between registers. SH_Z's
    #: operand (max |A un|) is final in the pass's last cycle, a stage before the state starts;
    #: CW's normalisation of ``wᵀkh = rd (zsmᵀkh)`` runs from BLK_W's first cycle (it needs only
    #: rd), so CW's own stages are max |w|'s (the shifters, the rounding add, the compare)
    STEP_STAGES = {"SH_Z": BLOCK_SHIFT_STAGES - 1, "DELTA": 3, "BLK_W": 1 + BLOCK_SHIFT_STAGES, "CW": 3,
                   "S3": 1, "BOUND": 3, "SH_AL": BLOCK_SHIFT_STAGES, "C2P": 1, "C2": NORMALIZE_STAGES,
                   "BLK_O": 1 + BLOCK_SHIFT_STAGES}
    assert 1 + NORMALIZE_STAGES <= 1 + STEP_STAGES["BLK_W"] + STEP_STAGES["CW"]
    #: cycles from VP2's first issue to alpha_n's shifters, where the first element meets
    #: ``sh_al`` (cw at 3, s3 at 4: both are final by then)
    VP2_SH_AL_USE = 8
    #: VP2 issues this many cycles after BOUND starts, so that ``sh_al`` (captured at the end of
    #: SH_AL) is final exactly when its first element needs it
    VP2_LEAD = STEP_STAGES["BOUND"] + 1 + STEP_STAGES["SH_AL"] + 1 - VP2_SH_AL_USE
    assert 1 <= VP2_LEAD <= STEP_STAGES["BOUND"] + 1

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, lambda0: float = 0.1, eps: float = 1e-4,
                 refresh_period: int = 20, eta: float = 1e-3, u_scale: float | None = None,
                 in_range: float | None = None, fe_lanes: int | None = None):
        for name, v in (("d", d), ("k", k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
        if k > d:
            raise ValueError(f"k: must be <= d ({d}), got {k}")
        if d % k:
            raise ValueError(f"d: must be a multiple of k ({k}), got {d}")
        check_fe_lanes(k, fe_lanes)
        check_rtl_preset(preset)
        lambda0, eps, refresh_period, eta, u_scale = _check_params(d, lambda0, eps, refresh_period, eta, u_scale)
        self.d, self.k, self.dk, self.preset = d, k, d // k, preset
        self.params = {"lambda0": lambda0, "eps": eps, "refresh_period": int(refresh_period), "eta": eta,
                       "u_scale": u_scale, "in_range": in_range}
        self.fmt = F = formats_for("vla", preset, d, {"lambda0": lambda0, "u_scale": u_scale, "in_range": in_range})
        self.dp = dp = Datapath(F, trace=False)
        self.su_config = cfg = F.scalar_unit
        for name in F.tensors:
            if F[name].saturation != "saturate":
                raise ValueError(f"preset: tensor {name} uses {F[name].saturation}; the RTL implements 'saturate'")
        if len({F[n] for n in ("k", "v", "q", "u")}) != 1 or F["kf"] != F["qf"]:
            raise ValueError("preset: k, v, q, u must share one input format and kf, qf one feature format")
        Wb = F["zsm"].width
        if not F["w"].width == F["alpha"].width == Wb:
            raise ValueError("preset: the block vectors zsm, w, alpha must share one width")
        if F["s_mul"].frac + F["kh"].frac < F["k"].frac:
            raise ValueError("preset: v must align exactly with S kh (s_mul.frac + kh.frac >= k.frac)")

        # constants of the model
        a0, n0 = F["a"].quantize(1.0 / lambda0)
        eta_raw, n1 = F["a"].quantize(eta)
        self.a0, self.eta_raw, self.sat_init = int(a0), int(eta_raw), int(n0 + n1)
        ff, fin = F["kf"].frac, F["k"].frac
        self.eps_k = int(dp.eps_raw(eps * eps, 2 * ff))
        self.eps_u = int(dp.eps_raw(eps * eps, 2 * fin))
        self.eps_den = int(dp.eps_raw(eps, 2 * ff))
        self.eps_d = int(dp.eps_raw(eps, F["delta"].frac))
        cu = cfg.const(u_scale)
        self.cu_m, self.cu_f = int(cu.m), int(cu.f)

        dk = self.dk
        Wam, Wsm = F["a_mul"].width, F["s_mul"].width
        Wun, Wkh, Wqf = F["un"].width, F["kh"].width, F["qf"].width
        # the read pass: A un, A kh, S kh, S qf (one row per d/k beats); the multipliers' operands
        # (narrowed from the written-back rows) registered first (``dsp="registered"``)
        self.e_au = DotEngine(k, dk, a_width=Wam, b_width=Wun, dsp="registered")
        self.e_ak = DotEngine(k, dk, a_width=Wam, b_width=Wkh, dsp="registered")
        self.e_sk = DotEngine(k, dk, a_width=Wsm, b_width=Wkh, dsp="registered")
        self.e_sq = DotEngine(k, dk, a_width=Wsm, b_width=Wqf, dsp="registered")
        # the vector chain's reductions: unᵀzsm (VP1) and ||alpha_n||² (VP2); zsmᵀkh (VP1) and
        # alpha_nᵀqf (VP2); operands registered (their bank reads and the state's select were the
        # routed critical path at 60.0 MHz with the multiply in the same cycle)
        self.ev = DotEngine(k, dk, a_width=Wb, b_width=max(Wun, Wb), dsp="registered")
        self.ev2 = DotEngine(k, dk, a_width=Wb, b_width=max(Wkh, Wqf), dsp="registered")
        assert self.ev2.latency == self.ev.latency
        self.pass_engines = (self.e_au, self.e_ak, self.e_sk, self.e_sq)
        assert len({e.latency for e in self.pass_engines}) == 1

        # A[i, c k + l] in bank l at address i d/k + c (depth 2 at least: no zero-width address)
        self.amem = StateMemory(max(d * dk, 2), k, F["a"].width)
        self.smem = StateMemory(max(d * dk, 2), k, F["s"].width)
        self._ranges()

        # compact units (a few cycles per rsqrt: two are on the chain) with a leading-one tree and
        # registered Newton multiplies
        self.su = ScalarUnit(cfg, self.su_in, frac_width=self.su_frac_w, lod_tree=True, split_mul=True)
        self.su_fe = ScalarUnit(cfg, self.su_fe_in, frac_width=self.su_fe_frac_w, lod_tree=True, split_mul=True)
        # the front end's pipelines (ELU+1, the shared multipliers, the norms' adder tree, the scale
        # shifter, u's product normaliser): their latencies, for latency()
        kfw = F["kf"].width
        self.mu_norm = SerialBlockNormaliser(1, 2 * cfg.out_bits + 1, cfg.out_bits, frac_width=self.ew + 2)
        self.fe_mul_widths = (max(kfw, F["zk"].width + 1, F["k"].width), max(kfw, F["k"].width, cfg.out_bits))
        self.fe_lat = {"elu": PipelinedElu1.latency,
                       "mul": PipelinedMultiplier.latency_for("registered", *self.fe_mul_widths, input_register=True),
                       "tree": (k - 1).bit_length(), "shift": RoundShiftVar.latency,
                       "mu_norm": self.mu_norm.latency}
        # the front end's lanes: the narrowest that provably keeps up with the core (its serial
        # bound within the core's cycles per token), unless given
        core_total = self.cycle_budget()["total"]
        if fe_lanes is None:
            fe_lanes = next((b for b in range(1, k + 1) if k % b == 0 and self.fe_bound(b) <= core_total), k)
        self.fe_lanes, self.fdb = fe_lanes, d // fe_lanes
        self.fe_lat["fe_tree"] = (fe_lanes - 1).bit_length()

        M = F["k"].width
        self.x_layout = data.ArrayLayout(signed(M), k)
        self.o_layout = data.StructLayout({
            "o": data.ArrayLayout(signed(F["o"].width), k),
            "o_frac": signed(self.o_frac_width),
            "last": 1,
        })
        super().__init__({
            "x_in": In(stream.Signature(self.x_layout)),
            "o_out": Out(stream.Signature(self.o_layout)),
            "tokens": Out(32),
            "saturations": Out(32),
            "refreshes": Out(32),
            "busy": Out(1),
        })

    # ------------------------------------------------------------------------------------------
    def _ranges(self):
        """Widths of every intermediate and ranges of every run-time exponent, from the formats."""
        F, cfg, d = self.fmt, self.su_config, self.d
        P = cfg.out_bits
        Wb = F["zsm"].width
        fin, ff, fh, fun = F["k"].frac, F["kf"].frac, F["kh"].frac, F["un"].frac
        fa, fam, fs, fsm = F["a"].frac, F["a_mul"].frac, F["s"].frac, F["s_mul"].frac
        fe, fd, fan = F["e"].frac, F["delta"].frac, F["alpha"].frac
        Fa, Fs = fam + fh, fsm + ff
        Wd, Wo, Wa = F["delta"].width, F["o"].width, F["a"].width
        Wza, Waa, Wsq = self.e_au.acc_width, self.e_ak.acc_width, self.e_sq.acc_width
        Wcw = self.ev2.acc_width + P  # zsmᵀkh rd.m and alpha_nᵀqf ra.m, exact products
        We = F["e"].width
        r = {}

        def nrm(wacc):  # shift + carry of normalize() on a wacc-bit signed value (nonzero)
            return iv((-(P - 2), wacc - 1 - (P - 2)), (0, 1))

        r["sh_z"] = (-(Wb - 2), Wza - Wb + 2)
        r["fz"] = iv(fam + fun, iv_neg(r["sh_z"]))
        r["s_delta"] = iv(fun - fd, r["fz"])
        self.delta_max = (1 << (Wd - 1)) - 1
        r["rd_f"] = su_f_range(cfg.rsqrt, fd, self.eps_d, self.delta_max)
        r["sh_w"] = (-(Wb - 2), P)
        r["fw"] = iv(r["fz"], r["rd_f"], iv_neg(r["sh_w"]))
        r["cw_f"] = iv_union(iv(r["fz"], r["rd_f"], fh, iv_neg(nrm(Wcw))), (0, 0))
        r["s3"] = iv(r["fw"], r["fz"], r["rd_f"], fh - Fa, iv_neg(nrm(Wcw)))  # nonzero wᵀkh
        r["s3_reg"] = iv_union(r["s3"], iv(r["fw"], -Fa))            # the register also holds the zero case
        r["s_wa"] = iv(iv_scale(r["fw"], 2), -fa)
        self.ml3 = max(0, -r["s3"][0])
        self.c_eta = fa + fh - Fa
        Weta = bit_len(self.eta_raw) + F["kh"].width + max(0, -self.c_eta) + 2
        self.W3 = Wb + P + self.ml3 + 1
        self.Wal = max(Waa, self.W3, Weta) + 2
        r["sh_al"] = (-(Wb - 2), self.Wal - Wb + 2)
        self.na_max = d * ((1 << (Wb - 1)) - 1) ** 2
        r["ra_f"] = su_f_range(cfg.rsqrt, 2 * fan, 0, self.na_max)
        r["s_ws"] = iv(r["ra_f"], fe + fan - fs)   # S += round(e_i (ra alpha_n_j)): its shift
        r["c2_f"] = iv_union(iv(fan, r["ra_f"], ff, iv_neg(nrm(Wcw))), (0, 0))
        r["s6"] = iv(fe - Fs, fan, r["ra_f"], ff, iv_neg(nrm(Wcw)))
        r["s6_reg"] = iv_union(r["s6"], (fe - Fs, fe - Fs))
        self.ml6 = max(0, -r["s6"][0])
        self.W6 = We + P + self.ml6 + 1
        self.Wnum = max(Wsq, self.W6) + 1
        # front end
        M = F["k"].width
        kf_max = F["kf"].max_raw
        self.zk_max = F["zk"].max_raw
        self.nk2_max = d * kf_max * kf_max
        self.nu2_max = d * (1 << (2 * (M - 1)))
        self.den_max = d * self.zk_max * F["qf"].max_raw
        W = cfg.work_bits
        self.den_bits = bit_len(self.den_max)
        self.den_pre = self.den_bits > 62   # the golden unit pre-truncates wider inputs to W bits
        r["rden_f"] = su_f_range(cfg.recip, 2 * ff, self.eps_den, self.den_max)
        r["sh_o"] = (-(Wo - 2), self.Wnum + P - 3 - (Wo - 2) + 1)
        r["o_frac"] = iv(Fs, r["rden_f"], iv_neg(r["sh_o"]))
        r["rk_f"] = su_f_range(cfg.rsqrt, 2 * ff, self.eps_k, self.nk2_max)
        r["s_kh"] = iv(r["rk_f"], ff - fh)
        r["r1_f"] = su_f_range(cfg.rsqrt, 2 * fin, self.eps_u, self.nu2_max)
        r["mu_f"] = iv(r["r1_f"], self.cu_f, iv_neg(iv((P - 2, P - 1), (0, 1))))
        r["s_un"] = iv(r["mu_f"], fin - fun)
        r["den_frac"] = (2 * ff - max(0, self.den_bits - W), 2 * ff)
        self.r = r

        exps = [v for v in r.values()]
        self.ew = max(min_signed_width(lo, hi) for lo, hi in exps) + 1
        self.o_frac_width = min_signed_width(*r["o_frac"])
        # scalar units: core (delta, ||alpha_n||²), front end (||kf||², ||u||², zkᵀqf)
        self.su_in = max(bit_len(self.delta_max), bit_len(self.na_max))
        fr = (fd, 2 * fan)
        self.su_frac_w = min_signed_width(min(fr), max(fr))
        self.su_fe_in = max(bit_len(self.nk2_max), bit_len(self.nu2_max), min(self.den_bits, W if self.den_pre else 62))
        fr = (2 * ff, 2 * fin, *r["den_frac"])
        self.su_fe_frac_w = min_signed_width(min(fr), max(fr))
        # left-shift bounds: exact where the result is not saturated, clamped where it is
        self.ml_delta = min(max(0, -r["s_delta"][0]), Wd + 1)
        self.ml_wa = min(max(0, -r["s_wa"][0]), Wa + 2)
        self.ml_ws = min(max(0, -r["s_ws"][0]), F["s"].width + 2)
        self.ml_kh = min(max(0, -r["s_kh"][0]), F["kh"].width + 1)
        self.ml_un = min(max(0, -r["s_un"][0]), F["un"].width + 1)

    def ranges(self) -> dict:
        """Run-time exponent ranges ``{name: (lo, hi)}`` and the widths derived from them."""
        return {"exponents": dict(self.r), "exp_width": self.ew, "alpha_width": self.Wal, "num_width": self.Wnum,
                "o_frac_width": self.o_frac_width, "den_width": self.den_bits}

    # ------------------------------------------------------------------------------------------
    def cycle_budget(self) -> dict:
        """Cycles per token in steady state (the next token already in its slot, the output sink
        always ready), phase by phase from the first cycle of one fused pass to the first cycle of
        the next; ``total`` is what ``tests/rtl/test_vla.py`` measures. ``floor`` is ``d²/k``."""
        dk, N = self.dk, self.d * self.dk
        L, Lv = self.e_au.latency, self.ev.latency
        Ls = self.su.latency[ScalarOp.RSQRT]
        st = self.STEP_STAGES
        budget = {
            # issue N addresses; S1, S2, the write stages to S3 (write back, narrow, engine input);
            # engine latency; the rows' two register stages (R1, R2);
            # the cycle that sees the last row captured; block(A un)'s shift (SH_Z) up to its
            # capture cycle, in which VP1 issues its first element (sh_z is used a cycle later)
            "pass": N + 2 + self.WRITE_STAGES + L + 2 + 1 + st["SH_Z"],
            # issue d/k; the last element's X, X2 and register cycles; the engines' latency
            "vp1_zsm": dk + 3 + Lv,
            # DELTA (its stages, then the capture and the request), then RD_WAIT for the unit's latency
            "delta_rsqrt": 1 + st["DELTA"] + Ls,
            # BLK_W, CW, S3: each its stages, then the capture; BOUND's first VP2_LEAD cycles
            # (BOUND and SH_AL finish while VP2 issues)
            "alpha_bound": sum(1 + st[n] for n in ("BLK_W", "CW", "S3")) + self.VP2_LEAD,
            # issue d/k; then w (X, X2, register), w cw on the S-write multipliers, alpha (four
            # stages), alpha_n (two) into the engines; their latency
            "vp2_alpha": dk + 10 + Lv,
            # RA_WAIT for the unit's latency (VP2's last cycle requests); its last cycle launches
            # the next pass, the output tail (c2, VP6, BLK_O) beside it
            "rsqrt_alpha": Ls,
        }
        budget["total"] = sum(budget.values())
        budget["floor"] = N
        return budget

    def latency(self) -> dict:
        """Latency of an isolated token (the core idle, i.e. ``busy`` low, when its first beat
        arrives; the output sink ready): cycles from the clock edge accepting its last input beat
        (the last ``u`` beat) to the edge transferring its first output beat. The beats before
        the last may come at any rate (the front end consumes each as it arrives); refresh
        tokens take the same time (the refresh changes values, not the schedule), and so does
        every input (the scalar units' latencies do not depend on the operand).

        ``parts`` (they sum to ``full``):

        * ``fe_norms`` ``k/b - 1 + Le + Lm + Lb + 2`` (``b`` = ``fe_lanes``): the last beat's last
          sub-beat (``k/b`` of ``b`` lanes each), registered, through the ELU+1 pipeline (``Le`` = 9;
          the ``u`` sub-beats ride beside it), the shared multipliers (``Lm``), the adder tree
          (``Lb = ceil(log2 b)``) and the accumulator (``||u||²``); ``FE_IDLE`` sees it.
        * ``fe_rsqrt_kf``, ``fe_rsqrt_u`` (``1 + Ls``), ``fe_recip_den`` (``1 + Lr``): each a
          request cycle (``FE_*_REQ``), then the front-end scalar unit's latency (``FE_*_WAIT``).
        * ``fe_mu_norm`` ``Ln + 1``: ``rsqrt(||u||²) u_scale`` normalised (``FE_NU_NORM``; ``Ln`` = 9,
          the one-lane block normaliser).
        * ``fe_scale`` ``2 d/b + Lm + 8``: ``FE_SCALE_GRANT`` (the receiver stopped, no sub-beat in
          flight), ``kh``, then ``un`` (one issue pass each: the front end has one multiplier per
          lane), then the last through the multiplier, the rounding shifter (6) and the saturation
          register into the slot (``FE_SCALE_WAIT``).
        * ``fe_done_idle`` 2: ``FE_DONE`` marks the slot full; the sequencer's ``IDLE`` starts a
          read-only pass.
        * ``pass_and_chain``: from the pass's first cycle to ``GO``, exactly
          :meth:`cycle_budget`'s ``total`` (the read-only pass has the fused pass's timing).
        * ``c2`` 8: the output tail's ``C2P`` and ``C2`` (``c2 = ra (alpha_nᵀqf)``'s product and
          normalisation, their stages and captures).
        * ``vp6_num`` ``d/k + 5 + Lt``: the output tail's vector pass (with a max: ``Lt`` =
          ``ceil(log2 k)`` levels of its registered tree) beside the write pass.
        * ``blk_o`` ``1 + STEP_STAGES['BLK_O']`` (6): the output block exponent's stages and its
          capture.
        * ``out_stages`` 4: the first element issues (``num`` read, the product), its product
          and then its rounded shift are registered, the FIFO's output register takes it;
          ``o_out.valid`` rises.
        * ``first_beat`` 1: that cycle, ended by the edge transferring the beat.

        In closed form (``L``, ``Lv`` the pass and vector engines' latencies, ``Ls``/``Lr`` the
        scalar units' rsqrt/recip latencies, the front end's and the core's being equal):
        ``d²/k + 3 d/k + 2 d/b + k/b - 1 + L + 2 Lv + 4 Ls + Lr + 2 Lm + Lt + Lb + 101``, i.e.
        ``cycle_budget()['total'] + d/k + 2 d/b + k/b - 1 + 2 Ls + Lr + 2 Lm + Lt + Lb + 58``.
        """
        dk, fl = self.dk, self.fe_lat
        Ls, Lr = self.su_fe.latency[ScalarOp.RSQRT], self.su_fe.latency[ScalarOp.RECIP]
        parts = {
            "fe_norms": self.k // self.fe_lanes - 1 + fl["elu"] + fl["mul"] + fl["fe_tree"] + 2,
            "fe_rsqrt_kf": 1 + Ls,
            "fe_rsqrt_u": 1 + Ls,
            "fe_mu_norm": fl["mu_norm"] + 1,
            "fe_recip_den": 1 + Lr,
            "fe_scale": 1 + 2 * self.fdb + fl["mul"] + fl["shift"] + 1,
            "fe_done_idle": 2,
            "pass_and_chain": self.cycle_budget()["total"],
            "c2": 2 + self.STEP_STAGES["C2P"] + self.STEP_STAGES["C2"],
            "vp6_num": dk + 5 + fl["tree"],
            "blk_o": 1 + self.STEP_STAGES["BLK_O"],
            "out_stages": 4,
            "first_beat": 1,
        }
        return {"full": sum(parts.values()), "parts": parts}

    @property
    def cycles_per_token(self) -> int:
        return self.cycle_budget()["total"]

    def fe_bound(self, b: int | None = None) -> int:
        """An upper bound on the front end's cycles per token with ``b`` lanes (default: its own),
        inputs at full rate: everything it does for a token added up as if nothing overlapped:
        receiving (4 d/b sub-beats, and the last beat's k/b), the norms' pipeline, the three
        scalar requests and u's normaliser, the scale passes (2 d/b) and their pipeline, the
        grant's drain of sub-beats in flight, FE_DONE and FE_IDLE. Where it is within
        :meth:`cycle_budget`'s ``total`` the core, not the front end, sets the token rate."""
        b = self.fe_lanes if b is None else b
        fl, db, kb = self.fe_lat, self.d // b, self.k // b
        Ls, Lr = self.su_fe.latency[ScalarOp.RSQRT], self.su_fe.latency[ScalarOp.RECIP]
        return (4 * db + kb + fl["elu"] + fl["mul"] + (b - 1).bit_length() + 3
                + 2 * (1 + Ls) + fl["mu_norm"] + 1 + 1 + Lr
                + 1 + 2 * db + fl["mul"] + fl["shift"] + 1 + fl["elu"] + kb + 2 + 2)


    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        F, dp, cfg = self.fmt, self.dp, self.su_config
        d, k, dk, N = self.d, self.k, self.dk, self.d * self.dk
        S = self.SLOTS
        EW = self.ew
        P = cfg.out_bits
        rnd = F["a"].rounding
        fin, ff, fh, fun = F["k"].frac, F["kf"].frac, F["kh"].frac, F["un"].frac
        fa, fam, fs, fsm = F["a"].frac, F["a_mul"].frac, F["s"].frac, F["s_mul"].frac
        fe, fd, fan = F["e"].frac, F["delta"].frac, F["alpha"].frac
        Fa, Fs = fam + fh, fsm + ff
        M = F["k"].width
        Wb, Wo, We = F["zsm"].width, F["o"].width, F["e"].width
        Wza, Waa, _, Wsq = (e.acc_width for e in self.pass_engines)
        Wal, Wnum = self.Wal, self.Wnum
        RP = self.params["refresh_period"]
        DK2, N2 = max(dk, 2), max(N, 2)  # counter ranges (never zero-width)

        m.submodules.amem = amem = self.amem
        m.submodules.smem = smem = self.smem
        for n, e in zip(("e_au", "e_ak", "e_sk", "e_sq"), self.pass_engines):
            m.submodules[n] = e
            m.d.comb += e.o.ready.eq(1)
        e_au, e_ak, e_sk, e_sq = self.pass_engines
        m.submodules.ev = ev = self.ev
        m.submodules.ev2 = ev2 = self.ev2
        m.d.comb += [ev.o.ready.eq(1), ev2.o.ready.eq(1)]
        m.submodules.su = su = self.su
        m.submodules.su_fe = sfe = self.su_fe

        vec, rd, sel, saddr, incr = lane_helpers(m, k, dk)
        # the front end's own b-lane vectors (d/b beats): kf, u and zk, which only it reads
        b, db, kb = self.fe_lanes, self.fdb, self.k // self.fe_lanes
        vecb, _, _, saddrb, _ = lane_helpers(m, b, db)

        # status
        tokens = Signal(32)
        sats = Signal(32)  # the model also counts saturations of its constants (the counter's init)
        refreshes = Signal(32)
        m.d.comb += [self.tokens.eq(tokens), self.saturations.eq(sats), self.refreshes.eq(refreshes)]
        sat_flags = []  # one-bit saturation events of this cycle, each already gated

        # ======================================================================== token slots
        # the receiver writes kf, u, qf, v; the scale passes read kf, u and write kh, un; the core
        # reads kh, un, qf, v (three slots: receiving, finishing, in the core). The front end works
        # on b lanes: kf and u are its own (b-lane words); it writes kh, un, qf, v b lanes at a time
        # into the core's k-lane words (row i // k, lanes of group (i % k) // b of element i)
        kf_mem, kf_w = vecb("slot_kf", signed(M), S * db)
        u_mem, u_w = vecb("slot_u", signed(M), S * db)
        kh_mem, kh_w = vec("slot_kh", signed(M), S * dk, granular=True)
        un_mem, un_w = vec("slot_un", signed(M), S * dk, granular=True)
        qf_mem, qf_w = vec("slot_qf", signed(M), S * dk, granular=True)
        v_mem, v_w = vec("slot_v", signed(M), S * dk, granular=True)

        def write_group(port, row, grp, lanes):  # b lanes into group grp of a k-lane word
            m.d.comb += [port.addr.eq(row), port.en.eq(Const((1 << b) - 1, k) << (grp * b))]
            m.d.comb += [port.data[l].eq(lanes[l % b]) for l in range(k)]
        slot_full = Signal(S)
        rden_m = [Signal(signed(P), name=f"rden_m{s}") for s in range(S)]
        rden_f = [Signal(signed(EW), name=f"rden_f{s}") for s in range(S)]
        cslot = Signal(range(S))   # the token the core reads and runs the chain of
        rslot = Signal(range(S))   # the token the receiver fills
        pslot = Signal(range(S))   # the token whose scalars and scale passes the front end runs

        # ======================================================================== front end
        DB2, KB2 = max(db, 2), max(kb, 2)   # counter ranges (never zero-width)
        zk_mem, zk_w = vecb("zk", unsigned(F["zk"].width), db)
        zmax = self.zk_max
        phase = Signal(2)
        beat = Signal(range(DK2))
        recv_done = Signal()
        # each accepted beat goes out in k/b sub-beats (r_v, r_x: the sub-beat registered; r_beat
        # its b-lane beat within the tensor, r_row and r_grp its k-lane word and lane group)
        r_v, r_phase, r_beat = Signal(), Signal(2), Signal(range(DB2))
        r_row, r_grp = Signal(range(DK2)), Signal(range(KB2))
        r_x = Signal(data.ArrayLayout(signed(M), b), reset_less=True)
        r_buf = Signal(self.x_layout, reset_less=True)   # the accepted beat's sub-beats still to go
        r_cnt = Signal(range(KB2))                 # how many
        e_phase, e_beat = Signal(2), Signal(range(DB2))   # the next sub-beat's tensor and beat
        e_row, e_grp = Signal(range(DK2)), Signal(range(KB2))
        nk2 = Signal(unsigned(bit_len(self.nk2_max)))
        nu2 = Signal(unsigned(bit_len(self.nu2_max)))
        den = Signal(unsigned(self.den_bits))
        # the norms as the front end's scalar work takes them over (the receiver goes on)
        pk2, pu2, pden = Signal.like(nk2, name="p_nk2"), Signal.like(nu2, name="p_nu2"), Signal.like(den, name="p_den")
        rk_m, rk_f = Signal(signed(P)), Signal(signed(EW))
        mu_m, mu_f = Signal(signed(P)), Signal(signed(EW))
        sa = Signal(range(DB2))   # the scale passes' b-lane beat, its k-lane word and group
        sa_row, sa_grp = Signal(range(DK2)), Signal(range(KB2))
        fe_clr = Signal(range(DB2))
        fe_clear, fe_scale_k, fe_scale_u = Signal(), Signal(), Signal()
        fe_mul_req = Signal()   # the scale passes want the front end's multipliers: no new beats
        fe_pidle = Signal()

        x_ok = materialise(m, ~fe_clear & ~fe_mul_req & ~recv_done & ~slot_full.bit_select(rslot, 1)
                           & (r_cnt == 0), "x_ok")
        m.d.comb += self.x_in.ready.eq(x_ok)
        accept = self.x_in.valid & x_ok
        emit = materialise(m, accept | (r_cnt != 0), "fe_emit")
        m.d.sync += r_v.eq(emit)
        with m.If(emit):
            m.d.sync += [r_phase.eq(e_phase), r_beat.eq(e_beat), r_row.eq(e_row), r_grp.eq(e_grp),
                         e_beat.eq(incr(e_beat, db - 1)), e_grp.eq(incr(e_grp, kb - 1))]
            with m.If(e_beat == db - 1):
                m.d.sync += e_phase.eq(e_phase + 1)
            with m.If(e_grp == kb - 1):
                m.d.sync += e_row.eq(incr(e_row, dk - 1))
        with m.If(accept):
            m.d.sync += [r_x[l].eq(self.x_in.payload[l]) for l in range(b)]
            m.d.sync += [r_buf[l].eq(self.x_in.payload[l + b]) for l in range(k - b)]
            m.d.sync += r_cnt.eq(kb - 1)
        with m.Elif(r_cnt != 0):
            m.d.sync += [r_x[l].eq(r_buf[l]) for l in range(b)]
            m.d.sync += [r_buf[l].eq(r_buf[l + b]) for l in range(k - b)]
            m.d.sync += r_cnt.eq(r_cnt - 1)
        with m.If(accept):
            with m.If(beat == dk - 1):
                m.d.sync += [beat.eq(0), phase.eq(phase + 1)]
                with m.If(phase == 3):
                    m.d.sync += recv_done.eq(1)
            with m.Else():
                m.d.sync += beat.eq(beat + 1)

        def delay(sig, shape, n, name):
            return register_chain(m, sig, shape, n, name)

        def ddelay(sig, shape, n, name):  # data a valid tag qualifies: no reset
            return register_chain(m, sig, shape, n, name, reset_less=True)

        # the registered beat through the pipelined ELU+1 (used for k and q); its tags and the raw
        # beat (for v and u) ride beside it; everything below happens at the ELU's output (stage F)
        m.submodules.elu = elu = PipelinedElu1(b, F["k"], F["kf"], dp, coded_shift=True)
        LE = elu.latency
        m.d.comb += [elu.en.eq(1), elu.i_valid.eq(r_v)]
        m.d.comb += [elu.i_data[l].eq(r_x[l]) for l in range(b)]
        f_v = elu.o_valid
        f_phase = delay(r_phase, 2, LE, "f_phase")
        # zk is read two cycles early into two registers: at d/b >= 64 words Yosys puts the bank in
        # block RAM, whose read (one register absorbed into it) then feeding zk's add, clamp and
        # write-back was the routed critical path at 60.3 MHz (d = 64, k = 4). A q sub-beat reads
        # the word its token's k sub-beat wrote 2 d/b sub-beats before: two cycles early needs
        # d/b >= 2 (at d/b = 1, one cycle, as before)
        early = 2 if db >= 2 else 1
        b_pre2 = delay(r_beat, range(DB2), LE - early, "f_beat")
        b_pre = delay(b_pre2, range(DB2), early - 1, "f_beatP")
        f_beat = delay(b_pre, range(DB2), 1, "f_beatF")
        f_row = delay(r_row, range(DK2), LE, "f_row")
        f_grp = delay(r_grp, range(KB2), LE, "f_grp")
        f_x = ddelay(r_x, r_x.shape(), LE, "f_x")
        feat = [elu.o_data[l] for l in range(b)]
        Wz = F["zk"].width
        zk_pre = [ddelay(x, x.shape(), early - 1, f"zk_p{l}") for l, x in enumerate(rd(zk_mem, b_pre2))]
        zk_rd = [Signal(unsigned(Wz), name=f"zk_r{l}", reset_less=True) for l in range(b)]
        m.d.sync += [zk_rd[l].eq(zk_pre[l]) for l in range(b)]
        zk_sum = [materialise(m, zk_rd[l] + feat[l].as_unsigned(), f"zk_sum{l}") for l in range(b)]
        zk_new = [materialise(m, Mux(zk_sum[l] > zmax, zmax + 1, zk_sum[l]), f"zk_new{l}", unsigned(Wz))
                  for l in range(b)]
        zk_val = [materialise(m, Mux(zk_rd[l] > zmax, zmax, zk_rd[l]), f"zk_val{l}", unsigned(Wz)) for l in range(b)]
        slot_a = saddrb(rslot, f_beat)  # the receiver's slot changes only after its last beat's norms
        slot_row = saddr(rslot, f_row)
        with m.If(f_v):
            with m.Switch(f_phase):
                with m.Case(0):  # k: kf, zk += kf (exact, saturating)
                    m.d.comb += [kf_w.addr.eq(slot_a), kf_w.en.eq(1), zk_w.addr.eq(f_beat), zk_w.en.eq(1)]
                    m.d.comb += [kf_w.data[l].eq(feat[l]) for l in range(b)]
                    m.d.comb += [zk_w.data[l].eq(zk_new[l]) for l in range(b)]
                with m.Case(1):  # v
                    write_group(v_w, slot_row, f_grp, [f_x[l] for l in range(b)])
                with m.Case(2):  # q: qf
                    write_group(qf_w, slot_row, f_grp, feat)
                with m.Case(3):  # u
                    m.d.comb += [u_w.addr.eq(slot_a), u_w.en.eq(1), u_w.data.eq(f_x)]
        for l in range(b):
            sat_flags.append(f_v & ((f_phase == 0) | (f_phase == 2)) & elu.o_ovf[l])
            sat_flags.append(f_v & (f_phase == 0) & (zk_sum[l] > zmax))

        # one pipelined multiplier per lane for the whole front end: ||kf||² (k beats), zkᵀqf
        # (q beats), ||u||² (u beats) at stage F, and the scale passes (kh, then un) of the token
        # before; a scale pass starts only when no accepted beat is on its way to stage F
        # (``infl``, counted from each sub-beat's emission, so it is nonzero while an accepted beat
        # still has sub-beats to go), and no beat is accepted while it issues
        infl = Signal(range(LE + 3))
        m.d.sync += infl.eq(infl + emit - f_v)
        kf_rd = rd(kf_mem, saddrb(pslot, sa))
        u_rd = rd(u_mem, saddrb(pslot, sa))
        Wfa, Wfb = self.fe_mul_widths
        fe_a = [Signal(signed(Wfa), name=f"fe_a{l}") for l in range(b)]
        fe_b = [Signal(signed(Wfb), name=f"fe_b{l}") for l in range(b)]
        for l in range(b):
            with m.If(fe_scale_k):
                m.d.comb += [fe_a[l].eq(kf_rd[l]), fe_b[l].eq(rk_m)]
            with m.Elif(fe_scale_u):
                m.d.comb += [fe_a[l].eq(u_rd[l]), fe_b[l].eq(mu_m)]
            with m.Elif(f_phase == 2):
                m.d.comb += [fe_a[l].eq(zk_val[l]), fe_b[l].eq(feat[l])]
            with m.Elif(f_phase == 3):
                m.d.comb += [fe_a[l].eq(f_x[l]), fe_b[l].eq(f_x[l])]
            with m.Else():
                m.d.comb += [fe_a[l].eq(feat[l]), fe_b[l].eq(feat[l])]
        fe_mul = []
        for l in range(b):
            mm = PipelinedMultiplier(Wfa, Wfb, input_register=True)
            m.submodules[f"fe_mul{l}"] = mm
            m.d.comb += [mm.a.eq(fe_a[l]), mm.b.eq(fe_b[l]), mm.en.eq(1)]
            fe_mul.append(mm)
        LM = fe_mul[0].latency
        fe_p = [mm.p for mm in fe_mul]
        # the norms: a registered adder tree over the lanes, then one accumulator
        n_v = delay(f_v & (f_phase != 1), 1, LM, "n_v")
        n_ph = delay(f_phase, 2, LM, "n_ph")
        n_first = delay(f_beat == 0, 1, LM, "n_first")
        n_last = delay(f_beat == db - 1, 1, LM, "n_last")
        terms, TL = list(fe_p), 0
        while len(terms) > 1:
            TL += 1
            sums = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
            terms = [ddelay(t, t.shape(), 1, f"fe_t{TL}_{i}") for i, t in enumerate(sums)]
        t_v, t_ph = delay(n_v, 1, TL, "t_v"), delay(n_ph, 2, TL, "t_ph")
        t_first, t_last = delay(n_first, 1, TL, "t_first"), delay(n_last, 1, TL, "t_last")
        acc = Signal(unsigned(max(bit_len(self.nk2_max), bit_len(self.nu2_max), self.den_bits)), name="fe_acc")
        acc_n = materialise(m, Mux(t_first, 0, acc) + terms[0], "fe_acc_n")
        norms_in = Signal()   # the token's three norms are in (set by its last u beat's sum)
        with m.If(t_v):
            m.d.sync += acc.eq(acc_n)
            with m.If(t_last):
                with m.Switch(t_ph):
                    with m.Case(0):
                        m.d.sync += nk2.eq(acc_n)
                    with m.Case(2):
                        m.d.sync += den.eq(acc_n)
                    with m.Case(3):
                        m.d.sync += [nu2.eq(acc_n), norms_in.eq(1)]

        # scale passes: kh = kf rsqrt(||kf||²), then un = u (rsqrt(||u||²) u_scale), in place:
        # issue (sa), the multiplier, RoundShiftVar, one saturation into a register, the write
        ml_sc = max(self.ml_kh, self.ml_un, 1)
        sw = max(EW + 2, ml_sc.bit_length() + 2)
        m.submodules.fe_rsv = rsv = RoundShiftVar(b, Wfa + Wfb, max_left=ml_sc, shift_width=sw, rounding=rnd)
        sc_v = delay(fe_scale_k | fe_scale_u, 1, LM, "sc_v")
        sc_u = delay(fe_scale_u, 1, LM, "sc_u")
        sc_a = delay(sa_row, range(DK2), LM, "sc_a")
        sc_g = delay(sa_grp, range(KB2), LM, "sc_g")
        sc_last = delay(fe_scale_u & (sa == db - 1), 1, LM, "sc_last")
        sh_kh = materialise(m, rk_f + (ff - fh), "sh_kh", signed(sw))
        sh_un = materialise(m, mu_f + (fin - fun), "sh_un", signed(sw))
        m.d.comb += [rsv.en.eq(1), rsv.i_valid.eq(sc_v), rsv.i_shift.eq(Mux(sc_u, sh_un, sh_kh))]
        m.d.comb += [rsv.i_data[l].eq(fe_p[l]) for l in range(b)]
        LR = rsv.latency
        o_u, o_a, o_last = (delay(sc_u, 1, LR, "sco_u"), delay(sc_a, range(DK2), LR, "sco_a"),
                            delay(sc_last, 1, LR, "sco_last"))
        o_g = delay(sc_g, range(KB2), LR, "sco_g")
        kh_sc = [saturate(m, rsv.o_data[l], F["kh"], name=f"sc_khs{l}") for l in range(b)]
        un_sc = [saturate(m, rsv.o_data[l], F["un"], name=f"sc_uns{l}") for l in range(b)]
        w_v, w_u = delay(rsv.o_valid, 1, 1, "scw_v"), delay(o_u, 1, 1, "scw_u")
        w_a, w_last = delay(o_a, range(DK2), 1, "scw_a"), delay(o_last, 1, 1, "scw_last")
        w_g = delay(o_g, range(KB2), 1, "scw_g")
        w_kh = [ddelay(kh_sc[l][0], kh_sc[l][0].shape(), 1, f"scw_kh{l}") for l in range(b)]
        w_un = [ddelay(un_sc[l][0], un_sc[l][0].shape(), 1, f"scw_un{l}") for l in range(b)]
        w_okh = [ddelay(kh_sc[l][1], 1, 1, f"scw_okh{l}") for l in range(b)]
        w_oun = [ddelay(un_sc[l][1], 1, 1, f"scw_oun{l}") for l in range(b)]
        with m.If(w_v & ~w_u):
            write_group(kh_w, saddr(pslot, w_a), w_g, w_kh)
        with m.If(w_v & w_u):
            write_group(un_w, saddr(pslot, w_a), w_g, w_un)
        for l in range(b):
            sat_flags += [w_v & ~w_u & w_okh[l], w_v & w_u & w_oun[l]]
        scale_done = w_v & w_last

        # u's two scalars multiplied as the golden ScalarUnit.mul does (one mantissa rounding):
        # the product registered, then normalised on a one-lane block normaliser
        mu_prod = Signal(signed(2 * P + 1), name="mu_prod")
        mu_fr = Signal(signed(EW + 2), name="mu_fr")
        m.submodules.mu_norm = mu_norm = self.mu_norm
        mu_go = Signal()   # a one-cycle start, set by FE_NU_WAIT
        m.d.sync += mu_go.eq(0)
        m.d.comb += [mu_norm.en.eq(1), mu_norm.i_valid.eq(mu_go), mu_norm.i_data[0].eq(mu_prod),
                     mu_norm.i_frac.eq(mu_fr)]

        den_c = materialise(m, Mux(pden < self.eps_den, self.eps_den, pden), "den_c")
        if self.den_pre:  # as the golden unit: keep work_bits significant bits, the shift in frac
            W = cfg.work_bits
            top = msb_index(m, den_c, name="den_msb", tree=True)
            dsh = materialise(m, Mux(top > W - 1, top - (W - 1), 0), "den_sh", unsigned(bit_len(self.den_bits)))
            den_x, den_fr = materialise(m, den_c >> dsh, "den_x"), materialise(m, 2 * ff - dsh, "den_fr")
        else:
            den_x, den_fr = den_c, Const(2 * ff, signed(self.su_fe_frac_w))

        def sa_step():  # the next b-lane beat of the scale passes
            m.d.sync += [sa.eq(incr(sa, db - 1)), sa_grp.eq(incr(sa_grp, kb - 1))]
            with m.If(sa_grp == kb - 1):
                m.d.sync += sa_row.eq(incr(sa_row, dk - 1))

        def fe_req(x, frac, op, nxt):
            m.d.comb += [sfe.i.valid.eq(1), sfe.i.payload.x.eq(x), sfe.i.payload.frac.eq(frac),
                         sfe.i.payload.op.eq(op)]
            with m.If(sfe.i.ready):
                m.next = nxt

        with m.FSM(init="FE_CLEAR", name="fe") as fe_fsm:
            with m.State("FE_CLEAR"):  # zk = 0 after reset
                m.d.comb += [fe_clear.eq(1), zk_w.addr.eq(fe_clr), zk_w.en.eq(1)]
                m.d.comb += [zk_w.data[l].eq(0) for l in range(b)]
                m.d.sync += fe_clr.eq(incr(fe_clr, db - 1))
                with m.If(fe_clr == db - 1):
                    m.next = "FE_IDLE"
            with m.State("FE_IDLE"):
                m.d.comb += fe_pidle.eq(1)
                with m.If(norms_in):  # the receiver's token is complete: take it over, free the receiver
                    m.d.sync += [norms_in.eq(0), recv_done.eq(0), pslot.eq(rslot), rslot.eq(incr(rslot, S - 1)),
                                 pk2.eq(nk2), pu2.eq(nu2), pden.eq(den)]
                    m.next = "FE_NK_REQ"
            with m.State("FE_NK_REQ"):
                fe_req(Mux(pk2 < self.eps_k, self.eps_k, pk2), 2 * ff, ScalarOp.RSQRT, "FE_NK_WAIT")
            with m.State("FE_NK_WAIT"):
                m.d.comb += sfe.o.ready.eq(1)
                with m.If(sfe.o.valid):
                    m.d.sync += [rk_m.eq(sfe.o.payload.m), rk_f.eq(sfe.o.payload.f)]
                    m.next = "FE_NU_REQ"
            with m.State("FE_NU_REQ"):
                fe_req(Mux(pu2 < self.eps_u, self.eps_u, pu2), 2 * fin, ScalarOp.RSQRT, "FE_NU_WAIT")
            with m.State("FE_NU_WAIT"):
                m.d.comb += sfe.o.ready.eq(1)
                with m.If(sfe.o.valid):
                    m.d.sync += [mu_prod.eq(sfe.o.payload.m * self.cu_m), mu_fr.eq(sfe.o.payload.f + self.cu_f),
                                 mu_go.eq(1)]
                    m.next = "FE_NU_NORM"
            with m.State("FE_NU_NORM"):
                with m.If(mu_norm.o_valid):
                    m.d.sync += [mu_m.eq(mu_norm.o_data[0]), mu_f.eq(Mux(mu_norm.o_data[0] == 0, 0, mu_norm.o_frac))]
                    m.next = "FE_DEN_REQ"
            with m.State("FE_DEN_REQ"):
                fe_req(den_x, den_fr, ScalarOp.RECIP, "FE_DEN_WAIT")
            with m.State("FE_DEN_WAIT"):
                m.d.comb += sfe.o.ready.eq(1)
                with m.If(sfe.o.valid):
                    for s in range(S):
                        with m.If(pslot == s):
                            m.d.sync += [rden_m[s].eq(sfe.o.payload.m), rden_f[s].eq(sfe.o.payload.f)]
                    m.d.sync += [sa.eq(0), sa_row.eq(0), sa_grp.eq(0)]
                    m.next = "FE_SCALE_GRANT"
            with m.State("FE_SCALE_GRANT"):  # the multipliers: beats stop, those in flight pass stage F
                m.d.comb += fe_mul_req.eq(1)
                with m.If(infl == 0):
                    m.next = "FE_SCALE"
            with m.State("FE_SCALE"):  # kh = kf rsqrt(||kf||²)
                m.d.comb += [fe_scale_k.eq(1), fe_mul_req.eq(1)]
                sa_step()
                with m.If(sa == db - 1):
                    m.next = "FE_SCALE_U"
            with m.State("FE_SCALE_U"):  # un = u (rsqrt(||u||²) u_scale), on the same multipliers
                m.d.comb += [fe_scale_u.eq(1), fe_mul_req.eq(1)]
                sa_step()
                with m.If(sa == db - 1):
                    m.next = "FE_SCALE_WAIT"
            with m.State("FE_SCALE_WAIT"):  # the last un written
                with m.If(scale_done):
                    m.next = "FE_DONE"
            with m.State("FE_DONE"):
                m.d.sync += slot_full.bit_select(pslot, 1).eq(1)
                m.next = "FE_IDLE"
        fe_idle = materialise(m, fe_pidle & (phase == 0) & (beat == 0) & (infl == 0) & ~recv_done & ~norms_in,
                              "fe_idle")

        # ======================================================================== core vectors
        za_mem, za_w = vec("v_za", signed(Wza), dk, granular=True)
        aa_mem, aa_w = vec("v_aa", signed(Waa), dk, granular=True)
        sq_mem, sq_w = vec("v_sq", signed(Wsq), dk, granular=True)
        e_mem, e_w = vec("v_e", signed(We), dk, granular=True)
        zsm_mem, zsm_w = vec("v_zsm", signed(Wb), dk)
        w_mem, w_w = vec("v_w", signed(Wb), dk)
        an_mem, an_w = vec("v_alpha_n", signed(Wb), dk)
        num_mem, num_w = vec("v_num", signed(Wnum), dk)

        # the vector banks by name (for testbenches: ``ctx.get(mem.data[addr])`` is a k-lane word)
        self.vector_banks = {"za": za_mem, "aa": aa_mem, "sq": sq_mem, "e": e_mem, "zsm": zsm_mem, "w": w_mem,
                     "an": an_mem, "num": num_mem}
        # chain registers (per token)
        refresh = Signal()            # token being chained / written gets +eta I
        tcount = Signal(range(max(RP, 1)))
        za_max, aa_max = Signal(unsigned(Wza)), Signal(unsigned(Waa))
        fz = Signal(signed(EW))
        dacc = Signal(signed(self.ev.acc_width))
        zkh = Signal(signed(self.ev2.acc_width))   # zsmᵀkh, exact
        delta = Signal(unsigned(F["delta"].width))
        rd_m, rd_f = Signal(signed(P)), Signal(signed(EW))
        # rd's mantissa copied per lane for VP2's zsm rd on the A-write multipliers (the one
        # register fanning out to every lane's multiplier was the routed critical path at 73.5 MHz)
        rd_ld = Signal()
        rd_l = [Signal(signed(P), name=f"rd_m{l}") for l in range(k)]
        for l in range(k):
            m.d.sync += rd_l[l].eq(Mux(rd_ld, su.o.payload.m, rd_l[l]))
        fw = Signal(signed(EW))
        cw_m, cw_f, s_wa = Signal(signed(P)), Signal(signed(EW)), Signal(signed(EW))
        ra_m, ra_f, s_ws = Signal(signed(P)), Signal(signed(EW)), Signal(signed(EW))
        # VP6's shift (set at C2) and then the output's (set at BLK_O) in one register: the two
        # never overlap, and both shift the output multiplier's product on one shifter per lane
        s6o = Signal(signed(EW))
        vsum = Signal(signed(self.ev.acc_width))    # ||alpha_n||²
        anq = Signal(signed(self.ev2.acc_width))    # alpha_nᵀqf

        # ======================================================================== fused pass
        wr, rdp = Signal(), Signal()            # this pass writes token t / reads token t+1
        p_on = Signal()
        pn = Signal(range(N2))
        pi, pia, pil, pc = Signal(range(max(d, 2))), Signal(range(DK2)), Signal(range(max(k, 2))), Signal(range(DK2))
        clear = Signal()
        core_idle = Signal()
        m.d.comb += [amem.rd_addr.eq(pn), amem.rd_en.eq(p_on), smem.rd_addr.eq(pn), smem.rd_en.eq(p_on)]
        with m.If(p_on | clear):
            m.d.sync += [pn.eq(incr(pn, N - 1)), pc.eq(incr(pc, dk - 1))]
            with m.If(pc == dk - 1):
                m.d.sync += [pi.eq(incr(pi, d - 1)), pil.eq(incr(pil, k - 1))]
                with m.If(pil == k - 1):
                    m.d.sync += pia.eq(incr(pia, dk - 1))
            with m.If(pn == N - 1):
                m.d.sync += p_on.eq(0)

        # S1: A, S read; row and lane operands; products
        s1_v, s1_n, s1_ia, s1_il, s1_c = (Signal(name="s1_v"), Signal(range(N2), name="s1_n"),
                                         Signal(range(DK2), name="s1_ia"), Signal(range(max(k, 2)), name="s1_il"),
                                         Signal(range(DK2), name="s1_c"))
        m.d.sync += [s1_v.eq(p_on), s1_n.eq(pn), s1_ia.eq(pia), s1_il.eq(pil), s1_c.eq(pc)]
        # the write multipliers' bank operands read at issue into registers (S1's view of them):
        # the multipliers start from registers, not from a LUTRAM read and its lane select (the
        # routed critical path at 65.6 MHz); w and alpha_n are final before the pass starts
        w_rd, an_rd = rd(w_mem, pc), rd(an_mem, pc)
        w_lane = [Signal(w_rd[l].shape(), name=f"w_lane{l}", reset_less=True) for l in range(k)]
        an_lane = [Signal(an_rd[l].shape(), name=f"an_lane{l}", reset_less=True) for l in range(k)]
        m.d.sync += [w_lane[l].eq(w_rd[l]) for l in range(k)] + [an_lane[l].eq(an_rd[l]) for l in range(k)]
        w_row = Signal(signed(Wb), name="w_row", reset_less=True)
        m.d.sync += w_row.eq(sel(rd(w_mem, pia), pil, signed(Wb), "w_row_rd"))
        # the S write's row factor e_i ra (ah = ra alpha_n is never formed): e_i read a cycle
        # ahead of issue (the row the counters will hold next) into a register, its product with
        # ra registered into S1; e's row i is rewritten only after row i's writes have issued
        e_adv = (p_on | clear) & (pc == dk - 1)
        pil_nx = Mux(e_adv, incr(pil, k - 1), pil)
        pia_nx = Mux(e_adv & (pil == k - 1), incr(pia, dk - 1), pia)
        e_row = Signal(signed(We), name="e_row", reset_less=True)
        m.d.sync += e_row.eq(sel(rd(e_mem, pia_nx), pil_nx, signed(We), "e_row_nx"))
        s1_er = Signal(signed(We + P), name="s1_er", reset_less=True)
        m.d.sync += s1_er.eq(e_row * ra_m)
        s2_v, s2_n, s2_c = Signal(name="s2_v"), Signal(range(N2), name="s2_n"), Signal(range(DK2), name="s2_c")
        s2_diag = Signal(k)
        s2_A = [Signal(signed(F["a"].width), name=f"s2_A{l}", reset_less=True) for l in range(k)]
        s2_S = [Signal(signed(F["s"].width), name=f"s2_S{l}", reset_less=True) for l in range(k)]
        # the write multipliers also form VP2's products, when no pass runs: zsm rd on the A
        # write's (issue -> stage X), w cw on the S write's (register stage -> a cycle later)
        v_on, va = Signal(), Signal(range(DK2))
        va_nx = Signal(range(DK2), name="va_nx")   # va in the next cycle (VP issue runs dk cycles from 0)
        vp2_on = Signal()   # VP2's datapath: set when its issue starts (in BOUND), cleared at its end
        vp2_set, vp2_clr = Signal(), Signal()
        m.d.sync += vp2_on.eq(Mux(vp2_set, 1, Mux(vp2_clr, 0, vp2_on)))
        # a copy per lane for the write multipliers' operand selects (the one register fanning out
        # to every lane's operand bits was the routed critical path at 70.3 MHz); each copy holds
        # itself, so no synthesis pass merges them
        vp2_l = [Signal(name=f"vp2_on{l}") for l in range(k)]
        for l in range(k):
            m.d.sync += vp2_l[l].eq(Mux(vp2_set, 1, Mux(vp2_clr, 0, vp2_l[l])))
        zsm_rd = rd(zsm_mem, va_nx)   # read a cycle ahead of VP2's issue, into a register
        zsm_v = [Signal(zsm_rd[l].shape(), name=f"zsm_v{l}", reset_less=True) for l in range(k)]
        m.d.sync += [zsm_v[l].eq(zsm_rd[l]) for l in range(k)]
        pw_a = [Signal(signed(Wb), name=f"pw_a{l}") for l in range(k)]
        pw_b = [Signal(signed(max(Wb, P)), name=f"pw_b{l}") for l in range(k)]
        for l in range(k):
            m.d.comb += [pw_a[l].eq(Mux(vp2_l[l], zsm_v[l], w_row)), pw_b[l].eq(Mux(vp2_l[l], rd_l[l], w_lane[l]))]
        pe_a = [Signal(signed(max(We + P, Wb)), name=f"pe_a{l}") for l in range(k)]
        pe_b = [Signal(signed(max(Wb, P)), name=f"pe_b{l}") for l in range(k)]
        s2_pw = [Signal(signed(Wb + max(Wb, P)), name=f"s2_pw{l}", reset_less=True) for l in range(k)]
        s2_pe = [Signal(signed(len(pe_a[0]) + len(pe_b[0])), name=f"s2_pe{l}", reset_less=True) for l in range(k)]
        # the chain's shifts that fan out to every lane, captured decoded (ShiftCode: the
        # negation and the clamps in the capture cycle, not in the lanes' shifter cycle)
        # VP1's zsm = block(A un) and VP2's w = block(zsm rd) on one k-lane shifter (the passes never
        # overlap; both are Wb-bit block vectors with the same left-shift clamp): its code holds
        # sh_z from SH_Z's capture and sh_w from BLK_W's, for values of Wx bits (round_shift_var's
        # result does not depend on the width it is computed at)
        Wx = max(Wza, Wb + max(Wb, P))
        vx_c = ShiftCode.held(signed(EW), Wx, max_left=Wb - 2, name="vx_sh")
        # fw + cw_f - Fa registered (fw, cw_f hold through S3, so it is final in S3's last cycle),
        # and decoded from the register: the add, clamps and mask tables in one cycle were the
        # routed critical path at 76.3 MHz
        s3_next = free_register(m)(fw + cw_f - Fa, signed(EW), "s3_next")
        s3_sc = ShiftCode.held(signed(EW), len(s2_pe[0]), max_left=self.ml3, name="s3")      # VP2's lanes
        s3_scw = ShiftCode.held(signed(EW), Wb + P, max_left=self.ml3, name="s3_w")          # the bound's term
        sh_al_c = ShiftCode.held(signed(EW), Wal, max_left=Wb - 2, name="sh_al")
        m.d.sync += [s2_v.eq(s1_v), s2_n.eq(s1_n), s2_c.eq(s1_c)]
        for l in range(k):
            m.d.sync += [s2_A[l].eq(amem.rd_data[l]), s2_S[l].eq(smem.rd_data[l]),
                         s2_pw[l].eq(pw_a[l] * pw_b[l]), s2_pe[l].eq(pe_a[l] * pe_b[l]),
                         s2_diag[l].eq((s1_ia == s1_c) & (s1_il == l))]

        # S2 -> S3, WRITE_STAGES register stages, at most one carry chain each:
        # A - round(w_i w_j) [+ eta] (the negation; the shifters; the rounding add; the sum; the
        # saturation) and S + round(e_i ra alpha_n_j) (the shifters; the rounding add; the sum; the
        # saturation), the values read riding beside
        preg = free_register(m)
        WS = self.WRITE_STAGES
        wv = [s2_v]
        for i in range(1, WS):
            wv.append(delay(wv[-1], 1, 1, f"sw{i}_v"))
        s3_v, s3_n, s3_c = Signal(name="s3_v"), Signal(range(N2), name="s3_n"), Signal(range(DK2), name="s3_c")
        m.d.sync += s3_v.eq(wv[-1])
        m.d.comb += [s3_n.eq(delay(s2_n, range(N2), WS, "sw_n")), s3_c.eq(delay(s2_c, range(DK2), WS, "sw_c"))]
        s3_A = [Signal(signed(F["a"].width), name=f"s3_A{l}", reset_less=True) for l in range(k)]
        s3_S = [Signal(signed(F["s"].width), name=f"s3_S{l}", reset_less=True) for l in range(k)]
        # the held shifts decoded once into registers (their negation and clamps out of the
        # lanes' shifter cycle): s_wa is final at S3, s_ws when the pass launches (first used
        # three cycles later)
        s_wa_c = shift_code(m, s_wa, len(s2_pw[0]) + 1, max_left=self.ml_wa, name="s_wa_c", reg=preg)
        s_ws_c = shift_code(m, s_ws, len(s2_pe[0]), max_left=self.ml_ws, name="s_ws_c", reg=preg)
        for l in range(k):
            npw = preg(-s2_pw[l], signed(len(s2_pw[l]) + 1), f"sw1_npw{l}")                        # 1
            ae = preg(s2_A[l] + Mux(refresh & s2_diag[l], self.eta_raw, 0), signed(F["a"].width + 1), f"sw1_ae{l}")
            ta = round_shift_var(m, npw, s_wa_c, rnd, max_left=self.ml_wa, name=f"wa{l}", reg=preg)  # 2
            ta = preg(ta, ta.shape(), f"sw3_ta{l}")                                                # 3
            sum_a = preg(ddelay(ae, ae.shape(), 2, f"sw_ae{l}") + ta, signed(max(len(ae), len(ta)) + 1),
                         f"sw4_sa{l}")                                                             # 4
            na_, oa_ = saturate(m, sum_a, F["a"], name=f"wa_sat{l}")
            ts = round_shift_var(m, s2_pe[l], s_ws_c, rnd, max_left=self.ml_ws, name=f"ws{l}", reg=preg)  # 1
            ts = preg(ts, ts.shape(), f"sw2_ts{l}")                                                # 2
            s_2 = ddelay(s2_S[l], s2_S[l].shape(), 2, f"sw_s{l}")
            sum_s = preg(s_2 + ts, signed(max(len(s_2), len(ts)) + 1), f"sw3_ss{l}")              # 3
            ns_, os_ = saturate(m, sum_s, F["s"], name=f"ws_sat{l}")
            ns_4 = preg(ns_, ns_.shape(), f"sw4_ns{l}")                                            # 4
            a_4, s_4 = ddelay(s2_A[l], s2_A[l].shape(), 4, f"sw_a{l}"), ddelay(s_2, s_2.shape(), 2, f"sw_s4_{l}")
            m.d.sync += [s3_A[l].eq(Mux(wr, na_, a_4)), s3_S[l].eq(Mux(wr, ns_4, s_4))]           # 5
            sat_flags += [wv[4] & wr & oa_, wv[3] & wr & os_]

        # S3: write back; narrow into the multipliers; the four engines (next token's vectors)
        with m.If(clear):
            m.d.comb += [amem.wr_addr.eq(pn), amem.wr_en.eq((1 << k) - 1), smem.wr_addr.eq(pn),
                         smem.wr_en.eq((1 << k) - 1)]
            for l in range(k):
                m.d.comb += [amem.wr_data[l].eq(Mux((pia == pc) & (pil == l), self.a0, 0)), smem.wr_data[l].eq(0)]
        with m.Else():
            m.d.comb += [amem.wr_addr.eq(s3_n), amem.wr_en.eq(Mux(s3_v & wr, (1 << k) - 1, 0)),
                         smem.wr_addr.eq(s3_n), smem.wr_en.eq(Mux(s3_v & wr, (1 << k) - 1, 0))]
            m.d.comb += [amem.wr_data[l].eq(s3_A[l]) for l in range(k)]
            m.d.comb += [smem.wr_data[l].eq(s3_S[l]) for l in range(k)]
        un_p = rd(un_mem, saddr(cslot, s3_c))
        kh_p = rd(kh_mem, saddr(cslot, s3_c))
        qf_p = rd(qf_mem, saddr(cslot, s3_c))
        feed = s3_v & rdp
        for e in self.pass_engines:
            m.d.comb += [e.i.valid.eq(feed), e.i.payload.first.eq(s3_c == 0), e.i.payload.last.eq(s3_c == dk - 1)]
        for l in range(k):
            am, ao = requantize(m, s3_A[l], fa, F["a_mul"], name=f"am{l}")
            sm, so = requantize(m, s3_S[l], fs, F["s_mul"], name=f"sm{l}")
            sat_flags += [feed & ao, feed & so]
            m.d.comb += [e_au.i.payload.a[l].eq(am), e_au.i.payload.b[l].eq(un_p[l]),
                         e_ak.i.payload.a[l].eq(am), e_ak.i.payload.b[l].eq(kh_p[l]),
                         e_sk.i.payload.a[l].eq(sm), e_sk.i.payload.b[l].eq(kh_p[l]),
                         e_sq.i.payload.a[l].eq(sm), e_sq.i.payload.b[l].eq(qf_p[l])]

        # rows out of the engines (R0), through two register stages (R1: the sums and v_i; R2:
        # v_i - S kh, |A un|, |A kh|), then stored: A un, A kh, S qf; e = narrow(v - S kh);
        # max |A un|, max |A kh|
        orow, oia, oil = Signal(range(max(d, 2))), Signal(range(DK2)), Signal(range(max(k, 2)))
        rows_done = Signal()
        row_v = e_au.o.valid
        with m.If(row_v):
            m.d.sync += [orow.eq(incr(orow, d - 1)), oil.eq(incr(oil, k - 1))]
            with m.If(oil == k - 1):
                m.d.sync += oia.eq(incr(oia, dk - 1))
        ro = free_register(m)
        v_row = ro(sel(rd(v_mem, saddr(cslot, oia)), oil, signed(M), "v_row"), signed(M), "ro1_vrow")
        sums = {n: ro(e.o.payload.sum, e.o.payload.sum.shape(), f"ro1_{n}")
                for n, e in (("au", e_au), ("ak", e_ak), ("sq", e_sq), ("sk", e_sk))}
        dif = (v_row << (fsm + fh - fin)) - sums["sk"]
        dif = ro(dif, dif.shape(), "ro2_dif")
        za_abs = ro(abs_value(m, sums["au"], name="za_abs"), unsigned(len(sums["au"]) + 1), "ro2_za_abs")
        aa_abs = ro(abs_value(m, sums["ak"], name="aa_abs"), unsigned(len(sums["ak"]) + 1), "ro2_aa_abs")
        s2v = {n: ro(sums[n], sums[n].shape(), f"ro2_{n}") for n in ("au", "ak", "sq")}
        r2_v, oia2 = delay(row_v, 1, 2, "ro_v"), delay(oia, range(DK2), 2, "ro_ia")
        oil2, orow2 = delay(oil, range(max(k, 2)), 2, "ro_il"), delay(orow, range(max(d, 2)), 2, "ro_row")
        e_new, e_ovf = requantize(m, dif, fsm + fh, F["e"], name="e_new")
        sat_flags.append(r2_v & e_ovf)
        for mem_w, val in ((za_w, s2v["au"]), (aa_w, s2v["ak"]), (sq_w, s2v["sq"])):
            m.d.comb += [mem_w.addr.eq(oia2), mem_w.en.eq(Mux(r2_v, 1 << oil2, 0))]
            m.d.comb += [mem_w.data[l].eq(val) for l in range(k)]
        # e written a cycle later from a register (its narrowing and the LUT RAM's write port in
        # one cycle were a routed critical path); nothing reads e until the chain's VP6
        e_3 = ro(e_new, e_new.shape(), "ro3_e")
        r3_v = delay(r2_v, 1, 1, "ro3_v")
        m.d.comb += [e_w.addr.eq(delay(oia2, range(DK2), 1, "ro3_ia")),
                     e_w.en.eq(Mux(r3_v, 1 << delay(oil2, range(max(k, 2)), 1, "ro3_il"), 0))]
        m.d.comb += [e_w.data[l].eq(e_3) for l in range(k)]
        with m.If(r2_v):
            m.d.sync += [za_max.eq(Mux((orow2 == 0) | (za_abs > za_max), za_abs, za_max)),
                         aa_max.eq(Mux((orow2 == 0) | (aa_abs > aa_max), aa_abs, aa_max))]
            with m.If(orow2 == d - 1):
                m.d.sync += rows_done.eq(1)
        pass_done = materialise(m, ~p_on & ~s1_v & ~Cat(*wv).any() & ~s3_v & (~rdp | rows_done), "pass_done")

        def start_pass(write, read):
            m.d.sync += [wr.eq(write), rdp.eq(read), p_on.eq(1), pn.eq(0), pi.eq(0), pia.eq(0), pil.eq(0),
                         pc.eq(0), rows_done.eq(0), orow.eq(0), oia.eq(0), oil.eq(0)]

        # ======================================================================== vector unit
        # issue (v_on, va: the products on the write multipliers) -> X (vx: the element-wise
        # operation's shifters) -> X2 (its rounding add) -> register (vr: bank write, extremes,
        # reductions); VP2 goes on from vr
        vx_v, vx_a = Signal(), Signal(range(DK2))
        vx2_v, vx2_a = Signal(), Signal(range(DK2))
        vr_v, vr_a = Signal(), Signal(range(DK2))
        vreg = free_register(m)
        Wv = max(Wnum, Wb) + 1
        alu = [Signal(signed(Wv), name=f"alu{l}") for l in range(k)]
        vr = [Signal(signed(Wv), name=f"vr{l}", reset_less=True) for l in range(k)]
        with m.If(v_on):
            m.d.sync += [va.eq(incr(va, dk - 1))]
            with m.If(va == dk - 1):
                m.d.sync += v_on.eq(0)
        m.d.sync += [vx_v.eq(v_on), vx_a.eq(va), vx2_v.eq(vx_v), vx2_a.eq(vx_a), vr_v.eq(vx2_v), vr_a.eq(vx2_a)]
        m.d.sync += [vr[l].eq(alu[l]) for l in range(k)]
        # the largest and smallest element: registered trees over the lanes, then running extremes
        # over the pass; max |x| from the two a cycle later (max |w| needs the signed extremes
        # of zsm: the rounding of w is not symmetric under every mode)
        Lt = (k - 1).bit_length()
        hi_t = reduce_tree(m, vr, lambda a, b: Mux(b > a, b, a), "vm_hi")
        lo_t = reduce_tree(m, vr, lambda a, b: Mux(b < a, b, a), "vm_lo")
        mx_chain = [vr_v]
        for i in range(Lt):
            mx_chain.append(delay(mx_chain[-1], 1, 1, f"vm_v{i + 1}"))
        mx_v, mx_first = mx_chain[-1], delay(vr_a == 0, 1, Lt, "vm_first")
        vhi, vlo = Signal(signed(Wv)), Signal(signed(Wv))
        with m.If(mx_v):
            m.d.sync += [vhi.eq(Mux(mx_first | (hi_t > vhi), hi_t, vhi)),
                         vlo.eq(Mux(mx_first | (lo_t < vlo), lo_t, vlo))]
        vmax = Signal(unsigned(Wv + 1))
        m.d.sync += vmax.eq(abs_max_hw(m, vhi, vlo, "vmax_hl"))
        mx_busy = mx_chain[1:] + [delay(mx_v, 1, 1, "vm_v_max")]

        def start_vp():
            m.d.sync += [v_on.eq(1), va.eq(0)]

        # output stage; its multiplier also forms VP6's e (ahᵀqf) (VP6 runs only while no o streams)
        o_busy, oa = Signal(), Signal(range(DK2))
        o_fr = Signal(signed(self.o_frac_width))
        # the output and VP6 never overlap (the tail launches once o has issued its last element;
        # o starts at BLK_O, after VP6's last issue), so the multiplier takes one operand register
        # per side: x holds num (the output) or e (VP6), read a cycle ahead of issue at the address
        # the counters will hold next, and om holds o_m or c2's mantissa. The select is a mode
        # (x_num) that changes in the gaps between the two, so the multiply starts from registers,
        # with no select in front of it (o_sel -> operand mux -> multiply was the routed critical
        # path at 71.9 MHz)
        oa_nx = Signal(range(DK2), name="oa_nx")
        num_rd, e_rd = rd(num_mem, oa_nx), rd(e_mem, va_nx)
        # a copy of the mode per lane (one register fanning out to every lane's operand bits was
        # the routed critical path at k = 8); each copy holds itself, so no synthesis pass merges them
        x_num = [Signal(name=f"x_num{l}") for l in range(k)]
        x_to_num, x_to_e = Signal(), Signal()   # VP6 has issued its last element / the tail launches
        for l in range(k):
            m.d.sync += x_num[l].eq(Mux(x_to_num, 1, Mux(x_to_e, 0, x_num[l])))
        x_rd = [Mux(x_num[l], num_rd[l], e_rd[l]) for l in range(k)]
        x_op = [Signal(x_rd[l].shape(), name=f"x_op{l}", reset_less=True) for l in range(k)]
        m.d.sync += [x_op[l].eq(x_rd[l]) for l in range(k)]
        om = Signal(signed(P))
        out_p = [materialise(m, x_op[l] * om, f"out_p{l}") for l in range(k)]
        # issue (num read, the product) -> 1 (product registered; the shifters) -> 2 (the rounding
        # add) -> a FIFO whose registered output is o_out; an element issues only while the FIFO
        # has room for everything in flight (ocnt counts issued, not yet transferred)
        OD = self.OUT_FIFO_DEPTH
        m.submodules.o_fifo = o_fifo = SyncFIFOBuffered(width=Shape.cast(self.o_layout).width, depth=OD)
        ocnt = Signal(range(OD + 1))
        o_issue = materialise(m, o_busy & (ocnt < OD), "o_issue")
        o_xfer = materialise(m, o_fifo.r_rdy & self.o_out.ready, "o_xfer")
        m.d.sync += ocnt.eq(ocnt + o_issue - o_xfer)
        m.d.comb += [oa_nx.eq(Mux(o_issue, incr(oa, dk - 1), oa)), va_nx.eq(Mux(v_on, incr(va, dk - 1), va))]
        with m.If(o_issue):
            m.d.sync += oa.eq(incr(oa, dk - 1))
            with m.If(oa == dk - 1):
                m.d.sync += o_busy.eq(0)
        op1 = [vreg(out_p[l], out_p[l].shape(), f"o1_p{l}") for l in range(k)]
        # the shift decoded into registers a cycle after C2 / BLK_O, when the first product reaches
        # the shifters; one clamp for both (a block output shifted further left than Wo - 2 would
        # not fit, and num's left shifts reach ml6 at most)
        sh1 = shift_code(m, s6o, len(op1[0]), max_left=max(self.ml6, Wo - 2), name="o1_sh", reg=vreg)
        o6 = [round_shift_var(m, op1[l], sh1, rnd, max_left=max(self.ml6, Wo - 2), name=f"o{l}", reg=vreg)
              for l in range(k)]
        fr1 = ddelay(o_fr, o_fr.shape(), 1, "o1_fr")
        ov2, last2 = delay(o_issue, 1, 2, "o_v"), delay(oa == dk - 1, 1, 2, "o_last")
        o_word = Signal(self.o_layout)
        for l in range(k):
            m.d.comb += o_word.o[l].eq(o6[l])
        m.d.comb += [o_word.o_frac.eq(ddelay(fr1, fr1.shape(), 1, "o2_fr")), o_word.last.eq(last2),
                     o_fifo.w_data.eq(o_word.as_value()), o_fifo.w_en.eq(ov2),
                     self.o_out.valid.eq(o_fifo.r_rdy), self.o_out.payload.as_value().eq(o_fifo.r_data),
                     o_fifo.r_en.eq(self.o_out.ready)]

        # element-wise operations at stages X, X2 (VP1 zsm, VP2 w, VP6 num); A un read at issue
        # into a register, so the shared shifter's operand select is between two registers
        za_r = [ddelay(x, x.shape(), 1, f"vp1_za{l}") for l, x in enumerate(rd(za_mem, va))]
        sq_x = rd(sq_mem, vx_a)
        x_vx = [materialise(m, Mux(vp2_l[l], s2_pw[l], za_r[l]), f"vx_in{l}", signed(Wx)) for l in range(k)]
        op_zsm = op_w = [round_shift_var(m, x_vx[l], vx_c, rnd, max_left=Wb - 2, name=f"vx_{l}", reg=vreg)
                         for l in range(k)]
        op_num = [materialise(m, vreg(sq_x[l], sq_x[l].shape(), f"vp6_sq{l}") + o6[l], f"vp6o_{l}") for l in range(k)]
        # reduction operands at the register stage
        un_r = rd(un_mem, saddr(cslot, vr_a))
        kh_r = rd(kh_mem, saddr(cslot, vr_a))

        # VP2 after the register stage (w): w cw on the S write's multipliers (stage 3); alpha =
        # A kh - round(w cw) [+ round(eta kh)] (4: the shifters, eta kh; 5: the rounding adds;
        # 6: A kh - round(w cw); 7: alpha); alpha_n = its block by the bound (8: the shifters;
        # 9: the rounding add, registered), into the bank and the two reductions
        for l in range(k):
            m.d.comb += [pe_a[l].eq(Mux(vp2_l[l], vr[l][:Wb].as_signed(), s1_er)),
                         pe_b[l].eq(Mux(vp2_l[l], cw_m, an_lane[l]))]
        v3, a3 = delay(vr_v, 1, 1, "vp2_v3"), delay(vr_a, range(DK2), 1, "vp2_a3")
        v4, a4 = delay(v3, 1, 1, "vp2_v4"), delay(a3, range(DK2), 1, "vp2_a4")
        v5, a5 = delay(v4, 1, 5, "vp2_v9"), delay(a4, range(DK2), 5, "vp2_a9")   # stage 9
        aa_3, kh_3 = rd(aa_mem, a3), rd(kh_mem, saddr(cslot, a3))
        an_r = [Signal(signed(Wb), name=f"vp2_an{l}", reset_less=True) for l in range(k)]
        for l in range(k):
            t3 = vreg(round_shift_var(m, s2_pe[l], s3_sc, rnd, max_left=self.ml3, name=f"vp2a_{l}", reg=vreg),
                      signed(Wal + 1), f"vp2_t5_{l}")
            tep = vreg(kh_3[l] * self.eta_raw, signed(len(kh_3[l]) + bit_len(abs(self.eta_raw)) + 1), f"vp2_ep{l}")
            te = vreg(round_shift(m, tep, self.c_eta, rnd, name=f"vp2e_{l}"), signed(Wal + 1), f"vp2_te5_{l}")
            aa5 = ddelay(aa_3[l], aa_3[l].shape(), 2, f"vp2_aa{l}")
            dlt = vreg(aa5 - t3, signed(Wal + 2), f"vp2_d6_{l}")
            te6 = vreg(Mux(refresh, te, 0), signed(Wal + 1), f"vp2_te6_{l}")
            al_r = vreg(dlt + te6, signed(Wal), f"vp2_al{l}")
            an = round_shift_var(m, al_r, sh_al_c, rnd, max_left=Wb - 2, name=f"vp2n_{l}", reg=vreg)
            m.d.sync += an_r[l].eq(an)
        qf_5 = rd(qf_mem, saddr(cslot, a5))

        # max |kh| (VP1, for alpha's bound on refresh tokens): magnitudes registered, a max tree
        vp1_on = Signal()   # driven by the sequencer's VP1
        km = [abs_value(m, kh_r[l], name=f"kh_abs{l}") for l in range(k)]
        km = [ddelay(x, x.shape(), 1, f"kh_abs_r{l}") for l, x in enumerate(km)]
        km_t = reduce_tree(m, km, lambda a, b: Mux(b > a, b, a), "kh_mx")
        km_v = delay(vr_v & vp1_on, 1, 1 + Lt, "kh_mx_v")
        km_first = delay(vr_a == 0, 1, 1 + Lt, "kh_mx_first")
        khmax = Signal(unsigned(M))
        with m.If(km_v):
            m.d.sync += khmax.eq(Mux(km_first | (km_t > khmax), km_t, khmax))

        def vp_state(ops, bank_w, aux=None, aux2=None):
            m.d.comb += [alu[l].eq(ops[l]) for l in range(k)]
            m.d.comb += [bank_w.addr.eq(vr_a), bank_w.en.eq(vr_v)]
            m.d.comb += [bank_w.data[l].eq(vr[l]) for l in range(k)]
            for eng, b in ((ev, aux), (ev2, aux2)):
                if b is not None:
                    m.d.comb += [eng.i.valid.eq(vr_v), eng.i.payload.first.eq(vr_a == 0),
                                 eng.i.payload.last.eq(vr_a == dk - 1)]
                    m.d.comb += [eng.i.payload.a[l].eq(vr[l]) for l in range(k)]
                    m.d.comb += [eng.i.payload.b[l].eq(b[l]) for l in range(k)]

        vp_max_done = ~v_on & ~vx_v & ~vx2_v & ~vr_v & ~Cat(*mx_busy).any()

        # ======================================================================== scalar work
        # each step is a few free-running register stages on operands the sequencer holds (at
        # most one carry chain between registers); its state captures the result once they have
        # passed (STEP_STAGES, :meth:`cycle_budget`)
        ff_ = free_register(m)
        def ffx(value, name):  # a free-running register of the expression's own shape
            return ff_(value, value.shape(), name)

        blk_z, (z_code,) = block_shift_hw(m, za_max, Wb, rnd, EW, "blk_z", reg=ff_, codes=[(Wx, Wb - 2)])

        # fz holds from SH_Z's capture through VP1: its sum registered before the decode (the sum
        # and the decode in one cycle were the routed critical path at 74.0 MHz)
        dsh = shift_code(m, ffx(fz + (fun - fd), "delta_sh0"), len(dacc), max_left=self.ml_delta, name="delta_sh",
                         reg=ff_)
        dl = ffx(round_shift_var(m, dacc, dsh, rnd, max_left=self.ml_delta, name="delta_r", reg=ff_), "delta_rr")
        delta_c, delta_ovf = saturate(m, dl + (1 << fd), F["delta"], name="delta_sat")
        delta_c, delta_ovf = ff_(delta_c, delta_c.shape(), "delta_cr"), ff_(delta_ovf, 1, "delta_ovfr")
        delta_v = materialise(m, Mux(delta_c < self.eps_d, self.eps_d, delta_c), "delta_v", delta.shape())
        blk_w, (w_code, w_code_x) = block_shift_hw(m, ff_(vmax[:Wb] * rd_m.as_unsigned(), unsigned(Wb + P), "mx_w"),
                                                   Wb, rnd, EW, "blk_w", reg=ff_,
                                                   codes=[(Wb + P + 1, Wb - 2), (Wx, Wb - 2)])
        fzr = ffx(fz + rd_f, "fz_rd")
        Wp = self.ev2.acc_width + P
        p_hi, p_lo = Signal(signed(Wb + P + 1), name="p_hi"), Signal(signed(Wb + P + 1), name="p_lo")
        p_c2 = Signal(signed(Wp), name="p_c2")
        ph_r = ff_(vhi[:Wb].as_signed() * rd_m, p_hi.shape(), "p_hi_r")
        pl_r = ff_(vlo[:Wb].as_signed() * rd_m, p_lo.shape(), "p_lo_r")
        pcw_r = ff_(zkh * rd_m, signed(Wp), "p_cw_r")
        sh_w_hl = ShiftCode.held(signed(EW), len(p_hi), max_left=Wb - 2, name="sh_w_hl")  # captured in BLK_W
        w_hi = ffx(round_shift_var(m, p_hi, sh_w_hl, rnd, max_left=Wb - 2, name="w_hi", reg=ff_), "w_hi_r")
        w_lo = ffx(round_shift_var(m, p_lo, sh_w_hl, rnd, max_left=Wb - 2, name="w_lo", reg=ff_), "w_lo_r")
        w_pos = ff_(w_hi + w_lo > 0, 1, "w_pos")   # w_hi > -w_lo
        w_nlo = ffx(-w_lo, "w_nlo")
        w_hi2 = ffx(w_hi, "w_hi_r2")
        wmax = Signal(unsigned(Wb + 1))   # max |w|, exact: from the rounded extremes of zsm rd
        cw_nm, cw_nf = normalize_hw(m, pcw_r, fz + rd_f + fh, P, EW, "cw", reg=ff_)  # from BLK_W's start
        p_wc = Signal(unsigned(Wb + P), name="p_wc")
        cw_abs = ff_(Mux(cw_m < 0, -cw_m, cw_m), unsigned(P), "cw_abs")
        bound = Signal(unsigned(Wal), name="al_bound")
        eta_b = ffx(round_shift(m, ffx(khmax * self.eta_raw, "eta_p"), self.c_eta, rnd, name="eta_b"), "eta_br")
        t_wc = ffx(round_shift_var(m, p_wc, s3_scw, rnd, max_left=self.ml3, name="t_wc", reg=ff_), "t_wc_r")
        b_sum = ff_(aa_max + t_wc, unsigned(Wal), "b_sum")
        blk_al, (al_code,) = block_shift_hw(m, bound, Wb, rnd, EW, "blk_al", reg=ff_, codes=[(Wal, Wb - 2)])
        pc2_r = ff_(anq * ra_m, p_c2.shape(), "p_c2_r")
        # c2's exponent with VP6's shift offset added (the capture into s6o was the routed critical
        # path at 66.7-77.8 MHz: c2's exponent and the offset, two carry chains, in one cycle)
        c2_nm, c2_s6 = normalize_hw(m, p_c2, fan + ra_f + ff, P, EW, "c2", reg=ff_, f_offset=fe - Fs)
        rden_mc = Signal(signed(P))
        rden_fc = Signal(signed(EW))
        m.d.comb += [rden_mc.eq(Array(rden_m)[cslot]), rden_fc.eq(Array(rden_f)[cslot])]
        t_rden_m, t_rden_f = Signal(signed(P)), Signal(signed(EW))  # the tail's token's 1/zkᵀqf
        blk_o = block_shift_hw(m, ff_(vmax[:Wnum] * t_rden_m.as_unsigned(), unsigned(Wnum + P), "mx_o"), Wo, rnd, EW,
                               "blk_o", reg=ff_)
        st = self.STEP_STAGES
        scnt, tcnt = Signal(range(max(st.values()) + 1)), Signal(range(max(st.values()) + 1))

        def step_done(step, cnt=scnt):
            """The step's last cycle (its stages passed); counts up to it."""
            done = materialise(m, cnt == st[step], f"{step.lower()}_done")
            with m.If(~done):
                m.d.sync += cnt.eq(cnt + 1)
            return done

        def step_next(nxt, cnt=scnt):
            m.d.sync += cnt.eq(0)
            m.next = nxt
        launch, tail_idle = Signal(), Signal()
        nslot = materialise(m, incr(cslot, S - 1), "nslot", range(S))

        def su_req(x, frac, nxt):
            m.d.comb += [su.i.valid.eq(1), su.i.payload.x.eq(x), su.i.payload.frac.eq(frac),
                         su.i.payload.op.eq(ScalarOp.RSQRT)]
            with m.If(su.i.ready):
                m.next = nxt

        # ======================================================================== sequencer
        with m.FSM(init="CLEAR", name="core") as fsm:
            with m.State("CLEAR"):  # A = I / lambda0, S = 0 (RAM survives reset)
                m.d.comb += clear.eq(1)
                with m.If(pn == N - 1):
                    m.next = "IDLE"
            with m.State("IDLE"):
                m.d.comb += core_idle.eq(1)
                with m.If(slot_full.bit_select(cslot, 1)):
                    start_pass(0, 1)
                    m.next = "PASS"
            with m.State("PASS"):
                with m.If(pass_done):
                    with m.If(rdp):  # the chain of the token just read
                        if RP:
                            last_in_period = tcount == RP - 1
                            m.d.sync += [tcount.eq(incr(tcount, RP - 1)), refresh.eq(last_in_period)]
                            with m.If(last_in_period):
                                m.d.sync += refreshes.eq(refreshes + 1)
                        m.next = "SH_Z"
                    with m.Else():
                        m.next = "IDLE"
            with m.State("SH_Z"):  # block(A un)'s shift from max |A un|
                with m.If(scnt == st["SH_Z"] - 1):  # VP1's first shifters meet sh_z a cycle after issue
                    start_vp()
                with m.If(step_done("SH_Z")):
                    m.d.sync += [*vx_c.eq(z_code),
                                 fz.eq(fam + fun - blk_z)]
                    step_next("VP1")
            with m.State("VP1"):  # zsm = block(A un); unᵀzsm, zsmᵀkh; max, min zsm; max |kh|
                m.d.comb += vp1_on.eq(1)
                vp_state(op_zsm, zsm_w, un_r, kh_r)
                with m.If(ev.o.valid):
                    m.d.sync += [dacc.eq(ev.o.payload.sum), zkh.eq(ev2.o.payload.sum)]
                    m.next = "DELTA"
            with m.State("DELTA"):  # delta = max(clip(round(unᵀzsm) + 1), eps)
                with m.If(step_done("DELTA")):  # captured, and requested from the (idle) unit at once
                    m.d.sync += delta.eq(delta_v)
                    su_req(delta_v, fd, "RD_WAIT")
                    with m.If(su.i.ready):
                        m.d.sync += scnt.eq(0)
                sat_flags.append(fsm.ongoing("DELTA") & (scnt == st["DELTA"]) & su.i.ready & delta_ovf)
            with m.State("RD_WAIT"):
                m.d.comb += su.o.ready.eq(1)
                with m.If(su.o.valid):
                    m.d.sync += [rd_m.eq(su.o.payload.m), rd_f.eq(su.o.payload.f)]
                    m.d.comb += rd_ld.eq(1)
                    m.next = "BLK_W"
            with m.State("BLK_W"):  # w = block(zsm rsqrt(delta)): the shift from max|zsm| * m
                with m.If(step_done("BLK_W")):
                    m.d.sync += [fw.eq(fzr - blk_w), p_hi.eq(ph_r), p_lo.eq(pl_r),
                                 *sh_w_hl.eq(w_code), *vx_c.eq(w_code_x)]
                    step_next("CW")
            with m.State("CW"):  # wᵀkh = rd (zsmᵀkh) as a floating scalar; max |w|
                with m.If(step_done("CW")):
                    m.d.sync += [cw_m.eq(cw_nm), cw_f.eq(cw_nf), wmax.eq(Mux(w_pos, w_hi2, w_nlo))]
                    step_next("S3")
            with m.State("S3"):
                with m.If(step_done("S3")):
                    m.d.sync += [*s3_sc.eq(shift_code(m, s3_next, s3_sc.width, max_left=self.ml3, name="s3_d")),
                                 *s3_scw.eq(shift_code(m, s3_next, s3_scw.width, max_left=self.ml3, name="s3_dw")),
                                 s_wa.eq(2 * fw - fa), p_wc.eq(wmax * cw_abs)]
                    step_next("BOUND")
            with m.State("BOUND"):  # |alpha| <= max|A kh| + round(max|w| |wᵀkh|) [+ round(max|kh| eta)]
                with m.If(scnt == self.VP2_LEAD - 1):  # VP2 issues while BOUND and SH_AL finish
                    start_vp()
                    m.d.comb += vp2_set.eq(1)
                with m.If(step_done("BOUND")):
                    m.d.sync += bound.eq(b_sum + Mux(refresh, eta_b, 0))
                    step_next("SH_AL")
            with m.State("SH_AL"):  # alpha_n's block shift from the bound: known before its pass
                with m.If(step_done("SH_AL")):  # captured in time for alpha_n's shifters
                    m.d.sync += sh_al_c.eq(al_code)
                    step_next("VP2")
            with m.State("VP2"):  # w; alpha; alpha_n; ||alpha_n||², alpha_nᵀqf (issued from BOUND)
                with m.If(ev.o.valid):  # ||alpha_n||² requested from the (idle) unit at once
                    m.d.sync += [vsum.eq(ev.o.payload.sum), anq.eq(ev2.o.payload.sum)]
                    m.d.comb += vp2_clr.eq(1)
                    m.next = "RA_REQ"
                    su_req(ev.o.payload.sum.as_unsigned(), 2 * fan, "RA_WAIT")
            with m.State("RA_REQ"):
                su_req(vsum.as_unsigned(), 2 * fan, "RA_WAIT")

            def go():
                # w, e, alpha_n, ra are final: the write pass (fused with the next token's read)
                # starts, and the output tail (c2, VP6, BLK_O) runs beside it once the previous
                # token's o has left (num is rewritten)
                with m.If(tail_idle & ~o_busy):
                    m.d.comb += launch.eq(1)
                    m.d.sync += [t_rden_m.eq(rden_mc), t_rden_f.eq(rden_fc),
                                 slot_full.bit_select(cslot, 1).eq(0), cslot.eq(nslot)]
                    start_pass(1, slot_full.bit_select(nslot, 1))
                    m.next = "PASS"
            with m.State("RA_WAIT"):  # ra; the launch in the same cycle when the tail is free
                m.d.comb += su.o.ready.eq(1)
                with m.If(su.o.valid):
                    m.d.sync += [ra_m.eq(su.o.payload.m), ra_f.eq(su.o.payload.f),
                                 s_ws.eq(su.o.payload.f + (fe + fan - fs))]
                    m.next = "GO"
                    go()
            with m.State("GO"):  # the previous token's tail or output still busy
                go()

        # VP2's datapath, from its first issue (in BOUND) to its reductions (in VP2)
        with m.If(vp2_on):
            vp_state(op_w, w_w)
            m.d.comb += [an_w.addr.eq(a5), an_w.en.eq(v5)]
            m.d.comb += [an_w.data[l].eq(an_r[l]) for l in range(k)]
            for eng, b in ((ev, an_r), (ev2, qf_5)):
                m.d.comb += [eng.i.valid.eq(v5), eng.i.payload.first.eq(a5 == 0),
                             eng.i.payload.last.eq(a5 == dk - 1)]
                m.d.comb += [eng.i.payload.a[l].eq(an_r[l]) for l in range(k)]
                m.d.comb += [eng.i.payload.b[l].eq(b[l]) for l in range(k)]

        # output tail of the token just chained, beside the next pass (which rewrites sq and e only
        # after its first row, d/k + 9 + L cycles in, when VP6 has read them all)
        with m.FSM(init="TAIL_IDLE", name="tail"):
            with m.State("TAIL_IDLE"):
                m.d.comb += tail_idle.eq(1)
                with m.If(launch):
                    m.d.comb += x_to_e.eq(1)
                    m.next = "C2P"
            with m.State("C2P"):
                with m.If(step_done("C2P", tcnt)):
                    m.d.sync += p_c2.eq(pc2_r)
                    step_next("C2", tcnt)
            with m.State("C2"):  # c2 = ahᵀqf = ra (alpha_nᵀqf) as a floating scalar
                with m.If(step_done("C2", tcnt)):
                    m.d.sync += [om.eq(c2_nm), s6o.eq(c2_s6)]
                    start_vp()
                    step_next("VP6", tcnt)
            with m.State("VP6"):  # num = S qf + round(e (ahᵀqf)); max |num|
                vp_state(op_num, num_w)
                with m.If(vp_max_done):
                    m.d.comb += x_to_num.eq(1)
                    m.next = "BLK_O"
            with m.State("BLK_O"):  # o = block(num / zkᵀqf): the shift from max|num| * m
                with m.If(step_done("BLK_O", tcnt)):
                    m.d.sync += [o_busy.eq(1), oa.eq(0), om.eq(t_rden_m), s6o.eq(blk_o),
                                 o_fr.eq(Fs + t_rden_f - blk_o), tokens.eq(tokens + 1)]
                    step_next("TAIL_IDLE", tcnt)

        # every flag registered, then a registered tree of sums (never a sum of all flags in a cycle)
        sat_count, sat_pending = count_tree(m, sat_flags, name="sat", init=self.sat_init)
        m.d.comb += sats.eq(sat_count)
        m.d.comb += self.busy.eq(~core_idle | ~tail_idle | ~fe_idle | o_busy | (ocnt != 0) | (slot_full != 0)
                                 | sat_pending)
        return m
