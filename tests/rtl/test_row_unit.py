"""``rtl/row_unit.py`` (the annihilation core v2's row pipeline) against the golden model: the rows
as written equal :func:`row_update` (full steps) or the column write alone (warm-up, eviction) or
``U`` unchanged; ``r_i``, the saturation count and the co-accumulated ``a' = Um'ᵀx'`` and Gram
``G' = Um'ᵀUm'`` equal the golden operations on the same rows — random passes, back to back,
under stalls."""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from specmem.golden.fixed.annihilation import p_shift_window, row_update
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.datapath import Datapath
from specmem.rtl.row_unit import RowUnit


def _token(rng, ru, dp, mode):
    """One pass's per-token controls and rows (random, at the formats' ranges) and its golden result."""
    F, d, k = ru.fmt, ru.d, ru.k
    nr = np.random.default_rng(rng.randrange(1 << 30))

    def rnd(name, shape, scale_bits=None):
        w = F[name].width if scale_bits is None else scale_bits
        return nr.integers(-(1 << (w - 1)), 1 << (w - 1), size=shape).astype(np.int64)

    ub = rng.choice([F["u"].width, F["u"].width - 6, 14])  # full range (saturating) or typical rows
    U = rnd("u", (1, d, k), ub)
    a = rnd("a", (1, k))
    p, q = rnd("p", (1, k)), rnd("q", (1, k))
    j = rng.randrange(k)
    p[0, j] = q[0, j] = 0
    lo, hi = ru.p_window or (-6, 40)
    fp = rng.randint(F["u"].frac - F["r"].frac + lo, F["u"].frac - F["r"].frac + hi)
    x, xn = rnd("x", (1, d)), rnd("x", (1, d))
    fu, fm = F["u"].frac, F["u_mul"].frac
    Um = dp.narrow("u_mul", U, fu)
    r = dp.narrow("r", np.einsum("bik,bk->bi", Um, a), fm + F["a"].frac)
    sat0 = dp.sat.get("u", 0)
    if mode == "full":
        Un = row_update(dp, U.copy(), Um, r, p, np.array([fp]), q, np.array([j]), x)
        wsel, upd = 1 << j, 1
    else:
        Un = U.copy()
        if mode == "column":
            Un[0, :, j] = x[0] << (fu - F["x"].frac)
        wsel, upd = (1 << j) if mode == "column" else 0, 0
    nsat = dp.sat.get("u", 0) - sat0
    Um2 = dp.narrow("u_mul", Un, fu)
    acc_a = np.einsum("bik,bi->bk", Um2, xn)[0]
    G = np.einsum("bik,bil->bkl", Um2, Um2)[0]
    acc_g = [int(G[l, n]) for l in range(k) for n in range(l, k)]
    ctl = dict(a=a[0], p=p[0], q=q[0], p_shift=F["r"].frac + fp - fu, upd=upd, wsel=wsel)
    return ctl, U[0], x[0], xn[0], dict(u=Un[0], r=r[0], a=acc_a, g=acc_g, sat=nsat)


def _run(ru, tokens, *, stall=0.0, seed=0):
    """Drive the passes back to back (the next pass starts once the last one has left); collect."""
    rng = random.Random(seed)
    got = []

    async def bench(ctx):
        for ctl, U, x, xn, _ in tokens:
            for l in range(ru.k):
                ctx.set(ru.a[l], int(ctl["a"][l]))
                ctx.set(ru.p[l], int(ctl["p"][l]))
                ctx.set(ru.q[l], int(ctl["q"][l]))
            ctx.set(ru.p_shift, ctl["p_shift"])
            ctx.set(ru.upd, ctl["upd"])
            ctx.set(ru.wsel, ctl["wsel"])
            sat0 = ctx.get(ru.sat_u)
            rows, rs = [], []
            i = adv = 0
            while adv < ru.d + ru.acc_latency:
                en = rng.random() >= stall
                ctx.set(ru.en, en)
                ctx.set(ru.i_valid, i < ru.d)
                if i < ru.d:
                    ctx.set(ru.i_first, i == 0)
                    ctx.set(ru.i_x, int(x[i]))
                    ctx.set(ru.i_xn, int(xn[i]))
                    for l in range(ru.k):
                        ctx.set(ru.i_u[l], int(U[i, l]))
                await ctx.tick()
                if en:
                    adv += 1
                    i += 1
                    if ctx.get(ru.o_valid):
                        rows.append([ctx.get(ru.o_u[l]) for l in range(ru.k)])
                        rs.append(ctx.get(ru.o_r))
            ctx.set(ru.en, 1)
            ctx.set(ru.i_valid, 0)
            for _ in range(8):   # the saturation count's tree
                await ctx.tick()
            got.append(dict(u=rows, r=rs, a=[ctx.get(ru.acc_a[l]) for l in range(ru.k)],
                            g=[ctx.get(ru.acc_g[n]) for n in range(ru.n_gram)], sat=ctx.get(ru.sat_u) - sat0))

    sim = Simulator(ru)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize("d, k, preset, stall, delays, window", [
    (8, 4, "int18", 0.0, "registers", False), (12, 3, "int18", 0.3, "registers", False),
    (8, 8, "int8", 0.2, "registers", False), (4, 1, "int18", 0.0, "registers", False),
    (8, 4, "int18", 0.0, "behavioural", False), (12, 3, "int18", 0.3, "behavioural", False),
    (8, 4, "int18", 0.2, "behavioural", True), (8, 8, "int8", 0.0, "registers", True)])
def test_passes_match_the_golden_row_update(d, k, preset, stall, delays, window):
    rng = random.Random(d * 10 + k)
    F = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
    ru = RowUnit(d, k, preset, delays=delays, p_window=p_shift_window(F, k) if window else None)
    dp = Datapath(ru.fmt, trace=False)
    modes = ["full", "full", "column", "none", "full", "full"]
    tokens = [_token(rng, ru, dp, mode) for mode in modes]
    got = _run(ru, tokens, stall=stall, seed=k)
    total_sat = 0
    for n, ((_, _, _, _, want), g) in enumerate(zip(tokens, got)):
        assert g["u"] == want["u"].tolist(), f"pass {n} ({modes[n]}): rows"
        assert g["r"] == want["r"].tolist(), f"pass {n}: r"
        assert g["a"] == want["a"].tolist(), f"pass {n}: a'"
        assert g["g"] == want["g"], f"pass {n}: Gram"
        assert g["sat"] == want["sat"], f"pass {n}: saturations"
        total_sat += want["sat"]
    if preset == "int18" and stall == 0.0 and k > 1:
        assert total_sat > 0, "the random passes should include saturating writes"


def test_latencies_and_multipliers():
    """4k lane multipliers for the pass plus k(k+1)/2 for the Gram; the documented stage arithmetic."""
    import re

    from amaranth.back import rtlil

    for d, k in ((16, 4), (64, 8)):
        ru = RowUnit(d, k, "int18")
        assert ru.latency == ru.st_sum + 4 and ru.acc_latency == ru.latency + 2 + ru.mul_latency + 3
        text = rtlil.convert(ru, name="ru")
        muls = set(re.findall(r"cell \\ru\.(mul_[apqxg][0-9_]+)\s", text))
        assert len(muls) == 4 * k + k * (k + 1) // 2


@pytest.mark.parametrize("kw, match", [(dict(d=0, k=1), "^d:"), (dict(d=4, k=5), "^k: must be <= d")])
def test_bad_generics(kw, match):
    with pytest.raises(ValueError, match=match):
        RowUnit(**kw)


def _run_back_to_back(ru, tokens, *, stall=0.0, seed=0):
    """Passes with no gap between them, each row entering with its own pass's controls (heads):
    the controls travel with the rows. Accumulators are read at the cycle each pass's are final."""
    rng = random.Random(seed)
    d, k = ru.d, ru.k
    n = len(tokens)
    rows, rs, accs = [], [], []
    end = n * d + ru.acc_latency + 4

    hsplit = ru.acc_split
    halves = {}

    def take(ctx, part):
        """the caller's bank (``snapshot=False``): one half of every sum, as the strobe says"""
        mask = (1 << hsplit) - 1
        pick = (lambda v: v & mask) if part == "lo" else (lambda v: v >> hsplit)
        halves[part] = ([pick(ctx.get(ru.acc_a[l])) for l in range(k)],
                        [pick(ctx.get(ru.acc_g[m])) for m in range(ru.n_gram)])

    async def bench(ctx):
        i = adv = 0
        while adv <= end:
            en = rng.random() >= stall
            ctx.set(ru.en, en)
            live = i < n * d
            ctx.set(ru.i_valid, live)
            if live:
                p, row = divmod(i, d)
                ctl, U, x, xn, _ = tokens[p]
                for l in range(k):
                    ctx.set(ru.a[l], int(ctl["a"][l]))
                    ctx.set(ru.p[l], int(ctl["p"][l]))
                    ctx.set(ru.q[l], int(ctl["q"][l]))
                    ctx.set(ru.i_u[l], int(U[row, l]))
                ctx.set(ru.p_shift, ctl["p_shift"])
                ctx.set(ru.upd, ctl["upd"])
                ctx.set(ru.wsel, ctl["wsel"])
                ctx.set(ru.i_first, row == 0)
                ctx.set(ru.i_last, row == d - 1)
                ctx.set(ru.i_x, int(x[row]))
                ctx.set(ru.i_xn, int(xn[row]))
            else:  # controls that belong to no row: a row reading them would fail the test
                for l in range(k):
                    ctx.set(ru.a[l], 1)
                    ctx.set(ru.p[l], -1)
                ctx.set(ru.upd, 1)
                ctx.set(ru.wsel, 1)
            if not ru.snapshot:
                for part in ("lo", "hi"):
                    if ctx.get(getattr(ru, f"acc_{part}_we")):
                        take(ctx, part)
            await ctx.tick()
            if ctx.get(ru.acc_done) and ru.snapshot:  # this pass's sums, snapshot
                accs.append(([ctx.get(ru.acc_a[l]) for l in range(k)],
                             [ctx.get(ru.acc_g[m]) for m in range(ru.n_gram)]))
            elif ctx.get(ru.acc_done):
                (alo, glo), (ahi, ghi) = halves.pop("lo"), halves.pop("hi")
                accs.append(([(h << hsplit) | lo for lo, h in zip(alo, ahi)],
                             [(h << hsplit) | lo for lo, h in zip(glo, ghi)]))
            if en:
                if ctx.get(ru.o_valid):
                    rows.append([ctx.get(ru.o_u[l]) for l in range(k)])
                    rs.append(ctx.get(ru.o_r))
                adv += 1
                i += 1

    sim = Simulator(ru)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return rows, rs, accs


@pytest.mark.parametrize("d, k, stall, delays, snapshot", [
    (8, 4, 0.0, "registers", True), (6, 3, 0.25, "registers", True), (8, 4, 0.0, "behavioural", True),
    (6, 3, 0.25, "behavioural", True), (8, 4, 0.0, "behavioural", False), (6, 3, 0.3, "registers", False)])
def test_travelling_controls_let_passes_of_different_memories_follow_with_no_gap(d, k, stall, delays, snapshot):
    rng = random.Random(7 * d + k)
    ru = RowUnit(d, k, "int18", travelling_controls=True, delays=delays, snapshot=snapshot)
    dp = Datapath(ru.fmt, trace=False)
    modes = ["full", "column", "full", "none", "full", "full"]
    tokens = [_token(rng, ru, dp, mode) for mode in modes]
    rows, rs, accs = _run_back_to_back(ru, tokens, stall=stall, seed=k)
    assert len(rows) == len(modes) * d and len(accs) == len(modes)
    for p, (_, _, _, _, want) in enumerate(tokens):
        assert rows[p * d:(p + 1) * d] == want["u"].tolist(), f"pass {p} ({modes[p]}): rows"
        assert rs[p * d:(p + 1) * d] == want["r"].tolist(), f"pass {p}: r"
        assert accs[p] == (want["a"].tolist(), want["g"]), f"pass {p}: accumulators"


def test_held_controls_cannot_follow_with_no_gap():
    """The same back-to-back passes without travelling controls go wrong (the test above can fail)."""
    rng = random.Random(3)
    ru = RowUnit(8, 4, "int18")
    dp = Datapath(ru.fmt, trace=False)
    tokens = [_token(rng, ru, dp, mode) for mode in ["full", "full", "column"]]
    rows, _, _ = _run_back_to_back(ru, tokens)
    assert any(rows[p * 8:(p + 1) * 8] != t[4]["u"].tolist() for p, t in enumerate(tokens))


def test_ram_delays_take_the_long_wide_data_delays_only():
    """With block-RAM delays the row unit's long data delays are ring buffers (and the same passes
    match the model above); valid bits and short delays stay in registers."""
    from amaranth.back import rtlil
    ru = RowUnit(64, 8, "int18", travelling_controls=True, delays="ecp5")
    rtlil.convert(ru)
    names = {n for n, _, _ in ru.ram_lines}
    assert {"ud", "xd", "xnd", "rd", "cj"} <= names
    assert any(n.startswith("ctl_p_") for n in names) and any(n.startswith("ctl_q_") for n in names)
    assert not any(n.startswith(("ctl_upd", "ctl_cnt", "ctl_a_")) for n in names)
    assert all(w * n >= 96 and n >= 6 for _, w, n in ru.ram_lines)
    ud = next((w, n) for name, w, n in ru.ram_lines if name == "ud")
    assert ud == (8 * ru.wu, ru.st_sum - 2)
    with pytest.raises(ValueError, match="^delays:"):
        RowUnit(8, 4, "int18", delays="srl")


def test_window_shift_has_no_left_path_and_is_bounded():
    ru = RowUnit(16, 4, "int18", p_window=(-4, 11))
    assert ru.pre_left == 4 and ru.max_right == 15
    for bad in [(3, 1), (-4, 80), (-200, -40)]:
        with pytest.raises(ValueError, match="^p_window"):
            RowUnit(16, 4, "int18", p_window=bad)
