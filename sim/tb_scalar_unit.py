"""Directed cocotb tests of the scalar unit (``scalar_unit``: reciprocal and rsqrt), configured
exactly as the annihilation core instantiates it for the preset, against the golden
:class:`specmem.golden.fixed.scalar_unit.ScalarUnit` bit for bit (mantissa ``m`` and exponent
``f``), with the latency of the manifest.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from specmem.sim.axis import CLOCK_PERIOD_NS
from specmem.sim.tbcase import Record, load_case
from specmem.sim.stream import StreamDriver, StreamMonitor, pack, unpack

CASE = load_case()
MANIFEST = CASE.get("manifest", {})
SEEDS = CASE.get("seeds", [0])
RECORD = Record()
_save = RECORD.save


class ScalarUnitEnv:
    def __init__(self, dut, *, seed=0, idle=0.0, stall=0.0):
        from specmem.golden.fixed.scalar_unit import ScalarUnit

        p = MANIFEST["parameters"]
        self.golden = ScalarUnit(out_bits=p["out_bits"], seed_bits=p["seed_bits"], newton_steps=p["newton_steps"],
                                 work_bits=p["work_bits"])
        self.in_width, self.frac_width = int(p["in_width"]), int(p["frac_width"])
        self.ops = MANIFEST["ops"]
        self.fi, self.fo = MANIFEST["streams"]["i"], MANIFEST["streams"]["o"]
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        self.expected: list[tuple[int, int]] = []
        self.requests: list[dict] = []
        self.observed: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.driver = StreamDriver(dut, "i", dut.clk, rng=random.Random(self.rng.random()), idle=idle)
        self.in_mon = StreamMonitor(dut, "i", dut.clk, sink=False, callback=self._model)
        self.out_mon = StreamMonitor(dut, "o", dut.clk, sink=True, rng=random.Random(self.rng.random()),
                                     stall=stall, callback=self._score)

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 2)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    def _model(self, word):
        r = unpack(self.fi, word)
        x = np.array([r["x"]], dtype=np.int64)
        fn = self.golden.recip if r["op"] == self.ops["recip"] else self.golden.rsqrt
        s = fn(x, int(r["frac"]))
        self.requests.append(r)
        self.expected.append((int(s.m[0]), int(s.f[0])))

    def _score(self, word):
        n = len(self.observed)
        o = unpack(self.fo, word)
        got = (o["m"], o["f"])
        self.observed.append(got)
        if n >= len(self.expected):
            self.errors.append(f"result {n} before its request was seen")
        elif got != self.expected[n] and len(self.errors) < 20:
            self.errors.append(f"request {n} {self.requests[n]}: expected (m, f) = {self.expected[n]}, observed {got}")

    def words(self, xs, fracs, ops):
        return [pack(self.fi, {"x": int(x), "frac": int(f), "op": int(o)}) for x, f, o in zip(xs, fracs, ops)]

    async def run(self, xs, fracs, ops, deadline=None):
        self.driver.send(self.words(xs, fracs, ops))
        want = len(self.observed) + len(xs)
        for _ in range(deadline or 60 * want + 200):
            if len(self.observed) >= want:
                break
            await RisingEdge(self.dut.clk)
        if len(self.observed) < want:
            self.errors.append(f"timeout: {len(self.observed)} of {want} results")

    def finish(self, name, t0, **extra):
        rec = {"test": name, "passed": not self.errors, "results": len(self.observed), "errors": self.errors[:20],
               "wall_s": time.perf_counter() - t0, **extra}
        _save(name, rec)
        assert not self.errors, f"{name}: " + "; ".join(self.errors[:5])

    def frac_range(self):
        h = 1 << (self.frac_width - 1)
        return -h, h - 1


@cocotb.test()
@cocotb.parametrize(seed=SEEDS)
async def random_requests(dut, seed):
    """Random inputs over the whole input width (and small ones), random ``frac`` of both signs
    and parities, both operations, under idle gaps and backpressure."""
    t0 = time.perf_counter()
    env = ScalarUnitEnv(dut, seed=seed, idle=0.3, stall=0.3)
    await env.reset()
    rng = np.random.default_rng(seed)
    n = int(CASE.get("requests", 150))
    w = env.in_width
    xs = np.concatenate([rng.integers(0, 1 << min(w, 62), size=n // 2, dtype=np.int64),
                         rng.integers(0, 256, size=n // 4, dtype=np.int64),
                         np.int64(1) << rng.integers(0, w, size=n - n // 2 - n // 4)])
    lo, hi = env.frac_range()
    fracs = rng.integers(lo, hi + 1, size=n)
    ops = rng.integers(0, 2, size=n)
    await env.run(xs, fracs, ops)
    env.finish(f"random_requests/seed={seed}", t0)


@cocotb.test()
async def edge_cases(dut):
    """Zero (``m = f = 0``), one, powers of two, all ones, the top bit alone, extreme ``frac``."""
    t0 = time.perf_counter()
    env = ScalarUnitEnv(dut)
    await env.reset()
    w = env.in_width
    lo, hi = env.frac_range()
    base = [0, 1, 2, 3, (1 << w) - 1, 1 << (w - 1), (1 << (w - 1)) - 1, 5, 255]
    xs, fracs, ops = [], [], []
    for x in base:
        for f in (lo, -1, 0, 1, hi):
            for op in (0, 1):
                xs.append(x)
                fracs.append(f)
                ops.append(op)
    await env.run(xs, fracs, ops)
    env.finish("edge_cases", t0, requests=len(xs))


@cocotb.test()
async def latency(dut):
    """One request at a time, sink always ready: result transfer edge minus request transfer edge
    equals the manifest's latency per operation."""
    t0 = time.perf_counter()
    env = ScalarUnitEnv(dut)
    await env.reset()
    seen = {}
    for name, op in env.ops.items():
        start = len(env.observed)
        await env.run([12345], [3], [op])
        i_cycle = env.in_mon.items[start][0]
        o_cycle = env.out_mon.items[start][0]
        seen[name] = o_cycle - i_cycle
        await ClockCycles(dut.clk, 2)
    man = {k: int(v) for k, v in MANIFEST["latency"].items()}
    if seen != man:
        env.errors.append(f"latency {seen}, manifest {man}")
    env.finish("latency", t0, latency=seen)
