# amaranth: UnusedElaboratable=no
"""The RTL scalar unit against ``specmem.golden.fixed.scalar_unit`` bit for bit: reciprocal
and rsqrt over random and edge-case inputs, run-time ``frac`` of both signs and parities."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.scalar_unit import ScalarUnit as Golden
from specmem.rtl.scalar_unit import ScalarOp, ScalarUnit
from specmem.rtl.testing import run_simulation, stream_sink, stream_source


def _inputs(rng, in_width, n):
    x = rng.integers(0, 1 << in_width, size=n, dtype=np.int64)
    small = rng.integers(1, 64, size=n // 4, dtype=np.int64)
    edges = np.array([0, 1, 2, 3, (1 << in_width) - 1, 1 << (in_width - 1), (1 << (in_width - 1)) - 1], dtype=np.int64)
    pow2 = np.int64(1) << rng.integers(0, in_width, size=n // 8)
    return np.concatenate([edges, x, small, pow2])


ARRANGEMENTS = {"compact": {}, "compact-lod-tree": {"lod_tree": True},
                "compact-split-mul": {"lod_tree": True, "split_mul": True}, "pipelined": {"pipelined": True},
                "pipelined-seed-register": {"pipelined": True, "seed_register": True}}


@pytest.mark.parametrize("cfg,in_width", [
    pytest.param(Golden(out_bits=8, newton_steps=1), 20, id="int8-preset-1-step"),
    pytest.param(Golden(out_bits=16, newton_steps=2), 34, id="int16-preset-2-steps"),
    pytest.param(Golden(out_bits=12, seed_bits=4, newton_steps=0, work_bits=16), 12, id="seed-only"),
    pytest.param(Golden(out_bits=24, seed_bits=5, newton_steps=3, work_bits=28), 40, id="wide-3-steps"),
])
@pytest.mark.parametrize("arrangement", list(ARRANGEMENTS))
def test_scalar_unit_matches_golden(cfg, in_width, arrangement):
    rng = np.random.default_rng(in_width * 7 + cfg.newton_steps)
    x = _inputs(rng, in_width, 120)
    frac = rng.integers(-20, 40, size=x.size)
    op = rng.integers(0, 2, size=x.size)
    dut = ScalarUnit(cfg, in_width, frac_width=7, **ARRANGEMENTS[arrangement])
    reqs = [{"x": int(a), "frac": int(f), "op": ScalarOp(int(o))} for a, f, o in zip(x, frac, op)]
    out = []
    run_simulation(
        dut,
        stream_source(dut.i, reqs, seed=1, idle=0.3),
        stream_sink(dut.o, len(reqs), out, seed=2, stall=0.3, convert=lambda p: (int(p.m), int(p.f))),
        deadline_cycles=(40 + 2 * max(dut.latency.values())) * len(reqs),
    )
    got_m = np.array([o[0] for o in out])
    got_f = np.array([o[1] for o in out])
    for o, fn in ((0, cfg.recip), (1, cfg.rsqrt)):
        sel = op == o
        want = [fn(np.array([a]), int(f)) for a, f in zip(x[sel], frac[sel])]
        np.testing.assert_array_equal(got_m[sel], [int(w.m[0]) for w in want], err_msg=f"m, op {o}")
        np.testing.assert_array_equal(got_f[sel], [int(w.f[0]) for w in want], err_msg=f"f, op {o}")


@pytest.mark.parametrize("arrangement", ["pipelined", "compact-split-mul"])
def test_unit_at_the_widest_newton_operands(arrangement):
    """The pipelined unit's multiplier and the split multiply's pieces are as wide as the model's
    operand bound (33 bits at N = 30, not the registers' 37 x 38): mantissas at both ends of every
    seed interval, where the traced operands peak, through both functions and both rsqrt
    parities, equal the model."""
    cfg = Golden(out_bits=18, newton_steps=2)
    W, b = cfg.work_bits, cfg.seed_bits
    ends = [(1 << (W - 1)) + (i << (W - 1 - b)) + e for i in range(1 << b) for e in (0, (1 << (W - 1 - b)) - 1)]
    x = np.array(ends, dtype=np.int64)
    dut = ScalarUnit(cfg, W, frac_width=7, **ARRANGEMENTS[arrangement])
    assert dut.mul_width == cfg.newton_operand_width() == 33
    reqs = [{"x": int(a), "frac": f, "op": op} for a in x for f in (4, 5) for op in ScalarOp]
    out = []
    run_simulation(dut, stream_source(dut.i, reqs, seed=1),
                   stream_sink(dut.o, len(reqs), out, seed=2, convert=lambda p: (int(p.m), int(p.f))),
                   deadline_cycles=(10 + max(dut.latency.values())) * len(reqs))
    for r, got in zip(reqs, out):
        fn = cfg.recip if r["op"] == ScalarOp.RECIP else cfg.rsqrt
        w = fn(np.array([r["x"]]), r["frac"])
        assert got == (int(w.m[0]), int(w.f[0])), r


@pytest.mark.parametrize("arrangement,steps", [("compact", 1), ("compact-split-mul", 1), ("compact-split-mul", 2),
                                               ("pipelined", 1), ("pipelined", 2), ("pipelined-seed-register", 1)])
def test_scalar_unit_latency(arrangement, steps):
    cfg = Golden(out_bits=8, newton_steps=steps)
    dut = ScalarUnit(cfg, 16, **ARRANGEMENTS[arrangement])
    seen = {}

    async def tb(ctx):
        for op in (ScalarOp.RECIP, ScalarOp.RSQRT):
            ctx.set(dut.i.payload, {"x": 1000, "frac": 3, "op": op})
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)
            n = 1  # the accepting cycle
            while not ctx.get(dut.o.valid):
                await ctx.tick()
                n += 1
            seen[op] = n
            ctx.set(dut.o.ready, 1)
            await ctx.tick()
            ctx.set(dut.o.ready, 0)

    run_simulation(dut, tb, deadline_cycles=200)
    assert seen == dut.latency


@pytest.mark.parametrize("kwargs,match", [
    ({"config": None, "in_width": 16}, "config: expected"),
    ({"config": Golden(), "in_width": 0}, "in_width: must be"),
    ({"config": Golden(), "in_width": 63}, "in_width: the golden scalar unit"),
    ({"config": Golden(), "in_width": 16, "seed_register": True}, "seed_register: only the pipelined"),
    ({"config": Golden(), "in_width": 16, "pipelined": True, "split_mul": True}, "split_mul: only the compact"),
])
def test_scalar_unit_rejects_bad_generics(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScalarUnit(**kwargs)
