"""The scalar unit: reciprocal and reciprocal square root, bit-exact integer model.

Hardware algorithm (the RTL implements exactly this; all integers, no floats):

1. **Normalise.** A positive input ``x`` (raw integer, ``frac`` fraction bits) is shifted by
   its leading-zero count so that its top set bit lands on bit ``W-1``:
   ``xm = x >> (msb - (W-1))`` (bits below are dropped, i.e. truncated) or ``x << ...``;
   ``xm / 2^(W-1) = mu`` is the mantissa in ``[1, 2)`` and ``e = msb - frac`` the exponent,
   so ``x * 2^-frac = mu * 2^e``.
2. **Seed.** A table of ``2^b`` entries, indexed by the ``b`` mantissa bits below the
   leading one (reciprocal) or by the exponent's parity and the top ``b-1`` mantissa bits
   (rsqrt), gives the minimax constant of the interval, rounded to ``N`` fraction bits:
   ``2/(lo+hi)`` for ``1/mu`` and ``2/(sqrt(lo)+sqrt(hi))`` for ``1/sqrt(mu)``.
3. **Newton steps** in ``N``-fraction-bit fixed point, each product truncated (``>>``):
   reciprocal ``y <- y (2 - mu y)``; rsqrt ``y <- y (3 - mu' y^2) / 2`` with
   ``mu' = mu`` (``e`` even) or ``2 mu`` (``e`` odd, then ``e <- e-1``).
4. **Round the mantissa** to ``P`` bits with round-half-to-even: the result is the
   *floating scalar* ``m * 2^-f`` with ``m`` in ``[2^(P-2), 2^(P-1))`` (fits a signed
   ``P``-bit multiplier operand) and a per-element integer ``f``. Consumers multiply a
   vector by ``m`` and fold ``f`` into the narrowing shift that follows (one rounding).

Zero input gives ``m = 0`` (callers clamp with ``max(x, eps)`` first). The error bound is
``|m 2^-f - 1/x| <= (2^-(P-1) + E_N) |1/x|``, with ``2^-(P-1)`` the mantissa rounding (half an
ulp of a ``P``-bit mantissa at its smallest) and ``E_N`` the Newton/truncation error before
it: :func:`measured_error` and ``tests/fixed/test_scalar_unit.py`` measure it exhaustively
over 16-bit inputs; ``docs/fixed-point.md`` lists the values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np

from specmem.golden.common import SpecmemInputError

from .fxtype import FxType, msb, requantize, round_shift

__all__ = ["ScalarUnit", "Scalar", "measured_error"]


@dataclass(frozen=True)
class Scalar:
    """A floating scalar (or array of them): value ``m * 2**-f``; ``m``, ``f`` are ``int64``."""

    m: np.ndarray
    f: np.ndarray

    def to_float(self) -> np.ndarray:
        return np.ldexp(np.asarray(self.m, dtype=np.float64), -np.asarray(self.f))

    def to_fixed(self, fmt: FxType) -> tuple[np.ndarray, int]:
        """Round and saturate into a fixed format (one rounding)."""
        return requantize(self.m, self.f, fmt)


@dataclass(frozen=True)
class ScalarUnit:
    """Reciprocal / rsqrt unit: ``seed_bits`` table index bits, ``newton_steps``, working
    precision ``work_bits`` (mantissa bits ``W`` and Newton fraction bits ``N``), and the
    output mantissa width ``out_bits`` (``P``, the multiplier operand width)."""

    out_bits: int = 16
    seed_bits: int = 6
    newton_steps: int = 2
    work_bits: int = 30

    def __post_init__(self):
        for name, lo, hi in (("out_bits", 3, 31), ("seed_bits", 2, 12), ("newton_steps", 0, 4), ("work_bits", 8, 30)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise SpecmemInputError(f"{name}: must be an integer in [{lo}, {hi}], got {v!r}")
        if self.seed_bits >= self.work_bits:
            raise SpecmemInputError(f"seed_bits: must be below work_bits ({self.work_bits}), got {self.seed_bits}")

    def to_json(self) -> dict:
        return asdict(self)

    # -- tables --------------------------------------------------------------------------
    def recip_table(self) -> np.ndarray:
        return _recip_table(self.seed_bits, self.work_bits)

    def rsqrt_table(self) -> np.ndarray:
        return _rsqrt_table(self.seed_bits, self.work_bits)

    # -- steps ---------------------------------------------------------------------------
    def _normalise(self, x: np.ndarray, frac):
        W = self.work_bits
        e_msb = msb(x)
        xm = round_shift(x, e_msb - (W - 1), "floor")  # truncate to W bits, leading one at W-1
        return xm, e_msb - np.asarray(frac, dtype=np.int64)

    def _finish(self, y: np.ndarray, f: np.ndarray, zero: np.ndarray) -> Scalar:
        """``y`` in (2^(N-1), 2^N] (value ``y 2^-N``) -> P-bit mantissa, exponent ``f``."""
        P, N = self.out_bits, self.work_bits
        m = round_shift(y, N - (P - 1), "rne")  # in [2^(P-2), 2^(P-1)]
        top = m >= (1 << (P - 1))
        m = np.where(top, m >> 1, m)
        f = np.asarray(f, dtype=np.int64) + (P - 1) - top
        return Scalar(np.where(zero, 0, m).astype(np.int64), np.where(zero, 0, f).astype(np.int64))

    def _check(self, x, name):
        """Integer inputs; wider than 62 bits (``object`` arrays) are truncated to ``work_bits``
        significant bits first, exactly as step 1 would, with the exponent kept aside."""
        x = np.asarray(x)
        if x.dtype != object and not np.issubdtype(x.dtype, np.integer):
            raise SpecmemInputError(f"{name}: the scalar unit takes integer raw values, got dtype {x.dtype}")
        if np.any(x < 0):
            raise SpecmemInputError(f"{name}: the scalar unit takes non-negative inputs")
        if x.dtype != object:
            return x.astype(np.int64), 0
        sh = np.maximum(msb(x) - (self.work_bits - 1), 0)
        return round_shift(x, sh, "floor").astype(np.int64), sh

    def recip(self, x, frac) -> Scalar:
        """``1 / (x 2^-frac)`` as a floating scalar; ``x`` int64 >= 0 (0 gives m = 0)."""
        x, pre = self._check(x, "x")
        zero = x == 0
        x1 = np.where(zero, 1, x)
        W, N, b = self.work_bits, self.work_bits, self.seed_bits
        xm, e = self._normalise(x1, np.asarray(frac) - pre)
        idx = (xm >> (W - 1 - b)) & ((1 << b) - 1)
        y = self.recip_table()[idx]
        for _ in range(self.newton_steps):
            t = (xm * y) >> (W - 1)  # mu*y, N fraction bits
            y = (y * ((2 << N) - t)) >> N
        # 1/value = y 2^-N 2^-e
        return self._finish(y, e, zero)

    def rsqrt(self, x, frac) -> Scalar:
        """``1 / sqrt(x 2^-frac)`` as a floating scalar; ``x`` int64 >= 0 (0 gives m = 0)."""
        x, pre = self._check(x, "x")
        zero = x == 0
        x1 = np.where(zero, 1, x)
        W, N, b = self.work_bits, self.work_bits, self.seed_bits
        xm, e = self._normalise(x1, np.asarray(frac) - pre)
        odd = (e & 1).astype(np.int64)
        e = e - odd
        xm2 = xm << odd  # mu' = mu * 2^odd in [1, 4), W-1 fraction bits
        idx = (odd << (b - 1)) | ((xm >> (W - b)) & ((1 << (b - 1)) - 1))
        y = self.rsqrt_table()[idx]
        for _ in range(self.newton_steps):
            y2 = (y * y) >> N
            t = (xm2 * y2) >> (W - 1)  # mu' y^2, N fraction bits
            y = (y * ((3 << N) - t)) >> (N + 1)
        # 1/sqrt(value) = y 2^-N 2^-(e/2)
        return self._finish(y, e // 2, zero)

    def normalize(self, x, frac) -> Scalar:
        """A signed integer (e.g. a dot product) as a floating scalar: its magnitude rounded (rne)
        to a ``P``-bit mantissa in ``[2^(P-2), 2^(P-1))``, the sign kept. Zero stays zero."""
        P = self.out_bits
        x = np.asarray(x)
        mag = np.abs(x)
        sh = np.where(mag > 0, msb(mag) - (P - 2), 0)
        m = round_shift(mag, sh, "rne")
        over = m >= (1 << (P - 1))
        m = np.where(over, m >> 1, m).astype(np.int64)
        f = (np.asarray(frac) - sh - over).astype(np.int64)
        neg = x < 0
        return Scalar(np.where(neg, -m, m), np.where(mag > 0, f, 0).astype(np.int64))

    def mul(self, a: Scalar, b: Scalar) -> Scalar:
        """Product of two floating scalars, mantissa rounded (rne) back to ``P`` bits."""
        p = np.asarray(a.m, dtype=np.int64) * np.asarray(b.m, dtype=np.int64)  # |p| < 2^(2P-2)
        return self.normalize(p, np.asarray(a.f) + np.asarray(b.f))

    def const(self, c: float) -> Scalar:
        """A positive constant as a floating scalar (the value a ROM would hold)."""
        c = float(c)
        if not (np.isfinite(c) and c > 0):
            raise SpecmemInputError(f"c: scalar constants must be positive and finite, got {c!r}")
        P = self.out_bits
        _, e = np.frexp(c)  # c = mant * 2^e, mant in [0.5, 1)
        f = (P - 1) - int(e)
        m = int(np.rint(np.ldexp(c, f)))
        if m >= (1 << (P - 1)):
            m >>= 1
            f -= 1
        return Scalar(np.int64(m), np.int64(f))

    def newton_operand_range(self) -> tuple[int, int]:
        """The least and greatest value any Newton multiplication's operand can take, over every
        input: a bound, not a sample (:func:`_newton_operand_range`). The RTL sizes its multiplier
        from it (``newton_operand_width``)."""
        return _newton_operand_range(self.seed_bits, self.newton_steps, self.work_bits)

    def newton_operand_width(self) -> int:
        """Signed width holding every Newton multiplication operand (``newton_operand_range``)."""
        lo, hi = self.newton_operand_range()
        return max(2, (-lo - 1).bit_length() + 1 if lo < 0 else 0, hi.bit_length() + 1)

    def error_bound(self) -> float:
        """The documented relative error bound: mantissa rounding plus the measured Newton error."""
        return 2.0 ** -(self.out_bits - 1) + newton_error(self.seed_bits, self.newton_steps, self.work_bits)


@lru_cache(maxsize=None)
def _recip_table(b: int, N: int) -> np.ndarray:
    i = np.arange(1 << b, dtype=np.float64)
    lo, hi = 1 + i / (1 << b), 1 + (i + 1) / (1 << b)
    return np.rint(np.ldexp(2.0 / (lo + hi), N)).astype(np.int64)


@lru_cache(maxsize=None)
def _rsqrt_table(b: int, N: int) -> np.ndarray:
    h = 1 << (b - 1)
    i = np.arange(h, dtype=np.float64)
    lo, hi = 1 + i / h, 1 + (i + 1) / h
    tab = np.concatenate([2.0 / (np.sqrt(lo) + np.sqrt(hi)), 2.0 / (np.sqrt(2 * lo) + np.sqrt(2 * hi))])
    return np.rint(np.ldexp(tab, N)).astype(np.int64)


def _mul_range(a: tuple[int, int], b: tuple[int, int], shift: int) -> tuple[int, int]:
    """``(x * y) >> shift`` over ``x`` in ``a``, ``y`` in ``b`` (closed integer ranges): the
    extremes are at corners and the floor shift is monotone."""
    c = [x * y for x in a for y in b]
    return min(c) >> shift, max(c) >> shift


@lru_cache(maxsize=None)
def _newton_operand_range(b: int, steps: int, W: int) -> tuple[int, int]:
    """Interval arithmetic over each seed interval (all of the table's entries, both rsqrt
    parities): ``xm`` ranges over the interval's mantissas, ``y`` starts at its seed, and every
    step's operands are bounded by the ranges of the values they are made of. Each range covers
    every input in the interval (exact integer bounds, loose only where a step's factors are
    correlated), so the result bounds every operand the unit can ever multiply."""
    N = W
    lo = hi = 0
    seen = []
    step = 1 << (W - 1 - b)
    tab = _recip_table(b, N)
    for i in range(1 << b):
        x = ((1 << (W - 1)) + i * step, (1 << (W - 1)) + (i + 1) * step - 1)
        y = (int(tab[i]), int(tab[i]))
        for _ in range(steps):
            t = _mul_range(x, y, W - 1)
            f = ((2 << N) - t[1], (2 << N) - t[0])
            seen += [x, y, f]
            y = _mul_range(y, f, N)
    h, step = 1 << (b - 1), 1 << (W - b)
    tab = _rsqrt_table(b, N)
    for odd in (0, 1):
        for i in range(h):
            x = (((1 << (W - 1)) + i * step) << odd, ((1 << (W - 1)) + (i + 1) * step - 1) << odd)
            y = (int(tab[(odd << (b - 1)) | i]), int(tab[(odd << (b - 1)) | i]))
            for _ in range(steps):
                y2 = _mul_range(y, y, N)
                t = _mul_range(x, y2, W - 1)
                f = ((3 << N) - t[1], (3 << N) - t[0])
                seen += [x, y, y2, f]
                y = _mul_range(y, f, N + 1)
    for r in seen:
        lo, hi = min(lo, r[0]), max(hi, r[1])
    return lo, hi


@lru_cache(maxsize=None)
def newton_error(seed_bits: int, newton_steps: int, work_bits: int) -> float:
    """Max relative error of the unrounded Newton result over every ``work_bits`` mantissa
    reachable from 16-bit inputs and a dense sample of the rest, both functions (measured)."""
    su = ScalarUnit(out_bits=work_bits + 1, seed_bits=seed_bits, newton_steps=newton_steps, work_bits=work_bits)
    err = 0.0
    for fn, ref in ((su.recip, lambda v: 1.0 / v), (su.rsqrt, lambda v: 1.0 / np.sqrt(v))):
        x = _probe_inputs()
        s = fn(x, 0)
        err = max(err, float(np.max(np.abs(s.to_float() / ref(x.astype(np.float64)) - 1.0))))
    return err


@lru_cache(maxsize=None)
def _probe_inputs() -> np.ndarray:
    rng = np.random.default_rng(12345)
    dense = rng.integers(1 << 16, 1 << 40, size=200_000, dtype=np.int64)
    return np.concatenate([np.arange(1, 1 << 16, dtype=np.int64), dense, dense * 2 + 1])


def measured_error(su: ScalarUnit, x=None, frac: int = 0) -> dict:
    """Max relative error of ``recip`` and ``rsqrt`` against float64 over ``x``
    (default: every 16-bit input 1..65535)."""
    x = np.arange(1, 1 << 16, dtype=np.int64) if x is None else np.asarray(x, dtype=np.int64)
    v = np.ldexp(x.astype(np.float64), -frac)
    out = {}
    for name, fn, ref in (("recip", su.recip, 1.0 / v), ("rsqrt", su.rsqrt, 1.0 / np.sqrt(v))):
        rel = np.abs(fn(x, frac).to_float() / ref - 1.0)
        out[name] = float(np.max(rel))
    return out
