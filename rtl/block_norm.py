"""Pipelined block normalisation: the hardware of ``golden/fixed/scaled/bfp.block``.

An ``n``-element vector of ``in_width``-bit integers with one exponent ``frac`` becomes ``M``-bit
mantissas whose largest magnitude has its top bit just below the sign bit (one more shift if
round-half-even would carry into it), and ``frac - shift``; bit-exact with ``block()``.

How the arithmetic is arranged. With ``top = msb(max |x|)`` the golden shift is
``sh = top - (M - 2)`` (0 for an all-zero vector) plus ``carry``. Writing ``Y = x * 2^(M-1)``,
``x * 2^-(sh + carry)`` rounded is ``Y >> s`` rounded with ``s = top + carry``: a *right* shift
only, by ``0 .. in_width`` (the left shifts of small vectors are the low zeros of ``Y``), whose
bit 0 is the rounding bit and bits ``1 .. M`` the truncated mantissa ``q``. The carry is decided
*before* shifting, so each lane shifts once (not once with ``sh`` and once with ``sh + 1``): the
largest magnitude rounds up to ``2^(M-1)`` exactly when its ``M`` bits ``top - M + 1 .. top``
are all ones (the kept bits are ones so ``q`` is odd and a set rounding bit rounds up whatever
the sticky bits); round-half-even is monotone in magnitude, so ``carry = OR over lanes of
c_lane[top]`` with ``c_lane[t] = AND(|x|[t - M + 1 .. t])``, and that OR commutes with the
selection by ``top``: the window vectors are OR-reduced in a tree beside the magnitudes' tree,
without knowing ``top``. No magnitude comparator, no rounded-result test (whose
``-2^(M-1)`` corner fits ``M`` bits yet is a carry) is needed.

Timing discipline (``hardware.md``): at most one carry chain or about four LUT levels between
registers; per-token controls are registered and copied per lane. Stages (``L`` = 4:1 OR-tree
levels for ``n`` lanes, ``ceil(log4 n)``):

1. register the inputs and their ones' complements ``x XOR sign`` (one LUT level);
2. magnitudes ``|x| = (x XOR sign) + sign`` (a bare carry chain) and ``frac + (M - 2)``;
3. ``L`` OR-tree levels over the magnitudes (``msb(max |x|) = msb(OR |x|)``), one LUT level
   each; the first also forms every lane's window-AND vector ``c_lane`` (three LUT levels
   at ``M = 18``), whose own ``L``-level OR tree therefore ends one stage later;
4. leading one of the OR: the one-hot leading 4-bit group ``G`` (copied per lane), the
   one-hot leading bit, ``OR != 0``, and per lane the sticky OR of the ``x`` bits a coarse
   shift by ``4 g`` drops (the carry vectors' tree ends here);
5. coarse shift: every lane selects ``Y >> 4 g`` (``M + 5`` bits, an AND-OR by ``G``) and its
   sticky bit; the control picks ``carry = OR(C & leading bit)`` and decodes the fine shift
   ``(top mod 4) + carry`` in ``0 .. 4`` one-hot (copied per lane), and encodes ``top``;
6. fine shift by the one-hot ``0 .. 4`` to ``2 q + r`` (``q`` the truncated mantissa, ``r`` the
   rounding bit) and the bit ``sticky | q[0]`` (a few LUT levels, flat AND-ORs by the one-hot);
   the exponent ``frac + (M - 2) - top`` (``frac`` for a zero vector);
7. round-half-even as ``(2 q + r + (sticky | q[0])) >> 1`` (one ``M + 1``-bit carry chain
   straight from registers) and ``frac - carry``: the output register.

Advances one stage per cycle while ``en`` is high (a pipeline-wide stall); ``latency = 6 + L``
cycles from input to output. Round-half-even only (the presets' rounding).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .delay_line import LINE_STYLES, DelayLine
from .pipeline import hold_register, stage_register, tag_chain, tree4_levels

__all__ = ["BlockNormaliser", "SerialBlockNormaliser", "StreamBlockNormaliser"]


def _any(terms):
    """OR of a list of 1-bit values (0 for none)."""
    acc = Const(0, 1)
    for i, t in enumerate(terms):
        acc = t if i == 0 else acc | t
    return acc


def _ports(n, in_width, M, frac_width):
    """The normalisers' ports: ``en``; the vector, its exponent and its valid bit in and out."""
    return {"en": In(1), "i_valid": In(1), "i_data": In(data.ArrayLayout(signed(in_width), n)),
            "i_frac": In(signed(frac_width)), "o_valid": Out(1), "o_data": Out(data.ArrayLayout(signed(M), n)),
            "o_frac": Out(signed(frac_width))}


def _all_of(terms):
    """AND of a list of 1-bit values."""
    acc = terms[0]
    for t in terms[1:]:
        acc = acc & t
    return acc


def _window_ands(mag, W, M):
    """Per msb position ``t`` at which rounding can carry (``M - 1 .. W - 1``): ``AND(|x|[t - M + 1 .. t])``."""
    return Cat(*(mag[t - M + 1:t + 1].all() for t in range(M - 1, W)))


def _leading(orv, W):
    """``(group one-hot, bit one-hot)`` of the leading one of ``orv`` (4-bit groups)."""
    gmax = (W - 1) // 4
    grp_nz = [orv[4 * g:min(4 * g + 4, W)].any() for g in range(gmax + 1)]
    g_hot = Cat(*(grp_nz[g] & ~orv[4 * g + 4:].any() if 4 * g + 4 < W else grp_nz[g] for g in range(gmax + 1)))
    lead = Cat(*(orv[t] & ~orv[t + 1:].any() if t + 1 < W else orv[t] for t in range(W)))
    return g_hot, lead


def _coarse_stickies(x, W, M):
    """Per coarse shift ``4 g >= M``: the OR of the ``x`` bits it drops (``x[0 .. 4 g - M]``), or None."""
    sgs = [g for g in range((W - 1) // 4 + 1) if 4 * g >= M]
    return Cat(*(x[:4 * g - M + 1].any() for g in sgs)) if sgs else None


def _coarse_shift(x, g1, st, W, M):
    """``(Y >> 4 g, sticky)``: ``Y = x 2^(M-1)`` shifted by the one-hot group ``g1`` (``M + 5``
    bits: the round bit, ``M`` mantissa bits, up to 4 more for the fine shift), and the sticky bit
    of the dropped bits (``st``: :func:`_coarse_stickies`)."""
    gmax = (W - 1) // 4
    sgs = [g for g in range(gmax + 1) if 4 * g >= M]

    def ybit(j):
        """Bit ``j`` of ``Y`` sign-extended (None: constant 0)."""
        return None if j < M - 1 else x[min(j - (M - 1), W - 1)]

    bits = [_any([g1[g] & ybit(4 * g + b) for g in range(gmax + 1) if ybit(4 * g + b) is not None])
            for b in range(M + 5)]
    return Cat(*bits), _any([g1[g] & st[i] for i, g in enumerate(sgs)])


def _fine_control(lead, cvec, W, M):
    """``(carry, fine-shift one-hot 0 .. 4, top)`` from the leading bit and the OR of the window
    ANDs. The leading bit is one-hot, so carry = C[top] and the fine shift (top mod 4) + carry are
    flat AND-ORs of (leading bit, its carry flag) pairs: three LUT levels, not a carry selection
    followed by an adder or a second selection."""
    tpos = list(range(M - 1, W))
    cbit = {t: cvec[i] for i, t in enumerate(tpos)}
    cy = _any([cbit[t] & lead[t] for t in tpos])
    ksel = Cat(*(_any([lead[t] & ~cbit[t] if t in cbit else lead[t] for t in range(k, W, 4) if k < 4]
                      + ([lead[t] & cbit[t] for t in tpos if t % 4 == k - 1] if k >= 1 else []))
                 for k in range(5)))
    tw = max(1, (W - 1).bit_length())
    top = Cat(*(_any([lead[t] for t in range(W) if t >> b & 1]) for b in range(tw)))
    return cy, ksel, top


def _fine_shift(z, ks, st, M):
    """``(2 q + r, sticky | q[0])`` after the fine shift by the one-hot ``ks``: round-half-even is
    then ``(2 q + r + (sticky | q[0])) >> 1``, a bare carry chain."""
    rq = Cat(*(_any([ks[s] & z[s + b] for s in range(5)]) for b in range(M + 1)))
    sq = st | _any([ks[s] & (z[:s].any() | z[s + 1]) if s else ks[s] & z[1] for s in range(5)])
    return rq, sq


class BlockNormaliser(wiring.Component):
    """``n`` lanes of ``in_width``-bit signed integers -> ``M``-bit block mantissas; ``frac`` is a
    signed ``frac_width``-bit exponent carried beside the vector (wrapping modulo
    ``2^frac_width``)."""

    def __init__(self, n: int, in_width: int, M: int, frac_width: int = 16, rounding: str = "rne"):
        for name, v, lo in (("n", n, 1), ("in_width", in_width, 2), ("M", M, 3), ("frac_width", frac_width, 4)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if rounding != "rne":
            raise ValueError(f"rounding: the block normaliser implements 'rne' (the presets' rounding), got {rounding!r}")
        self.n, self.in_width, self.M, self.frac_width = n, in_width, M, frac_width
        self.or_levels = tree4_levels(n)
        #: cycles from an input accepted (``valid`` and ``en``) to its output
        self.latency = 6 + self.or_levels
        super().__init__(_ports(n, in_width, M, frac_width))

    def elaborate(self, platform):
        m = Module()
        n, W, M, FW = self.n, self.in_width, self.M, self.frac_width
        en = self.en
        gmax = (W - 1) // 4               # leading 4-bit groups of |x|: top = 4 g + j
        tpos = list(range(M - 1, W))      # msb positions at which rounding can carry
        sgs = [g for g in range(gmax + 1) if 4 * g >= M]  # coarse shifts that drop x bits

        reg = stage_register(m, en)

        def carry(xs, v, f, tag):
            """Delay the vector, its valid bit and its exponent by one stage."""
            return ([reg(x, signed(W), f"{tag}_x{i}") for i, x in enumerate(xs)],
                    reg(v, 1, f"{tag}_v"), reg(f, signed(FW), f"{tag}_f"))

        def or_level(vals, width, tag):
            """One registered 4:1 OR level."""
            out = []
            for j in range(0, len(vals), 4):
                out.append(reg(_any(vals[j:j + 4]), unsigned(width), f"{tag}_{j // 4}"))
            return out

        # 1. inputs, and their ones' complements for the magnitudes (x XOR sign: one LUT level)
        ins = [self.i_data[i] for i in range(n)]
        ones = [reg(x.as_unsigned() ^ x[-1].replicate(W), unsigned(W), f"s1_ones{i}") for i, x in enumerate(ins)]
        xs, v, f = carry(ins, self.i_valid, self.i_frac, "s1")
        # 2. magnitudes |x| = (x XOR sign) + sign, a bare carry chain between registers
        #    (|-2^(W-1)| = 2^(W-1) fits W unsigned bits), and frac + (M - 2)
        mags = [reg(b + x[-1], unsigned(W), f"s2_mag{i}") for i, (b, x) in enumerate(zip(ones, xs))]
        xs, v, f = carry(xs, v, f + (M - 2), "s2")
        # 3. OR tree of the magnitudes; window ANDs (first level) and their own OR tree
        cs = []
        if tpos:
            for i, a in enumerate(mags):
                cs.append(reg(_window_ands(a, W, M), unsigned(len(tpos)), f"s3_c{i}"))
        level = 0
        while len(mags) > 1:
            level += 1
            mags = or_level(mags, W, f"or{level}")
            xs, v, f = carry(xs, v, f, f"or{level}")
        orv = mags[0]
        level = 0
        while len(cs) > 1:
            level += 1
            cs = or_level(cs, len(tpos), f"cor{level}")
        # 4. leading one: group one-hot (per lane copies), bit one-hot, nonzero, sticky ORs
        g_hot, lead_v = _leading(orv, W)
        gs = [reg(g_hot, gmax + 1, f"s4_g{i}") for i in range(n)]
        lead = reg(lead_v, W, "s4_lead")
        nz = reg(orv.any(), 1, "s4_nz")
        # sticky of a coarse shift by 4 g: Y = x 2^(M-1) loses x[0 .. 4 g - M]
        sts = [reg(_coarse_stickies(x, W, M), max(len(sgs), 1), f"s4_st{i}") if sgs else None
               for i, x in enumerate(xs)]
        cvec = cs[0] if cs else None  # ends here: registered once more than the magnitudes' tree
        xs, v, f = carry(xs, v, f, "s4")
        # 5. coarse shift by 4 g; carry, fine-shift one-hot, top
        zw = M + 5
        z1s, st1s = [], []
        for i, (x, g1) in enumerate(zip(xs, gs)):
            z, st = _coarse_shift(x, g1, sts[i], W, M)
            z1s.append(reg(z, zw, f"s5_z{i}"))
            st1s.append(reg(st, 1, f"s5_st{i}"))
        cy, ksel_v, top_v = _fine_control(lead, cvec, W, M)
        ks = [reg(ksel_v, 5, f"s5_k{i}") for i in range(n)]
        top = reg(top_v, unsigned(len(top_v)), "s5_top")
        cy5 = reg(cy, 1, "s5_cy")
        nz5 = reg(nz, 1, "s5_nz")
        v5 = reg(v, 1, "s5_v")
        f5 = reg(f, signed(FW), "s5_f")
        # 6. fine shift by 0 .. 4, sticky, rounding increment; exponent
        # RNE of (q, round bit r, sticky) is q + (r & (sticky | q[0])) = (2 q + r + (sticky | q[0])) >> 1:
        # register 2 q + r and the one bit sticky | q[0], so stage 7 is a bare carry chain
        rqs, sqs = [], []
        for i, (z, k, st) in enumerate(zip(z1s, ks, st1s)):
            rq, sq = _fine_shift(z, k, st, M)
            rqs.append(reg(rq, signed(M + 1), f"s6_rq{i}"))
            sqs.append(reg(sq, 1, f"s6_sq{i}"))
        f6 = reg(f5 - Mux(nz5, top, M - 2), signed(FW), "s6_f")
        cy6 = reg(cy5, 1, "s6_cy")
        v6 = reg(v5, 1, "s6_v")
        # 7. increment: the output register
        # the output registers hold data that o_valid qualifies: no reset (the shell's reset net
        # into them was a routed critical path of the scaled DeltaNet core)
        od = [Signal(signed(M), name=f"o_data_r{i}", reset_less=True) for i in range(n)]
        ofr = Signal(signed(FW), name="o_frac_r", reset_less=True)
        m.d.comb += [self.o_data[i].eq(od[i]) for i in range(n)] + [self.o_frac.eq(ofr)]
        with m.If(en):
            for i in range(n):
                m.d.sync += od[i].eq((rqs[i] + sqs[i])[1:M + 1])
            m.d.sync += [self.o_valid.eq(v6), ofr.eq(f6 - cy6)]
        return m


class SerialBlockNormaliser(wiring.Component):
    """The same ``block()`` as :class:`BlockNormaliser`, on ``lanes`` lanes instead of ``n``: for
    a unit that normalises one vector every few dozen cycles (the token chain), where ``n`` lanes
    of shifters and trees would sit idle.

    The accepted vector is held in a rotating buffer (``ceil(n / lanes)`` beats of ``lanes``
    elements, zero-padded). First sweep: magnitudes and window ANDs of a beat per cycle, OR-ed
    into two accumulators (the OR of all magnitudes, the OR of their window vectors). Then the
    leading one, carry and fine-shift controls once, as in :class:`BlockNormaliser`. Second
    sweep: each beat through the coarse shift, the fine shift and the rounding increment into an
    output shift register. The same arithmetic through the same helper functions; the
    once-per-vector controls take one stage more (the leading one in two steps) and the carry
    windows are ANDs of 4-bit runs, so no stage is deeper than the wide unit's.
    ``latency = 2·beats + 7`` cycles from accept to ``o_valid`` (a one-cycle pulse; ``o_data``/
    ``o_frac`` then hold until the next vector's second sweep). One vector at a time: ``i_valid`` is accepted only while ``busy`` is low
    (``busy`` covers the accept cycle's successors up to ``o_valid``); ``en`` stalls it.

    ``held_input=True``: no buffer. ``i_data`` is read in the cycles after the accept (not in the
    accept cycle itself) until ``o_valid``, and the caller holds it over them (the token chain's
    accumulators, Gram and products do); each beat is read through a ``beats``:1 select steered by
    a beat counter: ``lanes·beats·in_width`` flip-flops and their load/rotate multiplexers fewer."""

    def __init__(self, n: int, in_width: int, M: int, frac_width: int = 16, lanes: int = 1,
                 rounding: str = "rne", *, held_input: bool = False):
        for name, v, lo in (("n", n, 1), ("in_width", in_width, 2), ("M", M, 3), ("frac_width", frac_width, 4),
                            ("lanes", lanes, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if lanes > 4:
            raise ValueError(f"lanes: at most 4 (a beat's OR with the accumulator is one LUT level), got {lanes}; "
                             f"BlockNormaliser is the wide arrangement")
        if rounding != "rne":
            raise ValueError(f"rounding: the block normaliser implements 'rne' (the presets' rounding), got {rounding!r}")
        self.n, self.in_width, self.M, self.frac_width, self.lanes = n, in_width, M, frac_width, lanes
        self.held_input = bool(held_input)
        self.beats = -(-n // lanes)
        #: cycles from an input accepted (``valid``, ``en``, not ``busy``) to ``o_valid``
        self.latency = 2 * self.beats + 7
        super().__init__({**_ports(n, in_width, M, frac_width), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        n, W, M, FW, w, B = self.n, self.in_width, self.M, self.frac_width, self.lanes, self.beats
        en = self.en
        gmax = (W - 1) // 4
        tpos = list(range(M - 1, W))
        sgs = [g for g in range(gmax + 1) if 4 * g >= M]
        reg = stage_register(m, en)
        nb = B * w

        # c: cycles since the accept (0: idle). Sweep 1 reads beats at c = 1 .. B, sweep 2 at
        # c = B + 4 .. 2B + 3 (once the controls exist); the output shifts at c = B + 7 .. 2B + 6.
        # Every phase is a flag register loaded from the counter's next value, so the wide enables
        # (the buffers' rotate and shift) come straight from a flip-flop, not from a compare.
        END = 2 * B + 6
        c = Signal(range(END + 1))
        nxt = Signal(range(END + 1))
        idle = Signal(init=1)

        def flag(name, *ranges):
            f = Signal(name=name)
            with m.If(en):
                m.d.sync += f.eq(_any([(nxt >= lo) & (nxt <= hi) for lo, hi in ranges]))
            return f

        accept = self.i_valid & idle
        m.d.comb += [self.busy.eq(~idle), nxt.eq(Mux(idle, accept, Mux(c == END, 0, c + 1)))]
        with m.If(en):
            m.d.sync += [c.eq(nxt), idle.eq(nxt == 0)]
        rotate = flag("ph_rotate", (1, B), (B + 4, 2 * B + 3))
        or_on, or_first = flag("ph_or", (3, B + 2)), flag("ph_or_first", (3, 3))
        cv_on, cv_first = flag("ph_cv", (5, B + 4)), flag("ph_cv_first", (5, 5))
        shift_out, last = flag("ph_shift", (B + 7, END)), flag("ph_last", (END, END))
        fM = Signal(signed(FW))  # frac + (M - 2)
        with m.If(en & accept):
            m.d.sync += fM.eq(self.i_frac + (M - 2))
        if self.held_input:  # beat ``bi`` of the held input, bi advancing as the buffer would rotate
            bi = Signal(range(max(B, 2)))
            with m.If(en):
                with m.If(accept):
                    m.d.sync += bi.eq(0)
                with m.Elif(rotate):
                    m.d.sync += bi.eq(Mux(bi == B - 1, 0, bi + 1))
            padded = [self.i_data[i] if i < n else Const(0, signed(W)) for i in range(nb)]
            beat = [padded[i] if B == 1 else Array(padded[bt * w + i] for bt in range(B))[bi] for i in range(w)]
        else:
            xbuf = [Signal(signed(W), name=f"xbuf{i}") for i in range(nb)]
            with m.If(en):
                with m.If(accept):
                    m.d.sync += [xbuf[i].eq(self.i_data[i] if i < n else 0) for i in range(nb)]
                with m.Elif(rotate):
                    m.d.sync += [xbuf[i].eq(xbuf[(i + w) % nb]) for i in range(nb)]
            beat = xbuf[:w]

        # sweep 1: ones' complements, magnitudes, window ANDs, OR accumulators
        ones = [reg(x.as_unsigned() ^ x[-1].replicate(W), unsigned(W), f"s1_ones{i}") for i, x in enumerate(beat)]
        sgn = [reg(x[-1], 1, f"s1_sgn{i}") for i, x in enumerate(beat)]
        mags = [reg(o + s, unsigned(W), f"s2_mag{i}") for i, (o, s) in enumerate(zip(ones, sgn))]
        acc_or = Signal(unsigned(W))
        with m.If(en & or_on):  # beat b's magnitudes are in mags at c = 3 + b
            m.d.sync += acc_or.eq(Mux(or_first, 0, acc_or) | _any(mags))
        cvec = None
        if tpos:  # per-lane windows in two registered stages (ANDs of L-bit runs, then of a few runs),
            # OR-ed into the accumulator after: no stage deeper than two LUT levels
            L = min(4, M)
            runs = [reg(Cat(*(a[j:j + L].all() for j in range(W - L + 1))), W - L + 1, f"s3_run{i}")
                    for i, a in enumerate(mags)]

            def window(r, t):
                starts = sorted(set(list(range(t - M + 1, t - L + 2, L)) + [t - L + 1]))
                return _all_of([r[j] for j in starts])

            cws = [reg(Cat(*(window(r, t) for t in tpos)), unsigned(len(tpos)), f"s4_cw{i}")
                   for i, r in enumerate(runs)]
            cvec = Signal(unsigned(len(tpos)))
            with m.If(en & cv_on):
                m.d.sync += cvec.eq(Mux(cv_first, 0, cvec) | _any(cws))
        # the controls, free-running: right from c = B + 5 (leading one) and B + 6 (fine shift).
        # The leading one in two stages: each 4-bit group's nonzero flag and local leading bit, then
        # the leading group (a 12-input priority) and the bit (about 4 LUT levels each, not 8)
        l1_gnz = reg(Cat(*(acc_or[4 * g:min(4 * g + 4, W)].any() for g in range(gmax + 1))), gmax + 1, "l1_gnz")
        l1_loc = reg(Cat(*(acc_or[t] & ~acc_or[t + 1:min(4 * (t // 4) + 4, W)].any() if t + 1 < min(4 * (t // 4) + 4, W)
                           else acc_or[t] for t in range(W))), W, "l1_loc")
        g_hot = Cat(*(l1_gnz[g] & ~l1_gnz[g + 1:].any() if g < gmax else l1_gnz[g] for g in range(gmax + 1)))
        gs = [reg(g_hot, gmax + 1, f"s4_g{i}") for i in range(w)]
        lead = reg(Cat(*(l1_loc[t] & g_hot[t // 4] for t in range(W))), W, "s4_lead")
        nz = reg(l1_gnz.any(), 1, "s4_nz")
        cy, ksel_v, top_v = _fine_control(lead, cvec, W, M)
        ks = [reg(ksel_v, 5, f"s5_k{i}") for i in range(w)]
        top = reg(top_v, unsigned(len(top_v)), "s5_top")
        cy5 = reg(cy, 1, "s5_cy")
        nz5 = reg(nz, 1, "s5_nz")
        f6 = reg(fM - Mux(nz5, top, M - 2), signed(FW), "s6_f")
        # sweep 2: stickies, coarse shift, fine shift, increment into the output shift register
        xs = [reg(x, signed(W), f"s4_x{i}") for i, x in enumerate(beat)]
        sts = [reg(_coarse_stickies(x, W, M), len(sgs), f"s4_st{i}") if sgs else None for i, x in enumerate(beat)]
        z1s, st1s = [], []
        for i, (x, g1) in enumerate(zip(xs, gs)):
            z, st = _coarse_shift(x, g1, sts[i], W, M)
            z1s.append(reg(z, M + 5, f"s5_z{i}"))
            st1s.append(reg(st, 1, f"s5_st{i}"))
        rqs, sqs = [], []
        for i, (z, k, st) in enumerate(zip(z1s, ks, st1s)):
            rq, sq = _fine_shift(z, k, st, M)
            rqs.append(reg(rq, signed(M + 1), f"s6_rq{i}"))
            sqs.append(reg(sq, 1, f"s6_sq{i}"))
        obuf = [Signal(signed(M), name=f"obuf{i}") for i in range(nb)]
        with m.If(en):
            with m.If(shift_out):
                m.d.sync += [obuf[i].eq(obuf[i + w]) for i in range(nb - w)]
                m.d.sync += [obuf[nb - w + i].eq((rqs[i] + sqs[i])[1:M + 1]) for i in range(w)]
            m.d.sync += self.o_valid.eq(last)
            with m.If(last):
                m.d.sync += self.o_frac.eq(f6 - cy5)
        # the last beat shifts in at c = END, so o_data is obuf after that edge
        m.d.comb += [self.o_data[i].eq(obuf[i]) for i in range(n)]
        return m


class StreamBlockNormaliser(wiring.Component):
    """The same ``block()`` on vectors that arrive as streams of beats: ``beats`` consecutive
    accepted beats of ``lanes`` elements are one vector (a row of a row-BFP state as the pass
    produces it, a per-row result vector as the engines emit it). One beat per cycle in and out,
    vectors back to back: the arithmetic of :class:`SerialBlockNormaliser` with its two sweeps
    overlapped. Sweep 1 ORs each beat's magnitudes and carry windows (registered 4:1 trees over
    the lanes) into two accumulators while the beats go down a delay line; when a vector's last
    beat is in, its controls (leading one, carry, fine shift) are formed and latched into per-lane
    copies exactly as its first beat leaves the delay line, and stay there for its ``beats``
    cycles of coarse shift, fine shift and rounding; the next vector's controls latch as its own
    first beat arrives.

    ``i_frac`` is read with a vector's first beat. A vector's beats must be accepted in
    consecutive ``en`` cycles (the delay line is as long as one vector); bubbles between vectors
    are free. A bubble inside a vector sets ``o_err`` (sticky until reset), so a caller that
    breaks the contract is seen, not silently mis-normalised. Outputs: ``o_valid`` per beat,
    ``o_first``/``o_last`` marking the vector's beats, ``o_frac`` held over them.
    ``latency = beats + 7 + ceil(log4 lanes)`` cycles from a vector's first beat in to its first
    beat out; ``en`` stalls the whole unit. ``delay_style``: the beats' wait (``beats + 3 +
    ceil(log4 lanes)`` stages of ``lanes x in_width`` bits), a style of
    :class:`~specmem.rtl.delay_line.DelayLine` (``lutram`` beside a core's block RAM)."""

    def __init__(self, lanes: int, beats: int, in_width: int, M: int, frac_width: int = 16, rounding: str = "rne",
                 delay_style: str = "registers"):
        for name, v, lo in (("lanes", lanes, 1), ("beats", beats, 1), ("in_width", in_width, 2), ("M", M, 3),
                            ("frac_width", frac_width, 4)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if rounding != "rne":
            raise ValueError(f"rounding: the block normaliser implements 'rne' (the presets' rounding), got {rounding!r}")
        if delay_style not in LINE_STYLES:
            raise ValueError(f"delay_style: must be one of {', '.join(LINE_STYLES)}, got {delay_style!r}")
        self.delay_style = delay_style
        self.lanes, self.beats, self.in_width, self.M, self.frac_width = lanes, beats, in_width, M, frac_width
        self.n = lanes * beats
        self.or_levels = tree4_levels(lanes)
        #: cycles from a vector's first beat accepted to its first beat out
        self.latency = beats + 7 + self.or_levels
        super().__init__({"en": In(1), "i_valid": In(1), "i_data": In(data.ArrayLayout(signed(in_width), lanes)),
                          "i_frac": In(signed(frac_width)), "o_valid": Out(1), "o_first": Out(1), "o_last": Out(1),
                          "o_data": Out(data.ArrayLayout(signed(M), lanes)), "o_frac": Out(signed(frac_width)),
                          "o_err": Out(1)})

    def elaborate(self, platform):
        m = Module()
        w, B, W, M, FW, Lk = self.lanes, self.beats, self.in_width, self.M, self.frac_width, self.or_levels
        en = self.en
        gmax = (W - 1) // 4
        tpos = list(range(M - 1, W))
        sgs = [g for g in range(gmax + 1) if 4 * g >= M]
        reg = stage_register(m, en)

        held = hold_register(m, en)  # a vector's latched values: no reset past one bit

        def or_tree(vals, width, tag):
            lv = 0
            while len(vals) > 1:
                lv += 1
                vals = [reg(_any(vals[j:j + 4]), unsigned(width), f"{tag}{lv}_{j // 4}") for j in range(0, len(vals), 4)]
            return vals[0]

        def tags(v, first, last, n, tag):
            """The beat's valid, first and last flags through ``n`` stage registers."""
            return tag_chain(reg, v, first, last, n, tag)

        # input framing: which accepted beat of its vector this is
        cnt = Signal(range(max(B, 2)))
        first_in, last_in = cnt == 0, cnt == B - 1
        with m.If(en):
            with m.If(self.i_valid):
                m.d.sync += cnt.eq(Mux(last_in, 0, cnt + 1))
            with m.Elif(cnt != 0):
                m.d.sync += self.o_err.eq(1)

        # sweep 1: beat magnitudes and windows, OR-ed over the lanes, accumulated over the beats
        beat = [self.i_data[i] for i in range(w)]
        ones = [reg(x.as_unsigned() ^ x[-1].replicate(W), unsigned(W), f"s1_ones{i}") for i, x in enumerate(beat)]
        sgn = [reg(x[-1], 1, f"s1_sgn{i}") for i, x in enumerate(beat)]
        v1, f1, l1 = tags(self.i_valid, first_in, last_in, 1, "s1")
        fq = reg(self.i_frac + (M - 2), signed(FW), "s1_f")  # kept at the first beat (acc_f)
        mags = [reg(o + s, unsigned(W), f"s2_mag{i}") for i, (o, s) in enumerate(zip(ones, sgn))]
        v2, f2, l2 = tags(v1, f1, l1, 1, "s2")
        fq2 = reg(fq, signed(FW), "s2_f")
        beat_or = or_tree(mags, W, "or")
        va, fa, la = tags(v2, f2, l2, Lk, "ort")
        fqa = fq2
        for i in range(Lk):
            fqa = reg(fqa, signed(FW), f"ort{i}_f")
        acc_or = Signal(unsigned(W), reset_less=True)  # restarts at each vector's first beat
        acc_done = Signal()  # acc_or holds a whole vector (its last beat went in)
        acc_f = Signal(signed(FW), reset_less=True)
        with m.If(en):
            m.d.sync += acc_done.eq(va & la)
            with m.If(va):
                m.d.sync += acc_or.eq(Mux(fa, 0, acc_or) | beat_or)
                with m.If(fa):
                    m.d.sync += acc_f.eq(fqa)
        cvec = None
        if tpos:  # per-lane windows in two stages (ANDs of L-bit runs, then of a few runs), then the tree
            L = min(4, M)
            runs = [reg(Cat(*(a[j:j + L].all() for j in range(W - L + 1))), W - L + 1, f"s3_run{i}")
                    for i, a in enumerate(mags)]

            def window(r, t):
                starts = sorted(set(list(range(t - M + 1, t - L + 2, L)) + [t - L + 1]))
                return _all_of([r[j] for j in starts])

            cws = [reg(Cat(*(window(r, t) for t in tpos)), unsigned(len(tpos)), f"s4_cw{i}")
                   for i, r in enumerate(runs)]
            beat_cv = or_tree(cws, len(tpos), "cor")
            vc, fc, _ = tags(v2, f2, l2, 2 + Lk, "cvt")
            cvec = Signal(unsigned(len(tpos)))  # complete two cycles after acc_or, when the controls read it
            with m.If(en & vc):
                m.d.sync += cvec.eq(Mux(fc, 0, cvec) | beat_cv)

        # the controls of a vector, latched as its first beat reaches them: leading one in two
        # stages, then carry, fine shift and top (per-lane copies of the coarse and fine selects)
        l1_v = reg(acc_done, 1, "l1_v")
        l1_gnz = reg(Cat(*(acc_or[4 * g:min(4 * g + 4, W)].any() for g in range(gmax + 1))), gmax + 1, "l1_gnz")
        l1_loc = reg(Cat(*(acc_or[t] & ~acc_or[t + 1:min(4 * (t // 4) + 4, W)].any() if t + 1 < min(4 * (t // 4) + 4, W)
                           else acc_or[t] for t in range(W))), W, "l1_loc")
        l1_f = reg(acc_f, signed(FW), "l1_f")
        g_hot = Cat(*(l1_gnz[g] & ~l1_gnz[g + 1:].any() if g < gmax else l1_gnz[g] for g in range(gmax + 1)))
        gs = [held(g_hot, gmax + 1, l1_v, f"c_g{i}") for i in range(w)]
        lead = held(Cat(*(l1_loc[t] & g_hot[t // 4] for t in range(W))), W, l1_v, "c_lead")
        nz = held(l1_gnz.any(), 1, l1_v, "c_nz")
        cf = held(l1_f, signed(FW), l1_v, "c_f")
        g_v = reg(l1_v, 1, "c_v")
        cy, ksel_v, top_v = _fine_control(lead, cvec, W, M)
        ks = [held(ksel_v, 5, g_v, f"k_k{i}") for i in range(w)]
        top = held(top_v, unsigned(len(top_v)), g_v, "k_top")
        kcy = held(cy, 1, g_v, "k_cy")
        knz = held(nz, 1, g_v, "k_nz")
        kf = held(cf, signed(FW), g_v, "k_f")
        of6 = reg(kf - Mux(knz, top, M - 2), signed(FW), "s6_of")
        cy6 = reg(kcy, 1, "s6_cy")

        # sweep 2: the beats out of the delay line (their vector's controls are latched by then),
        # stickies, coarse shift, fine shift, increment
        D = B + 3 + Lk
        xs = beat
        if self.delay_style == "registers":
            for s in range(D):
                xs = [reg(x, signed(W), f"dl{s}_x{i}") for i, x in enumerate(xs)]
        else:
            m.submodules.wait = dl = DelayLine(w * W, D, self.delay_style)
            m.d.comb += [dl.en.eq(en), dl.i.eq(Cat(*(x.as_unsigned() for x in beat)))]
            xs = [dl.o[i * W:(i + 1) * W].as_signed() for i in range(w)]
        vd, fd, ld = tags(self.i_valid, first_in, last_in, D + 1, "dlt")
        sts = [reg(_coarse_stickies(x, W, M), len(sgs), f"s4_st{i}") if sgs else None for i, x in enumerate(xs)]
        xs = [reg(x, signed(W), f"s4_x{i}") for i, x in enumerate(xs)]
        z1s, st1s = [], []
        for i, (x, g1) in enumerate(zip(xs, gs)):
            z, st = _coarse_shift(x, g1, sts[i], W, M)
            z1s.append(reg(z, M + 5, f"s5_z{i}"))
            st1s.append(reg(st, 1, f"s5_st{i}"))
        v5, f5, l5 = tags(vd, fd, ld, 1, "s5")
        rqs, sqs = [], []
        for i, (z, k, st) in enumerate(zip(z1s, ks, st1s)):
            rq, sq = _fine_shift(z, k, st, M)
            rqs.append(reg(rq, signed(M + 1), f"s6_rq{i}"))
            sqs.append(reg(sq, 1, f"s6_sq{i}"))
        v6, f6, l6 = tags(v5, f5, l5, 1, "s6")
        # the output registers hold data that o_valid qualifies: no reset (the shell's reset net
        # into them was a routed critical path of the scaled DeltaNet core)
        od = [Signal(signed(M), name=f"o_data_r{i}", reset_less=True) for i in range(w)]
        ofr = Signal(signed(len(self.o_frac)), name="o_frac_r", reset_less=True)
        m.d.comb += [self.o_data[i].eq(od[i]) for i in range(w)] + [self.o_frac.eq(ofr)]
        with m.If(en):
            for i in range(w):
                m.d.sync += od[i].eq((rqs[i] + sqs[i])[1:M + 1])
            m.d.sync += [self.o_valid.eq(v6), self.o_first.eq(v6 & f6), self.o_last.eq(v6 & l6)]
            with m.If(v6 & f6):
                m.d.sync += ofr.eq(of6 - cy6)
        return m
