"""The annihilation core v2 (issue 13), first complete version: one pass over ``U`` per token,
bit-exact with :func:`specmem.golden.fixed.annihilation.annihilation_fixed` in the co-accumulated
schedule (``gram="coaccumulate"``, the ``int18`` / ``int16`` / ``int8`` presets, orthogonal
inputs evicted: the model's defaults for those presets).

Blocks: the state ``U`` (``d`` rows of ``k·w_u`` bits) in a :class:`~specmem.rtl.bram.RegisteredRAM`
(read through its output register), the :class:`~specmem.rtl.row_unit.RowUnit` (one row per
cycle: the rank-two update of token ``t`` and the co-accumulation of ``a' = Uᵀx_{t+1}`` and the
exact Gram ``G'``), the :class:`~specmem.rtl.token_chain.TokenChain` (accumulators to the next
pass's controls), a three-slot token buffer and an output FIFO.

Per token ``t`` (its ``d/k`` input beats complete) the sequencer picks the pass:

* zero input: a pass that writes nothing (``y = 0``);
* warm-up (``count < k``): column ``count`` <- ``x``;
* full memory: the chain runs on the accumulators of the previous pass (if that pass could not
  see ``x_t``, because it had not arrived, a read-only *A pass* accumulates them first), then
  either the rank-two update with column ``j`` <- ``x`` (``y_i = r_i rsqrt(n²)``), or, for an
  orthogonal input, column ``evict_j`` <- ``x`` (``y = 0``, counted and flagged).

Every pass reads all ``d`` rows and feeds the next token's elements to the co-accumulation when
that token is already buffered. The sequencer is deliberately simple (one pass or chain at a
time, each pass drained before the chain): :meth:`cycles_per_token` states the resulting count,
which the tests measure; overlapping the chain with passes (heads) is the next step.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .bram import BRAM_READ_LATENCY, RegisteredRAM
from .fixed import round_shift_var
from .row_unit import RowUnit
from .token_chain import TokenChain, _sat

__all__ = ["AnnihilationCoreV2"]

_NONE, _WARM, _EVICT, _FULL = 0, 1, 2, 3


class AnnihilationCoreV2(wiring.Component):
    """Annihilation memory for dimension ``d``, ``k`` stored directions, one preset (``int18``,
    ``int16``, ``int8``), on the v2 blocks.

    Members as the v1 core's (``AnnihilationCore``): ``x_in`` (``k`` signed elements per beat,
    ``d/k`` beats a token), ``y_out`` (``k`` elements of ``y`` and ``last``), ``tokens``,
    ``saturations`` (``U`` writes, ``ahat``, ``q``, ``t``, ``y``), ``orth_count``, ``orth_flag``,
    ``count``, ``busy``.
    """

    SLOTS = 3

    def __init__(self, d: int, k: int, preset: str = "int18", *, dsp: str = "registered",
                 bram: str = "behavioural"):
        for name, v in (("d", d), ("k", k)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
        if k > d:
            raise ValueError(f"k: must be <= d ({d}), got {k}")
        if d % k:
            raise ValueError(f"d: must be a multiple of k ({k}), got {d}")
        self.d, self.k, self.preset, self.dsp, self.bram = d, k, preset, dsp, bram
        self.rows = RowUnit(d, k, preset, dsp=dsp)
        # the chain's bank has operands wider than one MULT18X18D (g_j beta: 36 bits): portable registers
        self.chain = TokenChain(d, k, preset, acc_width=self.rows.acc_width, dsp="registered")
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
        """Cycles of one pass: ``d`` rows issued, then the drain until the accumulators are final."""
        return 1 + self.d + BRAM_READ_LATENCY + 1 + self.rows.acc_latency

    def elaborate(self, platform):
        m = Module()
        d, k, F, B, NS = self.d, self.k, self.fmt, self.beats, self.SLOTS
        ru, tc = self.rows, self.chain
        m.submodules.rows, m.submodules.chain = ru, tc
        uram = RegisteredRAM(d, k * self.wu, self.bram)
        m.submodules.uram = uram
        xmem = memory.Memory(shape=self.x_layout, depth=NS * B, init=[])
        m.submodules.xmem = xmem
        xw, xr_cur, xr_nxt = xmem.write_port(), xmem.read_port(), xmem.read_port()
        yfifo = fifo.SyncFIFOBuffered(width=len(Cat(*[Signal(self.wy)] * k)) + 1, depth=2 * B)
        m.submodules.yfifo = yfifo
        m.d.comb += ru.en.eq(1)

        # -- token buffer: slots filled in order, consumed in order
        full = Signal(NS)
        nzs = Signal(NS)
        wr_slot, wr_beat, wr_nz = Signal(range(NS)), Signal(range(B)), Signal()
        cur = Signal(range(NS))
        nxt = Signal(range(NS))
        m.d.comb += nxt.eq(Mux(cur == NS - 1, 0, cur + 1))
        release = Signal()
        m.d.comb += self.x_in.ready.eq(~full.bit_select(wr_slot, 1))
        m.d.comb += [xw.addr.eq(wr_slot * B + wr_beat), xw.data.eq(self.x_in.payload),
                     xw.en.eq(self.x_in.valid & self.x_in.ready)]
        beat_nz = Signal()
        m.d.comb += beat_nz.eq(sum(self.x_in.payload[l] != 0 for l in range(k)) != 0)
        set_full = Signal(NS)
        clr_full = Signal(NS)
        with m.If(self.x_in.valid & self.x_in.ready):
            with m.If(wr_beat == B - 1):
                m.d.sync += [wr_beat.eq(0), wr_nz.eq(0), wr_slot.eq(Mux(wr_slot == NS - 1, 0, wr_slot + 1))]
                m.d.comb += set_full.eq(1 << wr_slot)
                m.d.sync += nzs.bit_select(wr_slot, 1).eq(wr_nz | beat_nz)
            with m.Else():
                m.d.sync += [wr_beat.eq(wr_beat + 1), wr_nz.eq(wr_nz | beat_nz)]
        m.d.comb += clr_full.eq(Mux(release, 1 << cur, 0))
        m.d.sync += full.eq((full | set_full) & ~clr_full)

        # -- per-memory state
        count = Signal(range(k + 1))
        ptr = Signal(range(k))
        acc_valid = Signal()
        tokens, orth_count, orth_flag, sat_extra = Signal(32), Signal(32), Signal(1), Signal(32)
        m.d.comb += [self.tokens.eq(tokens), self.orth_count.eq(orth_count), self.orth_flag.eq(orth_flag),
                     self.count.eq(count), self.saturations.eq(ru.sat_u + sat_extra)]

        # -- pass controls (held for the pass) and the row issue
        mode = Signal(2)
        a_ctl = Signal(data.ArrayLayout(signed(ru.wa), k))
        p_ctl, q_ctl = Signal(data.ArrayLayout(signed(ru.wp), k)), Signal(data.ArrayLayout(signed(ru.wq), k))
        p_shift = Signal(signed(8))
        wsel = Signal(k)
        ys_m, ys_f = Signal(signed(tc.P)), Signal(signed(12))
        emit_y = Signal()     # this pass emits y beats (not an A pass)
        x_slot = Signal(range(NS))   # slot whose elements are i_x (column writes)
        xn_slot = Signal(range(NS))  # slot whose elements are i_xn (co-accumulation)
        xn_en = Signal()
        m.d.comb += [ru.a.eq(a_ctl), ru.p.eq(p_ctl), ru.q.eq(q_ctl), ru.p_shift.eq(p_shift),
                     ru.upd.eq(mode == _FULL), ru.wsel.eq(Mux(mode == _NONE, 0, wsel))]
        issue = Signal()
        row = Signal(range(d + 1))
        m.d.comb += [uram.rd_addr.eq(row), uram.rd_en.eq(1), uram.rd_oce.eq(1),
                     xr_cur.addr.eq(x_slot * B + row // k), xr_nxt.addr.eq(xn_slot * B + row // k),
                     xr_cur.en.eq(1), xr_nxt.en.eq(1)]
        # align the x elements (one-cycle memory read, then a register) with the RAM's two cycles
        lane1 = Signal(range(k))
        v1, f1, v2, f2 = Signal(), Signal(), Signal(), Signal()
        xc2, xn2 = Signal(signed(self.wx)), Signal(signed(self.wx))
        m.d.sync += [lane1.eq(row % k), v1.eq(issue), f1.eq(issue & (row == 0)), v2.eq(v1), f2.eq(f1),
                     xc2.eq(xr_cur.data[lane1]), xn2.eq(Mux(xn_en, xr_nxt.data[lane1], 0))]
        m.d.comb += [ru.i_valid.eq(v2), ru.i_first.eq(f2), ru.i_x.eq(xc2), ru.i_xn.eq(xn2)]
        m.d.comb += [ru.i_u[l].eq(uram.rd_data[l * self.wu:(l + 1) * self.wu].as_signed()) for l in range(k)]

        # -- write-back and y
        wr_row = Signal(range(d + 1))
        with m.If(ru.o_valid):
            m.d.sync += wr_row.eq(wr_row + 1)
        m.d.comb += [uram.wr_addr.eq(wr_row), uram.wr_en.eq(ru.o_valid),
                     uram.wr_data.eq(Cat(*[ru.o_u[l] for l in range(k)]))]
        fr, fy = F["r"].frac, F["y"].frac
        yv1, yv2, yv3 = Signal(), Signal(), Signal()
        yp = Signal(signed(len(ru.o_r) + tc.P))
        ysh = Signal(signed(len(yp) + 5))
        yq, yov = Signal(signed(self.wy)), Signal()
        m.d.sync += [yv1.eq(ru.o_valid & emit_y), yp.eq(Mux(mode == _FULL, ru.o_r * ys_m, 0))]
        m.d.sync += [yv2.eq(yv1), ysh.eq(round_shift_var(m, yp, ys_f + fr - fy, "rne", max_left=4, name="y_rs"))]
        ysat, yov_c = _sat(m, ysh, self.wy, "y_sat")
        m.d.sync += [yv3.eq(yv2), yq.eq(ysat), yov.eq(yv2 & yov_c)]
        with m.If(yov):
            m.d.sync += sat_extra.eq(sat_extra + 1)
        ylane = Signal(range(k))
        ybeat = Signal(range(B))
        ybuf = [Signal(signed(self.wy), name=f"ybuf{l}") for l in range(k - 1)]
        with m.If(yv3):
            m.d.sync += ylane.eq(Mux(ylane == k - 1, 0, ylane + 1))
            for l in range(k - 1):
                with m.If(ylane == l):
                    m.d.sync += ybuf[l].eq(yq)
            with m.If(ylane == k - 1):
                m.d.sync += ybeat.eq(Mux(ybeat == B - 1, 0, ybeat + 1))
        m.d.comb += [yfifo.w_en.eq(yv3 & (ylane == k - 1)),
                     yfifo.w_data.eq(Cat(*ybuf, yq, ybeat == B - 1))]
        m.d.comb += [self.y_out.valid.eq(yfifo.r_rdy), yfifo.r_en.eq(self.y_out.ready),
                     self.y_out.payload.eq(yfifo.r_data)]

        # -- the sequencer
        drain = Signal(range(self.pass_cycles() + 2))
        is_apass = Signal()
        cur_nz = Signal()
        m.d.comb += cur_nz.eq(nzs.bit_select(cur, 1))
        tcp = tc.o.payload
        with m.FSM(init="CLEAR") as fsm:
            with m.State("CLEAR"):  # U <- 0 after reset
                m.d.comb += [uram.wr_en.eq(1), uram.wr_addr.eq(row), uram.wr_data.eq(0)]
                m.d.sync += row.eq(row + 1)
                with m.If(row == d - 1):
                    m.d.sync += row.eq(0)
                    m.next = "IDLE"
            with m.State("IDLE"):
                with m.If(full.bit_select(cur, 1)):
                    m.d.sync += [x_slot.eq(cur), is_apass.eq(0)]
                    with m.If(~cur_nz):
                        m.d.sync += mode.eq(_NONE)
                        m.next = "PASS_WAIT"
                    with m.Elif(count < k):
                        m.d.sync += [mode.eq(_WARM), wsel.eq(1 << count)]
                        m.next = "PASS_WAIT"
                    with m.Elif(~acc_valid):  # the previous pass did not see x_t: accumulate first
                        m.d.sync += [mode.eq(_NONE), is_apass.eq(1)]
                        m.next = "PASS_WAIT"
                    with m.Else():
                        m.next = "CHAIN"
            with m.State("CHAIN"):
                m.d.comb += tc.i.valid.eq(1)
                m.d.comb += [tc.i.payload.a[l].eq(ru.acc_a[l]) for l in range(k)]
                m.d.comb += [tc.i.payload.g[n].eq(ru.acc_g[n]) for n in range(ru.n_gram)]
                m.d.comb += tc.i.payload.ptr.eq(ptr)
                with m.If(tc.i.ready):
                    m.next = "CHAIN_WAIT"
            with m.State("CHAIN_WAIT"):
                m.d.comb += tc.o.ready.eq(1)
                with m.If(tc.o.valid):
                    with m.If(tcp.orth):
                        m.d.sync += [mode.eq(_EVICT), wsel.eq(1 << tcp.evict_j),
                                     ptr.eq(Mux(tcp.evict_j == k - 1, 0, tcp.evict_j + 1)),
                                     orth_count.eq(orth_count + 1), orth_flag.eq(1)]
                    with m.Else():
                        m.d.sync += [mode.eq(_FULL), wsel.eq(1 << tcp.j), a_ctl.eq(tcp.a_n), p_ctl.eq(tcp.p),
                                     q_ctl.eq(tcp.q), p_shift.eq(F["r"].frac + tcp.fp - F["u"].frac),
                                     ys_m.eq(tcp.ysc_m), ys_f.eq(tcp.ysc_f), sat_extra.eq(sat_extra + tcp.sat)]
                    m.next = "PASS_WAIT"
            with m.State("PASS_WAIT"):  # room for a whole token of y beats; the next token's slot
                with m.If(is_apass | (yfifo.level <= B)):
                    m.d.sync += [row.eq(0), wr_row.eq(0), emit_y.eq(~is_apass)]
                    with m.If(is_apass):  # the A pass accumulates x_t itself
                        m.d.sync += [xn_slot.eq(cur), xn_en.eq(1)]
                    with m.Else():
                        m.d.sync += [xn_slot.eq(nxt), xn_en.eq(full.bit_select(nxt, 1))]
                    m.next = "PASS"
            with m.State("PASS"):
                m.d.comb += issue.eq(1)
                m.d.sync += row.eq(row + 1)
                with m.If(row == d - 1):
                    m.d.sync += drain.eq(0)
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain + 1)
                with m.If(drain == self.pass_cycles() - d - 1):
                    m.d.sync += acc_valid.eq(xn_en)
                    with m.If(is_apass):
                        m.d.sync += [mode.eq(_NONE), is_apass.eq(0)]
                        m.next = "CHAIN"
                    with m.Else():
                        m.d.comb += release.eq(1)
                        m.d.sync += [cur.eq(nxt), tokens.eq(tokens + 1)]
                        with m.If(mode == _WARM):
                            m.d.sync += count.eq(count + 1)
                        m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE") | (full != 0))
        return m
