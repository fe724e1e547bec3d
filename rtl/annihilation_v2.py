"""The annihilation core v2 (issue 13): one pass over ``U`` per token, ``heads`` independent
memories interleaved on one datapath, bit-exact with
:func:`specmem.golden.fixed.annihilation.annihilation_fixed` in the co-accumulated schedule
(``gram="coaccumulate"``, presets ``int18`` / ``int16`` / ``int8``, orthogonal inputs evicted,
``p``'s exponent clamped: the model's defaults for those presets), each head a batch row of the
model.

Blocks: the states ``U`` of all heads (``H·d`` rows of ``k·w_u`` bits) in one
:class:`~specmem.rtl.bram.RegisteredRAM` (read through its output register); the
:class:`~specmem.rtl.row_unit.RowUnit` with *travelling* controls (each row carries its pass's
controls, so passes of different heads follow each other with no gap), which also co-accumulates
``a' = Uᵀx_next`` and the exact Gram ``G'`` and snapshots them at each pass's last row; the
:class:`~specmem.rtl.token_chain.TokenChain`; a token buffer of ``H + 2`` slots; an output FIFO.

Tokens arrive in stream order ``n = t·H + h`` (time step, then head), ``d/k`` beats each, and
leave in the same order. Three engines:

* the *chain engine* walks the tokens in order and fills one mailbox per head with the controls
  of the head's next pass: zero input (no write), warm-up (column ``count`` <- ``x``), or, with the
  memory full, the chain on the head's snapshot: the rank-two update (``y = r rsqrt(n²)``) or,
  for an orthogonal input, an eviction (counted, flagged). If the head's previous pass could not
  see ``x`` (it had not arrived), it asks for a read-only *A pass* first;
* the *dispatcher* takes the mailboxes in token order and issues one pass at a time: ``d`` rows,
  the next token of the same head (``x_{n+H}``) fed to the co-accumulation when already buffered;
* the *output side* writes each row back and turns ``r_i`` into ``y_i`` with the descriptor of
  the pass it belongs to.

The chain of one head runs while the other heads' passes stream, so with enough heads a token
costs ``max(d + 4, chain)`` cycles per head instead of pass + drain + chain; the counts are in
``docs/annihilation.md`` (measured by the tests' harness). ``count`` reports head 0.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.annihilation import p_shift_window
from specmem.golden.fixed.formats import formats_for

from .bram import BRAM_READ_LATENCY, RegisteredRAM
from .dsp import PipelinedMultiplier
from .params import check_dims
from .pipeline import stage_register
from .row_unit import RowUnit
from .saturate import fits_signed
from .shift import RoundShiftVar
from .token_chain import TokenChain

__all__ = ["AnnihilationCoreV2"]

_NONE, _WARM, _EVICT, _FULL, _APASS = 0, 1, 2, 3, 4


class AnnihilationCoreV2(wiring.Component):
    """Annihilation memory for dimension ``d``, ``k`` stored directions, ``heads`` memories, one
    preset (``int18``, ``int16``, ``int8``), on the v2 blocks.

    Members as the v1 core's (``AnnihilationCore``): ``x_in`` (``k`` signed elements per beat,
    ``d/k`` beats a token), ``y_out`` (``k`` elements of ``y`` and ``last``), ``tokens``,
    ``saturations`` (``U`` writes, ``u_mul``, ``r``, ``ahat``, ``q``, ``t``, ``p``, ``y``), ``orth_count``, ``orth_flag``,
    ``count``, ``busy``.
    """

    def __init__(self, d: int, k: int, preset: str = "int18", *, heads: int = 1, chains: int = 1,
                 dsp: str = "registered", bram: str = "behavioural", norm_lanes: int | None = None):
        check_dims(d, k)
        if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= 16:
            raise ValueError(f"heads: must be an integer in [1, 16], got {heads!r}")
        if isinstance(chains, bool) or not isinstance(chains, int) or not 1 <= chains <= heads:
            raise ValueError(f"chains: must be an integer in [1, heads = {heads}], got {chains!r}")
        self.d, self.k, self.preset, self.dsp, self.bram, self.heads = d, k, preset, dsp, bram, heads
        self.slots = heads + 2  # x_n, x_{n+H} (the head's next token) and one filling
        # p's exponent clamped to a 16-value window (the model's default for these presets): the row
        # unit's shift of r_i p is then 4 bits to the right, no left shifter
        fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
        self.p_window = p_shift_window(fmt, k)
        self.rows = RowUnit(d, k, preset, dsp=dsp, travelling_controls=True, delays=bram, p_window=self.p_window,
                            snapshot=False)   # the per-head banks below are the snapshots
        # the chain's products wider than one MULT18X18D (g_j beta: 36 bits) are split into 18 x 18 pieces
        # one head: the chain reads the head's snapshot bank in place (it holds while the chain runs)
        self.chain_units = [TokenChain(d, k, preset, acc_width=self.rows.acc_width, dsp=dsp, norm_lanes=norm_lanes,
                                       p_window=self.p_window, latch_inputs=heads > 1)
                            for _ in range(chains)]
        self.chain = self.chain_units[0]
        self.uram = RegisteredRAM(heads * d, k * self.rows.wu, bram)
        self.fmt = F = self.rows.fmt
        self.wx, self.wy, self.wu = F["x"].width, F["y"].width, F["u"].width
        self.beats = d // k
        self.x_layout = data.ArrayLayout(signed(self.wx), k)
        self.y_layout = data.StructLayout({"y": data.ArrayLayout(signed(self.wy), k), "last": 1})
        self.y_latency = 3  # r_i ys_m; round; saturate
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

    def pass_cycles(self) -> int:
        """Cycles the row issue spends on one pass: dispatch, ``d`` rows, the RAM's read latency."""
        return 1 + self.d + BRAM_READ_LATENCY + 1

    def elaborate(self, platform):
        m = Module()
        d, k, F, B, H, NS = self.d, self.k, self.fmt, self.beats, self.heads, self.slots
        ru, tc, TCS = self.rows, self.chain, self.chain_units
        m.submodules.rows = ru
        for c, unit in enumerate(TCS):
            m.submodules[f"chain{c}"] = unit
        uram = self.uram
        m.submodules.uram = uram
        xmem = memory.Memory(shape=self.x_layout, depth=NS * B, init=[])
        m.submodules.xmem = xmem
        xw, xr_cur, xr_nxt = xmem.write_port(), xmem.read_port(), xmem.read_port()
        DEPTH = 3 * B
        yfifo = fifo.SyncFIFOBuffered(width=k * self.wy + 1, depth=DEPTH)
        m.submodules.yfifo = yfifo
        m.d.comb += ru.en.eq(1)

        def nxt_slot(s, n=1):
            out = Signal(range(NS), name=f"slot_plus{n}")
            m.d.comb += out.eq(Mux(s + n >= NS, (s + n - NS)[:len(out)], s + n))
            return out

        # -- token buffer: slots filled and consumed in stream order
        full, nzs = Signal(NS), Signal(NS)
        wr_slot, wr_beat, wr_nz = Signal(range(NS)), Signal(range(B)), Signal()
        m.d.comb += self.x_in.ready.eq(~full.bit_select(wr_slot, 1))
        m.d.comb += [xw.addr.eq(wr_slot * B + wr_beat), xw.data.eq(self.x_in.payload),
                     xw.en.eq(self.x_in.valid & self.x_in.ready)]
        beat_nz = Signal()
        m.d.comb += beat_nz.eq(sum(self.x_in.payload[l] != 0 for l in range(k)) != 0)
        set_full, clr_full = Signal(NS), Signal(NS)
        with m.If(self.x_in.valid & self.x_in.ready):
            with m.If(wr_beat == B - 1):
                m.d.sync += [wr_beat.eq(0), wr_nz.eq(0), wr_slot.eq(nxt_slot(wr_slot))]
                m.d.comb += set_full.eq(1 << wr_slot)
                m.d.sync += nzs.bit_select(wr_slot, 1).eq(wr_nz | beat_nz)
            with m.Else():
                m.d.sync += [wr_beat.eq(wr_beat + 1), wr_nz.eq(wr_nz | beat_nz)]
        m.d.sync += full.eq((full | set_full) & ~clr_full)

        # -- per-head state and the mailbox between the chain engine and the dispatcher
        def per_head(shape, name):
            return [Signal(shape, name=f"{name}{h}") for h in range(H)]

        count, ptr = per_head(range(k + 1), "count"), per_head(range(k), "ptr")
        acc_valid, pending, ready = per_head(1, "acc_valid"), per_head(1, "pending"), per_head(1, "ctl_ready")
        inflight = per_head(1, "inflight")  # a chain unit works on the head's next token
        c_mode = per_head(3, "c_mode")
        c_wsel = per_head(k, "c_wsel")
        c_a = per_head(data.ArrayLayout(signed(ru.wa), k), "c_a")
        c_p = per_head(data.ArrayLayout(signed(ru.wp), k), "c_p")
        c_q = per_head(data.ArrayLayout(signed(ru.wq), k), "c_q")
        c_psh = per_head(signed(8), "c_psh")
        c_ysm, c_ysf = per_head(signed(tc.P), "c_ysm"), per_head(signed(12), "c_ysf")
        snap_a = [[Signal(signed(ru.acc_width), name=f"snap_a{h}_{l}") for l in range(k)] for h in range(H)]
        snap_g = [[Signal(signed(ru.acc_width), name=f"snap_g{h}_{n}") for n in range(ru.n_gram)] for h in range(H)]
        tokens, orth_count, orth_flag = Signal(32), Signal(32), Signal(1)
        sat_chain, sat_y = Signal(32), Signal(32)
        m.d.comb += [self.tokens.eq(tokens), self.orth_count.eq(orth_count), self.orth_flag.eq(orth_flag),
                     self.count.eq(count[0]), self.saturations.eq(ru.sat_u + ru.sat_um + ru.sat_r + sat_chain + sat_y)]
        A = Array
        set_pending, clr_pending = Signal(H), Signal(H)
        set_ready, set_ready_c, clr_ready = Signal(H), Signal(H), Signal(H)
        for h in range(H):
            with m.If(set_pending[h]):
                m.d.sync += pending[h].eq(1)
            with m.Elif(clr_pending[h]):
                m.d.sync += pending[h].eq(0)
            with m.If(set_ready[h] | set_ready_c[h]):
                m.d.sync += ready[h].eq(1)
            with m.Elif(clr_ready[h]):
                m.d.sync += ready[h].eq(0)

        # -- the chain engine: tokens in stream order, one mailbox entry per head
        cslot, chead = Signal(range(NS)), Signal(range(H))
        c_nz = Signal()
        m.d.comb += c_nz.eq(nzs.bit_select(cslot, 1))
        chain_head = [Signal(range(H), name=f"chain_head{c}") for c in range(len(TCS))]
        with m.FSM(init="WAIT", name="chain_engine"):
            with m.State("WAIT"):  # token m in cslot, head chead: its head's last pass done, mailbox empty
                with m.If(full.bit_select(cslot, 1) & ~A(ready)[chead] & ~A(pending)[chead] & ~A(inflight)[chead]):
                    with m.If(~c_nz):
                        m.d.sync += A(c_mode)[chead].eq(_NONE)
                        m.next = "POST"
                    with m.Elif(A(count)[chead] < k):
                        m.d.sync += [A(c_mode)[chead].eq(_WARM), A(c_wsel)[chead].eq(1 << A(count)[chead]),
                                     A(count)[chead].eq(A(count)[chead] + 1)]
                        m.next = "POST"
                    with m.Elif(~A(acc_valid)[chead]):  # its previous pass did not see x_m: an A pass first
                        m.d.sync += A(c_mode)[chead].eq(_APASS)
                        m.d.comb += set_ready.eq(1 << chead)
                    with m.Else():
                        m.next = "LAUNCH"
            with m.State("LAUNCH"):  # the first free chain unit takes the head's snapshot
                taken = Const(0)
                for c, unit in enumerate(TCS):
                    with m.If(~taken & unit.i.ready):
                        m.d.comb += unit.i.valid.eq(1)
                        for h in range(H):
                            with m.If(chead == h):
                                if H > 1:
                                    m.d.comb += [unit.i.payload.a[l].eq(snap_a[h][l]) for l in range(k)]
                                    m.d.comb += [unit.i.payload.g[n].eq(snap_g[h][n]) for n in range(ru.n_gram)]
                                m.d.comb += unit.i.payload.ptr.eq(ptr[h])
                        m.d.sync += [chain_head[c].eq(chead), A(inflight)[chead].eq(1)]
                        m.next = "NEXT"
                    taken = taken | unit.i.ready
            with m.State("POST"):  # mailbox full
                m.d.comb += set_ready.eq(1 << chead)
                m.next = "NEXT"
            with m.State("NEXT"):  # the next token (a launched chain fills its mailbox when it ends)
                m.d.sync += [cslot.eq(nxt_slot(cslot)), chead.eq(Mux(chead == H - 1, 0, chead + 1))]
                m.next = "WAIT"

        if H == 1:   # the chain reads the snapshot in place: it holds from LAUNCH until the result
            m.d.comb += [tc.i.payload.a[l].eq(snap_a[0][l]) for l in range(k)]
            m.d.comb += [tc.i.payload.g[n].eq(snap_g[0][n]) for n in range(ru.n_gram)]

        # chain results, one per cycle (the first unit with one): the head's mailbox, pointer and counts
        done_any = Const(0)
        for c, unit in enumerate(TCS):
            tcp, hc = unit.o.payload, chain_head[c]
            with m.If(~done_any):
                m.d.comb += unit.o.ready.eq(1)
                with m.If(unit.o.valid):
                    m.d.comb += set_ready_c.eq(1 << hc)
                    m.d.sync += A(inflight)[hc].eq(0)
                    with m.If(tcp.orth):
                        m.d.sync += [A(c_mode)[hc].eq(_EVICT), A(c_wsel)[hc].eq(1 << tcp.evict_j),
                                     A(ptr)[hc].eq(Mux(tcp.evict_j == k - 1, 0, tcp.evict_j + 1)),
                                     orth_count.eq(orth_count + 1), orth_flag.eq(1)]
                    with m.Else():
                        m.d.sync += [A(c_mode)[hc].eq(_FULL), A(c_wsel)[hc].eq(1 << tcp.j),
                                     A(c_a)[hc].eq(tcp.a_n), A(c_p)[hc].eq(tcp.p), A(c_q)[hc].eq(tcp.q),
                                     A(c_psh)[hc].eq(F["r"].frac + tcp.fp - F["u"].frac),
                                     A(c_ysm)[hc].eq(tcp.ysc_m), A(c_ysf)[hc].eq(tcp.ysc_f),
                                     sat_chain.eq(sat_chain + tcp.sat)]
            done_any = done_any | unit.o.valid

        # -- pass descriptors, in pass order: the output side and the accumulator side pop them
        DQ = 4
        q_head = [Signal(range(H), name=f"dq_head{i}") for i in range(DQ)]
        q_full, q_emit = Signal(DQ), Signal(DQ)
        q_ysm = [Signal(signed(tc.P), name=f"dq_ysm{i}") for i in range(DQ)]
        q_ysf = [Signal(signed(12), name=f"dq_ysf{i}") for i in range(DQ)]
        q_wr, q_out, q_acc = Signal(range(DQ)), Signal(range(DQ)), Signal(range(DQ))
        q_count = Signal(range(DQ + 1))  # descriptors not yet popped by the accumulator side
        q_live = Signal(range(DQ + 1))   # ... by the output side
        q_room = Signal()                # the slot at q_wr is free on both sides (registered counts)
        m.d.comb += q_room.eq((q_count < DQ) & (q_live < DQ))

        # -- dispatcher and row issue
        dslot, dhead = Signal(range(NS)), Signal(range(H))
        x_slot, xn_slot, xn_en = Signal(range(NS)), Signal(range(NS)), Signal()
        issue, row, base = Signal(), Signal(range(d)), Signal(range(H * d))
        p_mode, p_wsel = Signal(3), Signal(k)
        p_a = Signal(data.ArrayLayout(signed(ru.wa), k))
        p_p, p_q = Signal(data.ArrayLayout(signed(ru.wp), k)), Signal(data.ArrayLayout(signed(ru.wq), k))
        p_psh = Signal(signed(8))
        # the output FIFO's free entries not reserved by passes in flight (DEPTH - level - reserved), kept as
        # a register so that the issue decision does not wait on the FIFO's level: a pass reserves its
        # B beats at issue, a beat's write uses its reservation, a read frees an entry
        free = Signal(range(DEPTH + 1), init=DEPTH)
        res_add = Signal()
        m.d.sync += free.eq(free - Mux(res_add, B, 0) + (yfifo.r_en & yfifo.r_rdy))
        writes = (p_mode == _WARM) | (p_mode == _EVICT) | (p_mode == _FULL)
        m.d.comb += [ru.a.eq(p_a), ru.p.eq(p_p), ru.q.eq(p_q), ru.p_shift.eq(p_psh),
                     ru.upd.eq(p_mode == _FULL), ru.cnt.eq((p_mode == _FULL) | (p_mode == _EVICT)),
                     ru.wsel.eq(Mux(writes, p_wsel, 0))]
        d_mode = Signal(3)
        m.d.comb += d_mode.eq(A(c_mode)[dhead])
        room = Signal()
        m.d.comb += room.eq(free >= B)
        gap = Signal(range(BRAM_READ_LATENCY + 2))
        with m.FSM(init="CLEAR", name="dispatcher") as fsm:
            with m.State("CLEAR"):  # U <- 0 after reset
                m.d.comb += [uram.wr_en.eq(1), uram.wr_addr.eq(base), uram.wr_data.eq(0)]
                m.d.sync += base.eq(base + 1)
                with m.If(base == H * d - 1):
                    m.d.sync += base.eq(0)
                    m.next = "IDLE"
            with m.State("IDLE"):
                apass = d_mode == _APASS
                # the pass's controls follow the head's mailbox while idle and hold from the issue on
                # (their enable is the state, not the issue decision: hundreds of flip-flops)
                m.d.sync += [p_mode.eq(d_mode), p_wsel.eq(A(c_wsel)[dhead]), p_a.eq(A(c_a)[dhead]),
                             p_p.eq(A(c_p)[dhead]), p_q.eq(A(c_q)[dhead]), p_psh.eq(A(c_psh)[dhead])]
                # likewise the descriptor in the free slot at q_wr: q_wr moves on at the issue
                for i in range(DQ):
                    with m.If(q_room & (q_wr == i)):
                        m.d.sync += [q_head[i].eq(dhead), q_full[i].eq(d_mode == _FULL), q_emit[i].eq(~apass),
                                     q_ysm[i].eq(A(c_ysm)[dhead]), q_ysf[i].eq(A(c_ysf)[dhead])]
                with m.If(A(ready)[dhead] & full.bit_select(dslot, 1) & (apass | room) & q_room):
                    m.d.comb += [clr_ready.eq(1 << dhead), set_pending.eq(1 << dhead)]
                    m.d.sync += [row.eq(0), base.eq(dhead * d), x_slot.eq(dslot)]
                    m.d.sync += q_wr.eq(Mux(q_wr == DQ - 1, 0, q_wr + 1))
                    with m.If(apass):  # accumulate x_m itself; the token stays
                        m.d.sync += [xn_slot.eq(dslot), xn_en.eq(1), A(acc_valid)[dhead].eq(1)]
                    with m.Else():
                        nx = nxt_slot(dslot, H)
                        m.d.comb += res_add.eq(1)
                        m.d.sync += [xn_slot.eq(nx), xn_en.eq(full.bit_select(nx, 1)),
                                     A(acc_valid)[dhead].eq(full.bit_select(nx, 1))]
                    m.next = "PASS"
            with m.State("PASS"):
                m.d.comb += issue.eq(1)
                m.d.sync += row.eq(row + 1)
                with m.If(row == d - 1):
                    m.d.sync += gap.eq(0)
                    m.next = "GAP"
            with m.State("GAP"):  # the last rows leave the RAM's read pipeline with this pass's controls
                m.d.sync += gap.eq(gap + 1)
                with m.If(gap == BRAM_READ_LATENCY):
                    with m.If(p_mode != _APASS):
                        m.d.comb += clr_full.eq(1 << x_slot)
                        m.d.sync += [dslot.eq(nxt_slot(dslot)), dhead.eq(Mux(dhead == H - 1, 0, dhead + 1)),
                                     tokens.eq(tokens + 1)]
                    m.next = "IDLE"
        m.d.comb += [uram.rd_addr.eq(base + row), uram.rd_en.eq(issue), uram.rd_oce.eq(1),
                     xr_cur.addr.eq(x_slot * B + row // k), xr_nxt.addr.eq(xn_slot * B + row // k),
                     xr_cur.en.eq(1), xr_nxt.en.eq(1)]
        lane1 = Signal(range(k))
        v1, f1, l1, v2, f2, l2 = Signal(), Signal(), Signal(), Signal(), Signal(), Signal()
        xc2, xn2 = Signal(signed(self.wx)), Signal(signed(self.wx))
        m.d.sync += [lane1.eq(row % k), v1.eq(issue), f1.eq(issue & (row == 0)), l1.eq(issue & (row == d - 1)),
                     v2.eq(v1), f2.eq(f1), l2.eq(l1),
                     xc2.eq(xr_cur.data[lane1]), xn2.eq(Mux(xn_en, xr_nxt.data[lane1], 0))]
        m.d.comb += [ru.i_valid.eq(v2), ru.i_first.eq(f2), ru.i_last.eq(l2), ru.i_x.eq(xc2), ru.i_xn.eq(xn2)]
        m.d.comb += [ru.i_u[l].eq(uram.rd_data[l * self.wu:(l + 1) * self.wu].as_signed()) for l in range(k)]

        # -- accumulator side: snapshot into the head's bank, the head's pass is done
        acc_head = Signal(range(H))
        m.d.comb += acc_head.eq(A(q_head)[q_acc])
        q_push = Signal()
        m.d.comb += q_push.eq(set_pending != 0)
        # the row unit's sums half by half (low half one cycle before the high half; q_acc, so
        # acc_head, holds until acc_done)
        hs = ru.acc_split
        for we, sl in ((ru.acc_lo_we, slice(0, hs)), (ru.acc_hi_we, slice(hs, ru.acc_width))):
            with m.If(we):
                for h in range(H):
                    with m.If(acc_head == h):
                        m.d.sync += [snap_a[h][l][sl].eq(ru.acc_a[l][sl]) for l in range(k)]
                        m.d.sync += [snap_g[h][n][sl].eq(ru.acc_g[n][sl]) for n in range(ru.n_gram)]
        with m.If(ru.acc_done):
            m.d.comb += clr_pending.eq(1 << acc_head)
            m.d.sync += q_acc.eq(Mux(q_acc == DQ - 1, 0, q_acc + 1))
        m.d.sync += q_count.eq(q_count + q_push - ru.acc_done)

        # -- output side: write-back and y, with the descriptor of the pass the rows belong to
        out_row = Signal(range(d))
        o_head, o_full, o_emit = Signal(range(H)), Signal(), Signal()
        o_ysm, o_ysf = Signal(signed(tc.P)), Signal(signed(12))
        m.d.comb += [o_head.eq(A(q_head)[q_out]), o_full.eq(q_full.bit_select(q_out, 1)),
                     o_emit.eq(q_emit.bit_select(q_out, 1)), o_ysm.eq(A(q_ysm)[q_out]), o_ysf.eq(A(q_ysf)[q_out])]
        with m.If(ru.o_valid):
            m.d.sync += out_row.eq(Mux(out_row == d - 1, 0, out_row + 1))
            with m.If(out_row == d - 1):
                m.d.sync += q_out.eq(Mux(q_out == DQ - 1, 0, q_out + 1))
        m.d.sync += q_live.eq(q_live + q_push - (ru.o_valid & (out_row == d - 1)))
        with m.If(~fsm.ongoing("CLEAR")):
            m.d.comb += [uram.wr_addr.eq(o_head * d + out_row), uram.wr_en.eq(ru.o_valid),
                         uram.wr_data.eq(Cat(*[ru.o_u[l] for l in range(k)]))]
        # y = round(r_i rsqrt(n²)): a registered multiplier, the pipelined rounding shift, then a
        # registered sign-extension saturation (hardware.md, "Timing discipline")
        fr, fy = F["r"].frac, F["y"].frac
        reg = stage_register(m, Const(1))
        ymul = PipelinedMultiplier(len(ru.o_r), tc.P, self.dsp)
        m.submodules.ymul = ymul
        m.d.comb += [ymul.a.eq(ru.o_r), ymul.b.eq(o_ysm), ymul.en.eq(1)]
        yv, yfull, ysf = ru.o_valid & o_emit, o_full, o_ysf
        for s in range(ymul.latency):
            yv, yfull, ysf = reg(yv, 1, f"yv_m{s}"), reg(yfull, 1, f"yfull_m{s}"), reg(ysf, signed(12), f"ysf_m{s}")
        yp = reg(Mux(yfull, ymul.p, 0), signed(len(ymul.p)), "yp")
        ysh_in = reg(ysf + fr - fy, signed(16), "ysh_in")
        yv = reg(yv, 1, "yv_p")
        yrs = RoundShiftVar(1, len(yp), max_left=4, shift_width=16, rounding="rne")
        m.submodules.yrs = yrs
        m.d.comb += [yrs.en.eq(1), yrs.i_valid.eq(yv), yrs.i_data[0].eq(yp), yrs.i_shift.eq(ysh_in)]
        ysh = yrs.o_data[0]
        yfits = reg(fits_signed(ysh, self.wy), 1, "yfits")
        ytr, yng, yv2 = reg(ysh[:self.wy], unsigned(self.wy), "ytr"), reg(ysh[-1], 1, "yng"), reg(yrs.o_valid, 1, "yv2")
        ymax, ymin = (1 << (self.wy - 1)) - 1, -(1 << (self.wy - 1))
        yq = reg(Mux(yfits, ytr.as_signed(), Mux(yng, ymin, ymax)), signed(self.wy), "yq")
        yov = reg(yv2 & ~yfits, 1, "yov")
        yv3 = reg(yv2, 1, "yv3")
        # rows entering the y pipeline minus rows leaving it: busy covers every internal stage
        y_inflight = Signal(range(ymul.latency + yrs.latency + 8))
        m.d.sync += y_inflight.eq(y_inflight + (ru.o_valid & o_emit) - yv3)
        with m.If(yov):
            m.d.sync += sat_y.eq(sat_y + 1)
        ylane, ybeat = Signal(range(k)), Signal(range(B))
        ybuf = [Signal(signed(self.wy), name=f"ybuf{l}") for l in range(k - 1)]
        with m.If(yv3):
            m.d.sync += ylane.eq(Mux(ylane == k - 1, 0, ylane + 1))
            for l in range(k - 1):
                with m.If(ylane == l):
                    m.d.sync += ybuf[l].eq(yq)
            with m.If(ylane == k - 1):
                m.d.sync += ybeat.eq(Mux(ybeat == B - 1, 0, ybeat + 1))
        m.d.comb += [yfifo.w_en.eq(yv3 & (ylane == k - 1)), yfifo.w_data.eq(Cat(*ybuf, yq, ybeat == B - 1))]
        m.d.comb += [self.y_out.valid.eq(yfifo.r_rdy), yfifo.r_en.eq(self.y_out.ready),
                     self.y_out.payload.eq(yfifo.r_data)]
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE") | (full != 0) | (q_count != 0) | (y_inflight != 0) |
                                 sum(~unit.i.ready for unit in TCS).bool())
        return m
