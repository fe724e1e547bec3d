"""FxType: rounding and saturation edge cases, requantize, and bit equality with fxpmath."""

from fractions import Fraction

import numpy as np
import pytest
from fxpmath import Fxp

from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed.fxtype import ROUNDING, FxType, msb, mul_round_shift, requantize, round_shift

# fxpmath's names for our rounding modes ('around' is numpy's round-half-to-even)
FXP_ROUNDING = {"rne": "around", "floor": "floor", "half_up": "nearest_posinf"}


def _ref_round(fr: Fraction, mode: str) -> int:
    """Reference rounding of an exact rational, written independently of the implementation."""
    fl = fr.numerator // fr.denominator
    rem = fr - fl
    if mode == "floor":
        return fl
    if mode == "half_up":
        return fl + (rem >= Fraction(1, 2))
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        return fl + 1
    return fl


@pytest.mark.parametrize("mode,expected", [
    # LSB 1/16: values are ±0.5, ±1.5, ±2.5 LSB, 2.25 LSB, -2.75 LSB
    ("rne", [0, 2, 2, 0, -2, -2, 2, -3]),
    ("floor", [0, 1, 2, -1, -2, -3, 2, -3]),
    ("half_up", [1, 2, 3, 0, -1, -2, 2, -3]),
])
def test_quantize_ties_by_hand(mode, expected):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.25, -2.75]) / 16
    raw, n = FxType(8, 4, rounding=mode).quantize(x)
    assert raw.dtype == np.int64 and n == 0
    np.testing.assert_array_equal(raw, expected)


def test_saturate_and_wrap_edges():
    t = FxType(8, 4)  # Q3.4: [-8, 7.9375]
    assert (t.min_raw, t.max_raw, t.min_value, t.max_value, t.lsb) == (-128, 127, -8.0, 7.9375, 0.0625)
    raw, n = t.quantize([7.9375, 7.96875, 8.0, -8.0, -8.03125, 1e300, -1e300])
    np.testing.assert_array_equal(raw, [127, 127, 127, -128, -128, 127, -128])
    # 7.96875 is 127.5 LSB: to even 128, out of range; -8.03125 is -128.5 LSB: to even -128, in range
    assert n == 4
    w = FxType(8, 4, saturation="wrap")
    raw, n = w.quantize([8.0, -8.0625, 15.9375, 16.0])
    np.testing.assert_array_equal(raw, [-128, 127, -1, 0])
    assert n == 4
    u = FxType(8, 8, signed=False)
    raw, n = u.quantize([-0.001, -0.01, 0.5, 1.0])  # -0.256 LSB rounds to 0: no saturation
    np.testing.assert_array_equal(raw, [0, 0, 128, 255])
    assert n == 2


def test_quantize_count_is_elementwise():
    t = FxType(8, 4)
    x = np.array([[100.0, -100.0, 0.0], [7.0, 9.0, -9.0]])
    raw, n = t.quantize(x)
    assert n == int(np.sum((x > t.max_value) | (x < t.min_value))) == 4


def test_qformat_strings():
    assert FxType(8, 6).qformat == "Q1.6"
    assert FxType(8, 7).qformat == "Q0.7"
    assert FxType(8, 10).qformat == "Q-3.10"
    assert FxType(8, 8, signed=False).qformat == "UQ0.8"
    assert FxType(16, -2).qformat == "Q17.-2"
    for q in ("Q1.6", "UQ0.8", "Q-3.10", "Q17.-2", "Q31.0"):
        assert FxType.from_q(q).qformat == q
    assert FxType.from_q("Q1.6", rounding="floor") == FxType(8, 6, rounding="floor")
    assert FxType.for_range(4.0, 8) == FxType(8, 5)  # Q2.5
    assert FxType.for_range(5.0, 8) == FxType(8, 4)  # Q3.4
    assert FxType.for_range(0.125, 8) == FxType(8, 10)


@pytest.mark.parametrize("kw,match", [
    ({"width": 0, "frac": 0}, "width"),
    ({"width": 63, "frac": 0}, "width"),
    ({"width": 8.5, "frac": 0}, "width"),
    ({"width": 8, "frac": 1.5}, "frac"),
    ({"width": 8, "frac": 4, "rounding": "ceil"}, "rounding"),
    ({"width": 8, "frac": 4, "saturation": "clamp"}, "saturation"),
])
def test_bad_types(kw, match):
    with pytest.raises(SpecmemInputError, match=f"^{match}"):
        FxType(**kw)


def test_bad_quantize_inputs():
    with pytest.raises(SpecmemInputError, match="^x: contains NaN"):
        FxType(8, 4).quantize([1.0, np.nan])
    with pytest.raises(SpecmemInputError, match="^k: cannot convert"):
        FxType(8, 4).quantize("abc", name="k")
    with pytest.raises(SpecmemInputError, match="^q:"):
        FxType.from_q("1.6")


@pytest.mark.parametrize("mode", ROUNDING)
def test_round_shift_matches_exact_rationals(mode):
    rng = np.random.default_rng(7)
    raw = np.concatenate([rng.integers(-(1 << 40), 1 << 40, 3000), np.arange(-40, 41)])
    for shift in (1, 2, 3, 7, 20):
        ref = [_ref_round(Fraction(int(r), 1 << shift), mode) for r in raw]
        np.testing.assert_array_equal(round_shift(raw, shift, mode), ref)
        # per-element shifts, object (Python int) arrays: the same bits
        np.testing.assert_array_equal(round_shift(raw, np.full(raw.shape, shift), mode), ref)
        np.testing.assert_array_equal(round_shift(raw.astype(object), shift, mode).astype(np.int64), ref)
    mixed = rng.integers(0, 9, raw.size)
    ref = [_ref_round(Fraction(int(r), 1 << int(s)), mode) for r, s in zip(raw, mixed)]
    np.testing.assert_array_equal(round_shift(raw, mixed, mode), ref)
    np.testing.assert_array_equal(round_shift(raw, -3, mode), raw * 8)


@pytest.mark.parametrize("mode", ROUNDING)
def test_requantize_is_round_then_saturate(mode):
    to = FxType(8, 2, rounding=mode)  # Q5.2: raw [-128, 127]
    raw = np.array([508, 509, 510, 511, -514, -513, -512, 6, -6, 1 << 50, -(1 << 50)])
    out, n = requantize(raw, 4, to)
    ref = np.clip([_ref_round(Fraction(int(r), 4), mode) for r in raw], -128, 127)
    np.testing.assert_array_equal(out, ref)
    assert n == sum(not -128 <= _ref_round(Fraction(int(r), 4), mode) <= 127 for r in raw)
    # widening: exact left shift, saturation decided without overflowing int64
    out, n = requantize(np.array([3, -3, 1 << 40, -(1 << 40)]), 0, FxType(16, 10, rounding=mode))
    np.testing.assert_array_equal(out, [3072, -3072, 32767, -32768])
    assert n == 2


def test_msb_and_wide_products():
    x = np.array([1, 2, 3, 255, 256, (1 << 53) - 1, 1 << 53, (1 << 53) + 1, (1 << 62) - 1])
    np.testing.assert_array_equal(msb(x), [int(v).bit_length() - 1 for v in x])
    assert msb(np.array([0]))[0] == -1
    a = np.array([(1 << 45) + 12345, -(1 << 44) - 7])
    b = np.array([(1 << 23) - 3, (1 << 23) - 5])
    for mode in ROUNDING:
        ref = [_ref_round(Fraction(int(p) * int(q), 1 << 30), mode) for p, q in zip(a, b)]
        np.testing.assert_array_equal(mul_round_shift(a, b, 30, mode), ref)


# ---------------------------------------------------------------------------------------
# fxpmath oracle


def _fxp_raw(x, t: FxType, overflow="saturate"):
    f = Fxp(x, signed=t.signed, n_word=t.width, n_frac=t.frac, rounding=FXP_ROUNDING[t.rounding], overflow=overflow)
    return np.asarray(f.val).astype(np.int64)


@pytest.mark.parametrize("mode", ROUNDING)
@pytest.mark.parametrize("width,frac,signed", [(8, 5, True), (8, 0, True), (16, 12, True), (12, 3, False), (24, 20, True)])
def test_quantize_bit_equal_to_fxpmath(mode, width, frac, signed):
    t = FxType(width, frac, signed, rounding=mode)
    rng = np.random.default_rng(width * 100 + frac)
    span = 1.3 * max(abs(t.min_value), t.max_value)
    x = rng.uniform(-span, span, 4000)
    ties = (rng.integers(-(1 << (width + 1)), 1 << (width + 1), 2000) + 0.5) * t.lsb  # exact half-LSB ties
    x = np.concatenate([x, ties, [0.0, t.max_value, t.min_value, t.max_value + t.lsb / 2, t.min_value - t.lsb / 2]])
    raw, _ = t.quantize(x)
    np.testing.assert_array_equal(raw, _fxp_raw(x, t))


def test_fxpmath_rounding_names_on_ties():
    """The mapping above is the point of this suite: check fxpmath's tie behaviour directly."""
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5])
    t = lambda m: np.asarray(Fxp(x, True, 8, 0, rounding=m, overflow="saturate").val).astype(int).tolist()  # noqa: E731
    assert t("around") == [0, 2, 2, 0, -2, -2]  # half to even
    assert t("nearest_posinf") == [1, 2, 3, 0, -1, -2]  # half toward +inf
    assert t("floor") == [0, 1, 2, -1, -2, -3]
    assert t("trunc") == [0, 1, 2, 0, -1, -2]  # toward zero: not a mode of FxType


def test_wrap_bit_equal_to_fxpmath():
    t = FxType(8, 4, saturation="wrap")
    x = np.random.default_rng(3).uniform(-40, 40, 3000)
    raw, _ = t.quantize(x)
    np.testing.assert_array_equal(raw, _fxp_raw(x, t, overflow="wrap"))


def test_requantize_mixed_shifts_clip_only_left_shifted_elements():
    # Regression: a per-element block exponent mixing right and left shifts must give each
    # element the result it gets alone (found by the RTL bit-exact tests).
    from specmem.golden.fixed.fxtype import FxType, requantize

    to = FxType(8, 5)
    mixed, _ = requantize(np.array([409, 5]), np.array([8, 1]), to)
    alone = [requantize(np.array([v]), np.array([f]), to)[0][0] for v, f in ((409, 8), (5, 1))]
    np.testing.assert_array_equal(mixed, alone)
    np.testing.assert_array_equal(mixed, [51, 80])
    wrap = FxType(8, 5, saturation="wrap")
    got, _ = requantize(np.array([5, 200]), np.array([1, 1]), wrap)
    np.testing.assert_array_equal(got, [80, ((200 << 4) + 128) % 256 - 128])
