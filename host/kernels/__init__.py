"""specmem.kernels: Triton kernels beside their plain torch references (fla layout ``[B, T, H, D]``).

One folder per operation: ``naive.py`` (torch loops, the oracle), ``fused_recurrent.py``
(one kernel stepping through T), ``chunk.py`` (chunkwise form, where there is one).
``backend.py`` registers them as the ``"triton"`` backend of :func:`specmem.backends.run`.

The names below load on first use. ``@triton.jit`` reads ``TRITON_INTERPRET`` when a module is
imported, triton's own ``triton.language.standard`` included, so the CPU interpreter must be
chosen before triton is first imported: set ``TRITON_INTERPRET=1`` in the environment, or call
:func:`use_interpreter_if_no_gpu` first (it imports torch, not triton).
"""

import importlib
import os
import sys

_EXPORTS = {
    "fused_recurrent_vla": "specmem.kernels.vla",
    "chunk_vla": "specmem.kernels.vla",
    "vla_recurrence": "specmem.kernels.vla",
    "vla_chunkwise": "specmem.kernels.vla",
    "fused_recurrent_annihilation": "specmem.kernels.annihilation",
    "annihilation_recurrence": "specmem.kernels.annihilation",
}

__all__ = [*_EXPORTS, "use_interpreter_if_no_gpu"]


def use_interpreter_if_no_gpu() -> bool:
    """Choose Triton's CPU interpreter when there is no CUDA device (or ``TRITON_INTERPRET=1`` is
    set), compiled kernels otherwise; returns True for the interpreter. Raises ``RuntimeError``
    if triton was already imported under the other choice (it cannot be switched afterwards)."""
    import torch

    interpret = not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") == "1"
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
    std = sys.modules.get("triton.language.standard")
    if std is not None and (type(std.zeros).__name__ == "InterpretedFunction") != interpret:
        want = "TRITON_INTERPRET=1 (no CUDA device)" if interpret else "TRITON_INTERPRET unset (CUDA device)"
        raise RuntimeError(f"triton was imported before the kernel backend was chosen; start Python with {want}")
    return interpret


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specmem.kernels' has no attribute {name!r}")
