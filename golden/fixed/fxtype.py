"""The one fixed-point type of specmem: width, fraction bits, sign, rounding and saturation.

A value ``v`` of an :class:`FxType` is stored as the integer ``raw = v * 2**frac`` in
``[min_raw, max_raw]``. The same object describes a tensor in the golden model, the RTL
generator and the reports (hls4ml's habit: one type, used everywhere).

Operation order wherever rounding happens (the same in the golden model and the RTL):

1. **quantize** (float -> raw, host side only): scale by ``2**frac`` (exact in float64),
   round to an integer with the type's rounding mode, then saturate (or wrap) to the width.
2. **requantize** (raw -> raw, every narrowing inside the datapath): shift right by
   ``from_frac - to.frac`` bits with the target's rounding mode (a left shift when negative,
   which is exact), then saturate (or wrap) to the target width. One rounding, then one
   saturation; never the other way round.

Rounding modes (``shift`` bits dropped, ``half = 2**(shift-1)``, ``rem`` the dropped bits
read as an unsigned number, ``q = raw >> shift`` the floor):

* ``"rne"``: round half to even: ``q + (rem > half or (rem == half and q odd))``;
* ``"floor"``: ``q`` (truncation of two's complement; toward -inf);
* ``"half_up"``: round half toward +inf: ``q + (rem >= half)`` (one adder, the cheapest
  round-to-nearest in hardware).

fxpmath names for the same modes: ``"around"`` (numpy's round half to even), ``"floor"``,
``"nearest_posinf"``.

All raw values are ``int64`` and widths are at most 62 bits, so one product of two
31-bit operands, or a sum of such products, never wraps the host integer. Products that
need more bits go through :func:`mul_round_shift`, which falls back to Python integers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import numpy as np

from specmem.golden.common import SpecmemInputError

__all__ = [
    "ROUNDING",
    "SATURATION",
    "MAX_WIDTH",
    "FxType",
    "round_shift",
    "requantize",
    "mul_round_shift",
    "msb",
]

ROUNDING = ("rne", "floor", "half_up")
SATURATION = ("saturate", "wrap")
MAX_WIDTH = 62


@dataclass(frozen=True)
class FxType:
    """Fixed-point format: ``width`` bits in total, ``frac`` of them after the binary point.

    ``frac`` may be negative (LSB > 1) or larger than ``width`` (all bits fractional).
    ``signed`` uses two's complement. The Q-format string counts integer bits without the
    sign bit: ``FxType(8, 6)`` is ``"Q1.6"``, ``FxType(8, 8, signed=False)`` is ``"UQ0.8"``.
    """

    width: int
    frac: int
    signed: bool = True
    rounding: str = "rne"
    saturation: str = "saturate"

    def __post_init__(self):
        if isinstance(self.width, bool) or not isinstance(self.width, (int, np.integer)):
            raise SpecmemInputError(f"width: expected an integer, got {self.width!r}")
        if not 1 + bool(self.signed) <= int(self.width) <= MAX_WIDTH:
            raise SpecmemInputError(f"width: must be in [{1 + bool(self.signed)}, {MAX_WIDTH}], got {self.width}")
        if isinstance(self.frac, bool) or not isinstance(self.frac, (int, np.integer)):
            raise SpecmemInputError(f"frac: expected an integer, got {self.frac!r}")
        if abs(int(self.frac)) > 2 * MAX_WIDTH:
            raise SpecmemInputError(f"frac: must be within ±{2 * MAX_WIDTH}, got {self.frac}")
        if self.rounding not in ROUNDING:
            raise SpecmemInputError(f"rounding: must be one of {ROUNDING}, got {self.rounding!r}")
        if self.saturation not in SATURATION:
            raise SpecmemInputError(f"saturation: must be one of {SATURATION}, got {self.saturation!r}")
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "frac", int(self.frac))
        object.__setattr__(self, "signed", bool(self.signed))

    # -- range ---------------------------------------------------------------------------
    @property
    def min_raw(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_raw(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def lsb(self) -> float:
        return 2.0 ** -self.frac

    @property
    def min_value(self) -> float:
        return self.min_raw * self.lsb

    @property
    def max_value(self) -> float:
        return self.max_raw * self.lsb

    @property
    def int_bits(self) -> int:
        """Integer bits without the sign bit (negative when the LSB is below 2^-width)."""
        return self.width - self.frac - int(self.signed)

    @property
    def qformat(self) -> str:
        return f"{'' if self.signed else 'U'}Q{self.int_bits}.{self.frac}"

    def __str__(self) -> str:
        return f"{self.qformat} ({self.width}b, {self.rounding}, {self.saturation})"

    @classmethod
    def from_q(cls, q: str, **kw) -> "FxType":
        """Parse ``"Q1.6"`` / ``"UQ0.8"`` / ``"Q-2.9"`` (integer bits exclude the sign)."""
        m = re.fullmatch(r"\s*(U?)Q(-?\d+)\.(-?\d+)\s*", str(q))
        if not m:
            raise SpecmemInputError(f"q: expected a Q format like 'Q1.6' or 'UQ0.8', got {q!r}")
        signed = m.group(1) == ""
        ib, fb = int(m.group(2)), int(m.group(3))
        return cls(ib + fb + int(signed), fb, signed, **kw)

    @classmethod
    def for_range(cls, max_abs: float, width: int, **kw) -> "FxType":
        """Signed ``width``-bit type with the most fraction bits whose range covers ``±max_abs``.

        ``max_abs`` itself may land on ``max_value + lsb`` (a power of two saturates by one LSB).
        """
        if not (np.isfinite(max_abs) and max_abs > 0):
            raise SpecmemInputError(f"max_abs: must be a positive number, got {max_abs!r}")
        ib = int(np.ceil(np.log2(max_abs)))
        return cls(width, width - 1 - ib, True, **kw)

    def to_json(self) -> dict:
        d = asdict(self)
        d["q"] = self.qformat
        return d

    # -- conversions ---------------------------------------------------------------------
    def quantize(self, x, name: str = "x") -> tuple[np.ndarray, int]:
        """Float array -> (``int64`` raw, number of saturated (or wrapped) elements)."""
        try:
            v = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise SpecmemInputError(f"{name}: cannot convert to a float array ({exc})") from None
        if not np.all(np.isfinite(v)):
            raise SpecmemInputError(f"{name}: contains NaN or Inf")
        v = np.ldexp(v, self.frac)  # exact: a power-of-two scale
        if self.rounding == "rne":
            r = np.rint(v)
        elif self.rounding == "floor":
            r = np.floor(v)
        else:  # half_up; v - floor(v) is exact, v + 0.5 is not always
            f = np.floor(v)
            r = f + (v - f >= 0.5)
        lo, hi = float(self.min_raw), float(self.max_raw)
        over = (r > hi) | (r < lo)
        n = int(np.count_nonzero(over))
        if self.saturation == "saturate":
            r = np.clip(r, lo, hi)
        elif n:
            r = np.where(over, np.mod(r - lo, float(1 << self.width)) + lo, r)
        return r.astype(np.int64), n

    def to_float(self, raw) -> np.ndarray:
        """Raw integers -> float64 values (exact for raw below 2^53)."""
        return np.ldexp(np.asarray(raw).astype(np.float64), -self.frac)

    def saturate(self, raw) -> tuple[np.ndarray, int]:
        """Clip (or wrap) raw integers to the width; return (``int64`` raw, count out of range)."""
        raw = np.asarray(raw)
        lo, hi = self.min_raw, self.max_raw
        over = (raw > hi) | (raw < lo)
        n = int(np.count_nonzero(over))
        if n == 0:
            return raw.astype(np.int64), 0
        if self.saturation == "saturate":
            out = np.where(raw > hi, hi, np.where(raw < lo, lo, raw))
        else:
            out = ((raw - lo) & ((1 << self.width) - 1)) + lo
        return np.asarray(out).astype(np.int64), n

    def requantize(self, raw, from_frac) -> tuple[np.ndarray, int]:
        """Narrow ``raw`` (``from_frac`` fraction bits) to this type; see :func:`requantize`."""
        return requantize(raw, from_frac, self)


def msb(x) -> np.ndarray:
    """Index of the most significant set bit of positive integers (``floor(log2 x)``), exact.

    Zero maps to -1. Works on ``int64`` arrays (the leading-zero count of the hardware).
    """
    x = np.asarray(x)
    if x.dtype == object:
        return np.vectorize(lambda v: int(v).bit_length() - 1, otypes=[np.int64])(x)
    x = x.astype(np.int64)
    xp = np.maximum(x, 1)
    e = np.frexp(xp.astype(np.float64))[1].astype(np.int64) - 1
    # the float conversion may round up to the next power of two, never below the true one
    e = e - (np.left_shift(np.int64(1), e) > xp)
    return np.where(x > 0, e, -1)


def round_shift(raw, shift, rounding: str = "rne") -> np.ndarray:
    """``raw * 2**-shift`` rounded to an integer with ``rounding``; ``shift`` may be an array.

    Positive ``shift`` drops bits (rounding); zero or negative shifts left, exactly (the caller
    saturates). Works on ``int64`` arrays and on ``object`` arrays of Python integers.
    """
    if rounding not in ROUNDING:
        raise SpecmemInputError(f"rounding: must be one of {ROUNDING}, got {rounding!r}")
    raw = np.asarray(raw)
    obj = raw.dtype == object
    if not obj:
        raw = raw.astype(np.int64)
    s = np.asarray(shift)
    if s.ndim and s.size and (s.size == 1 or np.all(s == s.flat[0])):
        s = s.flat[0]  # one shift for all: the scalar path (same result, far fewer operations)
        s = np.asarray(s)
    if s.ndim == 0:
        s = int(s)
        if s <= 0:
            return raw << (-s) if s else raw.copy()
        if s > 62 and not obj:  # every int64 raw is below 2^62 in magnitude: only the sign is left
            return -(raw < 0).astype(np.int64) if rounding == "floor" else np.zeros_like(raw)
        q = raw >> s
        if rounding == "floor":
            return q
        rem = raw - (q << s)
        half = 1 << (s - 1)
        if rounding == "half_up":
            return q + (rem >= half)
        return q + ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    s = s.astype(np.int64)
    right = np.clip(s, 0, 62) if not obj else np.maximum(s, 0)
    left = np.maximum(-s, 0)
    if obj:
        right = right.astype(object)
        left = left.astype(object)
    q = raw >> right
    if rounding != "floor":
        rem = raw - (q << right)
        half = np.where(right > 0, (q * 0 + 1) << np.maximum(right - 1, 0), 0)
        if rounding == "half_up":
            up = rem >= half
        else:
            up = (rem > half) | ((rem == half) & ((q & 1) == 1))
        q = q + (up & (right > 0))
    if not obj:
        big = s > 62  # see the scalar case
        if np.any(big):
            q = np.where(big, -(raw < 0).astype(np.int64) if rounding == "floor" else 0, q)
    return q << left


def requantize(raw, from_frac, to: FxType) -> tuple[np.ndarray, int]:
    """Narrow raw integers with ``from_frac`` fraction bits to ``to``: round, then saturate.

    ``from_frac`` may be an array broadcast against ``raw`` (a per-vector block exponent).
    Returns (``int64`` raw in ``to``, number of elements that saturated or wrapped).
    """
    raw = np.asarray(raw)
    shift = np.asarray(from_frac) - to.frac
    if raw.dtype != object and np.any(shift < 0):
        # A left shift could leave int64. Only left-shifted elements are touched: saturating types
        # pre-clip to one step beyond the target range (same saturation outcome); wrapping types
        # keep only the low bits that survive the shift (same value modulo 2**width).
        raw = raw.astype(np.int64)
        left = np.maximum(-shift, 0)
        if to.saturation == "wrap":
            keep = np.maximum(to.width - left, 0)
            narrowed = raw & ((np.int64(1) << keep) - 1)
        else:
            lo = (np.int64(to.min_raw) >> left) - 1
            hi = (np.int64(to.max_raw) >> left) + 1
            narrowed = np.clip(raw, lo, hi)
        raw = np.where(shift < 0, narrowed, raw)
    return to.saturate(round_shift(raw, shift, to.rounding))


def mul_round_shift(a, b, shift, rounding: str = "rne") -> np.ndarray:
    """``round(a * b * 2**-shift)`` exactly, in ``int64`` when the product fits, else Python ints.

    ``a`` and ``b`` broadcast; the result is ``int64`` when it fits (callers saturate next) and
    an ``object`` array otherwise.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    amax = int(np.max(np.abs(a))) if a.size else 0
    bmax = int(np.max(np.abs(b))) if b.size else 0
    if amax.bit_length() + bmax.bit_length() <= 62:
        return round_shift(a.astype(np.int64) * b.astype(np.int64), shift, rounding)
    p = a.astype(object) * b.astype(object)
    out = round_shift(p, shift, rounding)
    omax = int(np.max(np.abs(out))) if out.size else 0
    return out.astype(np.int64) if omax.bit_length() <= 62 else out
