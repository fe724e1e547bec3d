"""The clamped ``p`` exponent (``p_window``; the narrow row-unit shift of docs/annihilation.md):
the window's bound from the formats, the clamp against exact rational arithmetic, and the model
with the clamp: every update's shift inside the window, bit-identical to the unclamped model on
well-conditioned streams; an ill-conditioned memory clamped and counted."""

from fractions import Fraction

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed.annihilation import annihilation_fixed, clamp_p_exponent, p_shift_window, token_chain
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for


def _fmt(preset, d=16, k=4):
    return formats_for("annihilation", preset, d, {"k": k, "in_range": None})


def test_window_is_sixteen_shifts_below_the_formats_bound():
    # int18: fr - fu + wp + wa - fa + log2 k = 12 - 23 + 18 + 18 - 17 + 3
    assert p_shift_window(_fmt("int18", 64, 8), 8) == (-4, 11)
    assert p_shift_window(_fmt("int18", 16, 4), 4) == (-4, 11)   # fr = 13 at d = 16
    assert p_shift_window(_fmt("int8", 64, 8), 8) == (-12, 3)
    assert p_shift_window(_fmt("int16", 64, 16), 16) == (-11, 4)


def _rne(v: Fraction) -> int:
    f = v.numerator // v.denominator
    rem = v - f
    return f + (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and f % 2 == 1))


@pytest.mark.parametrize("preset", ["int18", "int8"])
def test_clamp_against_exact_arithmetic(preset):
    F = _fmt(preset)
    dp = Datapath(F, trace=False)
    assert F["p"].rounding == "rne"
    lo, hi = p_shift_window(F, 4)
    base = F["u"].frac - F["r"].frac
    wp = F["p"].width
    rng = np.random.default_rng(5)
    fps = np.array([base + lo - 3, base + lo - 40, base + lo, base + hi, base + hi + 1, base + hi + 5,
                    base + hi + 60, base + (lo + hi) // 2])
    p = rng.integers(-(1 << (wp - 1)), 1 << (wp - 1), size=(len(fps), 4))
    p[:, 0] = [3, -1, 5, -(1 << (wp - 1)), 7, -48, 1 << (wp - 2), 0]
    sat0 = dp.sat.get("p", 0)
    pc, fpc = clamp_p_exponent(dp, p, fps, (lo, hi))
    assert fpc.tolist() == [base + lo, base + lo, base + lo, base + hi, base + hi, base + hi, base + hi, fps[-1]]
    nsat = 0
    for b in range(len(fps)):
        for l in range(4):
            # the same real value re-expressed at the clamped exponent, rounded to nearest-even, saturated
            v = _rne(Fraction(int(p[b, l])) * Fraction(2) ** int(fpc[b] - fps[b])) if fps[b] > fpc[b] else \
                int(p[b, l]) << int(fpc[b] - fps[b])
            top = (1 << (wp - 1)) - 1
            want = max(-top - 1, min(top, v))
            nsat += want != v
            assert pc[b, l] == want, (b, l)
    assert nsat > 0 and dp.sat["p"] - sat0 == nsat
    assert pc[0, 0] == 3 << 3 and pc[4, 0] == 4 and pc[5, 0] == -2   # 7/2 -> 4 (even), -48/32 -> -2 (tie: even)


def _stream(kind, B, T, d, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, d))
    return x if kind == "gaussian" else x * np.logspace(0, -6, d)


def _ill_conditioned(s, F):
    """Rows with singular values ``(1, s, 1, 1)`` and ``x`` weighted ``(s², 1)`` on the first two:
    ``|p|·|a|`` grows like ``1/s`` (the largest ``p`` the formats let through, found by search)."""
    A = X = (1 << 17) - 1
    Um = np.zeros((16, 4), np.int64)
    Um[0, 0], Um[1, 1], Um[2, 2], Um[3, 3] = A, round(A * s), A, A
    x = np.zeros(16, np.int64)
    x[0], x[1] = round(X * s * s * 4), X
    return (Um.T @ x)[None], (Um.T @ Um)[None]


@pytest.mark.parametrize("preset, d, k, kind", [("int18", 16, 4, "gaussian"), ("int8", 16, 4, "gaussian"),
                                                ("int18", 16, 4, "anisotropic")])
def test_windowed_model_equals_the_unclamped_one_on_well_conditioned_streams(preset, d, k, kind):
    x = _stream(kind, 4, 120, d, 2)
    a = annihilation_fixed(x, k, preset, trace=False, p_window=False)
    b = annihilation_fixed(x, k, preset, trace=False)   # the preset's default: clamped
    F = b["fmt"]
    lo, hi = p_shift_window(F, k)
    ps = a["p_fp"][a["updated"]] + F["r"].frac - F["u"].frac
    assert ps.size > 300 and lo < ps.min() and ps.max() < hi  # strictly inside: nothing clamps
    assert np.array_equal(a["u_raw"], b["u_raw"]) and np.array_equal(a["y_raw"], b["y_raw"])
    assert b["sat"].get("p", 0) == 0


def test_the_chain_clamps_an_ill_conditioned_memory_and_counts_it():
    F = _fmt("int18")
    off = F["r"].frac - F["u"].frac
    a_acc, G_acc = _ill_conditioned(1 / 512, F)
    free = token_chain(Datapath(F, trace=False), a_acc, G_acc, np.zeros(1, np.int64))
    assert not free["orth"][0] and free["fp"][0] + off < 1   # the lowest shift found at int18: -1
    lo, hi = p_shift_window(F, 4)
    assert lo <= free["fp"][0] + off    # ... inside the window: int18's formats cannot reach its floor
    # a narrower window (floor at 3) must clamp it: p shifted left, saturated and counted
    dp = Datapath(F, trace=False)
    ch = token_chain(dp, a_acc, G_acc, np.zeros(1, np.int64), p_window=(3, 18))
    assert ch["fp"][0] + off == 3 and dp.sat.get("p", 0) > 0
    sh = int(ch["fp"][0] - free["fp"][0])
    top = (1 << (F["p"].width - 1)) - 1
    assert ch["p"][0].tolist() == np.clip(free["p"][0] << sh, -top - 1, top).tolist()


def test_bad_window_flag():
    with pytest.raises(SpecmemInputError, match="^p_window"):
        annihilation_fixed(np.ones((4, 8)), 2, "int18", p_window="yes")
