# amaranth: UnusedElaboratable=no
"""The pipelined block normaliser against ``golden/fixed/scaled/bfp.block``, bit for bit."""

import itertools

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import block
from specmem.rtl.block_norm import BlockNormaliser
from specmem.rtl.testing import run_simulation


def _run(dut, vecs, fracs, stall=0.0, seed=0):
    """Feed one vector per cycle (random stalls hold the whole pipeline); collect the outputs."""
    rng = np.random.default_rng(seed)
    got = []

    async def tb(ctx):
        i = 0
        while len(got) < len(vecs):
            en = rng.random() >= stall
            ctx.set(dut.en, int(en))
            if i < len(vecs):
                ctx.set(dut.i_valid, 1)
                for lane, val in enumerate(vecs[i]):
                    ctx.set(dut.i_data[lane], int(val))
                ctx.set(dut.i_frac, int(fracs[i]))
            else:
                ctx.set(dut.i_valid, 0)
            await ctx.tick()
            if en:
                i += 1
                if ctx.get(dut.o_valid):
                    got.append(([ctx.get(dut.o_data[lane]) for lane in range(dut.n)], ctx.get(dut.o_frac)))

    run_simulation(dut, tb, deadline_cycles=50 * len(vecs) + 200)
    return got


def _check(got, vecs, fracs, M):
    """Bit-exact against the golden block(); returns how many vectors needed the carry shift."""
    v = np.array(vecs, dtype=np.int64)
    want, wf = block(v, np.array(fracs, dtype=np.int64), M)
    mx = np.max(np.abs(v), axis=-1)
    plain = np.where(mx > 0, np.floor(np.log2(np.maximum(mx, 1))).astype(np.int64) - (M - 2), 0)
    assert len(got) == len(vecs)
    np.testing.assert_array_equal(np.array([g[0] for g in got]), want)
    np.testing.assert_array_equal(np.array([g[1] for g in got]), wf)
    return int(np.sum(np.array(fracs) - wf != plain))


def test_exhaustive_two_lanes_five_bits():
    W, M = 5, 3
    vals = range(-(1 << (W - 1)), 1 << (W - 1))
    vecs = [list(p) for p in itertools.product(vals, vals)]
    fracs = [(i % 7) - 3 for i in range(len(vecs))]
    assert _check(_run(BlockNormaliser(2, W, M, frac_width=8), vecs, fracs), vecs, fracs, M) > 0


@pytest.mark.parametrize("n,W,M", [(8, 24, 8), (5, 16, 8), (16, 30, 18), (1, 12, 6)])
def test_random_vectors_with_stalls(n, W, M):
    rng = np.random.default_rng(n * 100 + W)
    vecs = []
    for i in range(150):
        scale = int(rng.integers(0, W))
        v = rng.integers(-(1 << scale), 1 << scale, n, endpoint=False)
        if i % 10 == 0:
            v[:] = 0  # all-zero vectors keep their exponent
        if i % 10 == 1:
            v[int(rng.integers(n))] = -(1 << (W - 1))  # the most negative input
        if i % 10 == 2:  # ties and carries: the largest element rounds up to 2^(M-1)
            top = max(scale, M)
            v[0] = ((1 << (M - 1)) - 1) * (1 << max(top - M + 1, 0)) + (1 << max(top - M, 0))
            v = np.clip(v, -(1 << (W - 1)), (1 << (W - 1)) - 1)
        vecs.append([int(x) for x in v])
    fracs = [int(x) for x in rng.integers(-50, 50, len(vecs))]
    dut = BlockNormaliser(n, W, M, frac_width=10)
    assert _check(_run(dut, vecs, fracs, stall=0.3, seed=n), vecs, fracs, M) > 0  # carries were exercised


def test_latency_is_declared():
    dut = BlockNormaliser(16, 20, 8)
    assert dut.latency == 1 + 2 + 3  # inputs, two 4:1 OR levels, msb, rounding, select
    vecs = [[1] * 16, [3] * 16]
    cyc = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for t in range(12):
            ctx.set(dut.i_valid, int(t == 0))
            for lane in range(16):
                ctx.set(dut.i_data[lane], vecs[0][lane])
            await ctx.tick()
            if ctx.get(dut.o_valid):
                cyc.append(t + 1)

    run_simulation(dut, tb, deadline_cycles=100)
    assert cyc == [dut.latency]


def test_bad_parameters():
    with pytest.raises(ValueError, match="^rounding:"):
        BlockNormaliser(4, 8, 4, rounding="floor")
    with pytest.raises(ValueError, match="^M:"):
        BlockNormaliser(4, 8, 2)


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    dut = BlockNormaliser(8, 24, 8)
    path = tmp_path / "block_norm.v"
    path.write_text(verilog.convert(dut, name="block_norm"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
