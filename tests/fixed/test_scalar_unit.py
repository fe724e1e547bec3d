"""Scalar unit: reciprocal and rsqrt error bounds, exhaustive over 16-bit inputs, against float64."""

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed.formats import PRESETS
from specmem.golden.fixed.scalar_unit import Scalar, ScalarUnit

ALL16 = np.arange(1, 1 << 16, dtype=np.int64)

# Documented bounds (docs/fixed-point.md): mantissa rounding 2^-(P-1) plus the Newton error
# measured for the configuration (seed_bits=6, 30-bit Newton: 1 step 8.9e-5, 2 steps 1.3e-8 before
# rounding), by (P, Newton steps): P = 8, 16, 28 for legacy-int8, int16, wide; 12 for int8's
# scalar unit; 18 for int18.
_NEWTON = {1: 9.0e-5, 2: 1.3e-8}
BOUNDS = {n: 2.0 ** -(p.scalar_unit().out_bits - 1) + _NEWTON[p.newton_steps] for n, p in PRESETS.items()}
assert BOUNDS["legacy-int8"] == 2.0 ** -7 + 9.0e-5 and BOUNDS["int8"] == 2.0 ** -11 + 9.0e-5


def _rel(s: Scalar, ref):
    return np.abs(s.to_float() / ref - 1.0)


@pytest.mark.parametrize("preset", list(PRESETS))
@pytest.mark.parametrize("frac", [0, 9, 16])
def test_exhaustive_16bit_within_documented_bound(preset, frac):
    su = PRESETS[preset].scalar_unit()
    v = np.ldexp(ALL16.astype(np.float64), -frac)
    r = su.recip(ALL16, frac)
    s = su.rsqrt(ALL16, frac)
    assert _rel(r, 1.0 / v).max() <= BOUNDS[preset]
    assert _rel(s, 1.0 / np.sqrt(v)).max() <= BOUNDS[preset]
    assert su.error_bound() <= BOUNDS[preset]
    P = su.out_bits
    for out in (r, s):  # normalised P-bit mantissas: a signed P-bit multiplier operand
        assert out.m.dtype == np.int64 and out.f.dtype == np.int64
        assert out.m.min() >= 1 << (P - 2) and out.m.max() < 1 << (P - 1)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_dense_wide_inputs_and_python_ints(preset):
    su = PRESETS[preset].scalar_unit()
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.integers(1, 1 << 62, 20000), (1 << np.arange(62)).astype(np.int64)])
    for frac in (-10, 0, 40, 70):
        v = np.ldexp(x.astype(np.float64), -frac)
        assert _rel(su.recip(x, frac), 1.0 / v).max() <= BOUNDS[preset]
        assert _rel(su.rsqrt(x, frac), 1.0 / np.sqrt(v)).max() <= BOUNDS[preset]
    big = np.array([(1 << 90) + 12345, 3 << 70], dtype=object)  # wider than int64: truncated to W bits first
    vb = np.array([float(b) for b in big])
    assert _rel(su.recip(big, 0), 1.0 / vb).max() <= BOUNDS[preset]
    assert _rel(su.rsqrt(big, 3), 1.0 / np.sqrt(vb / 8)).max() <= BOUNDS[preset]


def test_seedless_newton_is_worse_and_more_steps_help():
    """The bound is earned by the Newton steps: zero steps leave the 2^-7 seed error."""
    errs = [np.max(_rel(ScalarUnit(out_bits=24, newton_steps=n).recip(ALL16, 0), 1.0 / ALL16)) for n in (0, 1, 2)]
    assert errs[0] > 2e-3 and errs[1] < 1e-4 and errs[2] < 2e-7


def test_exact_powers_and_zero():
    su = ScalarUnit(out_bits=16)
    x = np.array([0, 1, 4, 16, 1 << 40])
    r = su.recip(x, 2)
    np.testing.assert_array_equal(r.to_float(), [0.0, 4.0, 1.0, 0.25, 2.0 ** -38])
    s = su.rsqrt(x, 2)
    np.testing.assert_array_equal(s.to_float(), [0.0, 2.0, 1.0, 0.5, 2.0 ** -19])


def test_normalize_mul_const():
    su = ScalarUnit(out_bits=8)
    n = su.normalize(np.array([0, 5, -5, 255, -(1 << 40)]), 4)
    np.testing.assert_array_equal(n.to_float(), [0.0, 5 / 16, -5 / 16, 16.0, -(2.0 ** 36)])  # 255 rounds to 256
    assert np.all((np.abs(n.m[1:]) >= 64) & (np.abs(n.m[1:]) < 128))
    c = su.const(0.1)
    assert abs(c.to_float() / 0.1 - 1) <= 2.0 ** -7
    p = su.mul(su.const(3.0), su.const(0.75))
    assert p.to_float() == 2.25
    with pytest.raises(SpecmemInputError, match="^c:"):
        su.const(-1.0)


@pytest.mark.parametrize("kw,match", [
    ({"out_bits": 2}, "out_bits"), ({"seed_bits": 1}, "seed_bits"), ({"newton_steps": 5}, "newton_steps"),
    ({"work_bits": 31}, "work_bits"), ({"seed_bits": 10, "work_bits": 9}, "seed_bits")])
def test_bad_configs(kw, match):
    with pytest.raises(SpecmemInputError, match=f"^{match}"):
        ScalarUnit(**kw)


def test_bad_inputs():
    su = ScalarUnit()
    with pytest.raises(SpecmemInputError, match="^x: the scalar unit takes non-negative"):
        su.recip(np.array([-1]), 0)
    with pytest.raises(SpecmemInputError, match="^x: the scalar unit takes integer"):
        su.rsqrt(np.array([1.5]), 0)


def _traced_operands(su: ScalarUnit, xm: np.ndarray) -> np.ndarray:
    """Every Newton multiplication operand for the normalised mantissas ``xm`` (both functions,
    both rsqrt parities), written out from the module docstring's steps, independent of the unit."""
    W = N = su.work_bits
    b = su.seed_bits
    xm = np.asarray(xm, dtype=object)
    ops = []
    y = su.recip_table()[[(int(v) >> (W - 1 - b)) & ((1 << b) - 1) for v in xm]].astype(object)
    for _ in range(su.newton_steps):
        t = (xm * y) >> (W - 1)
        f = (2 << N) - t
        ops += [xm, y, f]
        y = (y * f) >> N
    for odd in (0, 1):
        x2 = xm * (1 << odd)
        y = su.rsqrt_table()[[(odd << (b - 1)) | ((int(v) >> (W - b)) & ((1 << (b - 1)) - 1)) for v in xm]]
        y = y.astype(object)
        for _ in range(su.newton_steps):
            y2 = (y * y) >> N
            t = (x2 * y2) >> (W - 1)
            f = (3 << N) - t
            ops += [x2, y, y2, f]
            y = (y * f) >> (N + 1)
    return np.concatenate(ops) if ops else np.zeros(0, dtype=object)


@pytest.mark.parametrize("seed_bits,steps,work_bits", [(2, 4, 12), (4, 2, 12), (6, 2, 13), (3, 3, 10)])
def test_newton_operand_range_holds_exhaustively_on_small_units(seed_bits, steps, work_bits):
    """Every mantissa of a small unit: each operand inside the stated range, and the signed width
    the RTL's multiplier takes from it holds them."""
    su = ScalarUnit(out_bits=8, seed_bits=seed_bits, newton_steps=steps, work_bits=work_bits)
    ops = _traced_operands(su, np.arange(1 << (work_bits - 1), 1 << work_bits))
    lo, hi = su.newton_operand_range()
    assert lo <= min(ops) and max(ops) <= hi
    w = su.newton_operand_width()
    assert -(1 << (w - 1)) <= lo and hi < 1 << (w - 1)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_newton_operands_of_the_presets_fit_33_bits(preset):
    """The presets' 30-bit Newton: operands traced over each seed interval's ends and 10^5 random
    mantissas lie inside the range, which needs the same width as what was traced (the bound is
    not loose by a bit): 33-bit signed operands, 2 x 2 MULT18X18D pieces in the pipelined RTL."""
    su = PRESETS[preset].scalar_unit()
    W, b = su.work_bits, su.seed_bits
    ends = [(1 << (W - 1)) + (i << (W - 1 - b)) + e for i in range(1 << b) for e in (0, (1 << (W - 1 - b)) - 1)]
    rnd = np.random.default_rng(5).integers(1 << (W - 1), 1 << W, 100_000)
    ops = _traced_operands(su, np.concatenate([np.array(ends, dtype=np.int64), rnd]))
    lo, hi = su.newton_operand_range()
    assert lo <= min(ops) and max(ops) <= hi
    assert su.newton_operand_width() == int(max(ops)).bit_length() + 1 == 33
