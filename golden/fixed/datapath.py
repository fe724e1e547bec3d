"""The datapath primitives every fixed-point model is written in (and the RTL implements).

A :class:`Datapath` holds one :class:`~.formats.FixedFormat`, counts saturations per tensor
and records the range each tensor saw before it was narrowed (hls4ml's ``trace``). Its
operations are the only places where rounding happens:

* ``quantize``: host float -> input format (round, saturate);
* ``narrow``: accumulator -> tensor format (round, saturate);
* ``write``: ``state + round(product)`` then saturate (one rounding, one saturation);
* ``scale``: vector times a floating scalar from the scalar unit (exact product, one
  rounding into the target, saturate);
* ``block``: block-floating normalisation of a vector (exact shift choice, one rounding,
  never saturates);
* ``elu1``: the hardware ELU+1 (see :func:`Datapath.elu1`).

Dot products are exact ``int64`` sums of exact products (the accumulator widths in the
format table are checked to fit).
"""

from __future__ import annotations

import numpy as np

from .formats import FixedFormat
from .fxtype import FxType, msb, mul_round_shift, round_shift
from .scalar_unit import Scalar

__all__ = ["Datapath", "exp2_table", "exact_dot"]

LOG2E = 1.4426950408889634


def exp2_table(lut_bits: int, word_frac: int) -> np.ndarray:
    """ROM of ``2^(-j / 2^lut_bits)`` for ``j = 0 .. 2^lut_bits`` (one extra entry for the
    interpolation), rounded to ``word_frac`` fraction bits."""
    j = np.arange((1 << lut_bits) + 1, dtype=np.float64)
    return np.rint(np.ldexp(np.exp2(-j / (1 << lut_bits)), word_frac)).astype(np.int64)


def exact_dot(a, b) -> np.ndarray:
    """``sum(a * b, axis=-1)`` exactly: ``int64`` when it fits, Python integers otherwise."""
    a, b = np.asarray(a), np.asarray(b)
    n = a.shape[-1]
    bits = int(np.max(np.abs(a))).bit_length() + int(np.max(np.abs(b))).bit_length() + int(n).bit_length()
    if bits <= 62:
        return np.einsum("...i,...i->...", a.astype(np.int64), b.astype(np.int64))
    return np.sum(a.astype(object) * b.astype(object), axis=-1)


class Datapath:
    """Formats, saturation counters and range trace of one fixed-point run."""

    def __init__(self, fmt: FixedFormat, trace: bool = True):
        self.fmt = fmt
        self.su = fmt.scalar_unit
        self.rounding = fmt.preset.rounding
        self.M = fmt.preset.mul_bits
        self.sat = {name: 0 for name in fmt.tensors}
        self.trace = trace
        self.ranges: dict[str, list[float]] = {}
        # elu1 constants: log2(e) with M+4 fraction bits, a 2^L+1-entry ROM of M+4-bit words
        self.exp_const_frac = self.M + 4
        self.log2e = int(np.rint(np.ldexp(LOG2E, self.exp_const_frac)))
        self.exp_word_frac = self.M + 4
        self.exp_rom = exp2_table(fmt.preset.exp_lut_bits, self.exp_word_frac)
        self.exp_interp_bits = self.M
        fmt.constants.update({
            "log2e": {"raw": self.log2e, "frac": self.exp_const_frac},
            "exp2_rom": {"entries": int(self.exp_rom.size), "frac": self.exp_word_frac,
                         "lut_bits": fmt.preset.exp_lut_bits, "interp_bits": self.exp_interp_bits},
        })

    # -- bookkeeping ------------------------------------------------------------------------
    def _observe(self, name: str, raw, frac) -> None:
        if not self.trace:
            return
        raw = np.asarray(raw)
        if raw.size == 0:
            return
        frac = np.asarray(frac)
        if frac.ndim == 0:
            lo, hi = float(np.min(raw)), float(np.max(raw))
            lo, hi = np.ldexp(lo, -int(frac)), np.ldexp(hi, -int(frac))
        else:  # one frac per leading (batch) index
            r = raw.reshape(frac.shape + (-1,))
            lo = float(np.min(np.ldexp(np.min(r, axis=-1).astype(np.float64), -frac)))
            hi = float(np.max(np.ldexp(np.max(r, axis=-1).astype(np.float64), -frac)))
        cur = self.ranges.get(name)
        if cur is None:
            self.ranges[name] = [lo, hi]
        else:
            cur[0], cur[1] = min(cur[0], lo), max(cur[1], hi)

    def _count(self, name: str, n: int) -> None:
        self.sat[name] = self.sat.get(name, 0) + int(n)

    # -- narrowing --------------------------------------------------------------------------
    def quantize(self, name: str, x: np.ndarray) -> np.ndarray:
        fx = self.fmt[name]
        raw, n = fx.quantize(x, name=name)
        self._count(name, n)
        if self.trace:
            self.ranges[name] = [float(np.min(x)), float(np.max(x))]
        return raw

    def narrow(self, name: str, raw, frac) -> np.ndarray:
        """Round ``raw`` (``frac`` fraction bits, scalar or per leading index) into ``name``'s format."""
        fx = self.fmt[name]
        frac = self._bcast(frac, raw)
        self._observe(name, raw, frac)
        out, n = fx.saturate(round_shift(raw, frac - fx.frac, fx.rounding))
        self._count(name, n)
        return out

    def clip(self, name: str, raw, frac) -> np.ndarray:
        """Saturate ``raw`` (already at the tensor's binary point, or at the block's ``frac``) to
        ``name``'s width: the check on an intermediate that is not rounded."""
        fx = self.fmt[name]
        self._observe(name, raw, self._bcast(frac, raw) if np.ndim(frac) else frac)
        out, n = fx.saturate(raw)
        self._count(name, n)
        return out

    def write(self, name: str, state: np.ndarray, *terms, add=None) -> np.ndarray:
        """``state + sum(round(prod -> state frac)) (+ add)``, then one saturation: the write port.

        ``terms`` are ``(prod, prod_frac)`` pairs, each rounded on its own; ``add`` is an exact
        raw addend already at the state's binary point (VLA's ``eta I``)."""
        fx = self.fmt[name]
        new = state
        for prod, prod_frac in terms:
            new = new + round_shift(prod, self._bcast(prod_frac, prod) - fx.frac, fx.rounding)
        if add is not None:
            new = new + add
        self._observe(name, new, fx.frac)
        out, n = fx.saturate(new)
        self._count(name, n)
        return out

    def scale(self, name: str, raw, frac, s: Scalar) -> np.ndarray:
        """``raw 2^-frac`` times the floating scalar ``s`` (one per leading index), into ``name``."""
        fx = self.fmt[name]
        fr = np.asarray(frac)
        f = np.asarray(s.f)[..., None] + (fr[..., None] if fr.ndim else fr)
        p = mul_round_shift(raw, np.asarray(s.m)[..., None], f - fx.frac, fx.rounding)
        self._observe(name, p, fx.frac)
        out, n = fx.saturate(p)
        self._count(name, n)
        return out

    def block(self, name: str, raw, frac, width: int | None = None):
        """Block-floating normalisation over the last axis: shift so the largest magnitude has its
        top bit just below the sign bit (one more if rounding would carry into it).

        Returns ``(raw_n, frac_n)`` with ``frac_n`` per leading index; an all-zero vector keeps
        ``frac_n = frac`` and stays zero. Never saturates.
        """
        w = self.fmt[name].width if width is None else width
        raw = np.asarray(raw)
        frac = np.asarray(frac)
        self._observe(name, raw, self._bcast(frac, raw))
        mx = np.max(np.abs(raw), axis=-1)
        top = msb(mx)
        sh = np.where(mx > 0, top - (w - 2), 0)
        carry = round_shift(mx, sh, self.rounding) >= (1 << (w - 1))
        sh = sh + carry
        out = round_shift(raw, sh[..., None], self.rounding)
        if out.dtype == object:
            out = out.astype(np.int64)
        return out, frac - sh

    @staticmethod
    def _bcast(frac, raw):
        frac = np.asarray(frac)
        return frac if frac.ndim == 0 else frac.reshape(frac.shape + (1,) * (np.ndim(raw) - frac.ndim))

    # -- scalar unit ------------------------------------------------------------------------
    def recip(self, x, frac) -> Scalar:
        return self.su.recip(x, frac)

    def rsqrt(self, x, frac) -> Scalar:
        return self.su.rsqrt(x, frac)

    @staticmethod
    def eps_raw(eps: float, frac) -> np.ndarray:
        """``eps`` at ``frac`` fraction bits, at least one LSB (the clamp ``max(x, eps)``)."""
        return np.maximum(1, np.rint(np.ldexp(eps, np.asarray(frac))).astype(np.int64))

    # -- elu1 -------------------------------------------------------------------------------
    def elu1(self, name: str, raw, in_fx: FxType) -> np.ndarray:
        """ELU+1 of an input tensor into ``name``'s format.

        ``x > 0``: ``x + 1`` (exact add, one narrowing). ``x <= 0``: ``exp(x) = 2^-(n+phi)`` with
        ``n + phi = -x log2(e)`` (one constant multiply, ``n`` integer, ``phi`` in [0, 1));
        ``2^-phi`` by linear interpolation between two ROM entries (``2^L + 1`` entries,
        index = top ``L`` bits of ``phi``, weight = the next ``M`` bits, floor), then a right
        shift by ``n`` with one rounding into the output format. Inputs below about
        ``-(frac_out + 2) ln 2`` round to zero.
        """
        fx = self.fmt[name]
        raw = np.asarray(raw, dtype=np.int64)
        fi = in_fx.frac
        pos = raw > 0
        out_pos = round_shift(raw + (1 << fi), fi - fx.frac, fx.rounding)
        t = np.where(pos, 0, -raw)  # >= 0, fi fraction bits
        p = t * self.log2e  # fi + C fraction bits
        F = fi + self.exp_const_frac
        n = p >> F
        phi = p - (n << F)
        L, Ib = self.fmt.preset.exp_lut_bits, self.exp_interp_bits
        idx = round_shift(phi, F - L, "floor")
        wgt = round_shift(phi - (idx << (F - L)), F - L - Ib, "floor")  # Ib-bit weight in [0, 1)
        lo, hi = self.exp_rom[idx], self.exp_rom[idx + 1]
        val = lo - round_shift((lo - hi) * wgt, Ib, "floor")  # 2^-phi, exp_word_frac bits
        out_neg = round_shift(val, np.minimum(n + self.exp_word_frac - fx.frac, 62), fx.rounding)
        out = np.where(pos, out_pos, out_neg)
        self._observe(name, out, fx.frac)
        out, cnt = fx.saturate(out)
        self._count(name, cnt)
        return out
