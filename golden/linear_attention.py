"""Linear attention with the ELU+1 feature map, float64 golden model (spec §3).

``S += v elu1(k)ᵀ``, ``z += elu1(k)``, ``o = S elu1(q) / max(zᵀ elu1(q), eps)``: the delta
rule with no read key, run through the shared loop in :mod:`deltanet`.
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_same_shape, check_scalar, elu1
from .deltanet import delta_rule

__all__ = ["linear_attention"]


def linear_attention(k, v, q, eps: float = 1e-4) -> dict:
    """ELU+1 linear attention over ``[..., T, d]`` inputs (``v`` may have its own last dim).

    Returns ``o`` ``[..., T, d_v]``, final ``s`` ``[..., d_v, d_k]``, final normaliser ``z``
    ``[..., d_k]`` and ``s_norm`` ``[..., T]`` (Frobenius norm of ``S`` after each step).
    """
    kk = as_float_array("k", k)
    vv = as_float_array("v", v)
    qq = as_float_array("q", q)
    check_same_shape("k", kk, q=qq)
    if vv.shape[:-1] != kk.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {vv.shape[:-1]} does not match k {kk.shape[:-1]}")
    eps = check_scalar("eps", eps, lo=0, lo_open=True)

    kf, qf = elu1(kk), elu1(qq)
    r = delta_rule(None, kf, vv, q=qf)
    zk = np.cumsum(kf, axis=-2)  # z_t after token t, same summation order as z += kf
    den = np.maximum(np.einsum("...td,...td->...t", zk, qf), eps)
    return {"o": r["o"] / den[..., None], "s": r["s"], "z": zk[..., -1, :], "s_norm": r["s_norm"]}
