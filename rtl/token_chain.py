"""The annihilation core v2's per-token chain: from the row pass's accumulators to the next row
pass's controls, bit-exact with :func:`specmem.golden.fixed.annihilation.token_chain`.

In: ``a' = Uᵀx`` (``k`` exact sums), the exact Gram ``G' = UmᵀUm`` (upper triangle, the
:class:`~specmem.rtl.row_unit.RowUnit`'s ``acc_g`` order) and the eviction pointer. Out: the
orthogonal-input flag and the column to evict, or ``a_n``, ``j``, ``s``, ``q``, ``p`` with its
exponent and ``rsqrt(n²)`` for ``y``; and the token's saturation count (``ahat``, ``q``, ``t``).

The chain is *sequential*: a small FSM issues the chain's k-vector products one step at a
time into one bank of registered multipliers with a registered adder tree and a dot accumulator
(``a·a``, then ``G_n a_n`` a row at a time, ``a·g``, ``a·rsqrt``, ``ahat·beta``, ``ahat·g_j beta``,
``t·(1/n²)``), the block exponents go through :class:`~specmem.rtl.block_norm.BlockNormaliser`
(``G``'s shift from its diagonal alone: ``|G_lm| <= sqrt(G_ll G_mm)``, so the largest magnitude is
on the diagonal; ``block(g)`` and ``block(t/n²)`` share one, they never overlap) and
the four scalar operations through one :class:`~specmem.rtl.scalar_unit.ScalarUnit`:
``rsqrt(a·a)`` (issued under the ``G_n a_n`` rows), ``1/n²`` (as soon as ``n²`` is known),
``beta`` and ``rsqrt(n²)`` (beside the ``q``/``t`` steps). The steps' order, widths and roundings
are the golden model's. Re-timed by ``hardware.md``'s discipline: the run-time roundings (``G``'s
rows before the bank, ``ahat``, ``q`` and ``term`` after it) share one pipelined
:class:`~specmem.rtl.shift.RoundShiftVar`, each followed by a registered sign-extension
saturation and a registered overflow count; ``g_j beta`` has a registered multiplier of its own;
the eviction column (argmin of ``G``'s diagonal, nearest to the pointer on ties) and ``j``
(argmax ``|a_n|``) come from registered tournament trees. The FSM's event cycles are named
constants (``GROWS_END``, ``AH_END``, ...), so a change of a latency moves them together.

``norm_lanes`` (``b``) is the width of the chain's lane units: the block normalisers, the
multiplier bank and the rounding shift with its saturations. A k-vector step takes ``ceil(k/b)``
beats, each tagged with its kind and beat so that each lane's result lands in its element and
each beat's dot in the accumulator; a G row's beats go from a feeder register through the shift
straight into the bank. With ``b = k`` every step is one beat, the arrangement before the units
went narrow (one cycle more per dot, for the accumulator).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.formats import formats_for

from .block_norm import BlockNormaliser, SerialBlockNormaliser
from .dsp import PipelinedMultiplier
from .pipeline import stage_register
from .saturate import fits_signed
from .shift import RoundShiftVar
from .params import check_dims
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["TokenChain"]

FW = 12  # exponents (block and scalar-unit) carried as signed 12-bit values
#: lanes of the chain's lane units (block normalisers, multiplier bank, rounding shift) unless
#: asked (at most k); measured in docs/annihilation.md ("Where the chain's area goes")
NORM_LANES_DEFAULT = 2


def _popcount(m, flags, name):
    """``(count, levels)``: the number of set ``flags``, summed through registered levels of four
    (the count is valid ``levels`` cycles after the flags)."""
    terms, level = list(flags), 0
    while len(terms) > 1 or level == 0:
        level += 1
        nxt = []
        for i in range(0, len(terms), 4):
            group = terms[i:i + 4]
            r = Signal(range(sum((1 << len(t)) - 1 for t in group) + 1), name=f"{name}{level}_{i // 4}")
            m.d.sync += r.eq(sum(group))
            nxt.append(r)
        terms = nxt
    return terms[0], level


def _tournament(m, keys, better, name):
    """``(index, depth)``: the index of the best of ``keys`` (``better(l, r)`` true when the right
    one wins; ties stay left, so the first best wins), ``depth`` cycles after the keys. Each round
    takes two registered cycles: the compare (a carry chain as wide as the key), then the select
    (in one cycle, a 44-bit compare into its select was the routed chain's critical path)."""
    cands = [(Const(i, range(len(keys))), key) for i, key in enumerate(keys)]
    depth = 0
    while len(cands) > 1:
        depth += 1
        nxt = []
        for i in range(0, len(cands) - 1, 2):
            (il, kl), (ir, kr) = cands[i], cands[i + 1]
            take = Signal(name=f"{name}{depth}_t{i // 2}")
            sl = [Signal(range(len(keys)), name=f"{name}{depth}_il{i // 2}"),
                  Signal(kl.shape(), name=f"{name}{depth}_kl{i // 2}"),
                  Signal(range(len(keys)), name=f"{name}{depth}_ir{i // 2}"),
                  Signal(kr.shape(), name=f"{name}{depth}_kr{i // 2}")]
            m.d.sync += [take.eq(better(kl, kr)), sl[0].eq(il), sl[1].eq(kl), sl[2].eq(ir), sl[3].eq(kr)]
            idx = Signal(range(len(keys)), name=f"{name}{depth}_i{i // 2}")
            key = Signal(kl.shape(), name=f"{name}{depth}_k{i // 2}")
            m.d.sync += [idx.eq(Mux(take, sl[2], sl[0])), key.eq(Mux(take, sl[3], sl[1]))]
            nxt.append((idx, key))
        if len(cands) % 2:
            il, kl = cands[-1]
            i1 = Signal(range(len(keys)), name=f"{name}{depth}_i_odd1")
            k1 = Signal(kl.shape(), name=f"{name}{depth}_k_odd1")
            idx = Signal(range(len(keys)), name=f"{name}{depth}_i_odd")
            key = Signal(kl.shape(), name=f"{name}{depth}_k_odd")
            m.d.sync += [i1.eq(il), k1.eq(kl), idx.eq(i1), key.eq(k1)]
            nxt.append((idx, key))
        cands = nxt
    return cands[0][0], 2 * depth


class TokenChain(wiring.Component):
    """Per-token chain for ``d`` rows, ``k`` lanes, one golden preset (``int18``, ``int16``, ``int8``).

    Members: ``i`` (stream: ``a[k]``, ``g[k(k+1)/2]`` of ``acc_width`` bits, ``ptr``) and ``o``
    (stream: ``orth``, ``evict_j``, ``a_n[k]``, ``j``, ``s_neg``, ``q[k]``, ``p[k]``, ``fp``,
    ``ysc_m``, ``ysc_f``, ``sat``). ``acc_width`` defaults to the row unit's accumulator width.
    ``latch_inputs=False``: ``a`` and ``g`` are read from the input payload, which the caller holds
    from the transfer until the result is taken (the core at one head: its snapshot bank, so the
    chain keeps no copy); ``p_window``: ``p``'s exponent clamp (:meth:`_p_clamp`).
    """

    def __init__(self, d: int, k: int, preset: str = "int18", *, acc_width: int | None = None,
                 dsp: str = "registered", norm_lanes: int | None = None, p_window=None,
                 latch_inputs: bool = True):
        check_dims(d, k, divides=False)
        self.latch_inputs = bool(latch_inputs)
        self.p_window = None if p_window is None else tuple(int(v) for v in p_window)
        if self.p_window is not None and not self.p_window[0] <= self.p_window[1]:
            raise ValueError(f"p_window: (lo, hi) with lo <= hi, got {p_window!r}")
        if norm_lanes is None:
            norm_lanes = min(NORM_LANES_DEFAULT, k)
        if (isinstance(norm_lanes, bool) or not isinstance(norm_lanes, int)
                or not (norm_lanes == k or 1 <= norm_lanes <= min(4, k - 1))):
            raise ValueError(f"norm_lanes: 1 .. {min(4, k - 1)} (the chain's normalisers, multipliers and "
                             f"rounding shift) or k = {k} (all k lanes wide), got {norm_lanes!r}" if k > 1 else
                             f"norm_lanes: k = 1 has one lane, got {norm_lanes!r}")
        self.norm_lanes = norm_lanes
        if not isinstance(preset, str) or preset.startswith("legacy-"):
            raise ValueError(f"preset: the token chain implements the co-accumulated schedule (int8, int16, "
                             f"int18), got {preset!r}")
        self.d, self.k, self.preset, self.dsp = d, k, preset, dsp
        self.fmt = F = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
        if F.preset.rounding != "rne":
            raise ValueError(f"preset: the block normalisers round half to even; {preset!r} rounds {F.preset.rounding!r}")
        self.su_config = F.scalar_unit
        self.P = self.su_config.out_bits
        self.acc_width = acc_width or 2 * 18 + max(1, d.bit_length()) + 1
        self.n_gram = k * (k + 1) // 2
        self.wa, self.wG, self.wg = F["a"].width, F["gram"].width, F["g"].width
        self.wh, self.wq, self.wt, self.wp = F["ahat"].width, F["q"].width, F["t"].width, F["p"].width
        lk = max(1, (k - 1).bit_length())
        self.w_gacc = self.wG + self.wa + lk      # one row of G_n a_n
        self.w_n2 = self.wa + self.wg + lk        # a_n·g_n, a_n·a_n
        # g_j beta.m: beta's mantissa is in [0, 2^(P-1)), so |g_j beta.m| < 2^(wg+P-2): one bit
        # under wg + P, which keeps the bank's wide operand at 2 pieces of 18 x 18, not 3
        self.w_gjb = self.wg + self.P - 1
        # operand A one 18-bit piece: t/n² runs as rn_m x t (t, 19 bits at int18, on the wide side)
        self.wA = max(self.wa, self.wG, self.wh, self.P)
        self.wB = max(self.wa, self.wg, self.P, self.w_gjb, self.wt)
        self.mul_latency = PipelinedMultiplier.latency_for(dsp, self.wA, self.wB, input_register=True)
        self.tree_levels = max(1, (self.norm_lanes - 1).bit_length())  # the bank's adder tree
        self.out_layout = data.StructLayout({
            "orth": 1, "evict_j": range(k), "a_n": data.ArrayLayout(signed(self.wa), k), "j": range(k),
            "s_neg": 1, "q": data.ArrayLayout(signed(self.wq), k), "p": data.ArrayLayout(signed(self.wp), k),
            "fp": signed(FW), "ysc_m": signed(self.P), "ysc_f": signed(FW), "sat": range(4 * k + 1),
        })
        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(signed(self.acc_width), k),
            "g": data.ArrayLayout(signed(self.acc_width), self.n_gram),
            "ptr": range(k),
        })
        super().__init__({"i": In(stream.Signature(self.in_layout)), "o": Out(stream.Signature(self.out_layout))})

    def gram_index(self, l: int, n: int) -> int:
        """Position of ``G_ln`` (``l <= n``) in the upper-triangle order of ``acc_g``."""
        l, n = min(l, n), max(l, n)
        return sum(self.k - i for i in range(l)) + (n - l)

    def _p_clamp(self, m, p, fp, sat, bn_p, gp_p):
        """``p``'s exponent clamped to ``p_window`` (the model's :func:`clamp_p_exponent`), after
        ``p`` and ``fp`` are captured from the normaliser: returns ``ready`` (high once ``p``,
        ``fp`` and ``sat`` are final). Inside the window (the case every measured stream is in)
        ``ready`` is high the cycle after the capture; outside, ``p`` moves one bit per cycle
        (right: guard and sticky bits kept, rounded half to even at the end; left: overflow
        tracked, saturated at the end and counted into ``sat``), at most ``w_p + 3`` cycles."""
        ready = Signal(init=1, name="p_ready")
        if self.p_window is None:
            return ready
        k, F, wp = self.k, self.fmt, self.wp
        lo, hi = self.p_window
        base = F["u"].frac - F["r"].frac
        f_lo, f_hi = base + lo, base + hi
        arm = Signal(name="pc_arm")         # a captured fp outside the window: decode its shift
        n = Signal(range(wp + 2), name="pc_n")
        left = Signal(name="pc_left")
        busy = Signal(name="pc_busy")
        fin = Signal(name="pc_fin")         # the final step wrote p: add the count next
        rb = [Signal(name=f"pc_rb{l}") for l in range(k)]
        st = [Signal(name=f"pc_st{l}") for l in range(k)]
        ov = [Signal(name=f"pc_ov{l}") for l in range(k)]
        sg = [Signal(name=f"pc_sg{l}") for l in range(k)]
        cnt = Signal(range(k + 1), name="pc_cnt")
        m.d.sync += fin.eq(0)
        with m.If(bn_p.o_valid & gp_p):
            inside = (bn_p.o_frac >= f_lo) & (bn_p.o_frac <= f_hi)
            m.d.sync += [ready.eq(inside), arm.eq(~inside)]
        with m.If(arm):
            r_exc = Signal(signed(FW + 1), name="pc_rexc")
            l_exc = Signal(signed(FW + 1), name="pc_lexc")
            m.d.comb += [r_exc.eq(fp - f_hi), l_exc.eq(f_lo - fp)]
            m.d.sync += [arm.eq(0), busy.eq(1), left.eq(l_exc > 0),
                         fp.eq(Mux(l_exc > 0, f_lo, f_hi)),
                         n.eq(Mux(l_exc > 0, Mux(l_exc > wp, wp, l_exc), Mux(r_exc > wp + 1, wp + 1, r_exc)))]
            m.d.sync += [x.eq(0) for x in rb + st + ov]
            m.d.sync += [sg[l].eq(p[l][-1]) for l in range(k)]
        with m.If(busy):
            with m.If(n != 0):
                m.d.sync += n.eq(n - 1)
                for l in range(k):
                    with m.If(left):
                        m.d.sync += [ov[l].eq(ov[l] | (p[l][wp - 1] ^ p[l][wp - 2])), p[l].eq(p[l] << 1)]
                    with m.Else():
                        m.d.sync += [st[l].eq(st[l] | rb[l]), rb[l].eq(p[l][0]), p[l].eq(p[l] >> 1)]
            with m.Else():
                top, bot = (1 << (wp - 1)) - 1, -(1 << (wp - 1))
                for l in range(k):
                    with m.If(left):
                        m.d.sync += p[l].eq(Mux(ov[l], Mux(sg[l], bot, top), p[l]))
                    with m.Else():
                        m.d.sync += p[l].eq(p[l] + (rb[l] & (st[l] | p[l][0])))
                m.d.sync += [cnt.eq(Mux(left, sum(ov), 0)), busy.eq(0), fin.eq(1)]
        with m.If(fin):
            m.d.sync += [sat.eq(sat + cnt), ready.eq(1)]
        return ready

    def elaborate(self, platform):
        m = Module()
        k, F = self.k, self.fmt
        fm, fx, fan, fh, fq = F["u_mul"].frac, F["x"].frac, F["a"].frac, F["ahat"].frac, F["q"].frac
        P, W, dsp = self.P, self.acc_width, self.dsp

        # -- latched inputs
        a_acc = [Signal(signed(W), name=f"a_acc{l}") for l in range(k)]
        G = [[Signal(signed(W), name=f"G{l}_{n}") for n in range(k)] for l in range(k)]
        ptr = Signal(range(k))

        # -- the multiplier bank (b lanes, ``nb`` beats per k-vector) and its adder tree
        b = self.norm_lanes
        nb = -(-k // b)
        opA = [Signal(signed(self.wA), name=f"opA{i}") for i in range(b)]
        opB = [Signal(signed(self.wB), name=f"opB{i}") for i in range(b)]
        prod = []
        for i in range(b):
            mm = PipelinedMultiplier(self.wA, self.wB, self.dsp, input_register=True)
            m.submodules[f"mul{i}"] = mm
            m.d.comb += [mm.a.eq(opA[i]), mm.b.eq(opB[i]), mm.en.eq(1)]
            prod.append(mm.p)
        level, lvl = list(prod), 0
        while len(level) > 1:
            lvl += 1
            nxt = []
            for i in range(0, len(level) - 1, 2):
                s = Signal(signed(max(len(level[i]), len(level[i + 1])) + 1), name=f"tree{lvl}_{i // 2}")
                m.d.sync += s.eq(level[i] + level[i + 1])
                nxt.append(s)
            if len(level) % 2:
                s = Signal(level[-1].shape(), name=f"tree{lvl}_odd")
                m.d.sync += s.eq(level[-1])
                nxt.append(s)
            level = nxt
        if b == 1:
            s = Signal(level[0].shape(), name="tree1_0")
            m.d.sync += s.eq(level[0])
            level = [s]
        dot = level[0]
        L, T = self.mul_latency, self.tree_levels
        # products held for the tree's depth, so that a beat's products and its dot arrive together
        prod_d = list(prod)
        for step in range(T):
            nxt = [Signal(p.shape(), name=f"prod_d{step}_{i}") for i, p in enumerate(prod_d)]
            m.d.sync += [n.eq(p) for n, p in zip(nxt, prod_d)]
            prod_d = nxt
        bank_wait = L + T  # cycles from the operands' cycle to prod_d and dot

        # -- block normalisers and the scalar unit
        def normaliser(width, M, held=False):
            if self.norm_lanes == k:
                return BlockNormaliser(k, width, M, FW)
            return SerialBlockNormaliser(k, width, M, FW, lanes=self.norm_lanes, held_input=held)

        # a' and G's diagonal hold from the chain's input until its output is taken (latched here or
        # held by the caller): their serial normalisers read them in place, without a buffer
        bn_a = normaliser(W, self.wa, held=True)
        bn_d = normaliser(W, self.wG, held=True)
        assert self.wg == self.wp, "block(g) and block(p) share one normaliser: one mantissa width"
        # block(g), later block(t/n²): g_acc and the products of t/n² (pasm) are held registers too
        bn_g = bn_p = normaliser(max(self.w_gacc, self.wt + P), self.wg, held=True)
        # rsqrt(a·a), 1/n², beta, rsqrt(n²): one unit (a second one, for the n² pair, was 4 MULT18X18D,
        # ~0.9k LUT4 and ~0.7k FF for about 24 cycles of a token at one head)
        su = ScalarUnit(self.su_config, max(self.w_n2, self.wh + 2), FW, pipelined=True, dsp=dsp)
        m.submodules.bn_a, m.submodules.bn_d, m.submodules.bn_gp = bn_a, bn_d, bn_g
        m.submodules.su = su
        for bn in (bn_a, bn_d, bn_g):
            m.d.comb += bn.en.eq(1)

        # -- chain registers
        a_n = [Signal(signed(self.wa), name=f"a_n{l}") for l in range(k)]
        g_acc = [Signal(signed(self.w_gacc), name=f"g_acc{l}") for l in range(k)]
        g_n = [Signal(signed(self.wg), name=f"g_n{l}") for l in range(k)]
        ahat = [Signal(signed(self.wh), name=f"ahat{l}") for l in range(k)]
        q = [Signal(signed(self.wq), name=f"q{l}") for l in range(k)]
        t = [Signal(signed(self.wt), name=f"t{l}") for l in range(k)]
        p = [Signal(signed(self.wp), name=f"p{l}") for l in range(k)]
        fG, fg, fp = Signal(signed(FW)), Signal(signed(FW)), Signal(signed(FW))
        a2 = Signal(signed(self.w_n2))
        n2 = Signal(signed(self.w_n2))
        rs_m, rs_f = Signal(signed(P)), Signal(signed(FW))       # rsqrt(a·a)
        be_m, be_f = Signal(signed(P)), Signal(signed(FW))       # beta
        rn_m, rn_f = Signal(signed(P)), Signal(signed(FW))       # 1/n²
        ys_m, ys_f = Signal(signed(P)), Signal(signed(FW))       # rsqrt(n²)
        gjb = Signal(signed(self.w_gjb))
        j = Signal(range(k))
        s_neg = Signal()
        a_zero = Signal()
        orth = Signal()
        sat = Signal(range(4 * k + 1))
        evict_j = Signal(range(k))
        row = Signal(range(k + 2))
        g_done, su_done = Signal(), Signal()
        reg = stage_register(m, Const(1))

        # argmax |a_n| (first on ties) and argmin of G's diagonal (nearest to ptr on ties): registered
        # tournament trees over the held registers, ready before the states that read them
        mag = [reg(Mux(a_n[l] < 0, -a_n[l], a_n[l]), unsigned(self.wa), f"mag{l}") for l in range(k)]
        best_j, d_best = _tournament(m, mag, lambda l, r: r > l, "amax")
        dkeys = []
        for l in range(k):
            dist = Mux(l >= ptr, l - ptr, l + k - ptr)
            dkeys.append(reg(Cat(dist[:max(1, (k - 1).bit_length())], G[l][l]).as_signed(),
                             signed(W + max(1, (k - 1).bit_length())), f"dkey{l}"))
        pick, d_pick = _tournament(m, dkeys, lambda l, r: r < l, "dmin")
        assert d_pick + 1 <= bn_a.latency, "the eviction tree is slower than block(a')"
        a_nz = reg(Cat(*(a_acc[l].any() for l in range(k))), k, "a_nz")  # per lane, then across lanes
        m.d.sync += a_zero.eq(~a_nz.any())
        assert bn_a.latency >= 3, "a_zero (two registers after the input latch) is read with block(a')"

        # The bank and the rounding shift are b lanes wide. A k-vector step is ``nb`` beats, each
        # tagged with its kind and beat; the tags travel beside the data and steer each lane's
        # result into its element (``ahat``, ``q``, ``t``, the product vector for ``block(p)``) or
        # a beat's dot into the accumulator (``a·a``, the G rows, ``a·g``). Bank steps come from the
        # issuer; the G rows come through the shift (``G_n = round(G' 2^-shG)``) straight into the
        # bank. Kinds:
        AA, GR, AG, KH, KQ, KT, KP = range(7)
        a_arr, g_arr, ahat_arr = Array(a_n), Array(g_n), Array(ahat)
        Grow = Array(Array(r) for r in G)
        shG = Signal(signed(FW))  # right shift of G' into G_n
        m.d.comb += shG.eq(2 * fm - fG)

        def chunk(vec, i, at):
            """element ``at·b + i`` of the k-vector ``vec`` (0 past its end)"""
            if nb == 1:
                return vec[i]
            return Array(vec[bt * b + i] if bt * b + i < k else Const(0, vec[0].shape())
                         for bt in range(nb))[at]

        def pipe(x, n, name):
            for s in range(n):
                x = reg(x, x.shape(), f"{name}{s}")
            return x

        # the G-row feeder: a row of G' loaded, handed to the shift b entries per cycle
        kp = nb * b
        fs = [Signal(signed(W), name=f"fs{i}") for i in range(kp)]
        f_left = Signal(range(nb + 1))           # beats still to feed, the current one included
        f_beat = Signal(range(max(nb, 2)))
        ld = Signal()
        with m.If(ld):
            m.d.sync += [fs[i].eq(Grow[row][i] if i < k else 0) for i in range(kp)]
            m.d.sync += [f_left.eq(nb), f_beat.eq(0)]
        with m.Elif(f_left != 0):
            m.d.sync += [fs[i].eq(fs[i + b] if i + b < kp else 0) for i in range(kp)]
            m.d.sync += [f_left.eq(f_left - 1), f_beat.eq(f_beat + 1)]

        # the issuer: a bank step of ``nb`` beats from the cycle after ``go``
        go, go_kind = Signal(), Signal(3)
        i_left = Signal(range(nb + 1))
        i_beat = Signal(range(max(nb, 2)))
        i_kind = Signal(3)
        with m.If(go):
            m.d.sync += [i_left.eq(nb), i_beat.eq(0), i_kind.eq(go_kind)]
        with m.Elif(i_left != 0):
            m.d.sync += [i_left.eq(i_left - 1), i_beat.eq(i_beat + 1)]

        # the rounding shift: the G rows from the feeder, ahat/q/term from the bank
        w_rs = max(W, len(prod_d[0]))
        rsv = RoundShiftVar(b, w_rs, max_left=max(self.wG + 1, 4), shift_width=FW + 4, rounding="rne")
        m.submodules.rsv = rsv
        R = RoundShiftVar.latency
        ro = [rsv.o_data[i] for i in range(b)]
        ro_on = Signal()
        ro_kind = Signal(3)
        ro_beat = Signal(range(max(nb, 2)))

        # the bank's operands: a G row's beat as it leaves the shift, else the issuer's step
        gr = Signal()
        m.d.comb += gr.eq(ro_on & (ro_kind == GR))
        with m.If(gr):
            m.d.comb += [opA[i].eq(ro[i]) for i in range(b)]
            m.d.comb += [opB[i].eq(chunk(a_n, i, ro_beat)) for i in range(b)]
        with m.Elif(i_left != 0):
            for i in range(b):
                with m.Switch(i_kind):
                    with m.Case(AA):
                        m.d.comb += [opA[i].eq(chunk(a_n, i, i_beat)), opB[i].eq(chunk(a_n, i, i_beat))]
                    with m.Case(AG):
                        m.d.comb += [opA[i].eq(chunk(a_n, i, i_beat)), opB[i].eq(chunk(g_n, i, i_beat))]
                    with m.Case(KH):
                        m.d.comb += [opA[i].eq(chunk(a_n, i, i_beat)), opB[i].eq(rs_m)]
                    with m.Case(KQ):
                        m.d.comb += [opA[i].eq(chunk(ahat, i, i_beat)), opB[i].eq(be_m)]
                    with m.Case(KT):
                        m.d.comb += [opA[i].eq(chunk(ahat, i, i_beat)), opB[i].eq(gjb)]
                    with m.Case(KP):
                        m.d.comb += [opA[i].eq(rn_m), opB[i].eq(chunk(t, i, i_beat))]
        bt_on0 = (i_left != 0) | gr
        bt_kind0 = Mux(gr, GR, i_kind)
        bt_beat0 = Mux(gr, ro_beat, i_beat)
        # the tag one cycle before the beat's products (to register the shift) and with them
        bp_on, bp_kind, bp_beat = (pipe(x, bank_wait - 1, f"btag_{n}")
                                   for x, n in ((bt_on0, "on"), (bt_kind0, "kind"), (bt_beat0, "beat")))
        bt_on, bt_kind = reg(bp_on, 1, "bt_on"), reg(bp_kind, 3, "bt_kind")
        bt_beat = reg(bp_beat, bp_beat.shape(), "bt_beat")
        bt_last = bt_on & (bt_beat == nb - 1)
        to_rs = bt_on & ((bt_kind == KH) | (bt_kind == KQ) | (bt_kind == KT))
        f_on = f_left != 0
        f_sh = Signal(signed(FW + 4))
        with m.If(ld):
            m.d.sync += f_sh.eq(shG)
        with m.Elif(bp_on & (bp_beat == 0)):
            with m.Switch(bp_kind):
                with m.Case(KH):
                    m.d.sync += f_sh.eq(rs_f + fan - fh)
                with m.Case(KQ):
                    m.d.sync += f_sh.eq(be_f + fh - fq)
                with m.Case(KT):
                    m.d.sync += f_sh.eq(fh + be_f)
        m.d.comb += [rsv.en.eq(1), rsv.i_valid.eq(1), rsv.i_shift.eq(f_sh)]
        m.d.comb += [rsv.i_data[i].eq(Mux(f_on, fs[i], prod_d[i])) for i in range(b)]
        m.d.sync += [ro_on.eq(pipe(f_on | to_rs, R - 1, "rtag_on")),
                     ro_kind.eq(pipe(Mux(f_on, GR, bt_kind), R - 1, "rtag_kind")),
                     ro_beat.eq(pipe(Mux(f_on, f_beat, bt_beat), R - 1, "rtag_beat"))]
        beat = [ro_beat]                                      # beat[n]: the beat n cycles after ro
        for n in range(6):
            beat.append(reg(beat[-1], beat[-1].shape(), f"tag_beat_r{n}"))
        s_h, s_q, s_t = (ro_on & (ro_kind == kind) for kind in (KH, KQ, KT))

        # a beat's dot into the accumulator; ``*_done`` the cycle after a step's last dot
        dacc = Signal(signed(len(dot) + max(1, (nb - 1).bit_length())))
        with m.If(bt_on):
            m.d.sync += dacc.eq(Mux(bt_beat == 0, dot, dacc + dot))
        aa_done, gr_done, ag_done = (reg(bt_last & (bt_kind == kind), 1, f"done{kind}") for kind in (AA, GR, AG))

        # the product vector of t/n² for block(p). Serial normaliser: every beat held, the unit
        # accepts with the last beat's products (p_go) and reads them, now in pasm, from the next
        # cycle on. Wide normaliser (it reads in the accept cycle): the last beat straight in.
        serial = self.norm_lanes != k
        n_held = k if serial else (nb - 1) * b
        pasm = [Signal(signed(self.wt + P), name=f"pasm{l}") for l in range(n_held)]
        for l in range(n_held):
            with m.If(bt_on & (bt_kind == KP) & (bt_beat == l // b)):
                m.d.sync += pasm[l].eq(prod_d[l % b])
        p_in = [pasm[l] if l < n_held else prod_d[l - (nb - 1) * b] for l in range(k)]
        # registered from the tag one cycle before (decoded from bt_*, its fanout into the shared
        # normaliser's input buffer was the routed critical path)
        p_go = reg(bp_on & (bp_beat == nb - 1) & (bp_kind == KP), 1, "p_go")

        # saturations after the shift, each a registered sign-extension test then a mux; the
        # overflow flags are counted one cycle later. Offsets: cycles after ro.
        def narrowed(width, name):
            fits = [reg(fits_signed(x, width), 1, f"{name}_f{i}") for i, x in enumerate(ro)]
            tr = [reg(x[:width], unsigned(width), f"{name}_tr{i}") for i, x in enumerate(ro)]
            ng = [reg(x[-1], 1, f"{name}_ng{i}") for i, x in enumerate(ro)]
            hi, lo = Const((1 << (width - 1)) - 1, signed(width)), Const(-(1 << (width - 1)), signed(width))
            out = [reg(Mux(fits[i], tr[i].as_signed(), Mux(ng[i], lo, hi)), signed(width), f"{name}_v{i}")
                   for i in range(b)]
            ovs = [reg(~fits[i], 1, f"{name}_ov{i}") for i in range(b)]
            return out, _popcount(m, ovs, f"{name}_pc")     # out at +2, count at +2 + levels

        ahat_v, (ahat_pc, LP) = narrowed(self.wh, "hn")
        q_v, (q_pc, _) = narrowed(self.wq, "qn")
        q_s = [reg(Mux(s_neg, q_v[i], -q_v[i]), signed(self.wq), f"qs{i}") for i in range(b)]  # +3
        # t = sat(-g_n + s term): term clamped first (a clamped term saturates t the same way)
        cw = max(self.wt, self.wg) + 2
        term_c, _ = narrowed(cw, "tc")                                                              # +2
        tn = [reg(Mux(s_neg, -term_c[i], term_c[i]), signed(cw + 1), f"tn{i}") for i in range(b)]  # +3
        tsum = [reg(tn[i] - chunk(g_n, i, beat[3]), signed(cw + 2), f"tsum{i}") for i in range(b)]  # +4
        t_fits = [reg(fits_signed(x, self.wt), 1, f"tf{i}") for i, x in enumerate(tsum)]
        t_tr = [reg(x[:self.wt], unsigned(self.wt), f"ttr{i}") for i, x in enumerate(tsum)]
        t_ng = [reg(x[-1], 1, f"tng{i}") for i, x in enumerate(tsum)]
        thi, tlo = (1 << (self.wt - 1)) - 1, -(1 << (self.wt - 1))
        t_v = [reg(Mux(t_fits[i], t_tr[i].as_signed(), Mux(t_ng[i], tlo, thi)), signed(self.wt), f"tv{i}")
               for i in range(b)]                                                                   # +6
        t_pc, _ = _popcount(m, [reg(~t_fits[i], 1, f"tov{i}") for i in range(b)], "t_pc")          # +6 + LP

        # each beat's results into their k-vector; each beat's overflow count into sat
        def capture(vec, vals, strobe, at):
            for l in range(k):
                with m.If(strobe & (beat[at] == l // b)):
                    m.d.sync += vec[l].eq(vals[l % b])

        capture(ahat, ahat_v, pipe(s_h, 2, "cap_h"), 2)
        capture(q, q_s, pipe(s_q, 3, "cap_q"), 3)
        capture(t, t_v, pipe(s_t, 6, "cap_t"), 6)
        pcv_h, pcv_q, pcv_t = pipe(s_h, 2 + LP, "pcv_h"), pipe(s_q, 2 + LP, "pcv_q"), pipe(s_t, 6 + LP, "pcv_t")
        # the beat's counts summed in a register of their own, then added to ``sat`` (the two adds
        # chained into the 32-bit counter were a long path)
        sat_inc = reg(Mux(pcv_h, ahat_pc, 0) + Mux(pcv_q, q_pc, 0) + Mux(pcv_t, t_pc, 0), range(3 * b + 1), "sat_inc")
        with m.If(reg(pcv_h | pcv_q | pcv_t, 1, "sat_inc_v")):
            m.d.sync += sat.eq(sat + sat_inc)

        # g_j beta on a multiplier of its own (the chain's only product outside the bank)
        gjm = PipelinedMultiplier(self.wg, P, self.dsp)
        m.submodules.gjm = gjm
        m.d.comb += [gjm.a.eq(reg(g_arr[j], signed(self.wg), "gj")), gjm.b.eq(be_m), gjm.en.eq(1)]
        m.d.sync += gjb.eq(gjm.p)                # registered before the bank's operand select
        hj = reg(ahat_arr[j], signed(self.wh), "hj")
        mag_hj = reg(Mux(hj < 0, -hj, hj), unsigned(self.wh + 1), "mag_hj")
        beta_x = reg((1 << fh) + mag_hj, unsigned(max(fh, self.wh) + 2), "beta_x")   # 3 cycles after ahat

        # the FSM's event cycles (``wait`` counts from each state's entry; a step's beats run
        # from the cycle after its ``go``)
        BW = bank_wait
        G_LD0 = max(0, nb - R)                   # the first G row's beats reach the bank after a·a's
        GROWS_END = G_LD0 + k * nb + R + BW + 1  # the last row's dot accumulated
        assert d_best + 2 <= GROWS_END, "argmax |a_n| is slower than the G rows (GNORM reads it)"
        AH_GO = nb                               # ahat = a_n rsqrt(a·a), after a·g
        AH_END = AH_GO + nb + BW + R + 2 + LP    # its last beat counted
        T_GO = max(nb, gjm.latency + 1)          # ahat (g_j beta): after q, once g_j beta is registered
        T_END = T_GO + nb + BW + R + 6 + LP
        wait = Signal(range(max(GROWS_END, AH_END, T_END, bn_a.latency) + 8))
        a2_req, n2_chk = reg(aa_done, 1, "a2_req"), reg(ag_done, 1, "n2_chk")

        # the G rows' loads (``ld``) as a register of their own, every nb cycles from GROWS's
        # G_LD0 (decoded from the FSM state, the load was the routed chain's critical path)
        g_arm = Signal()
        g_gap = Signal(range(max(nb, G_LD0, 1)))
        g_left = Signal(range(k + 1))
        with m.If(g_arm):
            m.d.sync += [ld.eq(G_LD0 == 0), g_gap.eq(nb - 1 if G_LD0 == 0 else G_LD0 - 1),
                         g_left.eq(k - 1 if G_LD0 == 0 else k)]
        with m.Elif((g_left != 0) & (g_gap == 0)):
            m.d.sync += [ld.eq(1), g_left.eq(g_left - 1), g_gap.eq(nb - 1)]
        with m.Else():
            m.d.sync += ld.eq(0)
            with m.If(g_left != 0):
                m.d.sync += g_gap.eq(g_gap - 1)
        with m.If(ld):
            m.d.sync += row.eq(row + 1)

        # One scalar unit, four requests a token, each a register until the unit takes it:
        # rsqrt(a·a) (a2_req, while the G rows run), 1/n² (once n² > 0 is known, in N2), beta
        # (raised the cycle before BETA asks; it waits while 1/n² runs) and rsqrt(n²) (once beta
        # is in). The unit serves one at a time; the kind taken steers its result. Every request
        # of a token is served before OUT (P waits for 1/n², P_WAIT for rsqrt(n²)).
        RS_A, RN, BE, YS = range(4)
        n_start = Signal()
        a2_pend, rn_req, beta_req, ys_req = Signal(), Signal(), Signal(), Signal()
        rn_done, ys_done, beta_done = Signal(), Signal(), Signal()
        su_kind = Signal(2)
        take = Signal(2)  # the request offered: beta, then 1/n², then rsqrt(n²), then rsqrt(a·a)
        m.d.comb += take.eq(Mux(beta_req, BE, Mux(rn_req, RN, Mux(ys_req, YS, RS_A))))
        n2_op = rn_req | ys_req
        m.d.comb += [su.i.valid.eq(a2_req | a2_pend | rn_req | beta_req | ys_req),
                     su.i.payload.x.eq(Mux(beta_req, beta_x, Mux(n2_op, n2, a2))),
                     su.i.payload.frac.eq(Mux(beta_req, fh, Mux(n2_op, fg + fan, 2 * fan))),
                     su.i.payload.op.eq(Mux(beta_req | rn_req, ScalarOp.RECIP, ScalarOp.RSQRT))]
        accept = Signal()
        m.d.comb += accept.eq(su.i.valid & su.i.ready)
        with m.If(n_start):
            m.d.sync += rn_req.eq(1)
        with m.If(a2_req & ~(accept & (take == RS_A))):  # a2_req is offered at once, held if not taken
            m.d.sync += a2_pend.eq(1)
        with m.If(accept):
            m.d.sync += su_kind.eq(take)
            with m.Switch(take):
                with m.Case(RS_A):
                    m.d.sync += a2_pend.eq(0)
                with m.Case(RN):
                    m.d.sync += rn_req.eq(0)
                with m.Case(YS):
                    m.d.sync += ys_req.eq(0)
        m.d.comb += su.o.ready.eq(1)
        with m.If(su.o.valid):
            with m.Switch(su_kind):
                with m.Case(RS_A):
                    m.d.sync += [rs_m.eq(su.o.payload.m), rs_f.eq(su.o.payload.f), su_done.eq(1)]
                with m.Case(RN):
                    m.d.sync += [rn_m.eq(su.o.payload.m), rn_f.eq(su.o.payload.f), rn_done.eq(1)]
                with m.Case(BE):
                    m.d.sync += [be_m.eq(su.o.payload.m), be_f.eq(su.o.payload.f), beta_done.eq(1),
                                 ys_req.eq(1)]
                with m.Case(YS):
                    m.d.sync += [ys_m.eq(su.o.payload.m), ys_f.eq(su.o.payload.f), ys_done.eq(1)]

        gp_p = Signal()  # the shared normaliser works on t/n² (else on g): its input select
        # the normalisers' and the output's data held on their ports; only the valids are the FSM's
        # (gating them to zero outside their states cost ~1.8k LUT4 at k = 8 and selected nothing)
        m.d.comb += [bn_a.i_frac.eq(fm + fx), bn_d.i_frac.eq(2 * fm),
                     # from a register: fg, rn_f (and gp_p) settle cycles before p_go, fG before gnorm_go
                     bn_g.i_frac.eq(reg(Mux(gp_p, fg + rn_f, fG + fan), signed(FW), "gp_frac"))]
        m.d.comb += [bn_a.i_data[l].eq(a_acc[l]) for l in range(k)]
        m.d.comb += [bn_d.i_data[l].eq(G[l][l]) for l in range(k)]
        m.d.comb += [bn_g.i_data[l].eq(Mux(gp_p, p_in[l], g_acc[l])) for l in range(k)]
        o = self.o.payload
        m.d.comb += [o.orth.eq(orth), o.evict_j.eq(evict_j), o.j.eq(j), o.s_neg.eq(s_neg), o.fp.eq(fp),
                     o.ysc_m.eq(ys_m), o.ysc_f.eq(ys_f), o.sat.eq(sat)]
        m.d.comb += [o.a_n[l].eq(a_n[l]) for l in range(k)]
        m.d.comb += [o.q[l].eq(q[l]) for l in range(k)]
        m.d.comb += [o.p[l].eq(p[l]) for l in range(k)]
        # the normalisers' starts from registers, set as the FSM enters NORM and GNORM (their
        # decode from the FSM state was the routed chain's critical path)
        norm_go, gnorm_go = Signal(), Signal()
        m.d.sync += [norm_go.eq(0), gnorm_go.eq(0)]
        m.d.comb += [bn_a.i_valid.eq(norm_go), bn_d.i_valid.eq(norm_go), bn_g.i_valid.eq(gnorm_go | p_go)]
        # captures outside the FSM, each enabled by its own event (a tag, a unit's valid, a flag),
        # so that no wide register's enable is decoded from the state
        in_idle = Signal(init=1)        # the FSM is in IDLE
        m.d.comb += self.i.ready.eq(in_idle)
        pl = self.i.payload
        if self.latch_inputs:
            with m.If(in_idle & self.i.valid):
                m.d.sync += [a_acc[l].eq(pl.a[l]) for l in range(k)]
                m.d.sync += [G[l][n].eq(pl.g[self.gram_index(l, n)]) for l in range(k) for n in range(k)]
        else:  # the caller holds them from the transfer until the result is taken
            m.d.comb += [a_acc[l].eq(pl.a[l]) for l in range(k)]
            m.d.comb += [G[l][n].eq(pl.g[self.gram_index(l, n)]) for l in range(k) for n in range(k)]
        with m.If(in_idle & self.i.valid):
            m.d.sync += ptr.eq(pl.ptr)
        with m.If(bn_a.o_valid):
            m.d.sync += [a_n[l].eq(bn_a.o_data[l]) for l in range(k)]
            m.d.sync += fG.eq(bn_d.o_frac)
        with m.If(aa_done):
            m.d.sync += a2.eq(dacc)
        with m.If(gr_done):
            m.d.sync += [g_acc[l].eq(g_acc[l + 1]) for l in range(k - 1)]
            m.d.sync += g_acc[k - 1].eq(dacc)
        with m.If(ag_done):
            m.d.sync += n2.eq(dacc)
        with m.If(bn_g.o_valid & ~gp_p):
            m.d.sync += [g_n[l].eq(bn_g.o_data[l]) for l in range(k)]
            m.d.sync += [fg.eq(bn_g.o_frac), g_done.eq(1)]
        with m.If(bn_p.o_valid & gp_p):
            m.d.sync += [p[l].eq(Mux(j == l, 0, bn_p.o_data[l])) for l in range(k)]
            m.d.sync += [q[l].eq(Mux(j == l, 0, q[l])) for l in range(k)]
            m.d.sync += fp.eq(bn_p.o_frac)
        p_ready = self._p_clamp(m, p, fp, sat, bn_p, gp_p)
        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                with m.If(self.i.valid):
                    m.d.sync += [sat.eq(0), norm_go.eq(1), in_idle.eq(0), gp_p.eq(0)]
                    m.next = "NORM"
            with m.State("NORM"):  # block(a'), the shift of G from its diagonal (norm_go); the trees run
                m.next = "NORM_WAIT"
            with m.State("NORM_WAIT"):
                with m.If(bn_a.o_valid):
                    m.d.sync += [row.eq(0), wait.eq(0), evict_j.eq(pick)]
                    with m.If(a_zero):
                        m.d.sync += orth.eq(1)
                        m.next = "OUT"
                    with m.Else():
                        m.d.sync += orth.eq(0)
                        m.d.comb += g_arm.eq(1)
                        m.next = "GROWS"
            with m.State("GROWS"):  # a_n·a_n; G's rows fetched, shifted, then times a_n; rsqrt(a·a) once out
                with m.If(wait == 0):
                    m.d.comb += [go.eq(1), go_kind.eq(AA)]
                m.d.sync += wait.eq(wait + 1)
                # a2_req (the cycle after a·a is in) is the unit's request: it is idle between tokens
                with m.If(wait == GROWS_END):
                    m.d.sync += gnorm_go.eq(1)
                    m.next = "GNORM"
            with m.State("GNORM"):  # block(g) (gnorm_go)
                m.d.sync += j.eq(best_j)
                m.next = "RSQ_A_WAIT"
            with m.State("RSQ_A_WAIT"):  # both block(g) and rsqrt(a·a), in either order
                m.d.sync += s_neg.eq(a_arr[j] < 0)
                with m.If(g_done & su_done):
                    m.d.sync += [wait.eq(0), g_done.eq(0), su_done.eq(0)]
                    m.next = "N2"
            with m.State("N2"):  # n² = a_n·g_n, then ahat = a_n rsqrt(a·a)
                m.d.sync += wait.eq(wait + 1)
                with m.If(wait == 0):
                    m.d.comb += [go.eq(1), go_kind.eq(AG)]
                with m.If(wait == AH_GO):
                    m.d.comb += [go.eq(1), go_kind.eq(KH)]
                with m.If(n2_chk):
                    m.d.sync += orth.eq(n2 <= 0)
                    m.d.comb += n_start.eq(n2 > 0)
                with m.If(wait == AH_END):
                    m.d.sync += wait.eq(0)
                    m.next = "BETA"
            with m.State("BETA"):
                with m.If(orth):
                    m.next = "OUT"
                with m.Elif(wait < 3):  # |ahat_j| + 1 through its registers
                    m.d.sync += wait.eq(wait + 1)
                    with m.If(wait == 2):
                        m.d.sync += beta_req.eq(1)
                with m.Elif(su.i.ready):  # beta_req is the request
                    m.d.sync += beta_req.eq(0)
                    m.next = "BETA_WAIT"
            with m.State("BETA_WAIT"):
                with m.If(beta_done):
                    m.d.sync += [wait.eq(0), beta_done.eq(0)]
                    m.next = "QT"
            with m.State("QT"):  # q = -s ahat beta; term = ahat (g_j beta); t = -g + s term; rsqrt(n²) runs
                m.d.sync += wait.eq(wait + 1)
                with m.If(wait == 0):
                    m.d.comb += [go.eq(1), go_kind.eq(KQ)]
                with m.If(wait == T_GO):
                    m.d.comb += [go.eq(1), go_kind.eq(KT)]
                with m.If(wait == T_END):
                    m.d.sync += wait.eq(0)
                    m.next = "P"
            with m.State("P"):  # p = block(t / n²) once 1/n² is in; rsqrt(n²) runs on
                with m.If((wait == 0) & rn_done):  # wait: 1 once the step is issued
                    m.d.comb += [go.eq(1), go_kind.eq(KP)]
                    m.d.sync += gp_p.eq(1)  # the shared normaliser's input select, set before p_go
                    m.d.sync += wait.eq(1)
                with m.If(bn_p.o_valid):
                    m.next = "P_WAIT"
            with m.State("P_WAIT"):  # rsqrt(n²) may still be running; p's exponent clamp (rare)
                with m.If(ys_done & p_ready):
                    m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.d.sync += [ys_m.eq(0), ys_f.eq(0), rn_done.eq(0), ys_done.eq(0), in_idle.eq(1)]
                    m.next = "IDLE"
        return m
