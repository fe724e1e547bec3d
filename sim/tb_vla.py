"""cocotb testbench of the VLA top (``specmem_vla``, AXI4-Stream ports, ``m_axis_tuser`` = ``o_frac``).

The annihilation testbench's structure (:class:`~specmem.sim.tb_top.AnnihilationEnv`) with the
VLA's parts swapped in (:class:`VLAEnv`): a token is ``4 d/k`` input beats, the ``k``, ``v``,
``q``, ``u`` vectors one after the other (element ``i`` of a tensor in lane ``i % k`` of that
tensor's beat ``i // k``: the driver and the input monitor treat a token as ``4d`` elements);
the model (:class:`~specmem.sim.model.VLAModel`) runs ``vla_fixed`` with the parameters the
design was generated with (the case's ``manifest.design.params``) on the tokens the input monitor
saw; the in-order scoreboard compares every ``o_raw`` element and the ``o_frac`` (``tuser``) of
every output beat bit for bit; at the end of each stream the counters (``tokens``,
``saturations``, ``refreshes``, ``framing_errors``) and the states ``A`` and ``S`` (read back from
the RAM banks ``core.amem``/``core.smem``, a backdoor) equal the model's. The cycles per token
back to back and the latency of an isolated token (last input beat to first output beat) equal
the manifest's ``cycles_per_token`` and ``latency``.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from specmem.sim import stimulus
from specmem.sim.model import VLAModel
from specmem.sim.tb_top import CASE, MANIFEST, SEEDS, AnnihilationEnv, _expect_equal
from specmem.sim.axis import now_cycles

STATUS = ("tokens", "saturations", "refreshes", "framing_errors")


class VLAEnv(AnnihilationEnv):
    """The annihilation environment with the VLA's token packing, model, counters and state."""

    @property
    def in_len(self) -> int:
        return 4 * self.d

    @property
    def clear_cycles(self) -> int:
        return self.d * self.d // self.k + 4  # A = I/lambda0, S = 0: one address per cycle

    def make_model(self) -> VLAModel:
        params = dict(MANIFEST.get("design", {}).get("params") or {})
        if MANIFEST.get("design", {}).get("in_range") is not None:
            params["in_range"] = MANIFEST["design"]["in_range"]
        return VLAModel(self.d, self.k, self.preset, params)

    def _status(self) -> dict:
        dut = self.dut
        s = {name: int(getattr(dut, f"status_{name}").value) for name in STATUS}
        s["busy"] = int(dut.status_busy.value)
        return s

    async def _status_loop(self):
        """At every change of ``status_tokens``: a token is counted only after the input monitor
        saw it (the counters themselves are compared at the end of each stream: the refresh and
        the write-back saturations of token ``t`` land in the next token's fused pass)."""
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

    def read_state(self) -> tuple[np.ndarray, np.ndarray]:
        """``A`` and ``S`` (``d x d`` raw) from the RAM banks: ``M[i, j]`` is in bank ``j % k`` at
        address ``i d/k + j // k`` (a backdoor: the design has no port for them)."""
        d, k, dk = self.d, self.k, self.d // self.k
        tens = MANIFEST["formats"]["tensors"]
        out = []
        for mem_name, fmt in (("amem", "a"), ("smem", "s")):
            mem = getattr(self.dut.core, mem_name)
            banks = [getattr(mem, f"bank{l}") for l in range(k)]
            w = int(tens[fmt]["width"])
            M = np.zeros((d, d), dtype=np.int64)
            for i in range(d):
                for j in range(d):
                    v = int(banks[j % k][i * dk + j // k].value)
                    M[i, j] = v - (1 << w) if v >> (w - 1) else v
            out.append(M)
        return out[0], out[1]

    async def check_end_of_stream(self, *, state: bool = True) -> dict:
        """Counters and the states ``A``, ``S`` after the current stream, against the model."""
        n = len(self.model.observed)
        await self.wait_tokens(n)
        s = self._status()
        exp = self.model.totals(n)
        for name in ("tokens", "saturations", "refreshes"):
            if s[name] != exp[name]:
                self.errors.append(f"end of stream {self.sb.stream}: status_{name} = {s[name]}, model {exp[name]}")
        if s["framing_errors"] != self.expected_framing:
            self.errors.append(f"end of stream {self.sb.stream}: status_framing_errors = {s['framing_errors']}, "
                               f"expected {self.expected_framing}")
        if state:
            for name, M, E in zip(("A", "S"), self.read_state(), (exp["a_raw"], exp["s_raw"])):
                if not np.array_equal(M, E):
                    i, j = np.argwhere(M != E)[0]
                    self.errors.append(f"end of stream {self.sb.stream}: state {name}[{i}, {j}] = {M[i, j]}, model "
                                       f"{E[i, j]} ({int(np.sum(M != E))} elements differ)")
        s["model"] = {k: v for k, v in exp.items() if k not in ("a_raw", "s_raw")}
        return s


def _raw(kind: str, seed: int, T: int, env: VLAEnv) -> np.ndarray:
    return env.model.quantize(stimulus.vla_make(kind, seed, T, env.d))


async def _run_stream(dut, name: str, kind: str, seed: int, T: int, idle: float, stall: float) -> dict:
    t0 = time.perf_counter()
    env = VLAEnv(dut, seed=seed, idle=idle, stall=stall)
    await env.reset()
    env.start_stream(_raw(kind, seed, T, env))
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
    """A stream (Gaussian, a few tokens x3, an all-zero ``u``) under random idle gaps and random
    backpressure: every ``o_raw`` and ``o_frac``, the counters and the final ``A`` and ``S``."""
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
    env = VLAEnv(dut)
    await env.reset()
    T = 8
    env.start_stream(_raw("gaussian", 11, T, env))
    await env.wait_outputs(T, env.deadline(T))
    await env.check_end_of_stream()
    steps = np.diff(env.sb.last_cycles).tolist()
    full = MANIFEST.get("cycles_per_token", {}).get("full_steady_state")
    _expect_equal(env, "cycles per token back to back", sorted(set(steps)), [full])
    env.finish("steady_state", t0, steps=steps, manifest_full_steady_state=full)


@cocotb.test()
async def latency(dut):
    """Isolated tokens (each sent after the previous one's output and the core went idle, the sink
    always ready), refresh tokens among them: the latency from the last input beat to the first
    output beat of each equals the manifest's ``latency["full"]``."""
    t0 = time.perf_counter()
    env = VLAEnv(dut)
    await env.reset()
    X = _raw("gaussian", 71, 4, env)
    env.start_stream(X, send=False)
    refreshes = []
    for t in range(len(X)):
        env.driver.send(X[t:t + 1])
        await env.wait_outputs(t + 1, env.deadline(1))
        await env.wait_tokens(t + 1)
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
    """One-hot-like keys, large values, zero features and an all-zero ``u``: ``kh`` and ``e``
    saturate (legacy-int8) and the eps clamps act; counted as the model counts them."""
    t0 = time.perf_counter()
    env = VLAEnv(dut, seed=6, idle=0.2, stall=0.3)
    await env.reset()
    T = 10
    env.start_stream(_raw("saturating", 3, T, env))
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.3))
    status = await env.check_end_of_stream()
    env.finish("saturating", t0, status=status, saturated=status["model"]["saturations"] > 0)


@cocotb.test()
async def reset_mid_stream(dut):
    """A synchronous reset inside token 3's ``q`` beats of stream A (gaps, backpressure): what came
    out before is a prefix of the model's output for A (the scoreboard compared it), and stream B
    after the reset matches the model run on B alone (counters, ``A`` and ``S`` re-initialised)."""
    t0 = time.perf_counter()
    env = VLAEnv(dut, seed=7, idle=0.3, stall=0.4)
    await env.reset()
    bpt, dk = 4 * env.d // env.k, env.d // env.k
    A = _raw("gaussian", 51, 6, env)
    B = _raw("gaussian", 52, 5, env)
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
    """Two tokens per frame (``tlast`` missing on every other token's last ``u`` beat): outputs
    unaffected, one framing error per missing ``tlast``."""
    t0 = time.perf_counter()
    env = VLAEnv(dut, seed=8, idle=0.2, stall=0.2)
    await env.reset()
    T = 4
    env.expected_framing = T // 2
    env.start_stream(_raw("gaussian", 61, T, env), tokens_per_frame=2)
    await env.wait_outputs(T, env.deadline(T, 0.2, 0.2))
    status = await env.check_end_of_stream()
    env.finish("framing_errors", t0, status=status)


@cocotb.test()
async def streams(dut):
    """The back-end's run: each stream of ``streams_file`` (``.npz`` of raw ``[T, 4d]`` tokens
    ``s0, s1, ...``) after a reset; the observed ``o_raw``, ``o_frac`` (``tuser``), the states
    ``A``, ``S`` and the counters go to ``outputs_file``; the scoreboard checks every bit."""
    t0 = time.perf_counter()
    data = np.load(CASE["streams_file"])
    names = sorted((n for n in data.files if n.startswith("s")), key=lambda n: int(n[1:]))
    env = VLAEnv(dut, seed=0, idle=float(CASE.get("idle", 0.0)), stall=float(CASE.get("stall", 0.0)))
    env.collect = True
    out = {}
    dk = env.d // env.k
    for i, name in enumerate(names):
        X = np.asarray(data[name], dtype=np.int64)
        await env.reset()
        env.outputs, env.outputs_user = [], []
        env.start_stream(X)
        await env.wait_outputs(len(X), env.deadline(len(X)))
        status = await env.check_end_of_stream(state=True)
        out[f"o{i}"] = np.array(env.outputs, dtype=np.int64).reshape(len(env.outputs), env.d)
        user = np.array(env.outputs_user, dtype=np.int64).reshape(len(env.outputs_user), env.d)
        if np.any(user != user[:, :1]):
            env.errors.append(f"stream {i}: tuser differs between the beats of a token")
        out[f"o_frac{i}"] = user[:, 0] if len(user) else np.zeros(0, dtype=np.int64)
        out[f"a{i}"], out[f"s{i}"] = env.read_state()
        out[f"status{i}"] = np.array([status[k] for k in STATUS], dtype=np.int64)
        await RisingEdge(dut.clk)  # out of the ReadOnly phase before the next reset
    np.savez(CASE["outputs_file"], **out)
    env.finish("streams", t0, streams=len(names), tokens=int(sum(len(data[n]) for n in names)), beats_per_token=dk)
