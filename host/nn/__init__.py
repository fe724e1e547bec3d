"""Trainable PyTorch layers for the memory rules (fla-style API) and their pure-PyTorch recurrences.

``specmem.nn.ops``: the recurrences (sequential references and chunked forms, autograd);
``specmem.nn.layers``: one ``nn.Module`` per rule with a swappable memory step (torch, golden
NumPy, bit-exact fixed point). Needs ``torch`` (the ``gpu`` extra, or a CPU build).
"""

from __future__ import annotations

from specmem.golden.common import SpecmemInputError

from .layers import LAYERS, MEMORY_BACKENDS, DeltaNet, GatedDeltaNet, LinearAttention, SoftmaxAttention, VLA, \
    fixed_formats_for

__all__ = ["VLA", "DeltaNet", "GatedDeltaNet", "LinearAttention", "SoftmaxAttention", "LAYERS", "RULES",
           "MEMORY_BACKENDS", "fixed_formats_for", "make_layer"]

#: the rules a model can be built with; ``vla_eq8`` is VLA with the paper's eq. (8) ``u_scale = 1``
RULES = ("vla", "vla_eq8", "deltanet", "gated_deltanet", "linear", "softmax")


def make_layer(rule: str, hidden_size: int, num_heads: int, head_dim: int | None = None, **kw):
    """Build the mixer layer for ``rule`` (one of :data:`RULES`)."""
    if rule == "vla_eq8":
        return VLA(hidden_size, num_heads, head_dim, u_scale=1.0, **kw)
    if rule not in LAYERS:
        raise SpecmemInputError(f"rule: must be one of {', '.join(RULES)}, got {rule!r}")
    return LAYERS[rule](hidden_size, num_heads, head_dim, **kw)
