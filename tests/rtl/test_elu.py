"""The pipelined ELU+1 (``rtl/elu.py``) against the model's ``Datapath.elu1``: every input of the
preset's input format (exhaustive), values and per-lane saturation flags, in order, under
random stalls (``en`` low), with ``latency`` advancing cycles from input to output."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.fxtype import FxType
from specmem.rtl.elu import PipelinedElu1


def golden(preset, algo="vla", d=16, narrow=0):
    """Every raw input of the ``k`` format, the model's ELU+1 of each and whether it saturated
    (``narrow``: the output format that many bits narrower, so that large inputs saturate)."""
    F = formats_for(algo, preset, d, {})
    if narrow:
        F.tensors["kf"] = FxType(F["kf"].width - narrow, F["kf"].frac)
    fx_in = F["k"]
    xs = np.arange(fx_in.min_raw, fx_in.max_raw + 1, dtype=np.int64)
    dp = Datapath(F, trace=False)
    ys = dp.elu1("kf", xs, fx_in)
    sat = []
    for x in xs:  # one call per element: the model counts saturations per call
        dp1 = Datapath(F, trace=False)
        dp1.elu1("kf", np.array([x]), fx_in)
        sat.append(int(dp1.sat.get("kf", 0)))
    return F, dp, xs, ys, np.array(sat)


def run(dut, words, *, stall, seed):
    """Feed ``words`` (lists of ``k`` raw inputs) with random input gaps and stalls; return the
    valid outputs ``(values, ovf)`` in order and the advancing cycles from each input to its output."""
    rng = random.Random(seed)
    got, sent_at, out_at = [], [], []

    async def bench(ctx):
        i = adv = 0
        while len(got) < len(words):
            en = rng.random() >= stall
            valid = i < len(words) and rng.random() >= 0.2
            ctx.set(dut.en, en)
            ctx.set(dut.i_valid, valid)
            if i < len(words):
                for lane, x in enumerate(words[i]):
                    ctx.set(dut.i_data[lane], int(x))
            await ctx.tick()
            if en:
                adv += 1
                if valid:
                    sent_at.append(adv)
                    i += 1
                if ctx.get(dut.o_valid):
                    got.append(([ctx.get(dut.o_data[lane]) for lane in range(dut.k)],
                                [(ctx.get(dut.o_ovf) >> lane) & 1 for lane in range(dut.k)]))
                    out_at.append(adv)
            assert adv < 10 * len(words) + 100, "pipeline did not drain"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, [o - s + 1 for s, o in zip(sent_at, out_at)]  # the input's own edge counts


@pytest.mark.parametrize("coded", [False, True], ids=["plain-shift", "coded-shift"])
@pytest.mark.parametrize("preset,k,stall,narrow", [
    ("legacy-int8", 4, 0.0, 0),
    ("legacy-int8", 3, 0.4, 0),
    ("legacy-int8", 2, 0.3, 2),   # Q1.4 out: x + 1 saturates for x >= 1
    pytest.param("legacy-int16", 8, 0.2, 0, marks=pytest.mark.slow),
])
def test_exhaustive_bit_exact_with_the_model(preset, k, stall, narrow, coded):
    F, dp, xs, ys, sat = golden(preset, narrow=narrow)
    assert (sat.sum() > 0) == bool(narrow)
    pad = (-len(xs)) % k
    order = np.random.default_rng(k).permutation(len(xs))  # neighbouring lanes get unrelated inputs
    xs_p, ys_p, sat_p = (np.concatenate([a[order], a[order][:pad]]) for a in (xs, ys, sat))
    words = xs_p.reshape(-1, k).tolist()
    dut = PipelinedElu1(k, F["k"], F["kf"], dp, coded_shift=coded)
    got, lat = run(dut, words, stall=stall, seed=k)
    assert [v for v, _ in got] == ys_p.reshape(-1, k).tolist()
    assert [o for _, o in got] == sat_p.reshape(-1, k).tolist()
    assert set(lat) == {PipelinedElu1.latency}
    print(f"{preset}: {len(xs)} inputs, {int(sat.sum())} saturate; latency {PipelinedElu1.latency}")


def test_rejects_bad_k():
    F = formats_for("vla", "legacy-int8", 16, {})
    with pytest.raises(ValueError, match="k: must be an integer >= 1"):
        PipelinedElu1(0, F["k"], F["kf"], Datapath(F, trace=False))
