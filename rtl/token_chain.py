"""The annihilation core v2's per-token chain: from the row pass's accumulators to the next row
pass's controls, bit-exact with :func:`specmem.golden.fixed.annihilation.token_chain`.

In: ``a' = Uᵀx`` (``k`` exact sums), the exact Gram ``G' = UmᵀUm`` (upper triangle, the
:class:`~specmem.rtl.row_unit.RowUnit`'s ``acc_g`` order) and the eviction pointer. Out: the
orthogonal-input flag and the column to evict, or ``a_n``, ``j``, ``s``, ``q``, ``p`` with its
exponent and ``rsqrt(n²)`` for ``y``; and the token's saturation count (``ahat``, ``q``, ``t``).

The chain is *sequential*: a small FSM issues the chain's k-vector products one step at a
time into one bank of ``k`` registered multipliers with a registered adder tree (``a·a``, then
``G_n`` a row per issue, ``a·g``, ``a·rsqrt``, ``ahat·beta``, ``ahat·g_j beta``, ``t·(1/n²)``), the
block exponents go through :class:`~specmem.rtl.block_norm.BlockNormaliser` (``G``'s shift from
its diagonal alone: ``|G_lm| <= sqrt(G_ll G_mm)``, so the largest magnitude is on the diagonal) and
the four scalar operations through two :class:`~specmem.rtl.scalar_unit.ScalarUnit` instances:
``rsqrt(a·a)`` (issued first, under the ``G_n a_n`` rows) then ``beta`` on one, ``1/n²`` then
``rsqrt(n²)`` on the other, beside the ``q``/``t`` steps. The steps' order, widths and roundings
are the golden model's. Re-timed by ``hardware.md``'s discipline: the run-time roundings (``G``'s
rows before the bank, ``ahat``, ``q`` and ``term`` after it) share one pipelined
:class:`~specmem.rtl.shift.RoundShiftVar`, each followed by a registered sign-extension
saturation and a registered overflow count; ``g_j beta`` has a registered multiplier of its own;
the eviction column (argmin of ``G``'s diagonal, nearest to the pointer on ties) and ``j``
(argmax ``|a_n|``) come from registered tournament trees. The FSM's event cycles are named
constants (``GROWS_END``, ``AH_END``, ...), so a change of a latency moves them together.

``norm_lanes`` (``b``) is the width of the chain's serial units: the block normalisers, and the
rounding shift with its saturations, which a feeder register hands a k-vector ``b`` entries per
cycle (``ceil(k/b)`` beats, tagged with kind and beat so each lane's result lands in its
element). With ``b = k`` everything is one beat wide, the arrangement before the units went
serial. The multiplier bank stays ``k`` lanes: a ``G`` row is issued with its last beat.
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
#: lanes of the chain's serial units (block normalisers, rounding shift) unless asked (at most k);
#: measured in docs/annihilation.md ("Where the chain's area goes")
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
    one wins; ties stay left, so the first best wins), one registered level per round."""
    cands = [(Const(i, range(len(keys))), key) for i, key in enumerate(keys)]
    depth = 0
    while len(cands) > 1:
        depth += 1
        nxt = []
        for i in range(0, len(cands) - 1, 2):
            (il, kl), (ir, kr) = cands[i], cands[i + 1]
            take = better(kl, kr)
            idx = Signal(range(len(keys)), name=f"{name}{depth}_i{i // 2}")
            key = Signal(kl.shape(), name=f"{name}{depth}_k{i // 2}")
            m.d.sync += [idx.eq(Mux(take, ir, il)), key.eq(Mux(take, kr, kl))]
            nxt.append((idx, key))
        if len(cands) % 2:
            il, kl = cands[-1]
            idx = Signal(range(len(keys)), name=f"{name}{depth}_i_odd")
            key = Signal(kl.shape(), name=f"{name}{depth}_k_odd")
            m.d.sync += [idx.eq(il), key.eq(kl)]
            nxt.append((idx, key))
        cands = nxt
    return cands[0][0], depth


class TokenChain(wiring.Component):
    """Per-token chain for ``d`` rows, ``k`` lanes, one golden preset (``int18``, ``int16``, ``int8``).

    Members: ``i`` (stream: ``a[k]``, ``g[k(k+1)/2]`` of ``acc_width`` bits, ``ptr``) and ``o``
    (stream: ``orth``, ``evict_j``, ``a_n[k]``, ``j``, ``s_neg``, ``q[k]``, ``p[k]``, ``fp``,
    ``ysc_m``, ``ysc_f``, ``sat``). ``acc_width`` defaults to the row unit's accumulator width.
    """

    def __init__(self, d: int, k: int, preset: str = "int18", *, acc_width: int | None = None,
                 dsp: str = "registered", norm_lanes: int | None = None):
        check_dims(d, k, divides=False)
        if norm_lanes is None:
            norm_lanes = min(NORM_LANES_DEFAULT, k)
        if (isinstance(norm_lanes, bool) or not isinstance(norm_lanes, int)
                or not (norm_lanes == k or 1 <= norm_lanes <= min(4, k - 1))):
            raise ValueError(f"norm_lanes: 1 .. {min(4, k - 1)} (serial block normalisers and rounding "
                             f"shift) or k = {k} (all k lanes wide), got {norm_lanes!r}" if k > 1 else
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
        self.w_gjb = self.wg + self.P             # g_j beta.m
        self.wA = max(self.wa, self.wG, self.wh, self.wt)
        self.wB = max(self.wa, self.wg, self.P, self.w_gjb)
        self.mul_latency = PipelinedMultiplier.latency_for(dsp, self.wA, self.wB, input_register=True)
        self.tree_levels = lk
        self.out_layout = data.StructLayout({
            "orth": 1, "evict_j": range(k), "a_n": data.ArrayLayout(signed(self.wa), k), "j": range(k),
            "s_neg": 1, "q": data.ArrayLayout(signed(self.wq), k), "p": data.ArrayLayout(signed(self.wp), k),
            "fp": signed(FW), "ysc_m": signed(self.P), "ysc_f": signed(FW), "sat": range(3 * k + 1),
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

    def elaborate(self, platform):
        m = Module()
        k, F = self.k, self.fmt
        fm, fx, fan, fh, fq = F["u_mul"].frac, F["x"].frac, F["a"].frac, F["ahat"].frac, F["q"].frac
        P, W, dsp = self.P, self.acc_width, self.dsp

        # -- latched inputs
        a_acc = [Signal(signed(W), name=f"a_acc{l}") for l in range(k)]
        G = [[Signal(signed(W), name=f"G{l}_{n}") for n in range(k)] for l in range(k)]
        ptr = Signal(range(k))

        # -- the multiplier bank and the adder tree
        opA = [Signal(signed(self.wA), name=f"opA{l}") for l in range(k)]
        opB = [Signal(signed(self.wB), name=f"opB{l}") for l in range(k)]
        prod = []
        for l in range(k):
            mm = PipelinedMultiplier(self.wA, self.wB, self.dsp, input_register=True)
            m.submodules[f"mul{l}"] = mm
            m.d.comb += [mm.a.eq(opA[l]), mm.b.eq(opB[l]), mm.en.eq(1)]
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
        if k == 1:
            s = Signal(level[0].shape(), name="tree1_0")
            m.d.sync += s.eq(level[0])
            level = [s]
        dot = level[0]
        L, T = self.mul_latency, self.tree_levels
        # products held for the tree's depth, so that a step reads both at the same cycle; the
        # stage before the last loads the feeder one cycle ahead
        prod_d = prod_pre = list(prod)
        for step in range(T):
            prod_pre = prod_d
            nxt = [Signal(p.shape(), name=f"prod_d{step}_{l}") for l, p in enumerate(prod_d)]
            m.d.sync += [n.eq(p) for n, p in zip(nxt, prod_d)]
            prod_d = nxt
        bank_wait = L + T  # cycles from the operands' cycle to prod_d and dot

        # -- block normalisers and the scalar unit
        def normaliser(width, M):
            if self.norm_lanes == k:
                return BlockNormaliser(k, width, M, FW)
            return SerialBlockNormaliser(k, width, M, FW, lanes=self.norm_lanes)

        bn_a = normaliser(W, self.wa)
        bn_d = normaliser(W, self.wG)
        bn_g = normaliser(self.w_gacc, self.wg)
        bn_p = normaliser(self.wt + P, self.wp)
        su = ScalarUnit(self.su_config, max(self.w_n2, self.wh + 2), FW, pipelined=True, dsp=dsp)  # rsqrt(a·a), beta
        sun = ScalarUnit(self.su_config, self.w_n2, FW, pipelined=True, dsp=dsp)  # 1/n², then rsqrt(n²)
        m.submodules.bn_a, m.submodules.bn_d, m.submodules.bn_g, m.submodules.bn_p = bn_a, bn_d, bn_g, bn_p
        m.submodules.su, m.submodules.sun = su, sun
        for bn in (bn_a, bn_d, bn_g, bn_p):
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
        sat = Signal(range(3 * k + 1))
        evict_j = Signal(range(k))
        row = Signal(range(k + 2))
        g_done, su_done, beta_wait = Signal(), Signal(), Signal()
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
        m.d.sync += a_zero.eq(~Cat(*(a_acc[l].any() for l in range(k))).any())

        # one pipelined rounding shift (rtl/shift.py) on ``b`` lanes, shared by the G rows and the
        # bank's products (ahat, q, term): a feeder register takes a G row or a product vector and
        # hands it to the shift ``b`` entries per cycle (``nb`` beats) with its shift, tagged with
        # its kind and beat; tags travel beside the data, and each result lane is captured by them
        b = self.norm_lanes
        nb = -(-k // b)
        kp = nb * b
        KG, KH, KQ, KT = range(4)
        a_arr, g_arr, ahat_arr = Array(a_n), Array(g_n), Array(ahat)
        Grow = Array(Array(r) for r in G)
        shG = Signal(signed(FW))  # right shift of G' into G_n
        m.d.comb += shG.eq(2 * fm - fG)
        w_rs = max(W, len(prod_d[0]))
        fs = [Signal(signed(w_rs), name=f"fs{i}") for i in range(kp)]
        f_left = Signal(range(nb + 1))           # beats still to feed, the current one included
        f_beat = Signal(range(max(nb, 2)))
        f_kind = Signal(2)
        f_sh = Signal(signed(FW + 4))
        ld, ld_kind, ld_shift = Signal(), Signal(2), Signal(signed(FW + 4))
        with m.If(ld):
            m.d.sync += [fs[i].eq(Mux(ld_kind == KG, Grow[row][i], prod_pre[i]) if i < k else 0)
                         for i in range(kp)]
            m.d.sync += [f_left.eq(nb), f_beat.eq(0), f_kind.eq(ld_kind), f_sh.eq(ld_shift)]
        with m.Elif(f_left != 0):
            m.d.sync += [fs[i].eq(fs[i + b] if i + b < kp else 0) for i in range(kp)]
            m.d.sync += [f_left.eq(f_left - 1), f_beat.eq(f_beat + 1)]
        rsv = RoundShiftVar(b, w_rs, max_left=max(self.wG + 1, 4), shift_width=FW + 4, rounding="rne")
        m.submodules.rsv = rsv
        m.d.comb += [rsv.en.eq(1), rsv.i_valid.eq(1), rsv.i_shift.eq(f_sh)]
        m.d.comb += [rsv.i_data[i].eq(fs[i]) for i in range(b)]
        R = RoundShiftVar.latency
        ro = [rsv.o_data[i] for i in range(b)]

        def pipe(x, n, name):
            for s in range(n):
                x = reg(x, x.shape(), f"{name}{s}")
            return x

        ro_on, ro_kind = pipe(f_left != 0, R, "tag_on"), pipe(f_kind, R, "tag_kind")
        beat = [pipe(f_beat, R, "tag_beat")]                  # beat[n]: the beat n cycles after ro
        for n in range(6):
            beat.append(reg(beat[-1], beat[-1].shape(), f"tag_beat_r{n}"))
        s_g, s_h, s_q, s_t = (ro_on & (ro_kind == kind) for kind in (KG, KH, KQ, KT))

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
        g_lane = [g_n[i] if nb == 1 else
                  Array(g_n[bt * b + i] if bt * b + i < k else Const(0, signed(self.wg)) for bt in range(nb))[beat[3]]
                  for i in range(b)]
        tsum = [reg(tn[i] - g_lane[i], signed(cw + 2), f"tsum{i}") for i in range(b)]             # +4
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
        with m.If(pcv_h | pcv_q | pcv_t):
            m.d.sync += sat.eq(sat + Mux(pcv_h, ahat_pc, 0) + Mux(pcv_q, q_pc, 0) + Mux(pcv_t, t_pc, 0))

        # a G row goes to the bank with its last beat: the earlier beats from their row register
        gasm = [Signal(signed(self.wA), name=f"gasm{l}") for l in range((nb - 1) * b)]
        for l in range(len(gasm)):
            with m.If(s_g & (beat[0] == l // b)):
                m.d.sync += gasm[l].eq(ro[l % b])
        g_row = [gasm[l] if l < (nb - 1) * b else ro[l - (nb - 1) * b] for l in range(k)]
        g_iss = Signal()
        m.d.comb += g_iss.eq(s_g & (beat[0] == nb - 1))
        g_cap = pipe(g_iss, bank_wait, "g_cap")

        # g_j beta on a multiplier of its own (the chain's only product outside the bank)
        gjm = PipelinedMultiplier(self.wg, P, self.dsp)
        m.submodules.gjm = gjm
        m.d.comb += [gjm.a.eq(reg(g_arr[j], signed(self.wg), "gj")), gjm.b.eq(be_m), gjm.en.eq(1)]
        m.d.comb += gjb.eq(gjm.p)
        hj = reg(ahat_arr[j], signed(self.wh), "hj")
        mag_hj = reg(Mux(hj < 0, -hj, hj), unsigned(self.wh + 1), "mag_hj")
        beta_x = reg((1 << fh) + mag_hj, unsigned(max(fh, self.wh) + 2), "beta_x")   # 3 cycles after ahat

        # the FSM's event cycles (``wait`` counts from each state's entry); a vector's last beat
        # leaves the feeder nb - 1 cycles after its first
        BW = bank_wait
        GROWS_END = k * nb + R + BW              # the last row's dot: loads every nb cycles from 0
        AH_FEED = BW + 1                         # ahat's products into the shift
        AH_END = AH_FEED + nb - 1 + R + 2 + LP   # its last beat counted
        Q_FEED = BW
        T_ISSUE = max(gjm.latency + 1, nb)       # ahat (g_j beta) once g_j beta is out and q is fed
        T_FEED = T_ISSUE + BW
        T_END = T_FEED + nb - 1 + R + 6 + LP
        wait = Signal(range(max(GROWS_END, AH_END, T_END, bn_a.latency) + 8))

        def scalar_request(x, frac, op, unit=su):
            m.d.comb += [unit.i.valid.eq(1), unit.i.payload.x.eq(x), unit.i.payload.frac.eq(frac),
                         unit.i.payload.op.eq(op)]

        # the n² unit's own sequence, started once n² is known (> 0): 1/n² then rsqrt(n²)
        n_start = Signal()
        rn_done, ys_done = Signal(), Signal()
        m.d.comb += sun.o.ready.eq(1)
        with m.FSM(init="IDLE", name="n2_unit"):
            with m.State("IDLE"):
                with m.If(n_start):
                    m.next = "RECIP"
            with m.State("RECIP"):
                scalar_request(n2, fg + fan, ScalarOp.RECIP, sun)
                with m.If(sun.i.ready):
                    m.next = "RECIP_WAIT"
            with m.State("RECIP_WAIT"):
                with m.If(sun.o.valid):
                    m.d.sync += [rn_m.eq(sun.o.payload.m), rn_f.eq(sun.o.payload.f), rn_done.eq(1)]
                    m.next = "RSQRT"
            with m.State("RSQRT"):
                scalar_request(n2, fg + fan, ScalarOp.RSQRT, sun)
                with m.If(sun.i.ready):
                    m.next = "RSQRT_WAIT"
            with m.State("RSQRT_WAIT"):
                with m.If(sun.o.valid):
                    m.d.sync += [ys_m.eq(sun.o.payload.m), ys_f.eq(sun.o.payload.f), ys_done.eq(1)]
                    m.next = "IDLE"

        m.d.comb += su.o.ready.eq(1)
        beta_done = Signal()
        with m.If(su.o.valid):
            with m.If(~su_done & ~beta_wait):
                m.d.sync += [rs_m.eq(su.o.payload.m), rs_f.eq(su.o.payload.f), su_done.eq(1)]
            with m.Else():
                m.d.sync += [be_m.eq(su.o.payload.m), be_f.eq(su.o.payload.f), beta_done.eq(1)]

        o = self.o.payload
        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    pl = self.i.payload
                    m.d.sync += [a_acc[l].eq(pl.a[l]) for l in range(k)]
                    m.d.sync += [G[l][n].eq(pl.g[self.gram_index(l, n)]) for l in range(k) for n in range(k)]
                    m.d.sync += [ptr.eq(pl.ptr), sat.eq(0)]
                    m.next = "NORM"
            with m.State("NORM"):  # block(a'), the shift of G from its diagonal; the trees run
                m.d.comb += [bn_a.i_valid.eq(1), bn_a.i_frac.eq(fm + fx), bn_d.i_valid.eq(1), bn_d.i_frac.eq(2 * fm)]
                m.d.comb += [bn_a.i_data[l].eq(a_acc[l]) for l in range(k)]
                m.d.comb += [bn_d.i_data[l].eq(G[l][l]) for l in range(k)]
                m.next = "NORM_WAIT"
            with m.State("NORM_WAIT"):
                with m.If(bn_a.o_valid):
                    m.d.sync += [a_n[l].eq(bn_a.o_data[l]) for l in range(k)]
                    m.d.sync += [fG.eq(bn_d.o_frac), row.eq(0), wait.eq(0), evict_j.eq(pick)]
                    with m.If(a_zero):
                        m.d.sync += orth.eq(1)
                        m.next = "OUT"
                    with m.Else():
                        m.d.sync += orth.eq(0)
                        m.next = "GROWS"
            with m.State("GROWS"):  # a_n·a_n; G's rows fetched, shifted, then times a_n; rsqrt(a·a) once out
                with m.If((row < k) & (f_left <= 1)):
                    m.d.comb += [ld.eq(1), ld_kind.eq(KG), ld_shift.eq(shG)]
                    m.d.sync += row.eq(row + 1)
                with m.If(wait == 0):
                    m.d.comb += [opA[l].eq(a_n[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(a_n[l]) for l in range(k)]
                with m.If(g_iss):
                    m.d.comb += [opA[l].eq(g_row[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(a_n[l]) for l in range(k)]
                m.d.sync += wait.eq(wait + 1)
                with m.If(wait == BW):
                    m.d.sync += a2.eq(dot)
                with m.If(wait == BW + 1):
                    scalar_request(a2, 2 * fan, ScalarOp.RSQRT)  # accepted: the unit is idle between tokens
                with m.If(g_cap):
                    m.d.sync += [g_acc[l].eq(g_acc[l + 1]) for l in range(k - 1)]
                    m.d.sync += g_acc[k - 1].eq(dot)
                with m.If(wait == GROWS_END):
                    m.next = "GNORM"
            with m.State("GNORM"):  # block(g)
                m.d.comb += [bn_g.i_valid.eq(1), bn_g.i_frac.eq(fG + fan)]
                m.d.comb += [bn_g.i_data[l].eq(g_acc[l]) for l in range(k)]
                m.d.sync += j.eq(best_j)
                m.next = "RSQ_A_WAIT"
            with m.State("RSQ_A_WAIT"):  # both block(g) and rsqrt(a·a), in either order
                with m.If(bn_g.o_valid):
                    m.d.sync += [g_n[l].eq(bn_g.o_data[l]) for l in range(k)]
                    m.d.sync += [fg.eq(bn_g.o_frac), g_done.eq(1)]
                m.d.sync += s_neg.eq(a_arr[j] < 0)
                with m.If(g_done & su_done):
                    m.d.sync += [wait.eq(0), g_done.eq(0), su_done.eq(0)]
                    m.next = "N2"
            with m.State("N2"):  # n² = a_n·g_n; ahat = a_n rsqrt(a·a), in one issue each
                m.d.sync += wait.eq(wait + 1)
                with m.If(wait == 0):
                    m.d.comb += [opA[l].eq(a_n[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(g_n[l]) for l in range(k)]
                with m.If(wait == 1):
                    m.d.comb += [opA[l].eq(a_n[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(rs_m) for l in range(k)]
                with m.If(wait == BW):
                    m.d.sync += n2.eq(dot)
                with m.If(wait == BW + 1):
                    m.d.sync += orth.eq(n2 <= 0)
                    m.d.comb += n_start.eq(n2 > 0)
                with m.If(wait == AH_FEED - 1):
                    m.d.comb += [ld.eq(1), ld_kind.eq(KH), ld_shift.eq(rs_f + fan - fh)]
                with m.If(wait == AH_END):
                    m.d.sync += wait.eq(0)
                    m.next = "BETA"
            with m.State("BETA"):
                with m.If(orth):
                    m.next = "OUT"
                with m.Elif(wait < 3):  # |ahat_j| + 1 through its registers
                    m.d.sync += wait.eq(wait + 1)
                with m.Else():
                    scalar_request(beta_x, fh, ScalarOp.RECIP)
                    with m.If(su.i.ready):
                        m.d.sync += beta_wait.eq(1)
                        m.next = "BETA_WAIT"
            with m.State("BETA_WAIT"):
                with m.If(beta_done):
                    m.d.sync += [wait.eq(0), beta_done.eq(0), beta_wait.eq(0)]
                    m.next = "QT"
            with m.State("QT"):  # q = -s ahat beta; term = ahat (g_j beta); t = -g + s term; 1/n² runs
                m.d.sync += wait.eq(wait + 1)
                with m.If(wait == 0):
                    m.d.comb += [opA[l].eq(ahat[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(be_m) for l in range(k)]
                with m.If(wait == T_ISSUE):
                    m.d.comb += [opA[l].eq(ahat[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(gjb) for l in range(k)]
                with m.If(wait == Q_FEED - 1):
                    m.d.comb += [ld.eq(1), ld_kind.eq(KQ), ld_shift.eq(be_f + fh - fq)]
                with m.If(wait == T_FEED - 1):
                    m.d.comb += [ld.eq(1), ld_kind.eq(KT), ld_shift.eq(fh + be_f)]
                with m.If(wait == T_END):
                    m.d.sync += wait.eq(0)
                    m.next = "P"
            with m.State("P"):  # p = block(t / n²) once 1/n² is in; rsqrt(n²) runs on
                with m.If(wait != 0):
                    m.d.sync += wait.eq(wait + 1)
                with m.Elif(rn_done):
                    m.d.sync += wait.eq(1)
                with m.If((wait == 0) & rn_done):
                    m.d.comb += [opA[l].eq(t[l]) for l in range(k)]
                    m.d.comb += [opB[l].eq(rn_m) for l in range(k)]
                with m.If(wait == bank_wait):
                    m.d.comb += [bn_p.i_valid.eq(1), bn_p.i_frac.eq(fg + rn_f)]
                    m.d.comb += [bn_p.i_data[l].eq(prod_d[l]) for l in range(k)]
                with m.If(bn_p.o_valid):
                    m.d.sync += [p[l].eq(Mux(j == l, 0, bn_p.o_data[l])) for l in range(k)]
                    m.d.sync += [q[l].eq(Mux(j == l, 0, q[l])) for l in range(k)]
                    m.d.sync += fp.eq(bn_p.o_frac)
                    m.next = "P_WAIT"
            with m.State("P_WAIT"):  # rsqrt(n²) may still be running
                with m.If(ys_done):
                    m.next = "OUT"
            with m.State("OUT"):
                m.d.comb += self.o.valid.eq(1)
                m.d.comb += [o.orth.eq(orth), o.evict_j.eq(evict_j), o.j.eq(j), o.s_neg.eq(s_neg), o.fp.eq(fp),
                             o.ysc_m.eq(ys_m), o.ysc_f.eq(ys_f), o.sat.eq(sat)]
                m.d.comb += [o.a_n[l].eq(a_n[l]) for l in range(k)]
                m.d.comb += [o.q[l].eq(q[l]) for l in range(k)]
                m.d.comb += [o.p[l].eq(p[l]) for l in range(k)]
                with m.If(self.o.ready):
                    m.d.sync += [ys_m.eq(0), ys_f.eq(0), rn_done.eq(0), ys_done.eq(0)]
                    m.next = "IDLE"
        return m
