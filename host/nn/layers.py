"""fla-style token-mixing layers, one per rule: ``forward(x [B, T, D]) -> (o [B, T, D], state or None)``.

Each memory layer projects ``x`` to per-head raw vectors (``q, k, v``, VLA's ``u``, the
delta rules' ``beta`` and Gated DeltaNet's ``g``), runs the rule's memory on ``[B, H, T, d]``
and projects the heads back. The memory step is chosen by ``layer.memory``:

* ``"torch"`` (default): :mod:`specmem.nn.ops` in the input's dtype, with autograd;
* ``"float64"`` / ``"float32"``: the same ops at that precision (inference comparisons);
* ``"golden"``: the NumPy float64 golden model (``specmem.golden``), inference only;
* a fixed-point preset name (``formats.PRESETS``: ``int8``, ``int18``, ...): the bit-exact
  fixed-point model ``specmem.golden.fixed.run_fixed``, inference only, every (sequence, head)
  an independent stream;
* ``"verilator:<preset>"`` (an RTL preset, ``legacy-int8`` ...; VLA, DeltaNet, Gated DeltaNet (its
  decay ``g`` goes in with ``beta``) and linear attention):
  the Verilated RTL through :func:`specmem.backend_verilator.verilator_backend`, every
  (sequence, head) a stream after a reset (the cores hold one memory), inference only and slow
  (a few sequences); ``layer.verilator_options`` are the backend's options (``lanes``: the
  design's ``k``).

With ``layer.keep_memory_io = True`` the NumPy memories (golden excepted) keep their last inputs
and full result in ``layer.last_memory_io`` (``{"inputs", "result"}``), for bit-level comparisons.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from specmem.golden.common import SpecmemInputError

from . import ops

__all__ = ["VLA", "DeltaNet", "GatedDeltaNet", "LinearAttention", "SoftmaxAttention", "LAYERS", "MEMORY_BACKENDS",
           "VERILATOR_ALGO", "verilator_memory_error",
           "fixed_formats_for"]

#: memory backends other than the fixed-point presets
MEMORY_BACKENDS = ("torch", "float64", "float32", "golden")


def fixed_formats_for(rule: str) -> list[str]:
    """The fixed-point presets whose model covers ``rule``: every preset for the recurrent rules
    (Gated DeltaNet's fixed-binary-point ones run ``gated_deltanet_fixed``, the RTL's model), none for softmax."""
    from specmem.golden.fixed.formats import PRESETS

    return list(PRESETS) if rule in _FIXED_ALGO else []


_FIXED_ALGO = {"vla": "vla", "deltanet": "deltanet", "gated_deltanet": "gated-deltanet", "linear": "linear"}

#: the rules the Verilator backend runs (their RTL cores), layer rule -> backend algo
VERILATOR_ALGO = {"vla": "vla", "deltanet": "deltanet", "gated_deltanet": "gated-deltanet", "linear": "linear"}
VERILATOR_PREFIX = "verilator:"


def verilator_memory_error(rule: str, value: str) -> str | None:
    """Why ``value`` (``verilator:<preset>``) is not a memory of ``rule``'s layer, or None when it is."""
    from specmem.rtl.presets import rtl_preset_error

    if rule not in VERILATOR_ALGO:
        return (f"memory: the Verilator backend runs {', '.join(VERILATOR_ALGO)} (their RTL cores); "
                f"{rule} has none there")
    return rtl_preset_error(value[len(VERILATOR_PREFIX):], "memory")


class _MemoryLayer(nn.Module):
    """Shared projections, head reshaping and memory-backend dispatch of the recurrent layers."""

    rule = ""
    extra_vectors: tuple[str, ...] = ()  # per-head vectors besides q, k, v (VLA: "u")
    token_scalars: tuple[str, ...] = ()  # per-head scalars per token ("beta", "g")
    verilator_options: dict = {}  # the Verilator backend's options (``lanes``), set per layer
    keep_memory_io = False  # keep the NumPy memories' inputs and results in ``last_memory_io``

    def __init__(self, hidden_size: int, num_heads: int, head_dim: int | None = None, *, mode: str = "chunk",
                 chunk_size: int = 64, memory: str = "torch", **params):
        super().__init__()
        if hidden_size < 1 or num_heads < 1:
            raise SpecmemInputError(f"hidden_size, num_heads: must be positive, got {hidden_size}, {num_heads}")
        if head_dim is None:
            if hidden_size % num_heads:
                raise SpecmemInputError(f"num_heads: {num_heads} does not divide hidden_size {hidden_size}; "
                                        "give head_dim explicitly")
            head_dim = hidden_size // num_heads
        ops._check_mode(mode)
        self.hidden_size, self.num_heads, self.head_dim = hidden_size, num_heads, head_dim
        self.mode, self.chunk_size, self.params = mode, ops._check_chunk(chunk_size), params
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(hidden_size, inner, bias=False)
        self.k_proj = nn.Linear(hidden_size, inner, bias=False)
        self.v_proj = nn.Linear(hidden_size, inner, bias=False)
        for name in self.extra_vectors:
            setattr(self, f"{name}_proj", nn.Linear(hidden_size, inner, bias=False))
        for name in self.token_scalars:
            setattr(self, f"{name}_proj", nn.Linear(hidden_size, num_heads, bias=True))
        self.o_proj = nn.Linear(inner, hidden_size, bias=False)
        self.memory = memory

    @property
    def memory(self) -> str:
        return self._memory

    @memory.setter
    def memory(self, value: str) -> None:
        if isinstance(value, str) and value.startswith(VERILATOR_PREFIX):
            err = verilator_memory_error(self.rule, value)
            if err is not None:
                raise SpecmemInputError(err)
        elif value not in MEMORY_BACKENDS and value not in fixed_formats_for(self.rule):
            raise SpecmemInputError(f"memory: for {self.rule} one of {', '.join(MEMORY_BACKENDS)} or a fixed-point "
                                    f"preset ({', '.join(fixed_formats_for(self.rule)) or 'none'}), got {value!r}")
        self._memory = value

    def _heads(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, H*d] -> [B, H, T, d]
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

    def _scalars(self, name: str, x: torch.Tensor) -> torch.Tensor:  # -> [B, H, T] in (0, 1)
        return torch.sigmoid(getattr(self, f"{name}_proj")(x)).transpose(1, 2)

    def forward(self, x: torch.Tensor, initial_state=None, output_final_state: bool = False):
        """``x``: ``[B, T, hidden_size]``; returns ``(o [B, T, hidden_size], final state or None)``."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_size or x.shape[1] == 0:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise SpecmemInputError(f"x: expected [B, T, {self.hidden_size}] with T >= 1, got {shape}")
        vec = {n: self._heads(getattr(self, f"{n}_proj")(x)) for n in ("q", "k", "v") + self.extra_vectors}
        sca = {n: self._scalars(n, x) for n in self.token_scalars}
        if self.memory in ("torch", "float64", "float32"):
            dtype = {"torch": x.dtype, "float64": torch.float64, "float32": torch.float32}[self.memory]
            args = {n: t.to(dtype) for n, t in {**vec, **sca}.items()}
            if initial_state is not None:
                initial_state = _cast_state(initial_state, dtype)
            o, state = self._memory_torch(args, initial_state)
            o = o.to(x.dtype)
        else:
            if initial_state is not None or output_final_state:
                raise SpecmemInputError(f"memory: {self.memory!r} runs whole sequences for inference; "
                                        "initial_state and output_final_state need a torch memory")
            with torch.no_grad():
                o = self._memory_numpy({**vec, **sca}).to(device=x.device, dtype=x.dtype)
            state = None
        B, H, T, d = o.shape
        o = self.o_proj(o.transpose(1, 2).reshape(B, T, H * d))
        return o, (state if output_final_state else None)

    def _memory_numpy(self, args: dict) -> torch.Tensor:
        inputs = {n: t.detach().to("cpu", torch.float64).numpy() for n, t in args.items()}
        if self.memory == "golden":
            out = self._golden(inputs)
        elif self.memory.startswith(VERILATOR_PREFIX):
            from specmem.backend_verilator import verilator_backend
            from specmem.golden.fixed import SaturationWarning

            options = {**self.verilator_options, "format": self.memory[len(VERILATOR_PREFIX):]}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SaturationWarning)
                r = verilator_backend(VERILATOR_ALGO[self.rule], inputs, self._fixed_params(), options)
            self.last_saturation = {k: int(v) for k, v in r.items() if k.startswith("sat_")}
            if self.keep_memory_io:
                self.last_memory_io = {"inputs": inputs, "result": r}
            out = r["o"]
        else:
            from specmem.golden.fixed import SaturationWarning, run_fixed

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SaturationWarning)  # counts are in sat_*; callers read them
                r = run_fixed(_FIXED_ALGO[self.rule], inputs, self.memory, self._fixed_params())
            self.last_saturation = {k: int(v) for k, v in r.items() if k.startswith("sat_")}
            if self.keep_memory_io:
                self.last_memory_io = {"inputs": inputs, "result": r}
            out = r["o"]
        return torch.from_numpy(np.ascontiguousarray(out))

    def _fixed_params(self) -> dict:
        return {}


def _cast_state(state, dtype):
    if isinstance(state, dict):
        return {k: (v.to(dtype) if isinstance(v, torch.Tensor) else v) for k, v in state.items()}
    return state.to(dtype)


class VLA(_MemoryLayer):
    """Variational Linear Attention (spec §2): ``u_scale=None`` is Algorithm 1 (``1/sqrt(d)``), ``1`` eq. (8)."""

    rule = "vla"
    extra_vectors = ("u",)

    def __init__(self, hidden_size: int, num_heads: int, head_dim: int | None = None, *, lambda0: float = 0.1,
                 eps: float = 1e-4, refresh_period: int = 20, eta: float = 1e-3, u_scale: float | None = None,
                 **kw):
        super().__init__(hidden_size, num_heads, head_dim, lambda0=lambda0, eps=eps, refresh_period=refresh_period,
                         eta=eta, u_scale=u_scale, **kw)

    def _memory_torch(self, a, initial_state):
        return ops.vla(a["q"], a["k"], a["v"], a["u"], initial_state=initial_state, mode=self.mode,
                       chunk_size=self.chunk_size, **self.params)

    def _golden(self, x):
        from specmem.golden.vla import vla

        return vla(x["k"], x["v"], x["q"], x["u"], **self.params)["o"]

    def _fixed_params(self):
        return {k: v for k, v in self.params.items() if v is not None}


class DeltaNet(_MemoryLayer):
    """DeltaNet (spec §3): L2-normalised ``q, k``, ``beta = sigmoid(W_beta x)`` per head and token."""

    rule = "deltanet"
    token_scalars = ("beta",)

    def _memory_torch(self, a, initial_state):
        return ops.deltanet(a["q"], a["k"], a["v"], a["beta"], initial_state=initial_state, mode=self.mode,
                            chunk_size=self.chunk_size, **self.params)

    def _golden(self, x):
        from specmem.golden.deltanet import deltanet

        return deltanet(x["k"], x["v"], x["q"], x["beta"], **self.params)["o"]


class GatedDeltaNet(_MemoryLayer):
    """Gated DeltaNet (spec §3): DeltaNet plus a decay ``g = sigmoid(W_g x + b_g)`` (``b_g`` starts at 3: g ≈ 0.95)."""

    rule = "gated_deltanet"
    token_scalars = ("beta", "g")

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        nn.init.constant_(self.g_proj.bias, 3.0)

    def _memory_torch(self, a, initial_state):
        return ops.gated_deltanet(a["q"], a["k"], a["v"], a["beta"], a["g"], initial_state=initial_state,
                                  mode=self.mode, chunk_size=self.chunk_size, **self.params)

    def _golden(self, x):
        from specmem.golden.deltanet import gated_deltanet

        return gated_deltanet(x["k"], x["v"], x["q"], x["beta"], x["g"], **self.params)["o"]


class LinearAttention(_MemoryLayer):
    """Linear attention with the ELU+1 feature map and its normaliser (spec §3)."""

    rule = "linear"

    def _memory_torch(self, a, initial_state):
        return ops.linear_attention(a["q"], a["k"], a["v"], initial_state=initial_state, mode=self.mode,
                                    chunk_size=self.chunk_size, **self.params)

    def _golden(self, x):
        from specmem.golden.linear_attention import linear_attention

        return linear_attention(x["k"], x["v"], x["q"], **self.params)["o"]


class SoftmaxAttention(nn.Module):
    """Causal softmax attention, the reference mixer; state is the ``(k, v)`` cache ``[B, H, T, d]`` each."""

    rule = "softmax"

    def __init__(self, hidden_size: int, num_heads: int, head_dim: int | None = None, *, memory: str = "torch"):
        super().__init__()
        if head_dim is None:
            if hidden_size % num_heads:
                raise SpecmemInputError(f"num_heads: {num_heads} does not divide hidden_size {hidden_size}")
            head_dim = hidden_size // num_heads
        self.hidden_size, self.num_heads, self.head_dim = hidden_size, num_heads, head_dim
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(hidden_size, inner, bias=False)
        self.k_proj = nn.Linear(hidden_size, inner, bias=False)
        self.v_proj = nn.Linear(hidden_size, inner, bias=False)
        self.o_proj = nn.Linear(inner, hidden_size, bias=False)
        self.memory = memory

    @property
    def memory(self) -> str:
        return self._memory

    @memory.setter
    def memory(self, value: str) -> None:
        if value not in ("torch", "float64", "float32"):
            raise SpecmemInputError(f"memory: softmax attention has no fixed-point model; one of torch, float64, "
                                    f"float32, got {value!r}")
        self._memory = value

    def forward(self, x: torch.Tensor, initial_state=None, output_final_state: bool = False):
        """``x``: ``[B, T, hidden_size]``; ``initial_state``: a ``(k, v)`` cache of earlier tokens."""
        if not isinstance(x, torch.Tensor) or x.ndim != 3 or x.shape[-1] != self.hidden_size or x.shape[1] == 0:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise SpecmemInputError(f"x: expected [B, T, {self.hidden_size}] with T >= 1, got {shape}")
        B, T, _ = x.shape
        dtype = {"torch": x.dtype, "float64": torch.float64, "float32": torch.float32}[self.memory]
        q, k, v = (p(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2).to(dtype)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        P = 0
        if initial_state is not None:
            k0, v0 = initial_state
            P = k0.shape[-2]
            k, v = torch.cat([k0.to(dtype), k], dim=-2), torch.cat([v0.to(dtype), v], dim=-2)
        # query i (absolute P + i) sees keys 0..P+i
        mask = torch.ones(T, P + T, dtype=torch.bool, device=x.device).tril(diagonal=P)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0 / math.sqrt(self.head_dim))
        o = self.o_proj(o.to(x.dtype).transpose(1, 2).reshape(B, T, -1))
        return o, ((k, v) if output_final_state else None)


#: rule name -> layer class (``vla_eq8`` is VLA with ``u_scale=1``)
LAYERS = {
    "vla": VLA,
    "deltanet": DeltaNet,
    "gated_deltanet": GatedDeltaNet,
    "linear": LinearAttention,
    "softmax": SoftmaxAttention,
}
