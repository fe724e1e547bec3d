"""``rtl/saturate.py`` against the golden model's ``FxType.saturate``: every lane bit-exact, the
running overflow count equal to the golden count, under stalls; exhaustive for a small format."""

import random

import numpy as np
import pytest
from amaranth.back import verilog

from specmem.golden.fixed.fxtype import FxType
from specmem.rtl.saturate import SaturatingNarrow
from specmem.rtl.testing import run_stalled_pipeline


def _simulate(dut, beats, *, stall=0.0, seed=0):
    """Feed ``beats`` (lists of k ints, with a valid bit each); return outputs in order and the
    count once the last beat has had time to reach it."""
    counts = []

    async def count(ctx):
        for _ in range(dut.count_latency + 1):
            await ctx.tick()
        counts.append(ctx.get(dut.count))

    outs = run_stalled_pipeline(dut, beats, stall=stall, seed=seed, after=count)
    return outs, counts[-1]


def _golden(beats, out_width):
    fx = FxType(out_width, 0, saturation="saturate")
    outs, n = [], 0
    for v, x in beats:
        raw, c = fx.saturate(np.array(x, dtype=np.int64))
        if v:
            outs.append([int(r) for r in raw])
            n += c
    return outs, n


@pytest.mark.parametrize("k, W, N, stall", [(1, 6, 4, 0.0), (5, 12, 8, 0.3), (8, 24, 18, 0.2), (17, 20, 9, 0.0)])
def test_random_streams(k, W, N, stall):
    rng = random.Random(k * 100 + W)
    lo, hi = -(1 << (W - 1)), (1 << (W - 1)) - 1
    beats = []
    for _ in range(300):
        # half the values near the output range (both sides of each limit), half anywhere
        x = [rng.choice([rng.randint(lo, hi), rng.randint(-(1 << N), 1 << N)]) for _ in range(k)]
        beats.append((int(rng.random() < 0.8), x))
    dut = SaturatingNarrow(k, W, N)
    outs, count = _simulate(dut, beats, stall=stall, seed=k)
    g_outs, g_count = _golden(beats, N)
    assert outs == g_outs
    assert count == g_count and g_count > 0


def test_exhaustive_small_format():
    """Every 7-bit input narrowed to 4 bits, two lanes."""
    W, N = 7, 4
    vals = list(range(-(1 << (W - 1)), 1 << (W - 1)))
    beats = [(1, [a, vals[-1 - j]]) for j, a in enumerate(vals)]
    outs, count = _simulate(SaturatingNarrow(2, W, N), beats)
    g_outs, g_count = _golden(beats, N)
    assert outs == g_outs and count == g_count == 2 * (len(vals) - 16)


@pytest.mark.parametrize("kw, match", [
    (dict(k=0, in_width=8, out_width=4), "^k:"),
    (dict(k=2, in_width=1, out_width=1), "^in_width:"),
    (dict(k=2, in_width=8, out_width=9), "^out_width: must be <="),
])
def test_bad_generics(kw, match):
    with pytest.raises(ValueError, match=match):
        SaturatingNarrow(**kw)


def test_no_comparator_in_the_saturation_path():
    """The narrowing compares no magnitudes: the generated Verilog has no < or > on the lanes."""
    text = verilog.convert(SaturatingNarrow(4, 24, 18), name="satn")
    assert " < " not in text and " > " not in text and " >= " not in text


def test_verilog_lints_clean(tmp_path):
    from specmem.rtl.generate import lint

    path = tmp_path / "satn.v"
    path.write_text(verilog.convert(SaturatingNarrow(6, 24, 18), name="satn"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
