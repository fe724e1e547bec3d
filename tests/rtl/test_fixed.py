"""Hardware round-and-saturate against ``specmem.golden.fixed.fxtype`` (the shared spec)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned

from specmem.rtl.fixed import requantize, round_shift
from specmem.rtl.testing import run_simulation

fxtype = pytest.importorskip("specmem.golden.fixed.fxtype")


@pytest.mark.parametrize("rounding", ["rne", "floor", "half_up"])
@pytest.mark.parametrize("saturation", ["saturate", "wrap"])
@pytest.mark.parametrize("in_width,in_signed,from_frac,to_width,to_frac,to_signed", [
    (20, True, 12, 8, 6, True),      # ordinary narrowing
    (16, True, 4, 8, 6, True),       # left shift, then saturate
    (10, True, 14, 8, 0, True),      # shift wider than the input: only the sign survives
    (18, False, 10, 8, 8, False),    # unsigned
    (18, True, 10, 8, 8, False),     # signed into unsigned: negatives saturate to 0
])
def test_requantize_matches_golden(rounding, saturation, in_width, in_signed, from_frac, to_width, to_frac, to_signed):
    fx = fxtype.FxType(to_width, to_frac, to_signed, rounding, saturation)
    m = Module()
    x = Signal(signed(in_width) if in_signed else unsigned(in_width))
    raw, over = requantize(m, x, from_frac, fx)
    y = Signal(raw.shape())
    o = Signal()
    m.d.comb += [y.eq(raw), o.eq(over)]
    rng = np.random.default_rng(hash((rounding, saturation, in_width, from_frac)) % 2**32)
    lo, hi = (-(1 << (in_width - 1)), 1 << (in_width - 1)) if in_signed else (0, 1 << in_width)
    vals = np.concatenate([rng.integers(lo, hi, size=300), [lo, hi - 1, 0, 1, -1 if in_signed else 2]])
    shift = from_frac - to_frac
    if shift > 0:  # exact ties, where the rounding modes differ
        vals = np.concatenate([vals, (rng.integers(lo >> shift, hi >> shift, size=50) << shift) + (1 << (shift - 1))])
        vals = np.clip(vals, lo, hi - 1)
    want, _ = fxtype.requantize(vals, from_frac, fx)
    got = []

    async def tb(ctx):
        for v in vals:
            ctx.set(x, int(v))
            got.append((ctx.get(y), ctx.get(o)))

    run_simulation(m, tb, deadline_cycles=10, clock=False)
    np.testing.assert_array_equal(np.array([g[0] for g in got]), want)
    lo_t, hi_t = fx.min_raw, fx.max_raw
    exact = fxtype.round_shift(vals, shift, rounding)
    np.testing.assert_array_equal(np.array([g[1] for g in got]).astype(bool), (exact < lo_t) | (exact > hi_t))


def test_round_shift_rne_ties():
    m = Module()
    x = Signal(signed(8))
    y = Signal(signed(8))
    m.d.comb += y.eq(round_shift(m, x, 2, "rne"))
    got = {}

    async def tb(ctx):
        for v in (2, 6, -2, -6, 10, 3, -3):
            ctx.set(x, v)
            got[v] = ctx.get(y)

    run_simulation(m, tb, deadline_cycles=10, clock=False)
    assert got == {2: 0, 6: 2, -2: 0, -6: -2, 10: 2, 3: 1, -3: -1}


@pytest.mark.parametrize("rounding", ["rne", "floor", "half_up"])
@pytest.mark.parametrize("in_width,in_signed", [(12, True), (10, False)])
def test_requantize_var_matches_golden(rounding, in_width, in_signed):
    """Run-time shifts from far left to far right (past the input width), round then saturate."""
    from specmem.rtl.fixed import requantize_var
    fx = fxtype.FxType(8, 5, True, rounding, "saturate")
    m = Module()
    x = Signal(signed(in_width) if in_signed else unsigned(in_width))
    fr = Signal(signed(7))
    raw, over = requantize_var(m, x, fr, fx)
    y = Signal(raw.shape())
    o = Signal()
    m.d.comb += [y.eq(raw), o.eq(over)]
    rng = np.random.default_rng(17 + in_width)
    lo, hi = (-(1 << (in_width - 1)), 1 << (in_width - 1)) if in_signed else (0, 1 << in_width)
    cases = [(int(v), int(f)) for v, f in zip(rng.integers(lo, hi, 600), rng.integers(-12, 30, 600))]
    cases += [(v, f) for v in (lo, hi - 1, 0, 1, 3, -3 if in_signed else 5) for f in range(-12, 30)]
    got = []

    async def tb(ctx):
        for v, f in cases:
            ctx.set(x, v)
            ctx.set(fr, f)
            got.append((ctx.get(y), ctx.get(o)))

    run_simulation(m, tb, deadline_cycles=10, clock=False)
    vals = np.array([c[0] for c in cases])
    fracs = np.array([c[1] for c in cases])
    # round then saturate, as Datapath.narrow does (fxtype.requantize with an array from_frac of
    # mixed sign pre-clips the right-shifted elements too, so it is not used as the oracle here)
    exact = fxtype.round_shift(vals, fracs - fx.frac, rounding)
    want, _ = fx.saturate(exact)
    np.testing.assert_array_equal(np.array([g[0] for g in got]), want)
    np.testing.assert_array_equal(np.array([g[1] for g in got]).astype(bool), (exact < fx.min_raw) | (exact > fx.max_raw))


def _comb_values(m, x, outs, vals):
    """``outs`` read for each value set on ``x`` (a combinational module, no clock): one row per value."""
    got = []

    async def tb(ctx):
        for v in vals:
            ctx.set(x, v)
            got.append([ctx.get(o) for o in outs])

    run_simulation(m, tb, deadline_cycles=10, clock=False)
    return np.array(got, dtype=object)


def test_msb_index():
    from specmem.rtl.fixed import msb_index
    m = Module()
    x = Signal(20)
    y = Signal(5)
    m.d.comb += y.eq(msb_index(m, x))
    vals = [1, 2, 3, 255, 256, (1 << 20) - 1, 1 << 19, 12345]
    got = _comb_values(m, x, [y], vals)
    np.testing.assert_array_equal(got[:, 0].astype(np.int64), fxtype.msb(np.array(vals)))


@pytest.mark.parametrize("width", [1, 2, 3, 5, 8, 11])
def test_msb_index_tree_equals_chain_exhaustively(width):
    """The leading-one tree against the priority chain and ``fxtype.msb`` over every input."""
    from specmem.rtl.fixed import msb_index
    m = Module()
    x = Signal(width)
    yc, yt = Signal(range(max(width, 2))), Signal(range(max(width, 2)))
    m.d.comb += [yc.eq(msb_index(m, x, "c")), yt.eq(msb_index(m, x, "t", tree=True))]
    vals = list(range(1 << width))
    got = _comb_values(m, x, [yc, yt], vals).astype(np.int64)
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    np.testing.assert_array_equal(got[1:, 1], fxtype.msb(np.array(vals[1:])))
    assert got[0, 1] == 0  # zero: index 0, as the chain


def test_msb_index_tree_wide():
    """61 bits (VLA's alpha bound): every single bit, every bit under a higher one, random words."""
    from specmem.rtl.fixed import msb_index
    m = Module()
    x = Signal(61)
    y = Signal(6)
    m.d.comb += y.eq(msb_index(m, x, tree=True))
    rng = np.random.default_rng(61)
    vals = [1 << i for i in range(61)] + [(1 << i) | ((1 << i) - 1) for i in range(61)]
    vals += [int(rng.integers(1, 1 << 61)) >> int(rng.integers(0, 61)) for _ in range(300)]
    vals = [v for v in vals if v]
    assert _comb_values(m, x, [y], vals)[:, 0].tolist() == [v.bit_length() - 1 for v in vals]


@pytest.mark.parametrize("rounding", ["rne", "floor", "half_up"])
@pytest.mark.parametrize("in_signed,shift_signed", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("capture", ["registered", "held"])
def test_round_shift_var_with_shift_code_exhaustive(rounding, in_signed, shift_signed, capture):
    """A shift decoded once (``shift_code``, its fields registered, or captured into
    ``ShiftCode.held`` registers) gives what the plain run-time shift gives, for every value of a
    6-bit input and every shift from far left to far right, and both equal
    ``fxtype.round_shift``."""
    from specmem.rtl.pipeline import free_register
    from specmem.rtl.fixed import ShiftCode, round_shift_var, shift_code
    W, ML = 6, 5
    m = Module()
    x = Signal(signed(W) if in_signed else unsigned(W))
    sh = Signal(signed(5) if shift_signed else unsigned(4))
    plain = round_shift_var(m, x, sh, rounding, max_left=ML, name="p")
    if capture == "registered":
        code = shift_code(m, sh, W, max_left=ML, name="c", reg=free_register(m))
    else:
        code = ShiftCode.held(sh.shape(), W, max_left=ML, name="h")
        m.d.sync += code.eq(shift_code(m, sh, W, max_left=ML, name="c"))
    decoded = round_shift_var(m, x, code, rounding, max_left=ML, name="d")
    lo, hi = (-(1 << (W - 1)), 1 << (W - 1)) if in_signed else (0, 1 << W)
    shifts = range(-16, 16) if shift_signed else range(16)
    cases = [(v, s) for s in shifts for v in range(lo, hi)]
    got = []

    async def tb(ctx):
        for v, s in cases:
            ctx.set(sh, s)
            await ctx.tick()          # the code's registers take the held shift
            ctx.set(x, v)
            got.append((ctx.get(plain), ctx.get(decoded)))

    run_simulation(m, tb, deadline_cycles=2 * len(cases) + 10)
    got = np.array(got)
    np.testing.assert_array_equal(got[:, 1], got[:, 0])
    vals, shv = np.array([c[0] for c in cases]), np.array([c[1] for c in cases])
    want = fxtype.round_shift(vals, np.maximum(shv, -ML), rounding)
    np.testing.assert_array_equal(got[:, 0], want)


def test_shift_code_rejects_a_mismatched_use():
    from specmem.rtl.fixed import round_shift_var, shift_code
    m = Module()
    x, sh = Signal(signed(8)), Signal(signed(5))
    with pytest.raises(ValueError, match="a code for 6-bit values"):
        round_shift_var(m, x, shift_code(m, sh, 6, max_left=3), "rne", max_left=3)
    with pytest.raises(ValueError, match="max_left=3, used with max_left=4"):
        round_shift_var(m, x, shift_code(m, sh, 8, max_left=3), "rne", max_left=4)


def test_shift_code_capture_rejects_a_mismatched_code():
    from specmem.rtl.fixed import ShiftCode, shift_code
    m = Module()
    sh = Signal(signed(5))
    held = ShiftCode.held(signed(5), 8, max_left=3, name="h")
    assert len(held.eq(shift_code(m, sh, 8, max_left=3))) == 5
    with pytest.raises(ValueError, match="a code for 6-bit values"):
        held.eq(shift_code(m, sh, 6, max_left=3))


@pytest.mark.parametrize("rounding", ["rne", "floor", "half_up"])
@pytest.mark.parametrize("signed_shift", [True, False])
def test_shift_code_table_exhaustive(rounding, signed_shift):
    """A code read from tables on a small index (``shift_code_table``: the shift ``shift_of(v)``,
    here ``v - 6`` or ``2 v``, clamps included) shifts every 6-bit value as ``fxtype.round_shift``
    does with that shift, for every index value."""
    from specmem.rtl.fixed import round_shift_var, shift_code_table
    W, ML = 6, 5
    shift_of = (lambda v: v - 6) if signed_shift else (lambda v: 2 * v)
    m = Module()
    x, idx = Signal(signed(W)), Signal(unsigned(4))
    code = shift_code_table(m, idx, shift_of, W, max_left=ML, signed_shift=signed_shift, name="t")
    out = round_shift_var(m, x, code, rounding, max_left=ML, name="d")
    cases = [(v, i) for i in range(16) for v in range(-(1 << (W - 1)), 1 << (W - 1))]
    got = []

    async def tb(ctx):
        for v, i in cases:
            ctx.set(idx, i)
            ctx.set(x, v)
            got.append(ctx.get(out))

    run_simulation(m, tb, clock=False)
    vals, shv = np.array([c[0] for c in cases]), np.array([shift_of(c[1]) for c in cases])
    np.testing.assert_array_equal(np.array(got), fxtype.round_shift(vals, np.maximum(shv, -ML), rounding))


def test_shift_code_table_rejects_a_negative_unsigned_shift():
    from specmem.rtl.fixed import shift_code_table
    with pytest.raises(ValueError, match="negative, for an unsigned shift"):
        shift_code_table(Module(), Signal(unsigned(3)), lambda v: v - 1, 6, max_left=3, signed_shift=False)
