"""The sum of terms with different exponents (``golden/fixed/scaled/bfp.align_block``) as a
streaming pipeline: the scaled cores' ``e = v - gamma sk`` and ``o = gamma sq + be C``.

A term is ``lanes`` signed integers per beat with either one exponent for the whole vector (a
block vector: ``v``, ``be C``) or one per element (a per-row dot product of a row-BFP state:
``sk_i`` carries its row's exponent). The model rounds every term to a common binary point
``Fc = C - T`` (``C = M - 2 + guard``, ``T`` the largest ``top = msb(|x|) + 1 - frac`` over every
element of every term), adds exactly, then applies ``block()``. ``T`` is a maximum over the whole
vector, so no element can be shifted before the vector's last beat has been seen: the beats wait
in a delay line (registers, or block RAM through :class:`~specmem.rtl.delay_line.DelayLine`)
while the tops are formed and reduced, as :class:`~specmem.rtl.block_norm.StreamBlockNormaliser`
waits for its maximum.

Stages (timing discipline, ``hardware.md``: one carry chain or about four LUT levels each):

* tops: magnitudes (ones' complement and the sign's increment in one carry chain), then per element the msb in three steps
  (per 4-bit group: non-zero and the leading position; the one-hot leading group; the encoded
  msb), ``msb + 1 - frac`` (a carry chain), and a registered pairwise max tree over the lanes;
  a per-vector term ORs its magnitudes over the lanes first (4:1 trees) and takes one msb per
  beat. The terms' tops are padded to one depth, reduced over the terms, and accumulated over
  the vector's beats (a compare and a select per cycle).
* the vector's ``q = T - C`` (0 for an all-zero vector) is latched as its first beat leaves the
  delay line; per beat and lane the shift ``frac - Fc = frac + q`` (a carry chain into the
  shifter's input register; its decode clamps it), one :class:`~specmem.rtl.shift.RoundShiftVar`
  per term (``per_lane`` for the per-element terms), the sum, and a
  :class:`~specmem.rtl.block_norm.StreamBlockNormaliser` to ``M`` bits with ``Fc``.

Shift ranges: a non-zero element's shift is at least ``1 - C`` (its own top is at most ``T``), so
the shifters' left range is ``C - 1``; a right shift past a term's width gives what ``width + 1``
gives. Every rounded term is at most ``2^C`` in magnitude, so the shifters keep only ``C + 2``
bits (``keep``: their quotients and increments that wide, and no left path) and the
sum needs ``C + 2 + ceil(log2 terms)`` bits.

Contract (as the streaming normaliser's): a vector's ``beats`` beats are accepted in consecutive
``en`` cycles; bubbles between vectors are free; a bubble inside a vector sets the sticky
``o_err``. Per-vector exponents are read with the vector's first beat, per-element ones with each
beat. Every exponent and ``T`` lie within ``±2^(exp_width - 2)``.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scaled.bfp import GUARD

from .block_norm import StreamBlockNormaliser
from .delay_line import DELAY_STYLES, MIN_RAM_DELAY, DelayLine, short_delay_style
from .pipeline import data_register, or_all, stage_register, tag_chain, tree4_levels
from .shift import RoundShiftVar

__all__ = ["StreamAlignBlock", "MSB_STAGES"]

#: registered steps of the leading-one detector (group flags, leading group, encode)
MSB_STAGES = 3
#: registered steps of one level of a max tree (the compare, then the select)
PICK_STAGES = 2


def _log2_levels(n: int) -> int:
    """Registered levels of a pairwise tree over ``n`` leaves."""
    return max(0, (n - 1).bit_length())


def _msb(reg, mag, W, tag):
    """``(msb, non-zero)`` of the unsigned ``W``-bit ``mag`` through :data:`MSB_STAGES` registers:
    per 4-bit group its non-zero flag and leading position; the one-hot leading group; the
    encoded msb (flat AND-ORs of the one-hot, no priority chain)."""
    G = (W + 3) // 4
    nz, loc = [], []
    for g in range(G):
        b = [mag[4 * g + j] if 4 * g + j < W else Const(0, 1) for j in range(4)]
        nz.append(reg(b[0] | b[1] | b[2] | b[3], 1, f"{tag}_gnz{g}"))
        loc.append(reg(Cat(b[3] | (~b[2] & b[1]), b[3] | b[2]), 2, f"{tag}_gloc{g}"))
    hot = reg(Cat(*(nz[g] & ~Cat(*nz[g + 1:]).any() if g + 1 < G else nz[g] for g in range(G))), G, f"{tag}_ghot")
    locs = [reg(x, 2, f"{tag}_loc{g}") for g, x in enumerate(loc)]
    anyz = reg(Cat(*nz).any(), 1, f"{tag}_nzb")
    mw = max(1, (W - 1).bit_length())
    bits = []
    for b in range(mw):
        if b < 2:
            bits.append(or_all([hot[g] & locs[g][b] for g in range(G)]))
        else:
            sel = [hot[g] for g in range(G) if (4 * g) >> b & 1]
            bits.append(or_all(sel) if sel else Const(0, 1))
    return reg(Cat(*bits), unsigned(mw), f"{tag}_msb"), reg(anyz, 1, f"{tag}_nz")


class StreamAlignBlock(wiring.Component):
    """``align_block`` of ``terms`` on vectors of ``lanes x beats`` elements; see the module docstring.

    ``terms``: ``(width, per_element)`` per term. Members: ``en``, ``i_valid``; per term ``t``
    ``i_x{t}`` (``lanes`` x ``signed(width)``) and ``i_f{t}`` (``signed(exp_width)``, or ``lanes``
    of them for a per-element term); ``o_valid``, ``o_first``, ``o_last``, ``o_data`` (``lanes`` x
    ``signed(M)``), ``o_frac``, ``o_err``. ``latency``: cycles from a vector's first beat in to its
    first beat out; ``delay_style``: ``registers`` or a block-RAM style of
    :data:`~specmem.rtl.delay_line.DELAY_STYLES` for the beats' wait."""

    def __init__(self, lanes: int, beats: int, terms, M: int, *, guard: int = GUARD, exp_width: int = 12,
                 delay_style: str = "registers"):
        for name, v, lo in (("lanes", lanes, 1), ("beats", beats, 1), ("M", M, 3), ("guard", guard, 0),
                            ("exp_width", exp_width, 6)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        terms = tuple(terms)
        if not terms:
            raise ValueError("terms: at least one (width, per_element) pair")
        for w, pe in terms:
            if isinstance(w, bool) or not isinstance(w, int) or w < 2 or not isinstance(pe, bool):
                raise ValueError(f"terms: each must be (width >= 2, per_element: bool), got {(w, pe)!r}")
        if delay_style not in DELAY_STYLES:
            raise ValueError(f"delay_style: must be one of {', '.join(DELAY_STYLES)}, got {delay_style!r}")
        self.lanes, self.beats, self.terms, self.M, self.guard = lanes, beats, terms, M, guard
        self.exp_width, self.delay_style = exp_width, delay_style
        self.C = M - 2 + guard
        self.max_left = max(self.C - 1, 0)
        if self.C + max(w for w, _ in terms) + 4 >= 1 << (exp_width - 2):
            raise ValueError(f"exp_width: {exp_width} bits cannot hold the exponents of {M}-bit outputs with "
                             f"{guard} guard bits")
        #: the shifts ``frac + q`` (exponents and ``q`` within ``±2^(exp_width - 1)``)
        self.shift_width = exp_width + 3
        self.term_width = self.C + 2
        self.sum_width = self.term_width + _log2_levels(len(terms))
        self.lane_levels = _log2_levels(lanes)
        self.or_levels = tree4_levels(lanes)
        #: register stages from a beat in to its top at the beat accumulator's input
        self.beat_levels = _log2_levels(beats)
        self.top_depth = 1 + MSB_STAGES + 1 + PICK_STAGES * (self.lane_levels + _log2_levels(len(terms)))
        #: the beats' wait: until their vector's ``q`` is latched (the last beat's top captured,
        #: the tree over the beats, ``q``)
        self.delay = beats + self.top_depth + PICK_STAGES * self.beat_levels + 1
        if delay_style != "registers" and self.delay < MIN_RAM_DELAY:
            raise ValueError(f"delay_style: a block-RAM delay needs {MIN_RAM_DELAY} stages, this shape waits {self.delay}")
        self.norm = StreamBlockNormaliser(lanes, beats, self.sum_width, M, frac_width=exp_width,
                                          delay_style=short_delay_style(delay_style))
        #: cycles from a vector's first beat in to its first beat out
        self.latency = self.delay + RoundShiftVar.latency + 1 + self.norm.latency
        EW = exp_width
        ports = {"en": In(1), "i_valid": In(1)}
        for t, (w, pe) in enumerate(terms):
            ports[f"i_x{t}"] = In(data.ArrayLayout(signed(w), lanes))
            ports[f"i_f{t}"] = In(data.ArrayLayout(signed(EW), lanes) if pe else signed(EW))
        ports.update({"o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
                      "o_data": Out(data.ArrayLayout(signed(M), lanes)), "o_frac": Out(signed(EW)), "o_err": Out(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        w, B, EW, en = self.lanes, self.beats, self.exp_width, self.en
        TW = EW + 1  # a top, T
        QW = EW + 2  # q = T - C
        reg = stage_register(m, en)  # the tags (valid, first, last) and wide data
        dreg = data_register(m, en)  # one-bit data (compare and non-zero flags): no reset

        def tags(v, first, last, n, tag):
            return tag_chain(reg, v, first, last, n, tag)

        def delay(x, shape, n, tag):
            for i in range(n):
                x = reg(x, shape, f"{tag}_p{i}")
            return x

        def pick(a, b, tag):
            """The larger of two ``(top, nz)`` pairs (a zero never wins) in two registered steps:
            the compare (a carry chain) beside both candidates, then the select (a LUT level)."""
            ge = dreg(a[0] >= b[0], 1, f"{tag}_ge")
            a1 = (reg(a[0], signed(TW), f"{tag}_at"), dreg(a[1], 1, f"{tag}_anz"))
            b1 = (reg(b[0], signed(TW), f"{tag}_bt"), dreg(b[1], 1, f"{tag}_bnz"))
            take_a = a1[1] & (~b1[1] | ge)
            return reg(Mux(take_a, a1[0], b1[0]), signed(TW), f"{tag}_t"), dreg(a1[1] | b1[1], 1, f"{tag}_nz")

        def max_tree(pairs, tag, levels):
            """``pairs`` reduced by :func:`pick` (two registers a level), padded to ``levels`` levels."""
            lv = 0
            while len(pairs) > 1:
                nxt = []
                for i in range(0, len(pairs), 2):
                    if i + 1 < len(pairs):
                        nxt.append(pick(pairs[i], pairs[i + 1], f"{tag}{lv}_{i // 2}"))
                    else:
                        p = pairs[i]
                        for r in range(PICK_STAGES):
                            p = (reg(p[0], signed(TW), f"{tag}{lv}_{i // 2}_t{r}"),
                                 dreg(p[1], 1, f"{tag}{lv}_{i // 2}_nz{r}"))
                        nxt.append(p)
                pairs, lv = nxt, lv + 1
            p = pairs[0]
            for i in range(lv * PICK_STAGES, levels * PICK_STAGES):
                p = (reg(p[0], signed(TW), f"{tag}{i}_pt"), dreg(p[1], 1, f"{tag}{i}_pnz"))
            return p

        # input framing, and each per-vector exponent held from the vector's first beat
        cnt = Signal(range(max(B, 2)))
        first_in, last_in = cnt == 0, cnt == B - 1
        err = Signal()
        with m.If(en):
            with m.If(self.i_valid):
                m.d.sync += cnt.eq(Mux(last_in, 0, cnt + 1))
            with m.Elif(cnt != 0):
                m.d.sync += err.eq(1)
        xs, fs = [], []  # per term: the lanes; the exponents (one per lane, or the vector's)
        for t, (wd, pe) in enumerate(self.terms):
            xs.append([getattr(self, f"i_x{t}")[i] for i in range(w)])
            fi = getattr(self, f"i_f{t}")
            if pe:
                fs.append([fi[i] for i in range(w)])
            else:
                fr = Signal(signed(EW), name=f"fvec{t}", reset_less=True)
                with m.If(en & self.i_valid & first_in):
                    m.d.sync += fr.eq(fi)
                fs.append(Mux(first_in, fi, fr))

        # tops: per beat the largest top over the lanes of every term
        tops = []
        for t, (wd, pe) in enumerate(self.terms):
            mags = [reg((x.as_unsigned() ^ x[-1].replicate(wd)) + x[-1], unsigned(wd), f"t{t}_mag{i}")
                    for i, x in enumerate(xs[t])]
            if pe:
                f3 = [delay(f, signed(EW), 1 + MSB_STAGES, f"t{t}_f{i}") for i, f in enumerate(fs[t])]
                pairs = []
                for i, mg in enumerate(mags):
                    mb, nz = _msb(dreg, mg, wd, f"t{t}_l{i}")
                    pairs.append((reg(mb + 1 - f3[i], signed(TW), f"t{t}_top{i}"), dreg(nz, 1, f"t{t}_tnz{i}")))
                top = max_tree(pairs, f"t{t}_mx", self.lane_levels)
            else:
                lv = 0
                while len(mags) > 1:
                    lv += 1
                    mags = [reg(or_all(mags[j:j + 4]), unsigned(wd), f"t{t}_or{lv}_{j // 4}") for j in range(0, len(mags), 4)]
                fv = delay(fs[t], signed(EW), 1 + lv + MSB_STAGES, f"t{t}_fv")
                mb, nz = _msb(dreg, mags[0], wd, f"t{t}_v")
                top = (reg(mb + 1 - fv, signed(TW), f"t{t}_top"), dreg(nz, 1, f"t{t}_tnz"))
                for i in range(lv, PICK_STAGES * self.lane_levels):
                    top = (reg(top[0], signed(TW), f"t{t}_pad{i}_t"), dreg(top[1], 1, f"t{t}_pad{i}_nz"))
            tops.append(top)
        beat_top = max_tree(tops, "tm", _log2_levels(len(self.terms)))
        va, fa, la = tags(self.i_valid, first_in, last_in, self.top_depth, "tt")

        # the vector's largest top: its beats' tops (the last B in a shift register when its last
        # beat arrives, the beats being consecutive) captured and reduced by a second tree
        hist = [beat_top]
        for i in range(B - 1):
            p = hist[-1]
            hist.append((reg(p[0], signed(TW), f"bh{i}_t"), dreg(p[1], 1, f"bh{i}_nz")))
        cap = va & la
        held_tops = []
        for i, (t_, nz_) in enumerate(hist):
            ht, hn = Signal(signed(TW), name=f"cap{i}_t", reset_less=True), Signal(name=f"cap{i}_nz", reset_less=True)
            with m.If(en & cap):
                m.d.sync += [ht.eq(t_), hn.eq(nz_)]
            held_tops.append((ht, hn))
        acc_done = reg(cap, 1, "cap_v")
        for i in range(self.beat_levels * PICK_STAGES):
            acc_done = reg(acc_done, 1, f"bt{i}_v")
        acc_t, acc_nz = max_tree(held_tops, "bt", self.beat_levels)
        q = Signal(signed(QW), name="q", reset_less=True)  # T - C: the vector's shifts are frac + q, its exponent Fc = -q
        with m.If(en & acc_done):
            m.d.sync += q.eq(Mux(acc_nz, acc_t - self.C, 0))

        # the beats wait for their vector's q
        fields = []
        for t, (wd, pe) in enumerate(self.terms):
            fields += [(x, wd) for x in xs[t]]
            fields += [(f, EW) for f in fs[t]] if pe else [(fs[t], EW)]
        word = Cat(*(x.as_unsigned() if hasattr(x, "as_unsigned") else x for x, _ in fields))
        m.submodules.wait = dl = DelayLine(len(word), self.delay, self.delay_style)
        m.d.comb += [dl.en.eq(en), dl.i.eq(word)]
        vd, fd, ld = tags(self.i_valid, first_in, last_in, self.delay, "dl")
        pos, outs = 0, []
        for _, wd in fields:
            outs.append(dl.o[pos:pos + wd].as_signed())
            pos += wd
        it = iter(outs)
        dxs, dfs = [], []
        for wd, pe in self.terms:
            dxs.append([next(it) for _ in range(w)])
            dfs.append([next(it) for _ in range(w)] if pe else next(it))

        # shifts: frac + q into the shifters (their decode clamps it), the rounding shifts, the sum
        SW = self.shift_width
        shifted = []
        for t, (wd, pe) in enumerate(self.terms):
            u = RoundShiftVar(w, wd, max_left=self.max_left, shift_width=SW, per_lane=pe, keep=self.term_width)
            m.submodules[f"shift{t}"] = u
            m.d.comb += [u.en.eq(en), u.i_valid.eq(vd)]
            m.d.comb += [u.i_data[i].eq(x) for i, x in enumerate(dxs[t])]
            m.d.comb += ([u.i_shift[i].eq(f + q) for i, f in enumerate(dfs[t])] if pe
                         else [u.i_shift.eq(dfs[t] + q)])
            shifted.append([u.o_data[i] for i in range(w)])
        v2, f2, l2 = tags(vd, fd, ld, RoundShiftVar.latency + 1, "sum")
        fc2 = delay(-q, signed(QW), RoundShiftVar.latency + 1, "fcs")
        sums = [reg(sum(s[i] for s in shifted), signed(self.sum_width), f"sum{i}") for i in range(w)]

        m.submodules.norm = nb = self.norm
        m.d.comb += [nb.en.eq(en), nb.i_valid.eq(v2), nb.i_frac.eq(fc2)]
        m.d.comb += [nb.i_data[i].eq(s) for i, s in enumerate(sums)]
        m.d.comb += [self.o_valid.eq(nb.o_valid), self.o_first.eq(nb.o_first), self.o_last.eq(nb.o_last),
                     self.o_frac.eq(nb.o_frac), self.o_err.eq(err | nb.o_err)]
        m.d.comb += [self.o_data[i].eq(nb.o_data[i]) for i in range(w)]
        return m
