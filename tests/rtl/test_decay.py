"""DecayScale against the scaled Gated DeltaNet model's scalar steps (``su.mul``, ``su.recip``), bit
for bit, with ``gamma``'s absolute exponent kept only in the test."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.formats import PRESETS
from specmem.golden.fixed.scaled.deltanet import scalar_in
from specmem.golden.fixed.scalar_unit import Scalar
from specmem.rtl.decay import DecayScale
from specmem.rtl.testing import run_simulation


def _expected(su, g):
    """Per token: gamma's mantissa, the change of its exponent, recip's mantissa and its exponent
    plus gamma's (the frame the hardware keeps); from the model's own operations."""
    Gm, Gf = scalar_in(su, g)
    one = su.const(1.0)
    gm, gf = one.m, one.f
    rows = []
    for t in range(len(g)):
        nxt = su.mul(Scalar(np.int64(gm), np.int64(gf)), Scalar(np.int64(Gm[t]), np.int64(Gf[t])))
        rg = su.recip(np.int64(nxt.m), np.int64(nxt.f))
        rows.append((int(nxt.m), int(nxt.f - gf), int(rg.m), int(rg.f + nxt.f)))
        gm, gf = int(nxt.m), int(nxt.f)
    return Gm, Gf, rows


@pytest.mark.parametrize("preset", ["int8", "int18"])
def test_gamma_delta_and_reciprocal_bit_exact(preset):
    su = PRESETS[preset].scalar_unit()
    rng = np.random.default_rng(3)
    # decays near 1, tiny ones (large exponent steps), exactly 1, and powers of two
    g = np.concatenate([rng.uniform(0.5, 1.0, 40), np.ldexp(rng.uniform(0.5, 1, 10), -rng.integers(1, 25, 10)),
                        np.ones(5), np.ldexp(1.0, -rng.integers(0, 8, 5))])
    rng.shuffle(g)
    Gm, Gf, want = _expected(su, g)
    dut = DecayScale(su)
    got = []
    pick = random.Random(1)

    async def tb(ctx):
        for t in range(len(g)):
            while pick.random() < 0.3:
                await ctx.tick()
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.i_g, int(Gm[t]))
            ctx.set(dut.i_fg, int(Gf[t]))
            await ctx.tick().until(dut.i_ready)
            ctx.set(dut.i_valid, 0)
            n = 0
            while True:
                _, _, ov, gm, dl, rg, rgf = await ctx.tick().sample(dut.o_valid, dut.o_gam, dut.o_delta, dut.o_rg,
                                                                    dut.o_rgf)
                n += 1
                if ov:
                    got.append((int(gm), int(dl), int(rg), int(rgf)))
                    assert n == dut.latency, (n, dut.latency)
                    break

    run_simulation(dut, tb, deadline_cycles=len(g) * (dut.latency + 20))
    assert got == want
    assert len({r[1] for r in want}) > 5  # the exponent steps vary, not one constant


def test_heads_keep_a_gamma_each():
    """Three heads, tokens in a random head order: each head's outputs are its own decays' model's
    (a shared gamma, or one updated for the wrong head, gives another sequence)."""
    su = PRESETS["int8"].scalar_unit()
    rng = np.random.default_rng(11)
    H, T = 3, 12
    order = rng.permutation(np.repeat(np.arange(H), T))
    g = [np.concatenate([rng.uniform(0.5, 1.0, 10), np.ldexp(rng.uniform(0.5, 1, 2), -rng.integers(1, 25, 2))])
         for _ in range(H)]
    expect = [_expected(su, g[h]) for h in range(H)]
    dut = DecayScale(su, heads=H)
    got = [[] for _ in range(H)]

    async def tb(ctx):
        seen = [0] * H
        for h in order:
            Gm, Gf, _ = expect[h]
            t = seen[h]
            seen[h] += 1
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.i_head, int(h))
            ctx.set(dut.i_g, int(Gm[t]))
            ctx.set(dut.i_fg, int(Gf[t]))
            await ctx.tick().until(dut.i_ready)
            ctx.set(dut.i_valid, 0)
            ctx.set(dut.i_head, int((h + 1) % H))  # the head is taken with the token, not later
            n = 0
            while True:
                _, _, ov, gm, dl, rg, rgf = await ctx.tick().sample(dut.o_valid, dut.o_gam, dut.o_delta, dut.o_rg,
                                                                    dut.o_rgf)
                n += 1
                if ov:
                    got[h].append((int(gm), int(dl), int(rg), int(rgf)))
                    assert n == dut.latency == DecayScale(su).latency + 1, n  # the product on a DSP's registers
                    break

    run_simulation(dut, tb, deadline_cycles=H * T * (dut.latency + 20))
    for h in range(H):
        assert got[h] == expect[h][2], h
    assert any(order[i] == order[i + 1] for i in range(H * T - 1))  # not only round robin


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="su"):
        DecayScale(None)
    with pytest.raises(ValueError, match="exp_width"):
        DecayScale(PRESETS["int8"].scalar_unit(), exp_width=3)
    with pytest.raises(ValueError, match="heads"):
        DecayScale(PRESETS["int8"].scalar_unit(), heads=0)


@pytest.mark.parametrize("pulse", [1, 3])
def test_a_reset_between_tokens_starts_gamma_again_at_one(pulse):
    """A reset of any length between tokens starts gamma again at 1: the tokens after it equal a
    fresh run of them (in the cores the unit's reset comes from a branch of the reset tree)."""
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    su = PRESETS["int8"].scalar_unit()
    rng = np.random.default_rng(5)
    g = rng.uniform(0.5, 1.0, 12)
    before, after = g[:5], g[5:]
    _, _, want_before = _expected(su, before)
    Gm, Gf, want_after = _expected(su, after)
    Gm0, Gf0 = scalar_in(su, before)[:2]
    dut = DecayScale(su)
    top = Module()
    top.domains.sync = cd = ClockDomain("sync")
    top.submodules.dut = dut
    got = []

    async def tb(ctx):
        for seq, (gm_in, gf_in) in enumerate(((Gm0, Gf0), (Gm, Gf))):
            if seq == 1:
                ctx.set(cd.rst, 1)
                for _ in range(pulse):
                    await ctx.tick()
                ctx.set(cd.rst, 0)
            for t in range(len(gm_in)):
                ctx.set(dut.i_valid, 1)
                ctx.set(dut.i_g, int(gm_in[t]))
                ctx.set(dut.i_fg, int(gf_in[t]))
                await ctx.tick().until(dut.i_ready)
                ctx.set(dut.i_valid, 0)
                while True:
                    _, _, ov, gm, dl, rg, rgf = await ctx.tick().sample(dut.o_valid, dut.o_gam, dut.o_delta,
                                                                        dut.o_rg, dut.o_rgf)
                    if ov:
                        got.append((int(gm), int(dl), int(rg), int(rgf)))
                        break

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()
    assert got == want_before + want_after
    assert want_after != _expected(su, g)[2][5:]  # without the reset the later tokens would differ
