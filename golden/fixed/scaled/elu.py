"""ELU+1 of a block vector (the scaled formats' feature map), bit-exact.

``x = raw 2^-frac`` per element. ``x > 0``: ``x + 1``, exact. ``x <= 0``: ``exp(x) =
2^-(n + phi)`` with ``n + phi = -x log2(e)`` (one constant multiply; ``n`` integer, ``phi`` in
[0, 1)); ``2^-phi`` by linear interpolation between two entries of the same ROM as the legacy
unit (``datapath.exp2_table``: ``2^L + 1`` entries, index the top ``L`` bits of ``phi``,
weight the next ``Ib`` bits, floor), and ``n`` becomes the element's exponent: nothing
underflows before the final rounding. The per-element results go through
:func:`~.bfp.align_block` into an ``M``-bit block vector (the feature's own scale).

The hardware's input window (``rtl/elu.BlockElu1``): a vector whose exponent ``frac`` exceeds
:data:`FRAC_HI` (its largest element below ``2^(M - 1 - FRAC_HI)``, e.g. ``2^-23`` at ``M`` = 8) is
first rounded to ``FRAC_HI`` fraction bits, so the positive branch's ``x + 1`` fits
``FRAC_HI + 2`` bits; that changes no feature of any measured stream (the ``+ 1`` dwarfs the
dropped bits: only exact rounding ties could move). Above the window's other end
(``max |x| >= 2^`` :data:`TOP_MAX`, where ``exp(x)``'s exponent passes the hardware's exponent
range) the model computes on and the hardware raises its error flag.
"""

from __future__ import annotations

import numpy as np

from ..datapath import LOG2E, exp2_table
from ..fxtype import round_shift
from .bfp import align_block

__all__ = ["elu1_block", "FRAC_HI", "TOP_MAX"]

#: the largest input exponent the features take as given; larger ones are rounded to it first
FRAC_HI = 30
#: the hardware's inputs stay below ``2^TOP_MAX`` in magnitude (``frac >= M - 1 - TOP_MAX``), so
#: ``-x log2(e) < 740``: ``exp(x)``'s exponent fits 12-bit exponent arithmetic
TOP_MAX = 9


def elu1_block(raw, frac, M: int, lut_bits: int, rounding: str = "rne"):
    """ELU+1 of block vectors ``(raw [..., d], frac [...])`` -> ``(raw, frac)``, ``M`` bits."""
    raw = np.asarray(raw, dtype=np.int64)
    f = np.broadcast_to(np.asarray(frac, dtype=np.int64)[..., None], raw.shape)
    if np.any(f > FRAC_HI):  # the hardware's input window: tiny vectors rounded to FRAC_HI first
        raw = np.where(f > FRAC_HI, round_shift(raw, np.maximum(f - FRAC_HI, 0), rounding), raw)
        f = np.minimum(f, FRAC_HI)
    C = M + 4  # log2(e) constant and ROM word fraction bits
    Ib = M  # interpolation weight bits
    log2e = int(np.rint(np.ldexp(LOG2E, C)))
    rom = exp2_table(lut_bits, C)
    pos = raw > 0
    F = np.maximum(f, 0)
    pos_raw = (raw << (F - f)) + (np.int64(1) << F)
    t = np.where(pos, 0, -raw)
    p = t * log2e  # frac f + C
    Fp = f + C
    lift = np.maximum(lut_bits + Ib - Fp, 0)  # so that the index and weight shifts below are right shifts
    p = p << lift
    Fp = Fp + lift
    n = p >> Fp
    phi = p - (n << Fp)
    idx = phi >> (Fp - lut_bits)
    wgt = (phi - (idx << (Fp - lut_bits))) >> (Fp - lut_bits - Ib)  # Ib-bit weight in [0, 1), floor
    lo, hi = rom[idx], rom[idx + 1]
    val = lo - round_shift((lo - hi) * wgt, Ib, "floor")
    out_raw = np.where(pos, pos_raw, val)
    out_frac = np.where(pos, F, C + n)
    return align_block([(out_raw, out_frac)], M, rounding)
