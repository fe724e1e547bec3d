"""The fused pass of the scaled delta rules over their row-BFP state: token ``t``'s rank-one write
of every row, then, as the written row streams out, token ``t + 1``'s two reads of it.

``golden/fixed/scaled/deltanet.py`` per token: ``sk = Ŝ kn``, ``sq = Ŝ qn`` from the state read
at ``M`` bits (``RowBFP.read``: ``block()`` per row), then ``Ŝ <- Ŝ + bh knᵀ`` (``RowBFP.write``
with the row bound ``product_bound_exp(bh_i, kmax)``). A write of row ``i`` for token ``t`` is
followed by no other use of that row before token ``t + 1``'s read, so one pass over the state
does both: the written row goes back to block RAM and, beat for beat, into the read's
normaliser and the two dot products. That is ``d²/k`` cycles per token for both matrices'
worth of work, the cycle floor of ``hardware.md``.

Per pass (the caller holds them for the pass): the write's ``bh`` (``d`` ``M``-bit elements,
exponent ``fbh``) and ``knw`` (the previous token's ``kn``, exponent ``fknw``), or ``i_wzero``:
the write adds nothing, as if ``knw`` were zero (the first pass after a reset: the caller's
vectors have no reset), and the reads' ``kn`` and ``qn`` with their exponents; with ``rescale`` also ``i_fshift``, added to every stored
row's exponent as the write reads it (Gated DeltaNet's state kept in ``S``'s frame moves into the
next token's frame in the same pass: :mod:`~specmem.rtl.decay`; a moved exponent that leaves
``exp_width`` bits, a row decayed below anything the exponents hold yet not written for that long,
sets the sticky ``err``). Out, one per row in row order (``o_valid``; ``o_valid_next`` the cycle
before): ``sk_i``, ``sq_i`` (exact,
``2 M + log2 d`` bits) and the row's read exponent ``rf_i`` (``sk_i``'s exponent is
``rf_i + fkn``); and the written rows' beats with their exponent (the state, for a read-out).

Pipeline, one beat (``k`` elements of a row) per cycle, rows of ``B = d/k`` beats:

* address ``i B + b`` into :class:`~specmem.rtl.bram.RegisteredRAM` (two read registers) and two
  delay registers; the row's side information (exponent, msb of its largest magnitude, all-zero
  flag: registers, reset to an all-zero state) read and held; a zero row's RAM word is masked
  (the RAM is never cleared); ``bh_i`` and ``knw``'s beat selected into registers, ``bh_i``'s
  magnitude and msb (its row bound ``msb(bh_i) + msb(kmax) + 2 - fbh - fknw``), the ``k``
  products registered;
* :class:`~specmem.rtl.row_bfp.RowBFPWrite`: the new row's beats, its exponent, msb and zero flag
  (written back to the RAM and the side registers);
* :class:`~specmem.rtl.block_norm.StreamBlockNormaliser` (``Ws`` to ``M`` bits, the row's read
  exponent); ``kn``'s and ``qn``'s beats selected into registers; ``2 k`` products, two registered
  adder trees, the sums over the row's beats.

``msb(kmax)`` is formed before the first row (a registered OR tree over ``knw``'s magnitudes,
:attr:`DeltaPass.prep_cycles` from ``start``). The pass runs at one beat per cycle without stalls:
the rows' results come out ``latency`` cycles after their first beat went in, and ``done`` pulses
after the last.

**Heads** (``heads = H``): ``H`` independent states in one RAM (``H d B`` words) with ``H d`` side
registers; the vector ports hold ``H d`` elements (head ``h``'s element ``i`` at ``h d + i``) and
the scalar ports one per head; ``i_head`` picks a pass's head with ``start``, ``o_whead`` is
the head of the row on the ``o_w*`` ports and ``o_head`` the head of the row on ``o_sk``, ``o_sq``. Every beat carries
its head down the pipeline (its row's side registers, ``bh_i``, ``knw``'s, ``kn``'s and ``qn``'s
beats, the head's ``msb(kmax)`` and row bound, ``i_fshift``), so the caller may rewrite a head's
operands from its pass's ``done`` to its next ``start``, and a pass may start as soon as ``ready``
is high: ``prep_cycles - lead + 1`` beats before this one's last, its prep under them, its rows
straight after them (:attr:`DeltaPass.pass_interval` from start to start). A head's next pass
must wait for its previous one's ``done`` (its rows' side registers are written back after the
reads of them); one head's passes therefore start when ``busy`` is low, as the one-memory cores do.

**VLA's ``A``** (``golden/fixed/scaled/vla.py``: ``A_off <- A_off - offdiag(w wᵀ)``, the row bound
from ``w``'s msbs as any other write) is this pass with ``bh = knw = w`` and two options:
``subtract`` (the write adds ``-bh knwᵀ``: ``knw``'s beat negated into the products' operand, the
bound unchanged) and ``offdiag`` (the products of the diagonal, column ``i`` of row ``i``, are zero;
the row's flag counters run beside the row counter, the lane's mask registered to the products).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .block_norm import StreamBlockNormaliser
from .dsp import PRODUCT_STYLES, operand_product
from .bram import BRAM_READ_LATENCY, BRAM_STYLES, RegisteredRAM
from .delay_line import short_delay_style
from .ff import replicas
from .fixed import msb_index
from .pipeline import free_register, or_all, register_chain, select_levels, select_pipe, stage_register, tree4_levels
from .row_bfp import RowBFPWrite
from .saturate import COUNT_WIDTH

__all__ = ["DeltaPass"]

#: cycles from a beat's address to its RowBFPWrite input (the RAM's two read registers, the mask's)
FRONT_STAGES = BRAM_READ_LATENCY + 1


class DeltaPass(wiring.Component):
    """The fused write-then-read pass over a ``d x d`` row-BFP state on ``k`` lanes; see the module
    docstring. ``Ws``: state mantissa bits; ``M``: operand bits; ``exp_width``: signed exponent
    bits; ``ram``: :data:`~specmem.rtl.bram.BRAM_STYLES`; ``ram_init``: the behavioural RAM's
    contents after reset (tests: garbage the all-zero side flags must mask); ``rescale``: the
    ``i_fshift`` port; ``subtract``, ``offdiag``: VLA's ``A`` write (the module docstring)."""

    def __init__(self, d: int, k: int, Ws: int, M: int, *, exp_width: int = 12, ram: str = "behavioural",
                 ram_init=None, rescale: bool = False, dsp: str = "registered", heads: int = 1,
                 subtract: bool = False, offdiag: bool = False):
        for name, v, lo in (("d", d, 1), ("k", k, 1), ("Ws", Ws, 4), ("M", M, 3), ("exp_width", exp_width, 6),
                            ("heads", heads, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if d % k:
            raise ValueError(f"d: must be a multiple of k = {k}, got {d}")
        if ram not in BRAM_STYLES:
            raise ValueError(f"ram: must be one of {', '.join(BRAM_STYLES)}, got {ram!r}")
        self.d, self.k, self.Ws, self.M, self.exp_width, self.ram = d, k, Ws, M, exp_width, ram
        self.ram_init = ram_init
        if dsp not in PRODUCT_STYLES:
            raise ValueError(f"dsp: must be one of {', '.join(PRODUCT_STYLES)}, got {dsp!r}")
        self.dsp = dsp
        self.rescale = bool(rescale)
        self.subtract, self.offdiag = bool(subtract), bool(offdiag)
        self.heads = H = heads
        self.B = d // k
        self.dot_width = 2 * M + max(1, (d - 1).bit_length())
        self.write = RowBFPWrite(k, Ws, M, exp_width=exp_width)
        self.norm = StreamBlockNormaliser(k, self.B, Ws, M, frac_width=exp_width, delay_style=short_delay_style(ram))
        self.tree_levels = max(0, (k - 1).bit_length())
        #: cycles from ``start`` to the first row's address: ``msb(kmax)`` through its OR tree (and,
        #: with heads, the per-head values through their select to the rows)
        self.prep_cycles = 4 + tree4_levels(d) + (select_levels(H) + 1 if H > 1 else 0)
        #: cycles the sequencer's counters run ahead of the RAM's address: the row's and beat's
        #: operands come through registered select trees (:func:`~specmem.rtl.pipeline.select_pipe`)
        self.lead = max(select_levels(H * d), select_levels(H * self.B)) - 1
        #: heads: the selects' first levels take copies of their counter's register, one per 4:1
        #: group (``ff.replicas``; the head-row counter's fanout into 2 d side registers' first
        #: level limited two heads at 82 MHz), one cycle more of lead
        self.split_selects = H > 1
        self.lead += int(self.split_selects)
        if self.prep_cycles < 1 + self.lead:
            raise AssertionError("the select trees' lead exceeds the pass's prep")
        #: cycles from a beat's address to the same beat at the read normaliser's output
        self.read_offset = FRONT_STAGES + self.write.latency + self.norm.latency
        #: cycles from a row's first address to its ``o_valid`` (sk, sq)
        self.latency = (FRONT_STAGES + self.write.latency + self.norm.latency + 2 + self.tree_levels + self.B)
        #: cycles from one start to the next when every start is taken as soon as ``ready`` (passes
        #: of other heads): the run's ``d B`` beats back to back, or the prep where it is longer
        self.pass_interval = max(d * self.B, self.prep_cycles - self.lead + 1)
        EW = exp_width
        vec = data.ArrayLayout(signed(M), H * d)
        # per head: a scalar port for one head (the interface of the one-memory cores), else an array
        fr = signed(EW) if H == 1 else data.ArrayLayout(signed(EW), H)
        extra = {"i_fshift": In(fr), "err": Out(1)} if self.rescale else {}
        if H > 1:
            extra.update({"i_head": In(range(H)), "o_whead": Out(range(H)), "o_head": Out(range(H))})
        super().__init__({**extra,
            "start": In(1), "ready": Out(1), "busy": Out(1), "done": Out(1),
            "i_bh": In(vec), "i_fbh": In(fr), "i_knw": In(vec), "i_fknw": In(fr),
            "i_kn": In(vec), "i_fkn": In(fr), "i_qn": In(vec), "i_fqn": In(fr), "i_wzero": In(H),
            "o_valid": Out(1), "o_valid_next": Out(1),
            "o_sk": Out(signed(self.dot_width)), "o_sq": Out(signed(self.dot_width)),
            "o_rf": Out(signed(EW)),
            "o_wvalid": Out(1), "o_wfirst": Out(1), "o_wdata": Out(data.ArrayLayout(signed(Ws), k)),
            "o_wfrac": Out(signed(EW)), "count": Out(COUNT_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        d, k, B, Ws, M, EW, H = self.d, self.k, self.B, self.Ws, self.M, self.exp_width, self.heads
        reg = free_register(m)  # data, qualified by a valid tag
        tag = stage_register(m, 1)  # valid, first, last: reset, so a reset mid-pass leaves no beat in flight

        def chain(x, shape, n, tag):
            for i in range(n):
                x = reg(x, shape, f"{tag}_d{i}")
            return x

        def per_head(port):
            return [port] if H == 1 else [port[h] for h in range(H)]

        # the sequencer: prep (msb(kmax)), then d x B beats; the next pass's prep may start as the
        # last beat is addressed (another head's: ``ready``), its rows follow this one's down the pipeline
        aw = max(1, (H * d * B - 1).bit_length())
        prep = Signal(range(self.prep_cycles + 1), name="prep")
        run = Signal(name="run")
        row = Signal(range(max(d, 2)), name="row")
        beat = Signal(range(max(B, 2)), name="beat")
        hrow = Signal(range(max(H * d, 2)), name="hrow")  # head d + row: the side registers' and bh's index
        hbeat = Signal(range(max(H * B, 2)), name="hbeat")  # head B + beat: knw's, kn's and qn's beat
        hd = Signal(range(max(H, 2)), name="hd")  # the head of the beat being addressed
        addr = Signal(aw, name="addr")
        head = Signal(range(max(H, 2)), name="head_r")  # the pass's head, from its start
        rows_out = Signal(range(d + 1), name="rows_out")
        inflight = Signal(2, name="inflight")
        # a start is taken when its run would begin right after this one's last beat: the prep runs
        # under the last beats (``left`` counts the run's beats still to address, this one included)
        overlap = self.prep_cycles - self.lead + 1
        left = Signal(range(d * B + 1), name="left")
        m.d.comb += [self.busy.eq(inflight != 0), self.ready.eq((prep == 0) & (~run | (left <= overlap)))]
        m.d.sync += self.done.eq(0)
        take = self.ready & self.start
        with m.If(take):
            m.d.sync += prep.eq(self.prep_cycles)
            if H > 1:
                m.d.sync += head.eq(self.i_head)
        last_beat = (beat == B - 1) & (row == d - 1)
        with m.If(run):
            m.d.sync += [addr.eq(addr + 1), beat.eq(Mux(beat == B - 1, 0, beat + 1)), left.eq(left - 1)]
            with m.If(beat == B - 1):
                m.d.sync += [row.eq(row + 1), hrow.eq(hrow + 1), hbeat.eq(hbeat - (B - 1))]
            with m.Else():
                m.d.sync += hbeat.eq(hbeat + 1)
            with m.If(last_beat):
                m.d.sync += run.eq(0)
        with m.If(prep != 0):  # after the run's updates: a new run's loads win in its first cycle
            m.d.sync += prep.eq(prep - 1)
            with m.If(prep == 1 + self.lead):
                m.d.sync += [run.eq(1), row.eq(0), beat.eq(0), hd.eq(head), left.eq(d * B),
                             addr.eq(Array([h * d * B for h in range(H)])[head]),
                             hrow.eq(Array([h * d for h in range(H)])[head]),
                             hbeat.eq(Array([h * B for h in range(H)])[head])]
        done_now = self.o_valid & (rows_out == d - 1)
        with m.If(self.o_valid):
            m.d.sync += rows_out.eq(Mux(rows_out == d - 1, 0, rows_out + 1))
        with m.If(done_now):
            m.d.sync += self.done.eq(1)
        m.d.sync += inflight.eq(inflight + take - done_now)

        # the counters run `lead` cycles ahead: the beat's operands come through registered select
        # trees; stage1(values, counter) is values[counter] at the beat's stage 1
        lead = self.lead

        ff_style = "ecp5" if self.ram == "ecp5" else "registers"

        def stage1(values, counter, shape, name):
            n = lead + 1 - select_levels(len(values))
            groups = -(-len(values) // 4)
            if self.split_selects and groups > 2:  # the last register copied per first-level group
                s_ = register_chain(m, counter, len(counter), n - 1, f"{name}_i", reset_less=True)
                copies = replicas(m, s_, groups, f"{name}_ic", ff_style)
                s_ = register_chain(m, s_, len(counter), 1, f"{name}_i_last", reset_less=True)
                return select_pipe(m, values, s_, shape, name, first_sel=copies)
            s_ = register_chain(m, counter, len(counter), n, f"{name}_i", reset_less=True)
            return select_pipe(m, values, s_, shape, name)

        v0 = register_chain(m, run, 1, lead, "run_m")
        f0 = register_chain(m, beat == 0, 1, lead, "first_m")
        l0 = register_chain(m, beat == B - 1, 1, lead, "last_m")
        addr_m = register_chain(m, addr, aw, lead, "addr_m", reset_less=True)

        # per head: msb(max |knw|) through a registered OR tree, the row bound's constant part
        kz, epc, fpr = [], [], []
        for h, (fbh, fknw, wz) in enumerate(zip(per_head(self.i_fbh), per_head(self.i_fknw), self.i_wzero)):
            nm = "" if H == 1 else f"h{h}_"
            mags = [reg(Mux(x[-1], -x, x)[:M], unsigned(M), f"{nm}km{j}") for j, x in
                    enumerate(self.i_knw[h * d + j] for j in range(d))]
            lv = 0
            while len(mags) > 1:
                lv += 1
                mags = [reg(or_all(mags[j:j + 4]), unsigned(M), f"{nm}kor{lv}_{j // 4}")
                        for j in range(0, len(mags), 4)]
            kmsb = reg(msb_index(m, mags[0], f"{nm}kmsb_c"), unsigned(max(1, (M - 1).bit_length())), f"{nm}kmsb")
            kz.append(reg((mags[0] == 0) | wz, 1, f"{nm}kzero"))
            epc.append(reg(kmsb + 2 - fbh - fknw, signed(EW + 2), f"{nm}ep_c"))  # e_prod = msb(bh_i) + ep_c
            fpr.append(reg(fbh + fknw, signed(EW), f"{nm}f_prod"))
        if H == 1:  # held for the pass: used as they are
            kzero, ep_c, f_prod = kz[0], epc[0], fpr[0]
        else:  # the beat's head's, at stage 3
            kzero, ep_c, f_prod = (reg(reg(stage1(vals, hd, shape, name), shape, f"{name}2"), shape, f"{name}3")
                                   for vals, shape, name in ((kz, 1, "kzero"), (epc, signed(EW + 2), "ep_c"),
                                                             (fpr, signed(EW), "f_prod")))

        # front: RAM read, side registers, bh_i and knw's beat, the row bound, the products
        m.submodules.ram = ram = RegisteredRAM(H * d * B, k * Ws, self.ram, init=self.ram_init)
        # reads only while the pass runs: a write of word 0 after the pass meets no read of it
        # (the DP16KD does not define a read and a write of one word at one edge)
        m.d.comb += [ram.rd_addr.eq(addr_m), ram.rd_en.eq(v0), ram.rd_oce.eq(1)]
        # the exponent and msb of a row whose zero flag is set are never used: only the flag resets
        side_f = [Signal(signed(EW), name=f"sf{i}", reset_less=True) for i in range(H * d)]
        side_m = [Signal(range(Ws), name=f"sm{i}", reset_less=True) for i in range(H * d)]
        side_z = [Signal(init=1, name=f"sz{i}") for i in range(H * d)]
        v1, f1, l1 = tag(v0, 1, "v1"), tag(f0, 1, "f1"), tag(l0, 1, "l1")
        r_f1 = stage1(side_f, hrow, signed(EW), "r_f1")
        r_m1 = stage1(side_m, hrow, range(Ws), "r_m1")
        r_z1 = stage1(side_z, hrow, 1, "r_z1")
        bh1 = stage1([self.i_bh[i] for i in range(H * d)], hrow, signed(M), "bh1")
        kw1 = [stage1([self.i_knw[h * d + b * k + j] for h in range(H) for b in range(B)], hbeat, signed(M), f"kw1_{j}")
               for j in range(k)]
        wz1 = stage1(list(self.i_wzero), hd, 1, "wz1")  # the write adds nothing: zero products
        v2, f2, l2 = tag(v1, 1, "v2"), tag(f1, 1, "f2"), tag(l1, 1, "l2")
        if self.rescale:
            fs1 = self.i_fshift if H == 1 else stage1(per_head(self.i_fshift), hd, signed(EW), "fs1")
            moved = reg(r_f1 + fs1, signed(EW + 1), "r_f2w")
            r_f2 = moved[:EW].as_signed()
            with m.If(tag(v1 & ~r_z1, 1, "v2_live") & (moved[EW] != moved[EW - 1])):
                m.d.sync += self.err.eq(1)
        else:
            r_f2 = reg(r_f1, signed(EW), "r_f2")
        r_m2, r_z2 = reg(r_m1, range(Ws), "r_m2"), reg(r_z1, 1, "r_z2")
        bh_mag2 = reg(Mux(bh1[-1], -bh1, bh1)[:M], unsigned(M), "bh_mag2")
        if self.offdiag:  # the row's diagonal element: its beat (a counter) and lane (one-hot)
            dg_beat = Signal(range(max(B, 2)), name="dg_beat")
            dg_lane = Signal(k, name="dg_lane", init=1)
            with m.If(prep == 1 + self.lead):
                m.d.sync += [dg_beat.eq(0), dg_lane.eq(1)]
            with m.Elif(run & (beat == B - 1)):
                with m.If(dg_lane[-1]):
                    m.d.sync += [dg_beat.eq(dg_beat + 1), dg_lane.eq(1)]
                with m.Else():
                    m.d.sync += dg_lane.eq(dg_lane << 1)
            dg1 = register_chain(m, Mux(beat == dg_beat, dg_lane, 0), k, lead + 1, "dg1", reset_less=True)
            zero1 = [wz1 | dg1[j] for j in range(k)]
        else:
            zero1 = [wz1] * k
        if self.subtract:  # -knw's beat: M + 1 bits, the product still within 2 M (|bh knw| <= 2^(2 M - 2))
            prod3 = [operand_product(m, bh1, Mux(z, 0, -x), f"prod_{j}", self.dsp)[:2 * M].as_signed()
                     for j, (z, x) in enumerate(zip(zero1, kw1))]
        else:
            prod3 = [operand_product(m, bh1, Mux(z, 0, x)[:M].as_signed(), f"prod_{j}", self.dsp)
                     for j, (z, x) in enumerate(zip(zero1, kw1))]
        v3, f3, l3 = tag(v2, 1, "v3"), tag(f2, 1, "f3"), tag(l2, 1, "l3")
        r_f3, r_m3, r_z3 = reg(r_f2, signed(EW), "r_f3"), reg(r_m2, range(Ws), "r_m3"), reg(r_z2, 1, "r_z3")
        bh_msb3 = reg(msb_index(m, bh_mag2, "bh_msb_c"), unsigned(max(1, (M - 1).bit_length())), "bh_msb3")
        bh_z3 = reg(bh_mag2 == 0, 1, "bh_z3")
        old3 = [reg(Mux(r_z2, 0, ram.rd_data[j * Ws:(j + 1) * Ws].as_signed()), signed(Ws), f"old3_{j}")
                for j in range(k)]

        m.submodules.write = wr = self.write
        m.d.comb += [wr.en.eq(1), wr.i_valid.eq(v3), wr.i_first.eq(v3 & f3), wr.i_last.eq(v3 & l3),
                     wr.i_frac.eq(r_f3), wr.i_msb.eq(r_m3), wr.i_zero.eq(r_z3),
                     wr.i_e_prod.eq(bh_msb3 + ep_c), wr.i_p_zero.eq(bh_z3 | kzero), wr.i_f_prod.eq(f_prod)]
        m.d.comb += [wr.i_old[j].eq(x) for j, x in enumerate(old3)]
        m.d.comb += [wr.i_prod[j].eq(p) for j, p in enumerate(prod3)]
        w_addr = chain(addr_m, aw, FRONT_STAGES + self.write.latency, "wad")
        m.d.comb += [ram.wr_addr.eq(w_addr), ram.wr_en.eq(wr.o_valid),
                     ram.wr_data.eq(Cat(*[wr.o_data[j] for j in range(k)]))]
        # the side registers: the row's exponent from its first beat, msb and zero after its last;
        # the row's index rides beside its beats (the next pass's rows follow this one's)
        hrow_m = register_chain(m, hrow, len(hrow), lead, "hrow_m", reset_less=True)
        fin_row = chain(hrow_m, range(max(H * d, 2)), FRONT_STAGES + self.write.latency + self.write.row_latency, "fr")
        fin_frac = chain(wr.o_frac, signed(EW), self.write.row_latency, "ff")
        with m.If(wr.o_row_valid):
            for i in range(H * d):
                with m.If(fin_row == i):
                    m.d.sync += [side_f[i].eq(fin_frac), side_m[i].eq(wr.o_row_msb), side_z[i].eq(wr.o_row_zero)]
        m.d.comb += [self.o_wvalid.eq(wr.o_valid), self.o_wfirst.eq(wr.o_first), self.o_wfrac.eq(wr.o_frac),
                     self.count.eq(wr.count)]
        if H > 1:  # the written row's head
            m.d.comb += self.o_whead.eq(register_chain(m, hd, len(hd), lead + FRONT_STAGES + self.write.latency,
                                                       "whead", reset_less=True))
        m.d.comb += [self.o_wdata[j].eq(wr.o_data[j]) for j in range(k)]

        # the read: the written row to M bits, kn's and qn's beats, the two dot products
        m.submodules.norm = nb = self.norm
        m.d.comb += [nb.en.eq(1), nb.i_valid.eq(wr.o_valid), nb.i_frac.eq(wr.o_frac)]
        m.d.comb += [nb.i_data[j].eq(wr.o_data[j]) for j in range(k)]
        # the beat at the normaliser's output is the sequencer's, a fixed number of cycles later
        Lb = select_levels(H * B)
        rsel = register_chain(m, hbeat, len(hbeat), lead + self.read_offset - Lb, "rbeat_sel", reset_less=True)
        kn1 = [select_pipe(m, [self.i_kn[h * d + b * k + j] for h in range(H) for b in range(B)], rsel, signed(M),
                           f"kn1_{j}") for j in range(k)]
        qn1 = [select_pipe(m, [self.i_qn[h * d + b * k + j] for h in range(H) for b in range(B)], rsel, signed(M),
                           f"qn1_{j}") for j in range(k)]
        rv1, rf1, rl1 = tag(nb.o_valid, 1, "rv1"), tag(nb.o_first, 1, "rf1"), tag(nb.o_last, 1, "rl1")
        rexp1 = reg(nb.o_frac, signed(EW), "rexp1")
        ps = [operand_product(m, nb.o_data[j], y, f"pk{j}", self.dsp) for j, y in enumerate(kn1)]
        qs = [operand_product(m, nb.o_data[j], y, f"pq{j}", self.dsp) for j, y in enumerate(qn1)]
        rv, rf_, rl = tag(rv1, 1, "rv2"), tag(rf1, 1, "rf2"), tag(rl1, 1, "rl2")
        rexp = reg(rexp1, signed(EW), "rexp2")
        DW = self.dot_width
        lv = 0
        while len(ps) > 1:
            lv += 1
            ps = [reg(ps[j] + ps[j + 1] if j + 1 < len(ps) else ps[j], signed(DW), f"tk{lv}_{j // 2}")
                  for j in range(0, len(ps), 2)]
            qs = [reg(qs[j] + qs[j + 1] if j + 1 < len(qs) else qs[j], signed(DW), f"tq{lv}_{j // 2}")
                  for j in range(0, len(qs), 2)]
            rv, rf_, rl = tag(rv, 1, f"rt{lv}_v"), tag(rf_, 1, f"rt{lv}_f"), tag(rl, 1, f"rt{lv}_l")
            rexp = reg(rexp, signed(EW), f"rt{lv}_e")
        acc_k = Signal(signed(DW), name="acc_sk")
        acc_q = Signal(signed(DW), name="acc_sq")
        with m.If(rv):
            m.d.sync += [acc_k.eq(Mux(rf_, 0, acc_k) + ps[0]), acc_q.eq(Mux(rf_, 0, acc_q) + qs[0])]
        m.d.sync += [self.o_valid.eq(rv & rl)]
        m.d.comb += self.o_valid_next.eq(rv & rl)  # o_valid a cycle ahead
        m.d.comb += [self.o_sk.eq(acc_k), self.o_sq.eq(acc_q)]
        if H > 1:  # the row's head rides beside it from its address
            rhead = register_chain(m, hd, len(hd), lead + self.read_offset + 2 + lv, "rhead", reset_less=True)
        with m.If(rv & rl):
            m.d.sync += self.o_rf.eq(rexp)
            if H > 1:
                m.d.sync += self.o_head.eq(rhead)
        return m
