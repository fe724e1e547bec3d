"""Directed cocotb tests of the k-lane dot-product engine (``dot_engine``, ``DotEngine(k, d/k)``).

The oracle is the fixed-point model's definition of a dot product: the exact integer sum of
exact products (``golden/fixed/datapath.py``), accumulated from a ``first`` beat to a ``last``
beat, computed from what the input monitor saw. Runs of random length (1 to ``max_len`` beats)
with random and extreme operands under random idle gaps and backpressure; full throughput (one
beat per cycle) and the latency of the manifest with the sink always ready.
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


class EngineEnv:
    def __init__(self, dut, *, seed=0, idle=0.0, stall=0.0):
        p = MANIFEST["parameters"]
        self.k, self.max_len = int(p["k"]), int(p["max_len"])
        self.aw, self.bw = int(p["a_width"]), int(p["b_width"])
        self.fi, self.fo = MANIFEST["streams"]["i"], MANIFEST["streams"]["o"]
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        self.acc = 0
        self.expected: list[int] = []
        self.expected_cycles: list[int] = []
        self.errors: list[str] = []
        self.observed: list[int] = []
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
        b = unpack(self.fi, word)
        if b["first"]:
            self.acc = 0
        self.acc += sum(b[f"a[{l}]"] * b[f"b[{l}]"] for l in range(self.k))
        if b["last"]:
            self.expected.append(self.acc)

    def _score(self, word):
        n = len(self.observed)
        got = unpack(self.fo, word)["sum"]
        self.observed.append(got)
        if n >= len(self.expected):
            self.errors.append(f"result {n}: {got} before its last input beat was seen")
        elif got != self.expected[n] and len(self.errors) < 20:
            self.errors.append(f"result {n}: expected {self.expected[n]}, observed {got}")

    def beats(self, runs):
        """Payload words for runs of ``(a [n, k], b [n, k])`` operands (first/last on the ends)."""
        words = []
        for a, b in runs:
            n = len(a)
            for t in range(n):
                vals = {f"a[{l}]": a[t][l] for l in range(self.k)}
                vals.update({f"b[{l}]": b[t][l] for l in range(self.k)})
                vals.update(first=int(t == 0), last=int(t == n - 1))
                words.append(pack(self.fi, vals))
        return words

    async def run(self, runs, deadline=20_000):
        self.driver.send(self.beats(runs))
        want = len(self.observed) + len(runs)
        for _ in range(deadline):
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


def _random_runs(rng: np.random.Generator, env: EngineEnv, n_runs: int):
    alo, ahi = -(1 << (env.aw - 1)), (1 << (env.aw - 1)) - 1
    blo, bhi = -(1 << (env.bw - 1)), (1 << (env.bw - 1)) - 1
    runs = []
    for _ in range(n_runs):
        n = int(rng.integers(1, env.max_len + 1))
        a = rng.integers(alo, ahi + 1, size=(n, env.k))
        b = rng.integers(blo, bhi + 1, size=(n, env.k))
        if rng.random() < 0.2:  # extremes
            a[:] = rng.choice([alo, ahi])
            b[:] = rng.choice([blo, bhi])
        runs.append((a.tolist(), b.tolist()))
    return runs


@cocotb.test()
@cocotb.parametrize(seed=SEEDS)
async def random_runs(dut, seed):
    """Random run lengths and operands (20 % extreme runs) under idle gaps and backpressure."""
    t0 = time.perf_counter()
    env = EngineEnv(dut, seed=seed, idle=0.3, stall=0.3)
    await env.reset()
    await env.run(_random_runs(np.random.default_rng(seed), env, int(CASE.get("runs", 60))))
    env.finish(f"random_runs/seed={seed}", t0)


@cocotb.test()
async def extremes_never_wrap(dut):
    """Full-length runs of the largest products of both signs: the accumulator holds the exact
    sum (``acc_width`` never wraps for ``d`` terms)."""
    t0 = time.perf_counter()
    env = EngineEnv(dut)
    await env.reset()
    alo, ahi = -(1 << (env.aw - 1)), (1 << (env.aw - 1)) - 1
    blo, bhi = -(1 << (env.bw - 1)), (1 << (env.bw - 1)) - 1
    n, k = env.max_len, env.k
    runs = [([[alo] * k] * n, [[blo] * k] * n), ([[alo] * k] * n, [[bhi] * k] * n),
            ([[ahi] * k] * n, [[bhi] * k] * n), ([[ahi] * k] * n, [[blo] * k] * n)]
    await env.run(runs)
    env.finish("extremes_never_wrap", t0, sums=env.observed)


@cocotb.test()
async def throughput_and_latency(dut):
    """Sink always ready, source at full rate, ``first = last = 1`` on every beat: one beat per
    cycle (``i.ready`` never drops), and each result arrives ``latency_cycles`` after its beat."""
    t0 = time.perf_counter()
    env = EngineEnv(dut)
    await env.reset()
    rng = np.random.default_rng(3)
    runs = [(rng.integers(-128, 128, size=(1, env.k)).tolist(), rng.integers(-128, 128, size=(1, env.k)).tolist())
            for _ in range(32)]
    await env.run(runs)
    ins = [c for c, _ in env.in_mon.items]
    outs = [c for c, _ in env.out_mon.items]
    gaps = sorted(set(np.diff(ins).tolist()))
    lat = sorted(set(o - i for i, o in zip(ins, outs)))
    if gaps != [1]:
        env.errors.append(f"input beats not one per cycle: gaps {gaps}")
    if lat != [int(MANIFEST["latency_cycles"])]:
        env.errors.append(f"latency {lat}, manifest {MANIFEST['latency_cycles']}")
    env.finish("throughput_and_latency", t0, latency=lat, input_gaps=gaps)


@cocotb.test()
async def long_backpressure(dut):
    """The sink stalls for long stretches (90 %): the engine holds its output, loses nothing."""
    t0 = time.perf_counter()
    env = EngineEnv(dut, seed=4, idle=0.0, stall=0.9)
    await env.reset()
    await env.run(_random_runs(np.random.default_rng(44), env, 20), deadline=50_000)
    env.finish("long_backpressure", t0)
