"""VLA's state pass through fla's ``chunk_dplr_delta_rule`` (CUDA only), with a backward.

Spec §2: ``S_t = S_{t-1}(I − kh ahᵀ) + v ahᵀ`` is fla's DPLR rule
``S_t = S_{t-1}(I + a bᵀ) + v kᵀ`` (``[V, K]`` orientation) with ``a = −kh``, ``b = ah``,
``k = ah``, ``q = elu1(q)``, scale 1 and no decay; ``o`` is then divided by the normaliser
``max(zkᵀ qf, eps)``. Without gradients ``ah`` comes from a Triton ``A`` pass; with them, from the
differentiable torch segment form (:func:`~specmem.kernels.vla.naive.vla_a_segments`), and fla's
own backward carries the state half.
"""

from __future__ import annotations

import torch

from ..utils import SpecmemInputError
from .naive import _normalize, elu1, vla_a_segments

__all__ = ["chunk_vla_dplr"]


def chunk_vla_dplr(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                   dot_precision, a_pass, initial_state=None):
    """Checked ``[B, T, H, D]`` CUDA inputs (and a checked resumable state) in, the kernels' dict out
    (``a_norm``, ``s_norm`` None)."""
    if k.device.type != "cuda":
        raise SpecmemInputError("state_pass: 'fla-dplr' needs CUDA tensors (fla's kernels do not run in "
                                "Triton's CPU interpreter); use state_pass='specmem'")
    from fla.ops.generalized_delta_rule import chunk_dplr_delta_rule

    st = initial_state or {}
    grad = torch.is_grad_enabled() and any(x.requires_grad for x in (k, v, q, u))
    kf = elu1(k.float())
    if grad:
        kh, ah, a = vla_a_segments(k.float(), u.float(), lambda0, eps, refresh_period, eta, u_scale,
                                   a0=st.get("a"), t0=st.get("t", 0))
    else:
        kh = _normalize(kf, eps)
        if a_pass == "sequential":
            from .chunk import vla_ah_sequential_fwd
            ah, a, _ = vla_ah_sequential_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                                             initial_state)
        else:
            from .chunk_a import vla_a_chunk_fwd
            ah, a = vla_a_chunk_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                                    dot_precision, initial_state=initial_state)
    qf = elu1(q.float())
    zk = torch.cumsum(kf, dim=1)
    if st:
        zk = zk + st["zk"][:, None]
    den = torch.clamp((zk * qf).sum(-1), min=eps)
    dt = v.dtype
    o, hs = chunk_dplr_delta_rule(
        q=qf.to(dt), k=ah.to(dt), v=v, a=(-kh).to(dt), b=ah.to(dt),
        gk=torch.zeros(kh.shape, dtype=torch.float32, device=kh.device),
        scale=1.0, initial_state=st["s"].transpose(-1, -2).contiguous() if st else None,
        output_final_state=output_final_state)
    o = (o.float() / den[..., None]).to(dt)
    if not output_final_state:
        return {"o": o, "s": None, "a": None, "s_norm": None, "a_norm": None, "final_state": None}
    s = hs.transpose(-1, -2)
    return {"o": o, "s": s, "a": a, "s_norm": None, "a_norm": None,
            "final_state": {"s": s, "a": a, "zk": zk[:, -1], "t": st.get("t", 0) + k.shape[1]}}
