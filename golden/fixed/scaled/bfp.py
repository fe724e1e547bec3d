"""Block floating point: the number primitives of the scaled formats (bit-exact integers).

A *block vector* is ``M``-bit signed mantissas ``raw`` with one power-of-two scale per vector:
value ``raw * 2**-frac`` with ``frac`` an integer per leading index (per token, per row). It
is what a real INT8 datapath feeds its multipliers: the vector's largest element fills the
word (its top bit just below the sign bit), so a unit vector with elements near 1/sqrt(d)
keeps all ``M - 1`` bits instead of the ~4 a fixed Q0.7 point leaves it.

A *row-BFP matrix* (:class:`RowBFP`) stores ``Ws``-bit mantissas with one exponent per row.
Its write chooses each row's new exponent *before* the row is written, from an upper bound
of the row's new magnitude built from quantities the hardware has in registers: the row's
stored maximum (kept as its msb, computed while the row was last written), the update's
per-row factor and the msb of the update vector's maximum. No row buffer is needed; the
price is at most three unused top bits of mantissa, under one on average (tests/fixed/test_scaled.py).

Rounding points (all round-half-to-even unless the preset says otherwise):

* :func:`quantize_block`: host float vector -> block vector (one rounding);
* :func:`block`: exact integers with one binary point per vector -> ``M`` bits (one rounding);
* :func:`align_block`: a sum of terms whose binary points differ per element (e.g. per-row
  dot products of a row-BFP matrix) -> ``M`` bits: every term is first rounded to a common
  point ``GUARD`` bits below the largest term's top bit, summed exactly, then rounded once
  more by :func:`block`. ``GUARD = 16`` keeps the first rounding ~2^-16 of the largest term.
* :meth:`RowBFP.write`: every term rounded to the row's new binary point, summed, then one
  saturation (counted; the bound makes it unreachable except by rounding at the very top).
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError

from ..fxtype import msb, round_shift

__all__ = ["GUARD", "quantize_block", "block", "align_block", "top_exp", "RowBFP", "to_float", "msb_bound_exp",
           "product_bound_exp", "stream_outputs"]

GUARD = 16
_NEG = -(1 << 40)  # the "exponent" of a zero term: below everything


def to_float(raw, frac) -> np.ndarray:
    """Block vector(s) to float64: ``raw * 2**-frac`` (``frac`` per leading index)."""
    raw = np.asarray(raw, dtype=np.float64)
    frac = np.asarray(frac)
    return np.ldexp(raw, -frac.reshape(frac.shape + (1,) * (raw.ndim - frac.ndim)))


def _bc(frac, raw):
    frac = np.asarray(frac, dtype=np.int64)
    return frac.reshape(frac.shape + (1,) * (np.ndim(raw) - frac.ndim))


def quantize_block(x, M: int, name: str = "x", rounding: str = "rne"):
    """Float ``[..., d]`` -> ``(raw, frac)``: ``M``-bit mantissas, one power-of-two scale per
    vector from its max (an all-zero vector gets ``frac = 0``). Never saturates."""
    v = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise SpecmemInputError(f"{name}: contains NaN or Inf")
    mx = np.max(np.abs(v), axis=-1)
    e = np.frexp(np.where(mx > 0, mx, 1.0))[1]  # mx in [2^(e-1), 2^e)
    frac = np.where(mx > 0, (M - 1) - e, 0).astype(np.int64)
    for _ in range(2):
        s = np.ldexp(v, _bc(frac, v))
        if rounding == "rne":
            r = np.rint(s)
        elif rounding == "floor":
            r = np.floor(s)
        else:
            f = np.floor(s)
            r = f + (s - f >= 0.5)
        over = np.max(np.abs(r), axis=-1) >= (1 << (M - 1))
        if not np.any(over):
            break
        frac = frac - over
    return r.astype(np.int64), frac


def block(raw, frac, M: int, rounding: str = "rne"):
    """Exact integers (one binary point ``frac`` per leading index) -> ``M``-bit block vector:
    shift so the largest magnitude's top bit is just below the sign bit (one more if rounding
    would carry into it). One rounding; never saturates; zero stays zero with its ``frac``."""
    raw = np.asarray(raw)
    frac = np.asarray(frac, dtype=np.int64)
    mx = np.max(np.abs(raw), axis=-1)
    top = msb(mx)
    sh = np.where(mx > 0, top - (M - 2), 0)
    carry = round_shift(mx, sh, rounding) >= (1 << (M - 1))
    sh = sh + carry
    out = round_shift(raw, sh[..., None], rounding)
    if out.dtype == object:
        out = out.astype(np.int64)
    return out.astype(np.int64), (np.broadcast_to(frac, sh.shape) - sh).astype(np.int64)


def top_exp(raw, frac) -> np.ndarray:
    """Per element, ``E`` with ``|raw 2^-frac| < 2^E`` (``msb + 1 - frac``); very small for zeros."""
    raw = np.asarray(raw)
    m = msb(np.abs(raw))
    fr = np.broadcast_to(_bc(frac, raw), raw.shape)
    return np.where(m >= 0, m + 1 - fr, _NEG)


def align_block(terms, M: int, rounding: str = "rne", guard: int = GUARD):
    """``sum(raw_t 2^-frac_t)`` over terms whose binary points may differ per element, as an
    ``M``-bit block vector: round each term to a common point ``guard`` bits below the top of
    the largest term, add exactly, then :func:`block`. ``terms``: ``(raw, frac)`` pairs, ``raw``
    ``[..., d]``, ``frac`` broadcastable to ``raw`` (scalar, per vector ``[...]`` or per element)."""
    tops = []
    for raw, frac in terms:
        tops.append(np.max(top_exp(raw, frac), axis=-1))
    T = np.max(np.stack(tops), axis=0)
    zero = T <= _NEG // 2
    Fc = np.where(zero, 0, (M - 2 + guard) - T).astype(np.int64)
    acc = 0
    for raw, frac in terms:
        fr = np.broadcast_to(_bc(frac, raw), np.shape(raw))
        acc = acc + round_shift(np.asarray(raw, dtype=np.int64), fr - Fc[..., None], rounding)
    return block(acc, Fc, M, rounding)


class RowBFP:
    """A ``[B, d, n]`` matrix stored as ``Ws``-bit mantissas with one exponent per row.

    ``mant`` ``[B, d, n]`` (int64), ``frac`` ``[B, d]``. ``sat`` counts saturated elements
    (the write's bound makes them unreachable except by the top rounding step).
    """

    def __init__(self, B: int, d: int, n: int, Ws: int, rounding: str = "rne"):
        self.Ws, self.rounding = Ws, rounding
        self.mant = np.zeros((B, d, n), dtype=np.int64)
        self.frac = np.zeros((B, d), dtype=np.int64)
        self.sat = 0

    def value(self, frac_offset=0) -> np.ndarray:
        """The matrix in float64, times ``2^-frac_offset`` (per matrix ``[B]``): a scale folded
        into the exponents before they become floats (Gated DeltaNet's ``gamma`` takes ``Ŝ``
        beyond float64 while ``gamma Ŝ`` is not)."""
        off = np.asarray(frac_offset, dtype=np.int64)
        return to_float(self.mant, self.frac + (off[:, None] if off.ndim else off))

    def frob2(self, frac_offset=0) -> np.ndarray:
        """Squared Frobenius norm per matrix ``[B]`` (float64, from the mantissas: no dense copy),
        of the matrix times ``2^-frac_offset`` as in :meth:`value`."""
        off = np.asarray(frac_offset, dtype=np.int64)
        rows = np.einsum("bij,bij->bi", self.mant, self.mant).astype(np.float64)  # exact: < 2^(2 Ws + log2 n)
        return np.einsum("bi,bi->b", rows, np.ldexp(1.0, -2 * (self.frac + (off[:, None] if off.ndim else off))))

    def row_exp(self) -> np.ndarray:
        """Per row, ``E`` with every ``|element| < 2^E`` (from the row's stored msb)."""
        return np.max(top_exp(self.mant, self.frac), axis=-1)

    def read(self, M: int):
        """Rows into ``M``-bit multiplier operands: ``(raw [B, d, n], frac [B, d])``."""
        return block(self.mant, self.frac, M, self.rounding)

    def write(self, terms, row_bounds):
        """Replace every row by ``sum(terms)``. ``terms``: ``(raw [B, d, n], frac [B, d])``,
        each the exact product feeding the write port; ``row_bounds``: one ``E [B, d]`` per
        term with ``|term| < 2^E`` on every element of the row (from register msbs). The new
        exponent is ``Ws - 2 - max(E)``; rows whose bound is empty keep their exponent."""
        E = np.max(np.stack(row_bounds), axis=0)
        zero = E <= _NEG // 2
        fnew = np.where(zero, self.frac, (self.Ws - 2) - E).astype(np.int64)
        acc = 0
        for raw, frac in terms:
            acc = acc + round_shift(np.asarray(raw, dtype=np.int64), _bc(frac, raw) - fnew[..., None], self.rounding)
        lim = (1 << (self.Ws - 1)) - 1
        over = (acc > lim) | (acc < -lim - 1)
        self.sat += int(np.count_nonzero(over))
        self.mant = np.clip(acc, -lim - 1, lim).astype(np.int64)
        self.frac = fnew


def msb_bound_exp(raw_max, frac) -> np.ndarray:
    """``E`` with ``|x| < 2^E`` for ``|x| <= raw_max 2^-frac`` (per leading index)."""
    m = msb(np.abs(np.asarray(raw_max)))
    return np.where(m >= 0, m + 1 - np.asarray(frac), _NEG)


def product_bound_exp(a_raw_max, a_frac, b_raw_max, b_frac) -> np.ndarray:
    """``E`` with ``|a b| < 2^E``, from the two factors' msbs only (what a leading-zero counter
    and an adder give): ``msb(a) + msb(b) + 2 - frac_a - frac_b``."""
    ma = msb(np.abs(np.asarray(a_raw_max)))
    mb = msb(np.abs(np.asarray(b_raw_max)))
    return np.where((ma >= 0) & (mb >= 0), ma + mb + 2 - np.asarray(a_frac) - np.asarray(b_frac), _NEG)


def stream_outputs(batch: tuple, o_raw, o_frac, S: RowBFP, scale=None) -> dict:
    """The outputs every scaled model returns, reshaped to the leading ``batch`` dims: ``o``,
    ``o_raw``, ``o_frac`` and the final state ``s`` (times ``scale = (m, f)``, ``m 2^-f`` per
    matrix, when given: the exponent joins the rows' before anything becomes a float), ``s_raw``,
    ``s_frac``."""
    T, d = o_raw.shape[-2:]
    s = S.value() if scale is None else S.value(scale[1]) * np.asarray(scale[0], dtype=np.float64)[:, None, None]
    return {
        "o": to_float(o_raw, o_frac).reshape(batch + (T, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "o_frac": o_frac.reshape(batch + (T,)),
        "s": s.reshape(batch + (d, d)),
        "s_raw": S.mant.reshape(batch + (d, d)),
        "s_frac": S.frac.reshape(batch + (d,)),
    }
