"""The block shift and the normalisation of ``rtl/vector_ops.py`` in both arrangements, one cycle
of combinational logic and free-running register stages (``reg=``, operands held), against the
golden formulas (``Datapath.block``'s shift, ``ScalarUnit.normalize``) and each other."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned

from specmem.golden.fixed.fxtype import msb, round_shift
from specmem.rtl.pipeline import free_register
from specmem.rtl.testing import run_simulation
from specmem.rtl.vector_ops import BLOCK_SHIFT_STAGES, NORMALIZE_STAGES, abs_max_hw, block_shift_hw, normalize_hw


def _edge_values(width, rng, n):
    """Zero, every power of two and the values just under them (rounding carries), random words."""
    vals = [0, 1, (1 << width) - 1] + [1 << i for i in range(width)] + [(1 << i) - 1 for i in range(2, width + 1)]
    vals += [int(v) for v in rng.integers(0, 1 << width, size=n)]
    return vals


def _run(m, x, outs, vals, hold, signed_in=False):
    got = []

    async def tb(ctx):
        for v in vals:
            ctx.set(x, v)
            for _ in range(hold):
                await ctx.tick()
            got.append([ctx.get(o) for o in outs])

    run_simulation(m, tb, deadline_cycles=(hold + 1) * len(vals) + 10)
    return np.array(got)


@pytest.mark.parametrize("rounding", ["rne", "floor", "half_up"])
@pytest.mark.parametrize("in_width,width", [(20, 8), (61, 18), (6, 8)])
def test_block_shift_staged_equals_golden(rounding, in_width, width):
    m = Module()
    mx = Signal(unsigned(in_width))
    comb = block_shift_hw(m, mx, width, rounding, 8, "c")
    staged = block_shift_hw(m, mx, width, rounding, 8, "s", reg=free_register(m))
    vals = _edge_values(in_width, np.random.default_rng(in_width + width), 120)
    got = _run(m, mx, [comb, staged], vals, BLOCK_SHIFT_STAGES)
    a = np.array(vals, dtype=object)
    top = np.array([max(v.bit_length() - 1, 0) for v in vals], dtype=object)
    sh = np.where(a > 0, top - (width - 2), 0)
    carry = np.array([round_shift(np.array([v], dtype=object), np.array([s]), rounding)[0] >= (1 << (width - 1))
                      for v, s in zip(vals, sh)])
    want = (sh + carry).astype(np.int64)
    np.testing.assert_array_equal(got[:, 0], want)
    np.testing.assert_array_equal(got[:, 1], want)


@pytest.mark.parametrize("rounding", ["rne", "half_up"])
@pytest.mark.parametrize("in_width,width,value_width,max_left", [(20, 8, 12, 6), (6, 8, 9, 6)])
def test_block_shift_codes_equal_the_plain_shift(rounding, in_width, width, value_width, max_left):
    """The codes ``block_shift_hw(codes=...)`` returns (tables on the leading one for both carry
    outcomes, picked by the carry) shift values as the returned shift itself does, for every
    edge magnitude (zero, powers of two, the carries) and edge and random values."""
    from specmem.rtl.fixed import round_shift_var
    m = Module()
    mx, y = Signal(unsigned(in_width)), Signal(signed(value_width))
    sh, (code,) = block_shift_hw(m, mx, width, rounding, 8, "s", reg=free_register(m),
                                 codes=[(value_width, max_left)])
    plain = round_shift_var(m, y, sh, rounding, max_left=max_left, name="p")
    coded = round_shift_var(m, y, code, rounding, max_left=max_left, name="c")
    rng = np.random.default_rng(in_width + value_width)
    vals = _edge_values(in_width, rng, 60)
    lim = 1 << (value_width - 1)
    ys = [0, 1, -1, lim - 1, -lim, 3, -3] + [int(v) for v in rng.integers(-lim, lim, size=12)]
    got, shifts = [], []

    async def tb(ctx):
        for v in vals:
            ctx.set(mx, v)
            for _ in range(BLOCK_SHIFT_STAGES):
                await ctx.tick()
            shifts.append(ctx.get(sh))
            for w in ys:
                ctx.set(y, w)
                got.append((ctx.get(plain), ctx.get(coded)))

    run_simulation(m, tb, deadline_cycles=(BLOCK_SHIFT_STAGES + 1) * len(vals) + 10)
    got = np.array(got)
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    assert len(set(shifts)) > 5 and min(shifts) < 0  # left shifts met
    assert max(shifts) > 0 or in_width < width  # and right shifts, where mx is wider than the block


def test_block_shift_codes_need_registers():
    with pytest.raises(ValueError, match="codes need reg"):
        block_shift_hw(Module(), Signal(unsigned(8)), 8, "rne", 8, "c", codes=[(8, 6)])


@pytest.mark.parametrize("in_width,p_bits", [(24, 10), (40, 16), (5, 10)])
def test_normalize_staged_equals_golden(in_width, p_bits):
    m = Module()
    x = Signal(signed(in_width))
    cm, cf = normalize_hw(m, x, 7, p_bits, 8, "c")
    sm, sf = normalize_hw(m, x, 7, p_bits, 8, "s", reg=free_register(m))
    om, of = normalize_hw(m, x, 7, p_bits, 8, "o", reg=free_register(m), f_offset=-5)  # f - 5, precomputed
    rng = np.random.default_rng(in_width + p_bits)
    mags = _edge_values(in_width - 1, rng, 120)
    vals = mags + [-v for v in mags if v] + [-(1 << (in_width - 1))]
    got = _run(m, x, [cm, cf, sm, sf, om, of], vals, NORMALIZE_STAGES)
    a = np.array(vals, dtype=np.int64)
    mag = np.abs(a)
    sh = np.where(mag > 0, msb(np.maximum(mag, 1)) - (p_bits - 2), 0)
    r = round_shift(mag, sh, "rne")
    over = r >= (1 << (p_bits - 1))
    mm = np.where(over, r >> 1, r)
    want_m = np.where(a < 0, -mm, mm)
    want_f = np.where(mag > 0, 7 - sh - over, 0)
    np.testing.assert_array_equal(got[:, 0], want_m)
    np.testing.assert_array_equal(got[:, 1], want_f)
    np.testing.assert_array_equal(got[:, 2], want_m)
    np.testing.assert_array_equal(got[:, 3], want_f)
    np.testing.assert_array_equal(got[:, 4], want_m)
    np.testing.assert_array_equal(got[:, 5], want_f - 5)   # zero included: its f is 0, so -5


def test_normalize_offset_needs_registers():
    with pytest.raises(ValueError, match="f_offset needs reg"):
        normalize_hw(Module(), Signal(signed(8)), 7, 6, 8, "c", f_offset=-5)


@pytest.mark.parametrize("width", [4, 5])
def test_abs_max_equals_max_of_hi_and_minus_lo(width):
    """Every pair of signed extremes lo <= hi of ``width`` bits (the most negative included,
    whose magnitude needs the extra bit)."""
    m = Module()
    x = Signal(unsigned(2 * width))
    hi, lo = x[width:].as_signed(), x[:width].as_signed()
    out = abs_max_hw(m, hi, lo, "am")
    assert len(out) == width + 1 and not out.shape().signed
    out = free_register(m)(out, out.shape(), "am_r")   # as the core uses it: registered
    r = range(-(1 << (width - 1)), 1 << (width - 1))
    pairs = [(h, lo_) for h in r for lo_ in r if lo_ <= h]
    vals = [((h & ((1 << width) - 1)) << width) | (lo_ & ((1 << width) - 1)) for h, lo_ in pairs]
    got = _run(m, x, [out], vals, 1)
    np.testing.assert_array_equal(got[:, 0], [max(h, -lo_) for h, lo_ in pairs])
