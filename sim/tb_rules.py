"""cocotb testbench of the attention-rule tops: VLA (``specmem_vla``), linear attention
(``specmem_linear``), DeltaNet (``specmem_deltanet``) and Gated DeltaNet
(``specmem_gated_deltanet``), AXI4-Stream ports.

One testbench for the four: the annihilation testbench's environment
(:class:`~specmem.sim.tb_top.AnnihilationEnv`: driver with random idle gaps, passive input
monitor, output sink with random backpressure, in-order scoreboard, waits) with a rule's parts
swapped in by :class:`RuleEnv` and its subclasses, picked from the build's manifest
(``design.kind``):

* :class:`VLAEnv`: a token is ``4 d/k`` beats (``k``, ``v``, ``q``, ``u``; element ``i`` of a
  tensor in lane ``i % k`` of that tensor's beat ``i // k``, so the driver and the input monitor
  treat a token as ``4d`` elements); model :class:`~specmem.sim.model.VLAModel`; ``m_axis_tuser``
  (``o_frac``) checked on every beat; counters ``tokens``, ``saturations``, ``refreshes``; final
  states ``A``, ``S``.
* :class:`BaselineEnv`: a token is ``3 d/k`` beats (``k``, ``v``, ``q``) and, for DeltaNet, one
  more beat whose lane 0 is ``beta`` (``3d + k`` elements); for Gated DeltaNet lane 1 of that
  beat holds ``g``'s unsigned bits (at ``k = 1`` two scalar beats); model
  :class:`~specmem.sim.model.BaselineModel` (``linear_attention_fixed`` / ``deltanet_fixed`` /
  ``gated_deltanet_fixed``);
  counters ``tokens``, ``saturations``; final state ``S`` and, for linear attention, ``z``.

The model runs the fixed-point golden model with the parameters the design was generated with
(the manifest's ``design.params``) on the tokens the input monitor saw; the scoreboard compares
every output element bit for bit, token by token; at the end of each stream the counters
(``framing_errors`` included) and the final states (read back from the RAMs, a backdoor) equal the
model's. The cycles per token back to back (and, where the manifest states one, the latency of an
isolated token) equal the manifest's.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from specmem.sim import stimulus
from specmem.sim.axis import now_cycles
from specmem.sim.model import BaselineModel, VLAModel
from specmem.sim.tb_top import CASE, MANIFEST, SEEDS, AnnihilationEnv, _expect_equal

__all__ = ["RuleEnv", "VLAEnv", "BaselineEnv", "env_class"]


def _to_signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) else v


class RuleEnv(AnnihilationEnv):
    """A rule top's environment: the annihilation environment's driver, monitors, scoreboard and
    waits; the counters named in :attr:`COUNTERS` (each ``status_<name>``, compared with the
    model's totals at the end of every stream) and the states :meth:`read_state` returns (compared
    with the model's ``<name>_raw``). Subclasses give :meth:`make_model`, :attr:`in_len`,
    :meth:`stimulus`, :attr:`COUNTERS` and :meth:`read_state`."""

    COUNTERS: tuple[str, ...] = ("tokens", "saturations")
    #: tokens of the ``saturating`` test's stream (long enough for the state to saturate)
    SATURATING_T = 10

    @property
    def clear_cycles(self) -> int:
        return self.d * self.d // self.k + 4  # the d x d state(s) cleared, one address per cycle

    @property
    def design_params(self) -> dict:
        """The rule parameters the design was generated with (``in_range`` included)."""
        design = MANIFEST.get("design", {})
        params = dict(design.get("params") or {})
        if design.get("in_range") is not None:
            params["in_range"] = design["in_range"]
        return params

    def stimulus(self, kind: str, seed: int, T: int) -> np.ndarray:  # pragma: no cover - abstract
        """Raw tokens ``[T, in_len]`` of a seeded stream of ``kind``."""
        raise NotImplementedError

    def status_vector(self, s: dict) -> np.ndarray:
        """The counters and ``framing_errors`` as the back-end's ``status<i>`` array, in that order
        (VLA: tokens, saturations, refreshes, framing errors; the baselines: tokens, saturations,
        framing errors)."""
        return np.array([s[n] for n in (*self.COUNTERS, "framing_errors")], dtype=np.int64)

    def _status(self) -> dict:
        s = {name: int(getattr(self.dut, f"status_{name}").value) for name in (*self.COUNTERS, "framing_errors")}
        s["busy"] = int(self.dut.status_busy.value)
        return s

    async def _status_loop(self):
        """At every change of ``status_tokens``: a token is counted only after the input monitor
        saw it (the counters themselves are compared at the end of each stream: a token's
        write-back saturations land in the next token's fused pass)."""
        while True:
            await self.dut.status_tokens.value_change
            await ReadOnly()
            s = self._status()
            s["cycle"] = now_cycles()
            if s["tokens"] == 0:
                continue
            if len(self.status_log) < 100_000:
                self.status_log.append(s)
            if not self.model.ready(s["tokens"] - 1):
                self.errors.append(f"status_tokens = {s['tokens']} before the input monitor saw {s['tokens']} tokens")

    # -- backdoor reads of the state RAMs ----------------------------------------------------------
    def _matrix(self, mem_name: str, fmt: str) -> np.ndarray:
        """A ``d x d`` state from a :class:`~specmem.rtl.memory.StateMemory` (``M[i, j]`` in bank
        ``j % k`` at address ``i d/k + j // k``)."""
        d, k, dk = self.d, self.k, self.d // self.k
        mem = getattr(self.dut.core, mem_name)
        banks = [getattr(mem, f"bank{l}") for l in range(k)]
        w = int(MANIFEST["formats"]["tensors"][fmt]["width"])
        M = np.zeros((d, d), dtype=np.int64)
        for i in range(d):
            for j in range(d):
                M[i, j] = _to_signed(int(banks[j % k][i * dk + j // k].value), w)
        return M

    def _lane_vector(self, mem_name: str, width: int) -> np.ndarray:
        """A ``d``-vector from a k-lane vector memory of the core (word ``a``, lane ``l`` is
        element ``a k + l``, unsigned lanes of ``width`` bits)."""
        mem = getattr(self.dut.core, mem_name)
        out = np.zeros(self.d, dtype=np.int64)
        mask = (1 << width) - 1
        for a in range(self.d // self.k):
            word = int(mem[a].value)
            for l in range(self.k):
                out[a * self.k + l] = (word >> (l * width)) & mask
        return out

    def read_state(self) -> dict:  # pragma: no cover - abstract
        """``{name: raw array}``; the model's totals hold each as ``<name>_raw``."""
        raise NotImplementedError

    async def check_end_of_stream(self, *, state: bool = True) -> dict:
        """Counters and the final states after the current stream, against the model."""
        n = len(self.model.observed)
        await self.wait_tokens(n)
        s = self._status()
        exp = self.model.totals(n)
        for name in self.COUNTERS:
            if s[name] != exp[name]:
                self.errors.append(f"end of stream {self.sb.stream}: status_{name} = {s[name]}, model {exp[name]}")
        if s["framing_errors"] != self.expected_framing:
            self.errors.append(f"end of stream {self.sb.stream}: status_framing_errors = {s['framing_errors']}, "
                               f"expected {self.expected_framing}")
        if state:
            for name, M in self.read_state().items():
                E = np.asarray(exp[f"{name}_raw"])
                if not np.array_equal(M, E):
                    idx = tuple(int(i) for i in np.argwhere(M != E)[0])
                    self.errors.append(f"end of stream {self.sb.stream}: state {name}{list(idx)} = {M[idx]}, model "
                                       f"{E[idx]} ({int(np.sum(M != E))} elements differ)")
        s["model"] = {k: v for k, v in exp.items() if not k.endswith("_raw")}
        return s


class VLAEnv(RuleEnv):
    """VLA: ``4d``-element tokens, ``tuser`` = ``o_frac``, a refresh counter, states ``A`` and ``S``."""

    COUNTERS = ("tokens", "saturations", "refreshes")

    @property
    def in_len(self) -> int:
        return 4 * self.d

    def make_model(self) -> VLAModel:
        return VLAModel(self.d, self.k, self.preset, self.design_params)

    def stimulus(self, kind: str, seed: int, T: int) -> np.ndarray:
        return self.model.quantize(stimulus.vla_make(kind, seed, T, self.d))

    def read_state(self) -> dict:
        return {"a": self._matrix("amem", "a"), "s": self._matrix("smem", "s")}


class BaselineEnv(RuleEnv):
    """Linear attention, DeltaNet or Gated DeltaNet (the manifest's ``design.kind``): ``3d``-element
    tokens (the delta rules ``3d + k``: one more beat, ``beta`` in lane 0, the gated core's ``g`` in
    lane 1); state ``S`` and linear attention's
    ``z`` (the hardware keeps a saturated ``z`` element as ``max + 1``, a sticky mark, and reads it
    as ``max``: the read-back clamps the same way)."""

    SATURATING_T = 40  # linear attention's S saturates from about token 26 (legacy-int8)

    @property
    def algo(self) -> str:
        return MANIFEST["design"]["kind"]

    @property
    def in_len(self) -> int:
        n = len(BaselineModel.SCALARS[self.algo])  # the scalar beats: as BaselineModel.token_len
        return 3 * self.d + -(-n // self.k) * self.k

    def make_model(self) -> BaselineModel:
        return BaselineModel(self.algo, self.d, self.k, self.preset, self.design_params)

    def stimulus(self, kind: str, seed: int, T: int) -> np.ndarray:
        return self.model.quantize(stimulus.baseline_make(self.algo, kind, seed, T, self.d))

    def read_state(self) -> dict:
        out = {"s": self._matrix("smem", "s")}
        if self.algo == "linear":
            z = self.model.fmt["z"]
            out["z"] = np.minimum(self._lane_vector("z", int(z.width)), int(z.max_raw))
        return out


def env_class(kind: str | None = None) -> type[RuleEnv]:
    """The environment of the design the case's manifest describes (or of ``kind``)."""
    kind = kind or MANIFEST.get("design", {}).get("kind", "vla")
    envs = {"vla": VLAEnv, "linear": BaselineEnv, "deltanet": BaselineEnv, "gated-deltanet": BaselineEnv}
    if kind not in envs:
        raise ValueError(f"design kind {kind!r}: this testbench runs {', '.join(envs)}")
    return envs[kind]


async def _run_stream(dut, name: str, kind: str, seed: int, T: int, idle: float, stall: float) -> dict:
    t0 = time.perf_counter()
    env = env_class()(dut, seed=seed, idle=idle, stall=stall)
    await env.reset()
    env.start_stream(env.stimulus(kind, seed, T))
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
    """A stream (``mixed``: Gaussian, a few tokens x3, zero vectors) under random idle gaps and
    random backpressure: every output element (and ``tuser``), the counters and the final states."""
    s = CASE.get("stream", {})
    await _run_stream(dut, f"random_stream/seed={seed}", s.get("kind", "mixed"), seed, int(s.get("T", 24)),
                      float(s.get("idle", 0.3)), float(s.get("stall", 0.3)))


@cocotb.test()
async def stream(dut):
    """One stream as the case describes it (``simulate``)."""
    s = CASE.get("stream", {})
    await _run_stream(dut, "stream", s.get("kind", "mixed"), int(s.get("seed", 0)), int(s.get("T", 24)),
                      float(s.get("idle", 0.3)), float(s.get("stall", 0.3)))


@cocotb.test()
async def steady_state(dut):
    """Source at full rate, sink always ready: consecutive tokens' last output beats are the
    manifest's ``cycles_per_token["full_steady_state"]`` apart."""
    t0 = time.perf_counter()
    env = env_class()(dut)
    await env.reset()
    T = 8
    env.start_stream(env.stimulus("gaussian", 11, T))
    await env.wait_outputs(T, env.deadline(T))
    await env.check_end_of_stream()
    steps = np.diff(env.sb.last_cycles).tolist()
    full = MANIFEST.get("cycles_per_token", {}).get("full_steady_state")
    _expect_equal(env, "cycles per token back to back", sorted(set(steps)), [full])
    env.finish("steady_state", t0, steps=steps, manifest_full_steady_state=full)


@cocotb.test()
async def latency(dut):
    """Isolated tokens (each sent after the previous one's output and the core went idle, the sink
    always ready; for VLA refresh tokens among them): the latency from the last input beat to the
    first output beat of each equals the manifest's ``latency["full"]`` (a design whose manifest
    states none fails here: run this test only where it does)."""
    t0 = time.perf_counter()
    env = env_class()(dut)
    await env.reset()
    X = env.stimulus("gaussian", 71, 4)
    env.start_stream(X, send=False)
    refreshes = []
    for t in range(len(X)):
        env.driver.send(X[t:t + 1])
        await env.wait_outputs(t + 1, env.deadline(1))
        await env.wait_tokens(t + 1)
        if "refreshes" in env.COUNTERS:
            refreshes.append(int(dut.status_refreshes.value))
        await ClockCycles(dut.clk, 3)
    status = await env.check_end_of_stream()
    lat = env.latencies()
    man = MANIFEST.get("latency")
    if isinstance(man, dict) and "full" in man:
        _expect_equal(env, "latency of an isolated token", lat, [int(man["full"])] * len(X))
    else:
        env.errors.append("the manifest states no latency")
    env.finish("latency", t0, latency=lat, refreshes_after_token=refreshes, status=status, manifest_latency=man)


@cocotb.test()
async def saturating(dut):
    """A stream built to saturate (VLA: one-hot-like keys, large values, zero features, an all-zero
    ``u``; linear attention: large positive keys and values; DeltaNet: one-hot keys, large values,
    a zero key) with gaps and backpressure: the saturations counted as the model counts them."""
    t0 = time.perf_counter()
    env = env_class()(dut, seed=6, idle=0.2, stall=0.3)
    await env.reset()
    T = env.SATURATING_T
    env.start_stream(env.stimulus("saturating", 3, T))
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.3))
    status = await env.check_end_of_stream()
    env.finish("saturating", t0, status=status, saturated=status["model"]["saturations"] > 0)


@cocotb.test()
async def reset_mid_stream(dut):
    """A synchronous reset inside token 3's ``q`` beats of stream A (gaps, backpressure): what came
    out before is a prefix of the model's output for A (the scoreboard compared it), and stream B
    after the reset matches the model run on B alone (counters and states re-initialised)."""
    t0 = time.perf_counter()
    env = env_class()(dut, seed=7, idle=0.3, stall=0.4)
    await env.reset()
    bpt, dk = env.in_len // env.k, env.d // env.k
    A = env.stimulus("gaussian", 51, 6)
    B = env.stimulus("gaussian", 52, 5)
    env.start_stream(A)
    cut = 3 * bpt + 2 * dk + 1
    accepted = 0
    for _ in range(env.deadline(len(A), 0.3, 0.4)):
        await RisingEdge(dut.clk)
        accepted += int(dut.s_axis_tvalid.value) and int(dut.s_axis_tready.value)
        if accepted == cut:
            break
    else:
        env.errors.append("the cut point was never reached")
    before = env.sb.compared
    env.driver.clear()
    await env.reset(2)
    env.start_stream(B)
    await env.wait_outputs(len(B), env.deadline(len(B), 0.3, 0.4))
    status = await env.check_end_of_stream()
    env.finish("reset_mid_stream", t0, outputs_before_reset=before, beats_before_reset=accepted,
               beats_per_token=bpt, status=status)


@cocotb.test()
async def framing_errors(dut):
    """Two tokens per frame (``tlast`` missing on every other token's last beat): outputs
    unaffected, one framing error per missing ``tlast``."""
    t0 = time.perf_counter()
    env = env_class()(dut, seed=8, idle=0.2, stall=0.2)
    await env.reset()
    T = 4
    env.expected_framing = T // 2
    env.start_stream(env.stimulus("gaussian", 61, T), tokens_per_frame=2)
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.2))
    status = await env.check_end_of_stream()
    env.finish("framing_errors", t0, status=status)


@cocotb.test()
async def streams(dut):
    """The back-end's run: each stream of ``streams_file`` (``.npz`` of raw ``[T, in_len]`` tokens
    ``s0, s1, ...``) after a reset; the observed outputs ``o<i>`` (VLA: and ``o_frac<i>`` from
    ``tuser``), the final states (``a<i>``, ``s<i>``, ``z<i>`` as the design has them) and the
    counters ``status<i>`` go to ``outputs_file``; the scoreboard checks every bit."""
    t0 = time.perf_counter()
    data = np.load(CASE["streams_file"])
    names = sorted((n for n in data.files if n.startswith("s")), key=lambda n: int(n[1:]))
    env = env_class()(dut, seed=0, idle=float(CASE.get("idle", 0.0)), stall=float(CASE.get("stall", 0.0)))
    env.collect = True
    out = {}
    for i, name in enumerate(names):
        X = np.asarray(data[name], dtype=np.int64)
        await env.reset()
        env.outputs, env.outputs_user = [], []
        env.start_stream(X)
        await env.wait_outputs(len(X), env.deadline(len(X)))
        status = await env.check_end_of_stream(state=True)
        out[f"o{i}"] = np.array(env.outputs, dtype=np.int64).reshape(len(env.outputs), env.d)
        if env.user_width is not None:
            user = np.array(env.outputs_user, dtype=np.int64).reshape(len(env.outputs_user), env.d)
            if np.any(user != user[:, :1]):
                env.errors.append(f"stream {i}: tuser differs between the beats of a token")
            out[f"o_frac{i}"] = user[:, 0] if len(user) else np.zeros(0, dtype=np.int64)
        for state, M in env.read_state().items():
            out[f"{state}{i}"] = M
        out[f"status{i}"] = env.status_vector(status)
        await RisingEdge(dut.clk)  # out of the ReadOnly phase before the next reset
    np.savez(CASE["outputs_file"], **out)
    env.finish("streams", t0, streams=len(names), tokens=int(sum(len(data[n]) for n in names)),
               beats_per_token=env.in_len // env.k)
