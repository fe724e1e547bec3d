"""The ``"triton"`` backend of :func:`specmem.backends.run`: VLA and the annihilation memory on
the Triton kernels, same inputs and output names as the float backend.

Inputs ``[..., T, d]`` (numpy) become ``[N, T, 1, d]`` float32 (``N`` = the leading dims
flattened, one head); outputs come back as float64 numpy arrays in the exchange layout. Options:
``mode="fused"`` (default) or ``"chunk"`` for VLA (``chunk`` has no ``s_norm``, and no
``a_norm`` unless ``a_pass="sequential"``), and ``chunk_size``, ``dot_precision``, ``a_pass``
for ``chunk``. Without a CUDA device the kernels run in
Triton's CPU interpreter (slow: small inputs only).
"""

from __future__ import annotations

import math

import numpy as np

from specmem.backends import register_backend
from specmem.golden.common import SpecmemInputError, as_float_array, check_same_shape

__all__ = ["triton_backend"]


def _to_kernel(a, torch, device):
    """``[..., T, d]`` float64 numpy -> ``[N, T, 1, d]`` float32 tensor, and the leading dims."""
    batch = a.shape[:-2]
    n = math.prod(batch)
    return torch.from_numpy(a.reshape((n,) + a.shape[-2:])).to(device, torch.float32)[:, :, None, :], batch


def _back(x, batch, tail):
    return x.detach().cpu().double().numpy().reshape(batch + tail)


def _vla(inputs, params, options):
    from specmem.kernels.vla import chunk_vla, fused_recurrent_vla

    mode = options.pop("mode", "fused")
    if mode not in ("fused", "chunk"):
        raise SpecmemInputError(f"mode: must be 'fused' or 'chunk', got {mode!r}")
    chunk_opts = {n: options.pop(n) for n in ("chunk_size", "dot_precision", "a_pass") if n in options}
    if chunk_opts and mode != "chunk":
        raise SpecmemInputError(f"{next(iter(chunk_opts))}: only applies to mode='chunk'")
    if options:
        raise SpecmemInputError(f"backend: unknown option(s) for triton vla: {', '.join(options)}")
    arrays = {n: as_float_array(n, inputs[n]) for n in ("k", "v", "q", "u")}
    check_same_shape("k", arrays["k"], v=arrays["v"], q=arrays["q"], u=arrays["u"])
    import torch
    device = "cuda" if torch.cuda.is_available() and not _interpreting() else "cpu"
    t = {}
    for n, a in arrays.items():
        t[n], batch = _to_kernel(a, torch, device)
    T, d = arrays["k"].shape[-2:]
    fn = fused_recurrent_vla if mode == "fused" else chunk_vla
    out = fn(t["k"], t["v"], t["q"], t["u"], **params, **chunk_opts)
    res = {"o": _back(out["o"], batch, (T, d)), "s": _back(out["s"], batch, (d, d)),
           "a": _back(out["a"], batch, (d, d))}
    for name in ("s_norm", "a_norm"):
        if out[name] is not None:
            res[name] = _back(out[name], batch, (T,))
    return res


def _annihilation(inputs, params, options):
    from specmem.kernels.annihilation import fused_recurrent_annihilation

    if options:
        raise SpecmemInputError(f"backend: unknown option(s) for triton annihilation: {', '.join(options)}")
    params = dict(params)
    if params.pop("variant", "exact") != "exact":
        raise SpecmemInputError("variant: the triton backend implements the exact variant (Gram form)")
    if params.pop("form", None) not in (None, "gram"):
        raise SpecmemInputError("form: the triton backend implements the Gram form")
    if params.pop("use_gram", False):
        raise SpecmemInputError("use_gram: the kernel recomputes g = Uᵀr and keeps no G")
    params.pop("eps", None)  # only the literal variant uses it
    import torch
    device = "cuda" if torch.cuda.is_available() and not _interpreting() else "cpu"
    x, batch = _to_kernel(as_float_array("x", inputs["x"]), torch, device)
    T, d = x.shape[1], x.shape[3]
    out = fused_recurrent_annihilation(x, **params)
    k = out["u"].shape[-1]
    return {"u": _back(out["u"], batch, (d, k)), "omega": _back(out["omega"], batch, (d, d)),
            "y": _back(out["y"], batch, (T, d)),
            "orth": out["orth"].cpu().numpy().reshape(batch + (T,)),
            "count": out["count"].cpu().numpy().reshape(batch)}


def _interpreting():
    from specmem.kernels.utils import interpreting
    return interpreting()


def triton_backend(algo: str, inputs: dict, params: dict, options: dict) -> dict:
    """Run ``algo`` (``vla`` or ``annihilation``) on the Triton kernels; see the module docstring."""
    if algo not in ("vla", "annihilation"):
        raise SpecmemInputError(f"backend: the triton backend implements vla and annihilation, not {algo}")
    from specmem.kernels import use_interpreter_if_no_gpu

    use_interpreter_if_no_gpu()
    return (_vla if algo == "vla" else _annihilation)(inputs, params, dict(options))


register_backend("triton", triton_backend)
