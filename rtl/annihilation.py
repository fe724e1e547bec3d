"""The spectral-annihilation core (spec §1, exact variant, Gram form), bit-exact with
``specmem.golden.fixed.annihilation.annihilation_fixed``.

State ``U`` (``d x k``) lives in :class:`~specmem.rtl.memory.StateMemory` (bank ``l`` = column
``l``). Tokens arrive as ``d/k`` beats of ``k`` input elements (element ``i`` in lane ``i % k`` of
beat ``i // k``) into a three-slot token buffer; each token leaves as ``d/k`` beats of ``k`` output
elements ``y`` (zero where nothing was annihilated), the last beat flagged.

Per token the sequencer runs row passes over ``U`` through one pipeline (one row per cycle):

* **A pass** ``a = Uᵀx``: the per-lane sums of engine ``E2``. Normally *fused* into the previous
  token's row pass (the freshly written row is narrowed and multiplied by the next token's
  ``x`` at once), so it costs nothing; a standalone A pass runs only when the next token was not
  yet complete when that row pass started.
* **G pass**: ``r_i = narrow(U_i · a)`` through the adder tree of engine ``E1``, stored in the
  ``r`` buffer; ``g = Uᵀr`` (``E2`` lane sums) and ``n² = Σ r_i²``. While it runs in the
  background, the sequencer does the ``a``-only vector work (``||a||²``, ``ahat``, ``beta``, ``q``).
* **k-vector work** after the G pass: block ``g``, ``t``, ``1/n²``, block ``p``, ``rsqrt(n²)``.
* **Row pass** (every token): ``U_i += round(r_i p) + round(U_ij q)``, one saturation,
  ``U_ij = x_i`` (full step), or ``U_i,count = x_i`` (warm-up), or nothing (zero/orthogonal
  input); the output ``y_i = r_i rsqrt(n²)``.

Orthogonal input (``a = 0`` or ``n² = 0``; the project's policy *skip and flag*): ``U`` is left
unchanged, ``y = 0``, the orthogonal-input counter and sticky flag are raised.

Cycles per token in steady state (full memory, next token already buffered): the G pass and
the row pass each take ``d`` cycles plus their pipeline tails, plus the k-vector work between
them (see :attr:`AnnihilationCore.cycles_full` and ``docs/rtl.md``).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum as aenum, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.formats import formats_for

from .engine import DotEngine, min_signed_width
from .fixed import abs_value, materialise, msb_index, requantize, round_shift, round_shift_var, saturate
from .memory import StateMemory
from .params import check_dims
from .presets import check_rtl_preset
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["AnnihilationCore", "RowUpdate"]


class RowUpdate(aenum.Enum, shape=2):
    """What the row pass writes back."""
    NONE = 0  # identity (zero or orthogonal input, standalone A pass): no write
    WARM = 1  # warm-up: column `count` <- x
    FULL = 2  # full step: rank-two row update, column j <- x


def _uwidth(n: int) -> int:
    return max(1, int(n).bit_length())


class AnnihilationCore(wiring.Component):
    """Annihilation memory engine for dimension ``d``, ``k`` stored directions, one preset.

    Members: ``x_in`` (stream of ``k`` signed input elements per beat, ``d/k`` beats a token),
    ``y_out`` (stream of ``y``: ``k`` signed elements and ``last``), and status outputs
    ``tokens``, ``saturations``, ``orth_count`` (32-bit counters), ``orth_flag`` (sticky),
    ``count`` (stored directions, ``<= k``) and ``busy``.
    """

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, in_range: float | None = None):
        check_dims(d, k)
        check_rtl_preset(preset)
        self.d, self.k, self.preset = d, k, preset
        self.fmt = F = formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})
        self.su_config = F.scalar_unit
        for name in F.tensors:
            if F[name].saturation != "saturate":
                raise ValueError(f"preset: tensor {name} uses {F[name].saturation}; the RTL implements 'saturate'")
        if not F["a"].width == F["g"].width == F["p"].width:
            raise ValueError("preset: the block-floating vectors a, g, p must share one width (one block unit)")
        if F["u"].frac < F["x"].frac:
            raise ValueError("preset: U must hold x exactly (u.frac >= x.frac)")

        M = F["u_mul"].width
        self.e1 = DotEngine(k, 1, a_width=F["u_mul"].width, b_width=F["a"].width, tree_reg_every=2)
        self.e2 = DotEngine(k, d, a_width=F["u_mul"].width, b_width=max(F["x"].width, F["r"].width),
                            lane_sums=True, reduce=False)
        na2_max = k * (1 << (2 * (F["a"].width - 1)))
        n2_max = d * (1 << (2 * (F["r"].width - 1)))
        self.na2_width = _uwidth(na2_max)
        self.n2_width = _uwidth(n2_max)
        su_in = max(self.na2_width, self.n2_width, F["ahat"].frac + 2)
        fracs = (2 * F["a"].frac, F["ahat"].frac, 2 * F["r"].frac)
        self.su = ScalarUnit(self.su_config, su_in, frac_width=min_signed_width(min(fracs), max(fracs)))
        # a second unit computes rsqrt(n²) (for y) while the first computes 1/n² (for p)
        self.su2 = ScalarUnit(self.su_config, self.n2_width, frac_width=min_signed_width(2 * F["r"].frac, 2 * F["r"].frac))
        # run-time exponents: scalar-unit exponents plus block shifts, with room to spare
        self.exp_width = max(self.su.f_width, _uwidth(self.e2.lane_width + 2 * M)) + 4
        del M

        self.mem = StateMemory(d, k, F["u"].width)
        self.slots = 3
        self.x_layout = data.ArrayLayout(signed(F["x"].width), k)
        self.y_layout = data.StructLayout({"y": data.ArrayLayout(signed(F["y"].width), k), "last": 1})

        # pipeline tails (cycles from the last row issued until the pass's effects are complete)
        # (the next pass may start reading U once the last row is written, and BLOCK_A1 may read
        # a_acc once the E2 result of the last row is captured)
        self.row_tail_write = 3
        self.row_tail_acc = 3 + self.e2.latency
        # row pipeline depths (cycles from the clock edge that issues a row, S0, to the edge that
        # registers it into a stage): S4 holds the new row and its y; S5 feeds E2 (fused/standalone A pass)
        self.row_stages_y = 4
        self.row_stages_e2 = 5
        # output FIFO (SyncFIFOBuffered, depth d/k): from the edge writing a beat into the empty FIFO
        # to the edge transferring it (sink ready): 2 (inner memory + output register), 1 at depth 1
        self.y_fifo_latency = 1 if d // k == 1 else 2
        super().__init__({
            "x_in": In(stream.Signature(self.x_layout)),
            "y_out": Out(stream.Signature(self.y_layout)),
            "tokens": Out(32),
            "saturations": Out(32),
            "orth_count": Out(32),
            "orth_flag": Out(1),
            "count": Out(range(k + 1)),
            "busy": Out(1),
        })

    # ------------------------------------------------------------------------------------------
    def cycle_budget(self) -> dict:
        """Cycles per full token in steady state (next token already buffered, output drained),
        phase by phase; ``total`` is what ``tests/rtl/test_annihilation.py`` measures.

        Times are cycle indices from BLOCK_A2 (the first cycle a G-pass row is issued is BLOCK_A2).
        """
        d = self.d
        L1, L2 = self.e1.latency, self.e2.latency
        Lr, Ls = self.su.latency[ScalarOp.RECIP], self.su.latency[ScalarOp.RSQRT]
        # G pass: last row issued at d-1; S2 at d+1; E1 out at d+1+L1; r register d+2+L1
        t_n2 = d + 3 + L1                      # n² final
        t_g = t_n2 + L2                        # g captured: WAIT_G may exit
        # a-only work beside it: ARGMAX, rsqrt(||a||²), AHAT, 1/(1+|ahat_j|), QSCALE -> WAIT_G
        t_wait = 6 + Ls + Lr
        t_exit = max(t_g, t_wait)
        t_req = max(t_n2, t_wait)              # both scalar units accept 1/n², rsqrt(n²)
        t_recip = max(t_exit + 5, t_req + Lr)  # BLOCK_G1/2, TERM1/2, then RECIP_N2_WAIT
        t_rsqrt = max(t_recip + 4, t_req + Ls)  # PMUL, BLOCK_P1/2, then RSQRT_N2_WAIT
        budget = {
            "idle_block_a1": 2,
            "g_pass_and_a_work": t_exit + 1,
            "vector_work": t_rsqrt - t_exit,
            "row_pass": d + 1 + self.row_tail_acc,  # d rows, then the tail until a_acc of the next token
        }
        budget["total"] = sum(budget.values())
        return budget

    def latency(self) -> dict:
        """Latency of an isolated token (the core idle, the output sink ready): cycles from the
        clock edge accepting its last input beat to the edge transferring its first output beat.

        * ``warm_up_or_zero``: IDLE, ROW_START (2), then the row pass: row 0 reaches S4 after
          :attr:`row_stages_y` cycles, the first beat collects ``k`` rows, then the output FIFO:
          ``2 + row_stages_y + k + y_fifo_latency`` (``k + 8``).
        * ``full``: the previous token's row pass found no token to fuse, so a standalone A pass runs:
          IDLE (1); the A pass until BLOCK_A2 (``row_stages_e2 + d`` rows into E2, E2's latency
          ``L2``, one cycle to see ``a_done``, BLOCK_A1: ``d + row_stages_e2 + L2 + 2``); the G pass
          and the vector work from BLOCK_A2 to the row pass (``g_pass_and_a_work + vector_work`` of
          :meth:`cycle_budget`, i.e. ``t_rsqrt + 1``, which holds ``d``, ``L1``, ``L2`` and the
          scalar-unit latencies); then the row pass to the first output beat as above
          (``row_stages_y + k + y_fifo_latency``). At the default pipeline depths this is
          ``d + k + L2 + t_rsqrt + 15``.
        """
        d, k = self.d, self.k
        budget = self.cycle_budget()
        row_to_out = self.row_stages_y + k + self.y_fifo_latency
        a_pass = d + self.row_stages_e2 + self.e2.latency + 2
        g_and_vector = budget["g_pass_and_a_work"] + budget["vector_work"]
        return {
            "warm_up_or_zero": 2 + row_to_out,
            "full": 1 + a_pass + g_and_vector + row_to_out,
            "parts": {"idle": 1, "standalone_a_pass": a_pass, "g_pass_and_vector_work": g_and_vector,
                      "row_pass_to_first_beat": row_to_out},
        }

    @property
    def cycles_full(self) -> int:
        """Cycles per full token in steady state (see :meth:`cycle_budget`)."""
        return self.cycle_budget()["total"]

    # ------------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        F = self.fmt
        d, k = self.d, self.k
        fx, fu, fm, fr = F["x"].frac, F["u"].frac, F["u_mul"].frac, F["r"].frac
        fh, fq, fan, fy = F["ahat"].frac, F["q"].frac, F["a"].frac, F["y"].frac
        Wa, Wg, Wp, Wh, Wt, Wq = F["a"].width, F["g"].width, F["p"].width, F["ahat"].width, F["t"].width, F["q"].width
        EW = self.exp_width
        x_to_u = fu - fx
        rnd = F["u"].rounding

        m.submodules.mem = mem = self.mem
        m.submodules.e1 = e1 = self.e1
        m.submodules.e2 = e2 = self.e2
        m.submodules.su = su = self.su
        m.submodules.su2 = su2 = self.su2
        m.submodules.yfifo = yfifo = fifo.SyncFIFOBuffered(width=self.y_layout.size, depth=d // k)
        m.d.comb += [e1.o.ready.eq(1), e2.o.ready.eq(1)]

        # ---------------------------------------------------------------- token buffer
        # three slots: the current token (read by its row pass), the next one (read by the fused
        # A pass) and one being received, so short passes (warm-up, zero tokens) still fuse
        S = self.slots
        beats = d // k
        xbanks = [[memory.Memory(shape=signed(F["x"].width), depth=beats, init=[]) for _ in range(k)] for _ in range(S)]
        for s in range(S):
            for l in range(k):
                m.submodules[f"xbuf{s}_{l}"] = xbanks[s][l]
        slot_full = Signal(S)
        slot_nz = Signal(S)
        wslot = Signal(range(S))
        beat = Signal(range(beats))
        cslot = Signal(range(S))
        nslot = Signal(range(S))
        m.d.comb += nslot.eq(Mux(cslot == S - 1, 0, cslot + 1))
        x_accept = self.x_in.valid & self.x_in.ready
        m.d.comb += self.x_in.ready.eq(~slot_full.bit_select(wslot, 1))
        nz_beat = Cat(*[self.x_in.payload[l] != 0 for l in range(k)]).any()
        xw = [[xbanks[s][l].write_port() for l in range(k)] for s in range(S)]
        for s in range(S):
            for l in range(k):
                m.d.comb += [
                    xw[s][l].addr.eq(beat),
                    xw[s][l].data.eq(self.x_in.payload[l]),
                    xw[s][l].en.eq(x_accept & (wslot == s)),
                ]
        with m.If(x_accept):
            with m.If(beat == 0):
                m.d.sync += slot_nz.bit_select(wslot, 1).eq(nz_beat)
            with m.Else():
                m.d.sync += slot_nz.bit_select(wslot, 1).eq(slot_nz.bit_select(wslot, 1) | nz_beat)
            with m.If(beat == beats - 1):
                m.d.sync += [beat.eq(0), slot_full.bit_select(wslot, 1).eq(1),
                             wslot.eq(Mux(wslot == S - 1, 0, wslot + 1))]
            with m.Else():
                m.d.sync += beat.eq(beat + 1)
        free_cslot = Signal()  # pulsed by the sequencer when the current token is done
        with m.If(free_cslot):
            m.d.sync += [slot_full.bit_select(cslot, 1).eq(0), cslot.eq(nslot)]

        # ---------------------------------------------------------------- r buffer
        rbuf = memory.Memory(shape=signed(F["r"].width), depth=d, init=[])
        m.submodules.rbuf = rbuf
        rbuf_r = rbuf.read_port()
        rbuf_w = rbuf.write_port()

        # ---------------------------------------------------------------- sequencer registers
        count = Signal(range(k + 1))
        a_valid = Signal()          # a_acc holds Uᵀx for the current token
        a_acc = [Signal(signed(e2.lane_width), name=f"a_acc{l}") for l in range(k)]
        g_acc = [Signal(signed(e2.lane_width), name=f"g_acc{l}") for l in range(k)]
        a_n = [Signal(signed(Wa), name=f"a_n{l}") for l in range(k)]
        g_n = [Signal(signed(Wg), name=f"g_n{l}") for l in range(k)]
        ahat = [Signal(signed(Wh), name=f"ahat{l}") for l in range(k)]
        q = [Signal(signed(Wq + 1), name=f"q{l}") for l in range(k)]  # -s * q can reach 2^(Wq-1)
        tv = [Signal(signed(Wt), name=f"t{l}") for l in range(k)]
        p = [Signal(signed(Wp), name=f"p{l}") for l in range(k)]
        vprod = [Signal(signed(max(Wh + Wg, Wt + self.su_config.out_bits)), name=f"vprod{l}") for l in range(k)]
        n2 = Signal(unsigned(self.n2_width))
        m.d.comb += [su2.i.payload.x.eq(n2), su2.i.payload.frac.eq(2 * fr), su2.i.payload.op.eq(ScalarOp.RSQRT)]
        na2 = Signal(unsigned(self.na2_width))
        a_zero = Signal()
        j = Signal(range(k))
        s_neg = Signal()  # s = -1
        sh_blk = Signal(signed(EW))
        fg = Signal(signed(EW))
        fp = Signal(signed(EW))
        sm1, sf1 = Signal(signed(self.su_config.out_bits)), Signal(signed(EW))   # rsqrt(||a||²)
        smb, sfb = Signal(signed(self.su_config.out_bits)), Signal(signed(EW))   # beta
        smn, sfn = Signal(signed(self.su_config.out_bits)), Signal(signed(EW))   # 1/n²
        smy, sfy = Signal(signed(self.su_config.out_bits)), Signal(signed(EW))   # rsqrt(n²)
        orth = Signal()
        pending_sat = Signal(range(2 * k + 1))  # ahat/q saturations, committed if not orthogonal

        tokens = Signal(32)
        sats = Signal(32)
        orth_cnt = Signal(32)
        orth_flag = Signal()
        m.d.comb += [self.tokens.eq(tokens), self.saturations.eq(sats), self.orth_count.eq(orth_cnt),
                     self.orth_flag.eq(orth_flag), self.count.eq(count)]

        # ---------------------------------------------------------------- row pipeline control
        is_g = Signal()          # the pass in flight is a G pass (else a row/A pass)
        upd = Signal(RowUpdate)
        wr = Signal()
        emit = Signal()
        acc = Signal()
        acc_next = Signal()      # accumulate with the next token's x (fused) instead of the current one
        issuing = Signal()
        irow = Signal(range(d))
        g_done = Signal()
        n2_done = Signal()       # n² of the G pass in flight is final
        su_sent = Signal()       # 1/n² and rsqrt(n²) already requested
        a_done = Signal()
        clear = Signal()

        # S0: issue
        m.d.comb += [mem.rd_addr.eq(irow), mem.rd_en.eq(issuing), rbuf_r.addr.eq(irow), rbuf_r.en.eq(issuing)]
        xr = [[xbanks[s][l].read_port() for l in range(k)] for s in range(S)]
        for s in range(S):
            for l in range(k):
                m.d.comb += [xr[s][l].addr.eq(irow // k if k > 1 else irow), xr[s][l].en.eq(issuing)]
        with m.If(issuing):
            with m.If(irow == d - 1):
                m.d.sync += [issuing.eq(0), irow.eq(0)]
            with m.Else():
                m.d.sync += irow.eq(irow + 1)
        s1_v = Signal()
        s1_row = Signal(range(d))
        m.d.sync += [s1_v.eq(issuing), s1_row.eq(irow)]

        # S1: memory data; narrow U to the multiplier format
        s1_U = [mem.rd_data[l] for l in range(k)]
        lane_sel = s1_row % k if k > 1 else 0
        xsel_c = Signal(signed(F["x"].width))
        xsel_n = Signal(signed(F["x"].width))
        with m.Switch(lane_sel):
            for l in range(k):
                with m.Case(l):
                    m.d.comb += [
                        xsel_c.eq(Array(xr[s][l].data for s in range(S))[cslot]),
                        xsel_n.eq(Array(xr[s][l].data for s in range(S))[nslot]),
                    ]
        s2_v, s2_row = Signal(), Signal(range(d))
        s2_U = [Signal(signed(F["u"].width), name=f"s2_U{l}") for l in range(k)]
        s2_Um = [Signal(signed(F["u_mul"].width), name=f"s2_Um{l}") for l in range(k)]
        s2_usat = Signal(k)
        s2_xc, s2_xn = Signal(signed(F["x"].width)), Signal(signed(F["x"].width))
        s2_r = Signal(signed(F["r"].width))
        m.d.sync += [s2_v.eq(s1_v), s2_row.eq(s1_row), s2_xc.eq(xsel_c), s2_xn.eq(xsel_n), s2_r.eq(rbuf_r.data)]
        for l in range(k):
            um, over = requantize(m, s1_U[l], fu, F["u_mul"], name=f"s1_um{l}")
            m.d.sync += [s2_U[l].eq(s1_U[l]), s2_Um[l].eq(um), s2_usat[l].eq(over)]

        # ---- G pass: E1 computes r_i = U_i·a; then r narrowed, stored; g, n² accumulate
        g_sat_inc = Signal(range(k + 2))
        m.d.comb += [
            e1.i.valid.eq(s2_v & is_g),
            e1.i.payload.first.eq(1),
            e1.i.payload.last.eq(1),
        ]
        for l in range(k):
            m.d.comb += [e1.i.payload.a[l].eq(s2_Um[l]), e1.i.payload.b[l].eq(a_n[l])]
        L1 = e1.latency
        um_d = list(s2_Um)
        row_d = s2_row
        for stage in range(L1):
            nxt = [Signal(signed(F["u_mul"].width), name=f"gdly{stage}_Um{l}") for l in range(k)]
            nrow = Signal(range(d), name=f"gdly{stage}_row")
            m.d.sync += [n.eq(c) for n, c in zip(nxt, um_d)] + [nrow.eq(row_d)]
            um_d, row_d = nxt, nrow
        r_new, r_over = requantize(m, e1.o.payload.sum, fm + fan, F["r"], name="g0_r")
        g1_v, g1_row, g1_r = Signal(), Signal(range(d)), Signal(signed(F["r"].width))
        g1_Um = [Signal(signed(F["u_mul"].width), name=f"g1_Um{l}") for l in range(k)]
        m.d.sync += [g1_v.eq(e1.o.valid & is_g), g1_row.eq(row_d), g1_r.eq(r_new)]
        m.d.sync += [a.eq(b) for a, b in zip(g1_Um, um_d)]
        m.d.comb += [rbuf_w.addr.eq(g1_row), rbuf_w.data.eq(g1_r), rbuf_w.en.eq(g1_v)]
        with m.If(g1_v):
            m.d.sync += n2.eq(Mux(g1_row == 0, 0, n2) + g1_r * g1_r)
            with m.If(g1_row == d - 1):
                m.d.sync += n2_done.eq(1)
        m.d.comb += g_sat_inc.eq(Mux(s2_v & is_g, sum(s2_usat[l] for l in range(k)), 0)
                                 + Mux(e1.o.valid & is_g, r_over, 0))

        # ---- row pass S2: products
        cj = Signal(signed(F["u_mul"].width))
        with m.Switch(j):
            for l in range(k):
                with m.Case(l):
                    m.d.comb += cj.eq(s2_Um[l])
        s3_v, s3_row = Signal(), Signal(range(d))
        s3_U = [Signal(signed(F["u"].width), name=f"s3_U{l}") for l in range(k)]
        s3_pr = [Signal(signed(F["r"].width + Wp), name=f"s3_pr{l}") for l in range(k)]
        s3_pc = [Signal(signed(F["u_mul"].width + Wq + 1), name=f"s3_pc{l}") for l in range(k)]
        s3_ry = Signal(signed(F["r"].width + self.su_config.out_bits))
        s3_xc, s3_xn = Signal(signed(F["x"].width)), Signal(signed(F["x"].width))
        m.d.sync += [s3_v.eq(s2_v & ~is_g), s3_row.eq(s2_row), s3_xc.eq(s2_xc), s3_xn.eq(s2_xn),
                     s3_ry.eq(s2_r * smy)]
        for l in range(k):
            m.d.sync += [s3_U[l].eq(s2_U[l]), s3_pr[l].eq(s2_r * p[l]), s3_pc[l].eq(cj * q[l])]

        # ---- row pass S3: round, add, saturate; column overwrite; y
        sh_rp = Signal(signed(EW))   # fr + fp - fu, set before the row pass
        sh_y = Signal(signed(EW))    # fy(scalar) + fr - fy(format)
        s4_v, s4_row = Signal(), Signal(range(d))
        s4_new = [Signal(signed(F["u"].width), name=f"s4_new{l}") for l in range(k)]
        s4_y = Signal(signed(F["y"].width))
        s4_x = Signal(signed(F["x"].width))
        row_sat = Signal(range(k + 2))
        xu = s3_xc << x_to_u
        sat_terms = []
        for l in range(k):
            t1 = round_shift_var(m, s3_pr[l], sh_rp, rnd, max_left=F["u"].width + 2, name=f"s3_t1_{l}")
            t2 = round_shift(m, s3_pc[l], fm + fq - fu, rnd, name=f"s3_t2_{l}")
            full_l, over_l = saturate(m, s3_U[l] + t1 + t2, F["u"], name=f"s3_u{l}")
            sat_terms.append(over_l)
            val = Signal(signed(F["u"].width), name=f"s3_new{l}")
            with m.Switch(upd):
                with m.Case(RowUpdate.FULL):
                    m.d.comb += val.eq(Mux(j == l, xu, full_l))
                with m.Case(RowUpdate.WARM):
                    m.d.comb += val.eq(Mux(count == l, xu, s3_U[l]))
                with m.Default():
                    m.d.comb += val.eq(s3_U[l])
            m.d.sync += s4_new[l].eq(val)
        yv, y_over = saturate(m, round_shift_var(m, s3_ry, sh_y, rnd, max_left=F["y"].width + 2, name="s3_yr"),
                              F["y"], name="s3_y")
        is_full = upd == RowUpdate.FULL
        m.d.comb += row_sat.eq(Mux(s3_v & is_full, sum(sat_terms) + y_over, 0))
        m.d.sync += [s4_v.eq(s3_v), s4_row.eq(s3_row), s4_y.eq(Mux(is_full, yv, 0)),
                     s4_x.eq(Mux(acc_next, s3_xn, s3_xc))]

        # ---- row pass S4: write back, pack y, narrow the new row for the fused A pass
        m.d.comb += [mem.wr_addr.eq(Mux(clear, irow, s4_row))]
        with m.If(clear):
            m.d.comb += [mem.wr_en.eq((1 << k) - 1)] + [mem.wr_data[l].eq(0) for l in range(k)]
        with m.Else():
            wmask = Signal(k)
            with m.Switch(upd):
                with m.Case(RowUpdate.FULL):
                    m.d.comb += wmask.eq((1 << k) - 1)
                with m.Case(RowUpdate.WARM):
                    m.d.comb += wmask.eq(Const(1, k) << count)
            m.d.comb += [mem.wr_en.eq(Mux(s4_v & wr, wmask, 0))] + [mem.wr_data[l].eq(s4_new[l]) for l in range(k)]
        ybeat = [Signal(signed(F["y"].width), name=f"ybeat{l}") for l in range(k - 1)]
        yfull = Signal(self.y_layout)
        m.d.comb += [yfull.y[l].eq(ybeat[l]) for l in range(k - 1)]
        m.d.comb += [yfull.y[k - 1].eq(s4_y), yfull.last.eq(s4_row == d - 1)]
        ylane = s4_row % k if k > 1 else 0
        with m.If(s4_v & emit):
            with m.Switch(ylane):
                for l in range(k - 1):
                    with m.Case(l):
                        m.d.sync += ybeat[l].eq(s4_y)
        m.d.comb += [yfifo.w_data.eq(yfull.as_value()), yfifo.w_en.eq(s4_v & emit & (ylane == k - 1))]
        m.d.comb += [self.y_out.valid.eq(yfifo.r_rdy), self.y_out.payload.eq(yfifo.r_data), yfifo.r_en.eq(self.y_out.ready)]

        s5_v, s5_row = Signal(), Signal(range(d))
        s5_Um = [Signal(signed(F["u_mul"].width), name=f"s5_Um{l}") for l in range(k)]
        s5_x = Signal(signed(F["x"].width))
        m.d.sync += [s5_v.eq(s4_v & acc), s5_row.eq(s4_row), s5_x.eq(s4_x)]
        for l in range(k):
            um, _ = requantize(m, s4_new[l], fu, F["u_mul"], name=f"s4_um{l}")
            m.d.sync += s5_Um[l].eq(um)

        # ---- E2: per-lane sums, fed by the G pass (Um·r) or the row/A pass (Um'·x)
        with m.If(is_g):
            m.d.comb += [e2.i.valid.eq(g1_v), e2.i.payload.first.eq(g1_row == 0), e2.i.payload.last.eq(g1_row == d - 1)]
            for l in range(k):
                m.d.comb += [e2.i.payload.a[l].eq(g1_Um[l]), e2.i.payload.b[l].eq(g1_r)]
        with m.Else():
            m.d.comb += [e2.i.valid.eq(s5_v), e2.i.payload.first.eq(s5_row == 0), e2.i.payload.last.eq(s5_row == d - 1)]
            for l in range(k):
                m.d.comb += [e2.i.payload.a[l].eq(s5_Um[l]), e2.i.payload.b[l].eq(s5_x)]
        with m.If(e2.o.valid):
            with m.If(is_g):
                m.d.sync += [g_acc[l].eq(e2.o.payload.lanes[l]) for l in range(k)]
                m.d.sync += g_done.eq(1)
            with m.Else():
                m.d.sync += [a_acc[l].eq(e2.o.payload.lanes[l]) for l in range(k)]
                m.d.sync += a_done.eq(1)

        # ---------------------------------------------------------------- vector unit
        # Shared k-lane datapaths for the k-vector work; states pick their inputs.
        # block: sh so that the largest |v| rounds to just below 2^(w-1); then v rounded by sh
        blk_w = max(e2.lane_width, len(vprod[0]))
        blk_in = [Signal(signed(blk_w), name=f"blk_in{l}") for l in range(k)]
        Wb = Wa  # every block-floating vector (a, g, p) has the same width (checked in __init__)
        mags = [abs_value(m, v, name=f"blk_abs{l}") for v in blk_in]
        mx = mags[0]
        for l, mg in enumerate(mags[1:], 1):
            mx = materialise(m, Mux(mg > mx, mg, mx), f"blk_max{l}")
        top = msb_index(m, mx, name="blk_msb")
        sh0 = materialise(m, Mux(mx == 0, 0, top - (Wb - 2)), "blk_sh0", signed(EW))
        blk_rounded = round_shift_var(m, mx, sh0, rnd, max_left=Wb, name="blk_mxr")
        carry = materialise(m, blk_rounded >= (1 << (Wb - 1)), "blk_carry")
        blk_sh = materialise(m, sh0 + carry, "blk_sh", signed(EW))
        blk_zero = materialise(m, mx == 0, "blk_zero")
        blk_out = [round_shift_var(m, blk_in[l], sh_blk, rnd, max_left=Wb, name=f"blk_out{l}")
                   for l in range(k)]

        # scale: v_l * (scalar mantissa), rounded by a run-time shift; saturated per use
        vs_w = max(Wa, Wh, len(vprod[0]))
        vs_in = [Signal(signed(vs_w), name=f"vs_in{l}") for l in range(k)]
        vs_m = Signal(signed(self.su_config.out_bits))
        vs_sh = Signal(signed(EW))
        vs_ml = max(Wh, Wq, Wt) + 2
        vs_out = [round_shift_var(m, vs_in[l] * vs_m, vs_sh, rnd, max_left=vs_ml, name=f"vs_out{l}") for l in range(k)]
        ahat_sat = [saturate(m, vs_out[l], F["ahat"], name=f"ahat_sat{l}") for l in range(k)]
        q_sat = [saturate(m, vs_out[l], F["q"], name=f"q_sat{l}") for l in range(k)]
        t_sat = [saturate(m, -g_n[l] + Mux(s_neg, -vs_out[l], vs_out[l]), F["t"], name=f"t_sat{l}") for l in range(k)]

        # product: vprod_l = v_l * w (ahat * g_j, then t * (1/n²) mantissa)
        vm_w = max(Wh, Wt)
        vm_in = [Signal(signed(vm_w), name=f"vm_in{l}") for l in range(k)]
        vm_b = Signal(signed(max(Wg, self.su_config.out_bits)))

        # selections by j
        def pick(vec, name):
            out = Signal(vec[0].shape(), name=name)
            with m.Switch(j):
                for l in range(k):
                    with m.Case(l):
                        m.d.comb += out.eq(vec[l])
            return out
        ahat_j = pick(ahat, "ahat_j")
        g_j = pick(g_n, "g_j")
        an_j = Signal(signed(Wa))

        # argmax |a_n| (first on ties)
        an_abs = [abs_value(m, v, name=f"an_abs{l}") for v in a_n]
        best, bmag = Const(0, range(k)), an_abs[0]
        for l in range(1, k):
            take = materialise(m, an_abs[l] > bmag, f"argmax_take{l}")
            best = materialise(m, Mux(take, l, best), f"argmax_idx{l}", range(k))
            bmag = materialise(m, Mux(take, an_abs[l], bmag), f"argmax_mag{l}")
        with m.Switch(best):
            for l in range(k):
                with m.Case(l):
                    m.d.comb += an_j.eq(a_n[l])
        na2_sum = materialise(m, sum(a_n[l] * a_n[l] for l in range(k)), "na2_sum")
        ahat_j_abs = abs_value(m, ahat_j, name="ahat_j_abs")

        su_req = Signal(self.su.in_layout)
        m.d.comb += su.i.payload.eq(su_req)

        # ---------------------------------------------------------------- sequencer
        sat_inc = Signal(range(4 * k + 4))
        seq_sat = Signal(range(2 * k + 2))
        m.d.comb += sat_inc.eq(g_sat_inc + row_sat + seq_sat)
        m.d.sync += sats.eq(sats + sat_inc)
        tail = Signal(range(max(self.row_tail_acc, self.row_tail_write) + 2))
        fused = Signal()
        warm_tok = Signal()
        m.d.comb += free_cslot.eq(0)

        def start_row_pass(update):
            nxt_ready = slot_full.bit_select(nslot, 1)
            m.d.sync += [is_g.eq(0), wr.eq(update != RowUpdate.NONE), emit.eq(1), acc.eq(nxt_ready),
                         acc_next.eq(1), fused.eq(nxt_ready), issuing.eq(1), irow.eq(0), a_done.eq(0),
                         tail.eq(Mux(nxt_ready, self.row_tail_acc, self.row_tail_write))]

        with m.FSM(init="CLEAR") as fsm:
            m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
            with m.State("CLEAR"):  # RAM contents survive reset: zero U once
                m.d.comb += clear.eq(1)
                with m.If(irow == d - 1):
                    m.d.sync += irow.eq(0)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += irow.eq(irow + 1)

            with m.State("IDLE"):
                with m.If(slot_full.bit_select(cslot, 1)):
                    nz = slot_nz.bit_select(cslot, 1)
                    m.d.sync += [orth.eq(0), warm_tok.eq(nz & (count < k))]
                    with m.If(~nz):
                        m.d.sync += upd.eq(RowUpdate.NONE)
                        m.next = "ROW_START"
                    with m.Elif(count < k):
                        m.d.sync += upd.eq(RowUpdate.WARM)
                        m.next = "ROW_START"
                    with m.Elif(~a_valid):
                        # standalone A pass: identity row pass accumulating Uᵀx with this token's x
                        m.d.sync += [is_g.eq(0), upd.eq(RowUpdate.NONE), wr.eq(0), emit.eq(0), acc.eq(1),
                                     acc_next.eq(0), issuing.eq(1), irow.eq(0), a_done.eq(0)]
                        m.next = "A_PASS"
                    with m.Else():
                        m.next = "BLOCK_A1"

            with m.State("A_PASS"):
                with m.If(a_done):
                    m.d.sync += a_valid.eq(1)
                    m.next = "BLOCK_A1"

            with m.State("BLOCK_A1"):
                m.d.comb += [blk_in[l].eq(a_acc[l]) for l in range(k)]
                m.d.sync += [sh_blk.eq(blk_sh), a_zero.eq(blk_zero)]
                # start the G pass in the background: row 0 reaches E1 after BLOCK_A2 wrote a_n
                m.d.sync += [is_g.eq(1), issuing.eq(1), irow.eq(0), g_done.eq(0), n2_done.eq(0), su_sent.eq(0)]
                m.next = "BLOCK_A2"
            with m.State("BLOCK_A2"):
                m.d.comb += [blk_in[l].eq(a_acc[l]) for l in range(k)]
                m.d.sync += [a_n[l].eq(blk_out[l]) for l in range(k)]
                m.next = "ARGMAX"
            with m.State("ARGMAX"):  # j = first index of the largest |a_n|; s = sign(a_n[j]); ||a||²
                m.d.sync += [j.eq(best), s_neg.eq(an_j < 0), na2.eq(na2_sum), pending_sat.eq(0)]
                with m.If(a_zero):
                    m.next = "WAIT_G"
                with m.Else():
                    m.next = "NORM_A_REQ"

            # rsqrt(||a||²) -> ahat
            with m.State("NORM_A_REQ"):
                m.d.comb += [su_req.x.eq(na2), su_req.frac.eq(2 * fan), su_req.op.eq(ScalarOp.RSQRT), su.i.valid.eq(1)]
                with m.If(su.i.ready):
                    m.next = "NORM_A_WAIT"
            with m.State("NORM_A_WAIT"):
                m.d.comb += su.o.ready.eq(1)
                with m.If(su.o.valid):
                    m.d.sync += [sm1.eq(su.o.payload.m), sf1.eq(su.o.payload.f)]
                    m.next = "AHAT"
            with m.State("AHAT"):  # ahat = a rsqrt(||a||²)
                m.d.comb += [vs_in[l].eq(a_n[l]) for l in range(k)] + [vs_m.eq(sm1), vs_sh.eq(sf1 + fan - fh)]
                m.d.sync += [ahat[l].eq(ahat_sat[l][0]) for l in range(k)]
                m.d.sync += pending_sat.eq(sum(ahat_sat[l][1] for l in range(k)))
                m.next = "BETA_REQ"
            # beta = 1 / (1 + |ahat_j|)
            with m.State("BETA_REQ"):
                m.d.comb += [su_req.x.eq((1 << fh) + ahat_j_abs), su_req.frac.eq(fh),
                             su_req.op.eq(ScalarOp.RECIP), su.i.valid.eq(1)]
                with m.If(su.i.ready):
                    m.next = "BETA_WAIT"
            with m.State("BETA_WAIT"):
                m.d.comb += su.o.ready.eq(1)
                with m.If(su.o.valid):
                    m.d.sync += [smb.eq(su.o.payload.m), sfb.eq(su.o.payload.f)]
                    m.next = "QSCALE"
            with m.State("QSCALE"):  # q_l = -s round(beta ahat_l)
                m.d.comb += [vs_in[l].eq(ahat[l]) for l in range(k)] + [vs_m.eq(smb), vs_sh.eq(sfb + fh - fq)]
                m.d.sync += [q[l].eq(Mux(s_neg, q_sat[l][0], -q_sat[l][0])) for l in range(k)]
                m.d.sync += pending_sat.eq(pending_sat + sum(q_sat[l][1] for l in range(k)))
                m.next = "WAIT_G"

            with m.State("WAIT_G"):  # then skip and flag (a = 0 or n² = 0), or go on with g
                # 1/n² (unit 1) and rsqrt(n²) (unit 2) start as soon as n² is final; both units
                # are idle here, so both accept in the same cycle
                is_orth = a_zero | (n2 == 0)
                can_req = n2_done & ~is_orth & ~su_sent
                with m.If(can_req):
                    m.d.comb += [su_req.x.eq(n2), su_req.frac.eq(2 * fr), su_req.op.eq(ScalarOp.RECIP),
                                 su.i.valid.eq(su2.i.ready), su2.i.valid.eq(su.i.ready)]
                sent_now = can_req & su.i.ready & su2.i.ready
                with m.If(sent_now):
                    m.d.sync += su_sent.eq(1)
                with m.If(g_done):
                    m.d.sync += is_g.eq(0)
                    with m.If(is_orth):
                        m.d.sync += [orth.eq(1), upd.eq(RowUpdate.NONE)]
                        m.next = "ROW_START"
                    with m.Else():
                        m.d.comb += seq_sat.eq(pending_sat)
                        with m.If(su_sent | sent_now):
                            m.next = "BLOCK_G1"
                        with m.Else():
                            m.next = "N2_REQ"
            with m.State("N2_REQ"):  # both scalar units are idle here: both accept at once
                m.d.comb += [su_req.x.eq(n2), su_req.frac.eq(2 * fr), su_req.op.eq(ScalarOp.RECIP),
                             su.i.valid.eq(su2.i.ready), su2.i.valid.eq(su.i.ready)]
                with m.If(su.i.ready & su2.i.ready):
                    m.next = "BLOCK_G1"
            with m.State("BLOCK_G1"):
                m.d.comb += [blk_in[l].eq(g_acc[l]) for l in range(k)]
                m.d.sync += sh_blk.eq(blk_sh)
                m.next = "BLOCK_G2"
            with m.State("BLOCK_G2"):
                m.d.comb += [blk_in[l].eq(g_acc[l]) for l in range(k)]
                m.d.sync += [g_n[l].eq(blk_out[l]) for l in range(k)]
                m.d.sync += fg.eq(fm + fr - sh_blk)
                m.next = "TERM1"
            with m.State("TERM1"):  # ahat_l * g_j
                m.d.comb += [vm_in[l].eq(ahat[l]) for l in range(k)] + [vm_b.eq(g_j)]
                m.d.sync += [vprod[l].eq(vm_in[l] * vm_b) for l in range(k)]
                m.next = "TERM2"
            with m.State("TERM2"):  # t_l = clip(-g_l + s round(beta ahat_l g_j))
                m.d.comb += [vs_in[l].eq(vprod[l]) for l in range(k)] + [vs_m.eq(smb), vs_sh.eq(sfb + fh)]
                m.d.sync += [tv[l].eq(t_sat[l][0]) for l in range(k)]
                m.d.comb += seq_sat.eq(sum(t_sat[l][1] for l in range(k)))
                m.next = "RECIP_N2_WAIT"
            with m.State("RECIP_N2_WAIT"):
                m.d.comb += su.o.ready.eq(1)
                with m.If(su.o.valid):
                    m.d.sync += [smn.eq(su.o.payload.m), sfn.eq(su.o.payload.f)]
                    m.next = "PMUL"
            with m.State("PMUL"):  # t_l / n² (mantissa product)
                m.d.comb += [vm_in[l].eq(tv[l]) for l in range(k)] + [vm_b.eq(smn)]
                m.d.sync += [vprod[l].eq(vm_in[l] * vm_b) for l in range(k)]
                m.next = "BLOCK_P1"
            with m.State("BLOCK_P1"):
                m.d.comb += [blk_in[l].eq(vprod[l]) for l in range(k)]
                m.d.sync += sh_blk.eq(blk_sh)
                m.next = "BLOCK_P2"
            with m.State("BLOCK_P2"):
                m.d.comb += [blk_in[l].eq(vprod[l]) for l in range(k)]
                for l in range(k):
                    m.d.sync += p[l].eq(Mux(j == l, 0, blk_out[l]))
                    m.d.sync += q[l].eq(Mux(j == l, 0, q[l]))
                m.d.sync += [fp.eq(fg + sfn - sh_blk), sh_rp.eq(fr + fg + sfn - sh_blk - fu)]
                m.next = "RSQRT_N2_WAIT"
            with m.State("RSQRT_N2_WAIT"):
                m.d.comb += su2.o.ready.eq(1)
                with m.If(su2.o.valid):
                    m.d.sync += [smy.eq(su2.o.payload.m), sfy.eq(su2.o.payload.f),
                                 sh_y.eq(su2.o.payload.f + fr - fy), upd.eq(RowUpdate.FULL)]
                    with m.If(yfifo.level == 0):
                        start_row_pass(RowUpdate.FULL)
                        m.next = "ROW_PASS"
                    with m.Else():
                        m.next = "ROW_START"

            # the row pass: every token; fuses the next token's A pass when it is buffered
            with m.State("ROW_START"):
                with m.If(yfifo.level == 0):
                    start_row_pass(upd)
                    m.next = "ROW_PASS"
            with m.State("ROW_PASS"):
                with m.If(~issuing):
                    with m.If(tail == 0):  # token done
                        m.d.comb += free_cslot.eq(1)
                        m.d.sync += [tokens.eq(tokens + 1), a_valid.eq(fused), count.eq(count + warm_tok)]
                        with m.If(orth):
                            m.d.sync += [orth_cnt.eq(orth_cnt + 1), orth_flag.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += tail.eq(tail - 1)
        return m
