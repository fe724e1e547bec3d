"""Hardware helpers shared by the attention-rule cores (``rtl/vla.py``, ``rtl/baselines.py``):
the per-token datapath primitives of the fixed-point golden model in hardware, and the interval
arithmetic that sizes the run-time shifts from the formats.

Each ``*_hw`` function is a golden primitive (``ScalarUnit.normalize``, the shift of
``Datapath.block``), bit for bit, as combinational logic in a module
``m``; the cores register around them. The ``iv*`` helpers and :func:`su_f_range` compute the
ranges of run-time exponents at construction, so every intermediate gets a width in which no
shift or sum wraps.
"""

from __future__ import annotations

import numpy as np
from amaranth.hdl import Cat, Mux, signed, unsigned

from .fixed import (abs_value, materialise, msb_index, round_shift, round_shift_var, select_code,
                    shift_code_table)

__all__ = ["normalize_hw", "block_shift_hw", "abs_max_hw", "BLOCK_SHIFT_STAGES", "NORMALIZE_STAGES", "iv", "iv_neg",
           "iv_scale", "iv_union", "su_f_range", "bit_len"]


# ----------------------------------------------------------------------------------------------
# datapath primitives (each is the golden primitive of the same name, in hardware)


def block_shift_hw(m, mx, width: int, rounding: str, ew: int, name: str, reg=None, codes=()):
    """Shift of ``Datapath.block`` for a vector whose largest magnitude is ``mx`` (unsigned):
    the top bit of ``mx`` lands just below the sign bit, one more if rounding carries into it.
    ``reg``: a register maker (``pipeline.free_register``) for :data:`BLOCK_SHIFT_STAGES`
    stages (leading one; the shift's code, from tables on it; the shifters; the rounding add),
    the operand held. ``codes`` (with ``reg``): ``(value_width, max_left)`` pairs; each gets the
    :class:`~specmem.rtl.fixed.ShiftCode` of the result for those shifters, from tables on the
    leading one for both carry outcomes, picked by the carry (a mux where a decode would be);
    returns ``(shift, [code, ...])`` then."""
    top = msb_index(m, mx, name=f"{name}_msb", tree=True)
    if reg is None:
        if codes:
            raise ValueError("block_shift_hw: codes need reg (the tables take a stage)")
        sh0 = materialise(m, Mux(mx == 0, 0, top - (width - 2)), f"{name}_sh0", signed(ew))
        rounded = round_shift_var(m, mx, sh0, rounding, max_left=width, name=f"{name}_mxr")
        return materialise(m, sh0 + (rounded >= (1 << (width - 1))), f"{name}_sh", signed(ew))
    off = width - 2
    zero = reg(mx == 0, 1, f"{name}_zero_r")                                               # 1
    top, mx = reg(top, top.shape(), f"{name}_msb_r"), reg(mx, mx.shape(), f"{name}_mx1")
    sh0 = materialise(m, Mux(zero, 0, top - off), f"{name}_sh0", signed(ew))
    # the rounding of mx itself: a zero mx rounds to zero at any shift, so no zero case
    code = shift_code_table(m, top, lambda t: t - off, len(mx), max_left=width, name=f"{name}_sc", reg=reg)  # 2
    sh0, mx = reg(sh0, sh0.shape(), f"{name}_sh0_r"), reg(mx, mx.shape(), f"{name}_mx2")
    rounded = round_shift_var(m, mx, code, rounding, max_left=width, name=f"{name}_mxr", reg=reg)  # 3
    rounded, sh0 = reg(rounded, rounded.shape(), f"{name}_mxr_r"), reg(sh0, sh0.shape(), f"{name}_sh0_r2")  # 4
    carry = materialise(m, rounded[width - 1:] != 0, f"{name}_carry")
    sh = materialise(m, sh0 + carry, f"{name}_sh", signed(ew))
    if not codes:
        return sh
    zt = Cat(top, zero)
    out = []
    for j, (vw, ml) in enumerate(codes):
        c0, c1 = (shift_code_table(m, zt, lambda v, c=c: 0 if v >> len(top) else v - off + c, vw, max_left=ml,
                                   name=f"{name}_c{j}_{c}", reg=reg) for c in (0, 1))        # 2
        out.append(select_code(carry, c1, c0))
    return sh, out


#: register stages of :func:`block_shift_hw` and :func:`normalize_hw` with ``reg``
BLOCK_SHIFT_STAGES = 4
NORMALIZE_STAGES = 5


def normalize_hw(m, x, frac, p_bits: int, ew: int, name: str, reg=None, f_offset=None):
    """``ScalarUnit.normalize``: a signed integer as a floating scalar ``(m, f)``, the magnitude
    rounded (rne) to a ``P``-bit mantissa in ``[2^(P-2), 2^(P-1))``; zero gives ``(0, 0)``.
    Shared because every rule turns an exact dot product (``kfᵀqf``, ``knᵀqn``, ``wᵀkh``) into a
    scalar multiplier this way. ``reg``: :data:`NORMALIZE_STAGES` register stages (magnitude;
    leading one; shift; shifters; rounding add), ``x`` and ``frac`` held. ``f_offset`` (with
    ``reg``; a constant): ``f + f_offset`` is returned instead of ``f``, its two candidates
    (``frac - sh + f_offset`` and one less) registered beside the shifters, so the exponent is a
    select after the rounding add, not two carry chains."""
    if f_offset is not None and reg is None:
        raise ValueError("normalize_hw: f_offset needs reg (its candidates take the shifters' stages)")
    if reg is not None:
        x = materialise(m, x, f"{name}_x")
    mag = abs_value(m, x, name=f"{name}_abs")
    if reg is not None:
        mag = reg(mag, mag.shape(), f"{name}_abs_r")
    top = msb_index(m, mag, name=f"{name}_msb", tree=True)
    zero = materialise(m, mag == 0, f"{name}_zero")
    if reg is not None:
        top, zero = reg(top, top.shape(), f"{name}_msb_r"), reg(zero, 1, f"{name}_zero_r")
    sh = materialise(m, Mux(zero, 0, top - (p_bits - 2)), f"{name}_sh", signed(ew))
    code = None
    if reg is not None:  # the shift decoded in its own stage from tables on the leading one (a
        # zero magnitude rounds to zero at any shift)
        code = shift_code_table(m, top, lambda t: t - (p_bits - 2), len(mag), max_left=p_bits - 2, name=f"{name}_sc",
                                reg=reg)
        sh = reg(sh, sh.shape(), f"{name}_sh_r")
    r = round_shift_var(m, mag, sh if code is None else code, "rne", max_left=p_bits - 2, name=f"{name}_r", reg=reg)
    if reg is not None:
        r = reg(r, r.shape(), f"{name}_r_r")
    over = materialise(m, r[p_bits - 1:] != 0, f"{name}_over")  # r >= 2^(P-1): an OR, not a compare
    mm = materialise(m, Mux(over, r >> 1, r), f"{name}_mm", unsigned(p_bits))
    mant = materialise(m, Mux(x < 0, -mm, mm), f"{name}_m", signed(p_bits))
    if f_offset is not None:
        fb = reg(frac - sh + f_offset, signed(ew + 2), f"{name}_fb")
        fb1 = reg(frac - sh + (f_offset - 1), signed(ew + 2), f"{name}_fb1")
        return mant, materialise(m, Mux(zero, f_offset, Mux(over, fb1, fb)), f"{name}_f", signed(ew))
    f = materialise(m, Mux(zero, 0, frac - sh - over), f"{name}_f", signed(ew))
    return mant, f


def abs_max_hw(m, hi, lo, name: str):
    """``max(hi, -lo)``: the largest magnitude of values whose signed extremes are ``hi >= lo``
    (the golden ``max(|x|)``), as unsigned. Picked by the sign of ``hi + lo``: one carry chain
    beside ``-lo``'s, not the negation and then a compare in series (at ``hi = -lo`` both picks
    are equal)."""
    w = max(len(hi), len(lo)) + 1
    s = materialise(m, hi + lo, f"{name}_hl", signed(w))
    return materialise(m, Mux(s[-1], -lo, hi), name, unsigned(w))


def _round_shift_const(m, value, shift: int, rounding: str, name: str):
    """``fixed.round_shift``, with the one-bit ``rne`` case written without its constant
    comparison (``rem > half`` is always false for one dropped bit; Verilator flags it CMPCONST)."""
    if shift == 1 and rounding == "rne":
        value = materialise(m, value, f"{name}_in")
        q = materialise(m, value >> 1, f"{name}_q")
        return materialise(m, q + (value[0] & q[0]), name)
    return round_shift(m, value, shift, rounding, name=name)


# ----------------------------------------------------------------------------------------------
# range analysis of the run-time exponents (intervals are ``(lo, hi)`` tuples of integers)


def iv(*terms):
    """Sum of intervals ``(lo, hi)`` and integers: the range of a sum of run-time exponents."""
    lo = hi = 0
    for t in terms:
        if isinstance(t, tuple):
            lo, hi = lo + t[0], hi + t[1]
        else:
            lo, hi = lo + t, hi + t
    return lo, hi


def iv_neg(a):
    """The interval of ``-x`` for ``x`` in ``a`` (an exponent subtracted)."""
    return -a[1], -a[0]


def iv_scale(a, c):
    """The interval of ``c x`` for ``x`` in ``a`` (an exponent counted ``c`` times, e.g. ``w wᵀ``)."""
    return (a[0] * c, a[1] * c) if c >= 0 else (a[1] * c, a[0] * c)


def iv_union(*ivs):
    """The smallest interval holding every one of ``ivs`` (a register that holds either value)."""
    return min(i[0] for i in ivs), max(i[1] for i in ivs)


def su_f_range(fn, frac: int, lo: int, hi: int) -> tuple[int, int]:
    """Range of the exponent ``f`` a golden scalar-unit function gives over inputs ``[lo, hi]``
    (``f`` depends on the input's leading-one position, its parity and a rounding carry: every
    octave is probed at both ends and widened by one). Sizes the shifts that use ``f``."""
    xs = {max(lo, 1), hi}
    for b in range(max(lo, 1).bit_length() - 1, hi.bit_length()):
        for x in (1 << b, (1 << (b + 1)) - 1):
            if lo <= x <= hi:
                xs.add(x)
    arr = np.array(sorted(xs), dtype=object if hi >= (1 << 62) else np.int64)
    f = [int(v) for v in np.asarray(fn(arr, frac).f).ravel()]
    if lo == 0:
        f.append(0)
    return min(f) - 1, max(f) + 1


def bit_len(n: int) -> int:
    """Bits of the unsigned integer ``n`` (at least 1): the width of a register holding ``0..n``."""
    return max(1, int(n).bit_length())
