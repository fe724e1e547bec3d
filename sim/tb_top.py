"""cocotb testbench of the annihilation top (``specmem_annihilation``, AXI4-Stream ports).

Run by :mod:`specmem.sim.runner` through ``cocotb_tools.runner``; the case (stream kind, length,
seeds, idle/backpressure probabilities) and the manifest of the build come in the JSON file named
by ``SPECMEM_SIM_CASE``; what each test measured goes to ``SPECMEM_SIM_RECORD``.

Structure (cocotb's habit): driver (:class:`~specmem.sim.axis.TokenDriver`, random idle gaps) ->
DUT -> monitors (input: passive ``AxiStreamMonitor``; output: ``AxiStreamSink`` with random
backpressure); the model (:class:`~specmem.sim.model.AnnihilationModel`) predicts from what the
input monitor saw; the in-order :class:`~specmem.sim.model.Scoreboard` compares every output bit;
a status checker compares the counters at every token boundary (``status_tokens`` changes) and at
the end of each stream, when the state ``U`` is also read back (a backdoor into the RAM) and
compared with the model's.

Cycle checks (steady-state and warm-up tests, source at full rate, sink always ready): cycles per
token equal the manifest's ``cycles_per_token``; the latency of an isolated token (last input
beat to first output beat) equals the manifest's ``latency`` where the manifest states one.
"""

from __future__ import annotations

import json
import os
import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, Event, ReadOnly, RisingEdge, SimTimeoutError, with_timeout

from specmem.sim import stimulus
from specmem.sim.axis import CLOCK_PERIOD_NS, TokenDriver, TokenMonitor, now_cycles, quiet_cocotbext, to_signed
from specmem.sim.model import AnnihilationModel, Scoreboard

CASE = json.loads(open(os.environ["SPECMEM_SIM_CASE"]).read()) if "SPECMEM_SIM_CASE" in os.environ else {}
MANIFEST = CASE.get("manifest", {})
RECORD_PATH = os.environ.get("SPECMEM_SIM_RECORD")
SEEDS = CASE.get("seeds", [0])
RECORD: dict = {}


def _save(name: str, rec: dict) -> None:
    RECORD[name] = rec
    if RECORD_PATH:
        with open(RECORD_PATH + ".tmp", "w") as fh:
            json.dump(RECORD, fh, default=_jsonable)
        os.replace(RECORD_PATH + ".tmp", RECORD_PATH)


def _jsonable(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if hasattr(o, "__dict__"):
        return o.__dict__
    return str(o)


class AnnihilationEnv:
    """Clock, reset, driver, monitors, model, scoreboard and status checker around the top.

    The rule tops (``sim/tb_rules.py``: VLA, linear attention, DeltaNet) subclass it: :meth:`make_model`, :attr:`in_len` (elements per
    input token), :attr:`clear_cycles` (the state clear after reset), :meth:`_status`,
    :meth:`_status_loop`, :meth:`check_end_of_stream` and :meth:`read_state` are the per-design
    parts; driver, monitors, scoreboard and waits are shared."""

    def __init__(self, dut, *, seed: int = 0, idle: float = 0.0, stall: float = 0.0):
        p = MANIFEST["parameters"]
        self.dut = dut
        self.d, self.k, self.preset = int(p["d"]), int(p["k"]), p["preset"]
        self.core_version = MANIFEST.get("core", "v1")  # v2: int18/int16/int8, co-accumulated Gram, evict
        self.in_range = MANIFEST.get("design", {}).get("in_range")
        self.xw = int(MANIFEST["streams"]["s_axis"]["format"]["width"])
        self.yw = int(MANIFEST["streams"]["m_axis"]["format"]["width"])
        tuser = MANIFEST["streams"]["m_axis"].get("tuser")
        self.user_width = int(tuser["width"]) if tuser else None  # m_axis_tuser, signed
        self.rng = random.Random(seed)
        quiet_cocotbext(dut._name)
        cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
        dut.rst.value = 1
        dut.s_axis_tvalid.value = 0
        dut.m_axis_tready.value = 0
        self.driver = TokenDriver(dut, "s_axis", dut.clk, dut.rst, self.xw,
                                  rng=random.Random(self.rng.random()), idle=idle)
        self.in_mon = TokenMonitor(dut, "s_axis", dut.clk, dut.rst, self.xw, self.in_len, sink=False)
        self.out_mon = TokenMonitor(dut, "m_axis", dut.clk, dut.rst, self.yw, self.d, sink=True,
                                    rng=random.Random(self.rng.random()), stall=stall)
        self.model = self.make_model()
        self.sb = Scoreboard(self.model, self.k)
        self.in_first: list[int] = []
        self.in_last: list[int] = []
        self.errors: list[str] = []
        self.status_log: list[dict] = []
        self.expected_framing = 0
        self.out_event = Event()
        self.streams: list[dict] = []
        self.outputs: list[np.ndarray] = []  # every output token of the current stream (collect mode)
        self.outputs_user: list[np.ndarray] = []  # ... and its tuser per element, where m_axis has one
        self.collect = False
        self.start_cycle = now_cycles()
        cocotb.start_soon(self._input_loop())
        cocotb.start_soon(self._output_loop())
        cocotb.start_soon(self._status_loop())

    # -- per design ----------------------------------------------------------------------------
    @property
    def in_len(self) -> int:
        """Elements per input token."""
        return self.d

    @property
    def clear_cycles(self) -> int:
        """Cycles the design spends clearing its state after a reset."""
        return self.d + 2

    def make_model(self):
        return AnnihilationModel(self.d, self.k, self.preset, self.in_range, core=self.core_version)

    # -- monitors ----------------------------------------------------------------------------
    async def _input_loop(self):
        while True:
            for tok in await self.in_mon.recv():
                if len(tok.raw) != self.in_len:
                    self.errors.append(f"input frame of {len(tok.raw)} elements is not whole tokens")
                    continue
                self.model.observe(tok.raw)
                self.in_first.append(tok.first_cycle)
                self.in_last.append(tok.last_cycle)

    async def _output_loop(self):
        pending = np.zeros(0, dtype=np.int64)
        while True:
            toks = await self.out_mon.recv()
            for tok in toks:
                user = None
                if self.user_width is not None and tok.user is not None:
                    user = to_signed(tok.user, self.user_width)
                if self.collect:
                    self.outputs.append(np.asarray(tok.raw, dtype=np.int64))
                    if user is not None:
                        self.outputs_user.append(user)
                if tok.frame_len % self.d == 0:  # whole tokens (one per frame unless tlast went missing)
                    self.sb.check(tok.raw, tok.first_cycle, tok.last_cycle, tok.frame_len, user)
                else:  # tlast misplaced: re-split the element stream into tokens (the tuser check
                    # needs whole frames; the misplaced tlast is an error of its own)
                    pending = np.concatenate([pending, tok.raw])
                    while len(pending) >= self.d:
                        self.sb.check(pending[:self.d], tok.first_cycle, tok.last_cycle, tok.frame_len)
                        pending = pending[self.d:]
            self.out_event.set()

    def _status(self) -> dict:
        dut = self.dut
        return {"tokens": int(dut.status_tokens.value), "saturations": int(dut.status_saturations.value),
                "orth_count": int(dut.status_orth_count.value), "orth_flag": int(dut.status_orth_flag.value),
                "count": int(dut.status_count.value), "framing_errors": int(dut.status_framing_errors.value),
                "busy": int(dut.status_busy.value)}

    async def _status_loop(self):
        """At every change of ``status_tokens``: the counters after token ``n - 1`` against the
        model's (orthogonal count, stored directions, framing errors)."""
        prev_orth = 0
        while True:
            await self.dut.status_tokens.value_change
            await ReadOnly()
            s = self._status()
            n = s["tokens"]
            s["cycle"] = now_cycles()
            if n == 0:  # reset
                prev_orth = 0
                continue
            if len(self.status_log) < 100_000:
                self.status_log.append(s)
            t = n - 1
            if not self.model.ready(t):
                self.errors.append(f"status_tokens = {n} before the input monitor saw {n} tokens")
                continue
            exp = self.model.predict(t)
            if s["orth_count"] - prev_orth != int(exp["orth"]):
                self.errors.append(f"token {t}: orth_count went {prev_orth} -> {s['orth_count']}, model orth = {exp['orth']}")
            if s["count"] != exp["count"]:
                self.errors.append(f"token {t}: status_count {s['count']}, model {exp['count']}")
            if s["orth_flag"] != int(s["orth_count"] > 0):
                self.errors.append(f"token {t}: orth_flag {s['orth_flag']} with orth_count {s['orth_count']}")
            prev_orth = s["orth_count"]

    # -- control -----------------------------------------------------------------------------
    async def reset(self, cycles_: int = 2, *, clear_time: bool = True):
        """Synchronous reset for ``cycles_`` cycles; then wait out the RAM clear (``d`` cycles)."""
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles_)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
        if clear_time:
            await ClockCycles(self.dut.clk, self.clear_cycles)

    def start_stream(self, X: np.ndarray, *, tokens_per_frame: int = 1, send: bool = True) -> None:
        """Begin a stream of raw tokens ``X``: the model gets the plan, the driver the frames."""
        X = np.asarray(X, dtype=np.int64)
        self.model.start(plan=X)
        if self.streams:
            self.sb.new_stream()
        self.in_first, self.in_last = [], []
        self.streams.append({"tokens": len(X), "start_cycle": self.now()})
        if send:
            self.driver.send(X, tokens_per_frame)

    def now(self) -> int:
        return now_cycles()

    def deadline(self, T: int, idle: float = 0.0, stall: float = 0.0) -> int:
        """Cycles after which a stream of ``T`` tokens is declared hung (generous)."""
        full = int(MANIFEST.get("cycles_per_token", {}).get("full_steady_state", 4 * self.d))
        beats_in, beats_out = self.in_len // self.k, self.d // self.k
        per = 2 * full + 4 * beats_in / max(1e-3, 1 - idle) + 4 * beats_out / max(1e-3, 1 - stall)
        return int(T * per + 20 * self.d + 2000)

    async def wait_outputs(self, n: int, deadline_cycles: int) -> bool:
        """Wait until ``n`` output tokens of the current stream have been compared."""
        end = self.now() + deadline_cycles
        while self.sb.compared < n:
            left = end - self.now()
            if left <= 0:
                self.errors.append(f"timeout: {self.sb.compared} of {n} output tokens after {deadline_cycles} cycles "
                                   f"(input monitor saw {len(self.model.observed)})")
                return False
            self.out_event.clear()
            try:
                await with_timeout(self.out_event.wait(), left * CLOCK_PERIOD_NS, "ns")
            except SimTimeoutError:
                pass
        return True

    async def wait_tokens(self, n: int, deadline_cycles: int = 1000) -> bool:
        """Wait until ``status_tokens == n`` and the sequencer is idle; returns in the ReadOnly
        phase of that cycle."""
        for _ in range(deadline_cycles):
            await ReadOnly()
            if int(self.dut.status_tokens.value) == n and not int(self.dut.status_busy.value):
                return True
            await RisingEdge(self.dut.clk)
        await ReadOnly()
        self.errors.append(f"timeout: status_tokens = {int(self.dut.status_tokens.value)}, expected {n}")
        return False

    def read_state(self) -> np.ndarray:
        """``U`` (``d x k`` raw) read through the simulator from the RAM banks (a backdoor: the
        design has no port for it). Core v2 keeps a row of ``U`` in one word of ``core.uram.mem``,
        lane ``l`` at bits ``[l w_u, (l+1) w_u)``."""
        U = np.zeros((self.d, self.k), dtype=np.int64)
        uw = int(MANIFEST["formats"]["tensors"]["u"]["width"])
        if self.core_version == "v2":
            mem = self.dut.core.uram.mem
            for i in range(self.d):
                word = int(mem[i].value)
                for l in range(self.k):
                    v = (word >> (l * uw)) & ((1 << uw) - 1)
                    U[i, l] = v - (1 << uw) if v >> (uw - 1) else v
            return U
        mem = self.dut.core.mem
        banks = [getattr(mem, f"bank{l}") for l in range(self.k)]
        for l, b in enumerate(banks):
            for i in range(self.d):
                v = int(b[i].value)
                U[i, l] = v - (1 << uw) if v >> (uw - 1) else v
        return U

    async def check_end_of_stream(self, *, state: bool = True) -> dict:
        """Counters and the state ``U`` after the current stream, against the model."""
        n = len(self.model.observed)
        await self.wait_tokens(n)
        s = self._status()
        exp = self.model.totals(n)
        for name in ("tokens", "saturations", "orth_count", "orth_flag", "count"):
            if s[name] != exp[name]:
                self.errors.append(f"end of stream {self.sb.stream}: status_{name} = {s[name]}, model {exp[name]}")
        if s["framing_errors"] != self.expected_framing:
            self.errors.append(f"end of stream {self.sb.stream}: status_framing_errors = {s['framing_errors']}, "
                               f"expected {self.expected_framing}")
        if state:
            U = self.read_state()
            if not np.array_equal(U, exp["u_raw"]):
                i, l = np.argwhere(U != exp["u_raw"])[0]
                self.errors.append(f"end of stream {self.sb.stream}: state U[{i}, {l}] = {U[i, l]}, model "
                                   f"{exp['u_raw'][i, l]} ({int(np.sum(U != exp['u_raw']))} elements differ)")
        s["model"] = {k: v for k, v in exp.items() if k != "u_raw"}
        return s

    # -- results -----------------------------------------------------------------------------
    def latencies(self) -> list[int]:
        n = min(len(self.in_last), len(self.sb.first_cycles))
        return [self.sb.first_cycles[t] - self.in_last[t] for t in range(n)]

    def summary(self, name: str, t0: float, **extra) -> dict:
        fm = self.sb.first
        rec = {
            "test": name, "passed": not self.errors and not self.sb.errors,
            "tokens_in": sum(s["tokens"] for s in self.streams), "tokens_compared": self.sb.total_compared,
            "mismatched_tokens": self.sb.mismatched_tokens, "cycles": self.now(), "wall_s": time.perf_counter() - t0,
            "first_mismatch": None if fm is None else fm.__dict__, "errors": (self.sb.errors + self.errors)[:20],
            "golden_runs": self.model.golden_runs, "model_s": self.model.golden_seconds,
            "test_cycles": self.now() - self.start_cycle, "waves": CASE.get("waves_file"),
        }
        rec.update(extra)
        return rec

    def finish(self, name: str, t0: float, **extra) -> dict:
        rec = self.summary(name, t0, **extra)
        _save(name, rec)
        if not rec["passed"]:
            msg = "; ".join(rec["errors"][:5])
            raise AssertionError(f"{name}: {msg}")
        return rec


def default_kind(env: AnnihilationEnv) -> str:
    """The random stream's kind when the case names none: ``mixed`` (core v1), ``evictions`` (core
    v2: orthogonal inputs evict, and a stream needs many of them)."""
    return "evictions" if env.core_version == "v2" else "mixed"


def _raw(kind: str, seed: int, T: int, env: AnnihilationEnv) -> np.ndarray:
    return stimulus.quantize(stimulus.make(kind, seed, T, env.d, env.k), env.k, env.preset, env.in_range)


async def _run_stream(dut, name: str, kind: str, seed: int, T: int, idle: float, stall: float) -> dict:
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=seed, idle=idle, stall=stall)
    await env.reset()
    kind = kind or default_kind(env)
    X = _raw(kind, seed, T, env)
    env.start_stream(X)
    await env.wait_outputs(T, env.deadline(T, idle, stall))
    status = await env.check_end_of_stream()
    steps = np.diff(env.sb.last_cycles).tolist() if len(env.sb.last_cycles) > 1 else []
    return env.finish(name, t0, kind=kind, seed=seed, T=T, idle=idle, stall=stall, status=status,
                      cycles_per_token_mean=(float(np.mean(steps)) if steps else None),
                      latency_max=max(env.latencies(), default=None))


# ------------------------------------------------------------------------------------------------
# tests


@cocotb.test()
@cocotb.parametrize(seed=SEEDS)
async def random_stream(dut, seed):
    """A mixed stream (Gaussian, zero, orthogonal and large tokens) under random idle gaps and
    random backpressure; every output bit, the counters and the final state checked."""
    s = CASE.get("stream", {})
    await _run_stream(dut, f"random_stream/seed={seed}", s.get("kind"), seed, int(s.get("T", 64)),
                      float(s.get("idle", 0.3)), float(s.get("stall", 0.3)))


@cocotb.test()
async def stream(dut):
    """One stream as the case describes it (``specmem sim``, the long run, the back-end)."""
    s = CASE.get("stream", {})
    await _run_stream(dut, "stream", s.get("kind"), int(s.get("seed", 0)), int(s.get("T", 64)),
                      float(s.get("idle", 0.3)), float(s.get("stall", 0.3)))


def _expect_equal(env: AnnihilationEnv, what: str, observed, expected) -> None:
    if expected is None:
        return
    if observed != expected:
        env.errors.append(f"{what}: observed {observed}, manifest {expected}")


@cocotb.test()
async def steady_state(dut):
    """Source at full rate, sink always ready: back-to-back warm-up tokens, zero tokens and full
    tokens take exactly the manifest's cycles per token (``warm_up_or_zero``,
    ``full_steady_state``), measured between the last output beats of consecutive tokens of the
    same kind; the output is bit exact throughout."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut)
    await env.reset()
    k = env.k
    T = k + 20
    x = stimulus.gaussian(11, T, env.d)
    zeros = list(range(k + 8, k + 12))  # a run of zero tokens between full ones
    x[zeros] = 0
    X = stimulus.quantize(x, k, env.preset, env.in_range)
    env.start_stream(X)
    await env.wait_outputs(T, env.deadline(T))
    await env.check_end_of_stream()
    kinds = []
    for t in range(T):
        kinds.append("zero" if not np.any(X[t]) else ("warm" if sum(map(lambda v: bool(np.any(v)), X[:t])) < k
                                                      else "full"))
    last = env.sb.last_cycles
    by = {"warm": [], "zero": [], "full": []}
    for t in range(2, len(last)):
        if kinds[t] == kinds[t - 1] == kinds[t - 2]:  # a token of the same kind was buffered behind one
            by[kinds[t]].append(last[t] - last[t - 1])
    cpt = MANIFEST.get("cycles_per_token", {})
    for kd, key in (("warm", "warm_up_or_zero"), ("zero", "warm_up_or_zero"), ("full", "full_steady_state")):
        if by[kd] and isinstance(cpt.get(key), int):
            _expect_equal(env, f"cycles per {kd} token back to back", sorted(set(by[kd])), [cpt[key]])
    if not by["full"]:
        env.errors.append("no steady-state full tokens measured")
    env.finish("steady_state", t0, steps=np.diff(last).tolist(), kinds=kinds,
               by_kind={kd: sorted(set(v)) for kd, v in by.items()}, floor_d=env.d,
               manifest_cycles_per_token={k_: v for k_, v in cpt.items() if isinstance(v, int)})


@cocotb.test()
async def warm_up_and_latency(dut):
    """Isolated tokens (each sent after the previous one's output and the sequencer went idle):
    warm-up, a zero token, full tokens; the latency from the last input beat to the first output
    beat of each, against the manifest's ``latency`` where it states one."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut)
    await env.reset()
    k = env.k
    x = stimulus.gaussian(21, k + 4, env.d)
    x[1] = 0  # a zero token during warm-up
    X = stimulus.quantize(x, k, env.preset, env.in_range)
    env.start_stream(X, send=False)
    kinds = []
    nonzero = 0
    for t in range(len(X)):
        kind = "zero" if not np.any(X[t]) else ("warm_up" if nonzero < k else "full")
        nonzero += kind != "zero"
        kinds.append(kind)
        env.driver.send(X[t:t + 1])
        await env.wait_outputs(t + 1, env.deadline(1))
        await env.wait_tokens(t + 1)
        await ClockCycles(dut.clk, 3)
    await env.check_end_of_stream()
    lat = env.latencies()
    by_kind: dict[str, list[int]] = {}
    for kd, v in zip(kinds, lat):
        by_kind.setdefault(kd, []).append(v)
    man = MANIFEST.get("latency")
    if isinstance(man, dict):
        for kd, vals in by_kind.items():
            key = {"zero": "warm_up_or_zero", "warm_up": "warm_up_or_zero", "full": "full"}[kd]
            if key in man:
                _expect_equal(env, f"latency of an isolated {kd} token", sorted(set(vals)), [int(man[key])])
    env.finish("warm_up_and_latency", t0, latency_by_kind={kd: sorted(set(v)) for kd, v in by_kind.items()},
               manifest_latency=man)


@cocotb.test()
async def orthogonal_and_zero(dut):
    """Orthogonal tokens (core v1: skip and flag, ``U`` unchanged; core v2: evict, the token
    written over the round-robin column; both ``y = 0``, counter and sticky flag) and all-zero
    tokens, warm-up and full, under gaps and backpressure."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=5, idle=0.3, stall=0.3)
    await env.reset()
    k = env.k
    T = k + 10
    # warm-up: tokens 0, 2, .., k on the first half of the coordinates (token 1 is zero); tokens
    # k+1, k+2 on the second half: orthogonal to every stored column
    x = stimulus.gaussian(31, T, env.d)
    x[:k + 1, env.d // 2:] = 0
    x[k + 1:k + 3, :env.d // 2] = 0
    if env.core_version == "v2":  # token k+1 is evicted into U: k+2 must also be orthogonal to it
        q = env.d // 2 + env.d // 4
        x[k + 1, q:] = 0
        x[k + 2, env.d // 2:q] = 0
    x = stimulus.with_zeros(x, [1, k + 4, k + 5])
    X = stimulus.quantize(x, k, env.preset, env.in_range)
    env.start_stream(X)
    await env.wait_outputs(T, env.deadline(T, 0.3, 0.3))
    status = await env.check_end_of_stream()
    orth = [bool(env.model.predict(t)["orth"]) for t in range(T)]
    if sum(orth) < 2:
        env.errors.append(f"stimulus: expected at least 2 orthogonal tokens, model flags {sum(orth)}")
    env.finish("orthogonal_and_zero", t0, status=status, orth=orth)


@cocotb.test()
async def round_robin_ties(dut):
    """Unit vectors ``1.25 e_t`` (``sim/stimulus.units``): warm-up, then, on core v2, one eviction
    after another among columns of equal energy, where the round-robin pointer picks the column (on
    core v1, skipped orthogonal inputs); Gaussian tokens after them, whose ``y`` shows which columns
    were kept. Under gaps and backpressure; every bit, the counters and ``U`` checked."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=9, idle=0.3, stall=0.3)
    await env.reset()
    T = env.d + 8
    env.start_stream(_raw("units", 71, T, env))
    await env.wait_outputs(T, env.deadline(T, 0.3, 0.3))
    status = await env.check_end_of_stream()
    orth = sum(bool(env.model.predict(t)["orth"]) for t in range(T))
    if orth < 2:
        env.errors.append(f"stimulus: expected at least 2 orthogonal tokens, model flags {orth}")
    env.finish("round_robin_ties", t0, status=status, orth=orth)


@cocotb.test()
async def saturating(dut):
    """Large aligned tokens: saturation in ``r`` (and elsewhere; at legacy-int8), counted as the model
    counts it."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=6, idle=0.2, stall=0.3)
    await env.reset()
    T = env.k + 12
    env.start_stream(_raw("saturating", 41, T, env))
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.3))
    status = await env.check_end_of_stream()
    # wider presets have the headroom not to saturate on this stream; the record says whether it did
    env.finish("saturating", t0, status=status, saturated=status["model"]["saturations"] > 0)


@cocotb.test()
@cocotb.parametrize(cut=["in_token", "between", "in_output"])  # short names: cocotb uses them in test names
async def reset_mid_stream(dut, cut):
    """A synchronous reset in the middle of stream A (in a token's beats, between tokens, or
    while outputs are pending); what came out before is a prefix of the model's output for A,
    and stream B after the reset matches the model run on B alone (counters, state)."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=7, idle=0.3, stall=0.4)
    await env.reset()
    k, beats = env.k, env.d // env.k
    A = _raw(default_kind(env), 51, k + 8, env)
    B = _raw(default_kind(env), 52, k + 6, env)
    env.start_stream(A)
    target = {"in_token": k + 2, "between": k + 3, "in_output": k + 1}[cut]
    # count the beats the DUT accepts (sampled as the monitors do: right after each edge) and cut
    # after two beats of token `target`, exactly after token `target - 1`, or while an output waits
    accepted = 0
    for _ in range(env.deadline(len(A), 0.3, 0.4)):
        await RisingEdge(dut.clk)
        accepted += int(dut.s_axis_tvalid.value) and int(dut.s_axis_tready.value)
        if cut == "in_token" and accepted == target * beats + min(2, beats - 1):
            break
        if cut == "between" and accepted == target * beats:
            break
        if cut == "in_output" and env.sb.compared >= target and int(dut.m_axis_tvalid.value) \
                and not int(dut.m_axis_tready.value):
            break
    else:
        env.errors.append(f"the cut point ({cut}) was never reached")
    before = env.sb.compared
    env.driver.clear()
    await env.reset(2)
    env.start_stream(B)
    await env.wait_outputs(len(B), env.deadline(len(B), 0.3, 0.4))
    status = await env.check_end_of_stream()
    env.finish(f"reset_mid_stream/cut={cut}", t0, cut=cut, outputs_before_reset=before, beats_before_reset=accepted,
               beats_per_token=beats, status=status)


@cocotb.test()
async def framing_errors(dut):
    """Tokens sent two per frame (``tlast`` missing on every other token's last beat): the
    outputs are unaffected (the core frames by beat count) and each missing ``tlast`` counts one
    framing error."""
    t0 = time.perf_counter()
    env = AnnihilationEnv(dut, seed=8, idle=0.2, stall=0.2)
    await env.reset()
    T = env.k + 6
    X = _raw("gaussian", 61, T, env)
    env.expected_framing = T // 2
    env.start_stream(X, tokens_per_frame=2)
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.2))
    status = await env.check_end_of_stream()
    env.finish("framing_errors", t0, status=status)


@cocotb.test()
async def streams(dut):
    """The back-end's run: each stream of the ``streams_file`` (``.npz`` of raw token arrays
    ``s0, s1, ...``) after a reset, at full rate; the observed outputs, per-token orthogonal flags
    (from the status counter), final counters and state ``U`` go to ``outputs_file``. The
    scoreboard still checks every bit against the model."""
    t0 = time.perf_counter()
    data = np.load(CASE["streams_file"])
    names = sorted((n for n in data.files if n.startswith("s")), key=lambda n: int(n[1:]))
    env = AnnihilationEnv(dut, seed=0, idle=float(CASE.get("idle", 0.0)), stall=float(CASE.get("stall", 0.0)))
    env.collect = True
    out = {}
    for i, name in enumerate(names):
        X = np.asarray(data[name], dtype=np.int64)
        await env.reset()
        env.outputs = []
        first_log = len(env.status_log)
        env.start_stream(X)
        await env.wait_outputs(len(X), env.deadline(len(X)))
        status = await env.check_end_of_stream(state=True)
        await RisingEdge(dut.clk)  # the status checker has logged the last token by now
        orth_count = [0] + [s["orth_count"] for s in env.status_log[first_log:] if s["tokens"] > 0]
        out[f"y{i}"] = np.array(env.outputs, dtype=np.int64).reshape(len(env.outputs), env.d)
        out[f"orth{i}"] = np.diff(np.array(orth_count[:len(X) + 1], dtype=np.int64)).astype(bool)
        out[f"u{i}"] = env.read_state()
        out[f"status{i}"] = np.array([status[k] for k in ("tokens", "saturations", "orth_count", "orth_flag",
                                                           "count", "framing_errors")], dtype=np.int64)
    np.savez(CASE["outputs_file"], **out)
    env.finish("streams", t0, streams=len(names), tokens=int(sum(len(data[n]) for n in names)))
