"""VLA (spec §2) as plain torch loops in the kernels' ``[B, T, H, D]`` layout: the kernels' oracle.

``vla_recurrence`` is Algorithm 1 token by token; ``vla_chunkwise`` runs the same ``A`` loop
and then the state chunk by chunk in the WY/UT form that ``chunk.py`` implements. Both
compute in the input dtype (float32 or float64) and return the kernels' dict.
"""

from __future__ import annotations

import math

import torch

__all__ = ["elu1", "vla_a_loop", "vla_a_segments", "vla_recurrence", "vla_chunkwise"]


def elu1(x: torch.Tensor) -> torch.Tensor:
    """ELU+1: ``x + 1`` for ``x > 0`` else ``exp(x)``, the same expression as the golden model."""
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


def _normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.clamp(x.norm(dim=-1, keepdim=True), min=eps)


def vla_a_loop(k, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None):
    """The ``A`` loop (RLS on ``u`` with a ``+eta I`` refresh every ``refresh_period`` tokens).

    ``k``, ``u``: ``[B, T, H, K]``. Returns ``kh``, ``ah`` ``[B, T, H, K]``, final ``a``
    ``[B, H, K, K]`` and ``a_norm`` ``[B, T, H]`` (Frobenius norm of ``A_t``).
    """
    B, T, H, K = k.shape
    u_scale = 1.0 / math.sqrt(K) if u_scale is None else u_scale
    kh = _normalize(elu1(k), eps)
    un = _normalize(u, eps) * u_scale
    eye = torch.eye(K, dtype=k.dtype, device=k.device)
    A = (eye / lambda0).expand(B, H, K, K).clone()
    ah = torch.empty_like(k)
    a_norm = k.new_empty(B, T, H)
    for t in range(T):
        u_t = un[:, t]                                        # [B, H, K]
        zsm = torch.einsum("bhij,bhj->bhi", A, u_t)
        delta = torch.clamp(1 + (u_t * zsm).sum(-1), min=eps)
        A = A - zsm[..., :, None] * zsm[..., None, :] / delta[..., None, None]
        if refresh_period and (t + 1) % refresh_period == 0:
            A = A + eta * eye
        ah[:, t] = _normalize(torch.einsum("bhij,bhj->bhi", A, kh[:, t]), eps)
        a_norm[:, t] = A.flatten(-2).norm(dim=-1)
    return kh, ah, A, a_norm


def vla_a_segments(k, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                   max_len=32, a0=None, t0=0):
    """The ``A`` loop in the exact segment form of spec §2, in the kernels' ``[B, T, H, K]`` layout.

    The algebra is :func:`specmem.nn.ops.chunk_vla_a` (Cholesky form, differentiable; segments of
    at most ``max_len`` tokens, each refresh ending one), which this adapts: features as
    Algorithm 1, ``a0`` the initial ``A`` ``[B, H, K, K]`` (default ``I / lambda0``), ``t0`` tokens
    before this call (the refresh phase). Returns
    ``kh``, ``ah`` ``[B, T, H, K]`` and the final ``A``. The Triton kernel ``chunk_a.py`` computes
    the same segments.
    """
    from specmem.nn.ops import chunk_vla_a

    B, T, H, K = k.shape
    u_scale = 1.0 / math.sqrt(K) if u_scale is None else u_scale
    kh = _normalize(elu1(k), eps)
    un = _normalize(u, eps) * u_scale
    A0 = (torch.eye(K, dtype=k.dtype, device=k.device) / lambda0).expand(B, H, K, K) if a0 is None else a0
    alpha, A = chunk_vla_a(kh.transpose(1, 2), un.transpose(1, 2), A0, t0, eps, refresh_period, eta,
                           chunk_size=max_len)
    return kh, _normalize(alpha.transpose(1, 2), eps), A


def _denominator(k, q, eps):
    """``max(zk_tᵀ qf_t, eps)`` with ``zk_t`` the running sum of ``elu1(k)``: ``[B, T, H]``."""
    qf = elu1(q)
    zk = torch.cumsum(elu1(k), dim=1)
    return qf, torch.clamp((zk * qf).sum(-1), min=eps)


def vla_recurrence(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                   output_final_state=True, return_trace=False) -> dict:
    """VLA, Algorithm 1, one token at a time.

    ``k, q, u``: ``[B, T, H, K]``; ``v``: ``[B, T, H, V]``. Returns ``o`` ``[B, T, H, V]``,
    ``s`` ``[B, H, V, K]`` (read as ``S @ key``, the spec's orientation), ``a`` ``[B, H, K, K]``,
    ``s_norm`` and ``a_norm`` ``[B, T, H]``; ``s``/``a`` are None without ``output_final_state``.
    ``return_trace`` adds ``kh`` and ``ah`` ``[B, T, H, K]``.
    """
    B, T, H, K = k.shape
    V = v.shape[-1]
    kh, ah, A, a_norm = vla_a_loop(k, u, lambda0, eps, refresh_period, eta, u_scale)
    qf, den = _denominator(k, q, eps)
    S = k.new_zeros(B, H, V, K)
    o = v.new_empty(B, T, H, V)
    s_norm = k.new_empty(B, T, H)
    for t in range(T):
        e = v[:, t] - torch.einsum("bhvk,bhk->bhv", S, kh[:, t])
        S = S + e[..., :, None] * ah[:, t, :, None, :]
        o[:, t] = torch.einsum("bhvk,bhk->bhv", S, qf[:, t]) / den[:, t, :, None]
        s_norm[:, t] = S.flatten(-2).norm(dim=-1)
    out = {"o": o, "s": S if output_final_state else None, "a": A if output_final_state else None,
           "s_norm": s_norm, "a_norm": a_norm}
    if return_trace:
        out.update(kh=kh, ah=ah)
    return out


def vla_chunkwise(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                  chunk_size=16, output_final_state=True) -> dict:
    """VLA with the state computed chunk by chunk (the algorithm of ``chunk.py``).

    The ``A`` loop runs first, token by token (:func:`vla_a_loop`); then, per chunk of
    ``C = chunk_size`` tokens with ``Hs = Sᵀ`` (``[K, V]``) at the chunk start:
    ``Tm = (I + tril(KH AHᵀ, -1))⁻¹``, ``U = Tm (V - KH Hs)``,
    ``O = (QF Hs + tril(QF AHᵀ) U) / den``, ``Hs += AHᵀ U``.
    Same arguments and outputs as :func:`vla_recurrence`, except ``s_norm`` is None
    (the state is only formed at chunk boundaries).
    """
    B, T, H, K = k.shape
    V = v.shape[-1]
    C = chunk_size
    kh, ah, A, a_norm = vla_a_loop(k, u, lambda0, eps, refresh_period, eta, u_scale)
    qf, den = _denominator(k, q, eps)
    Hs = k.new_zeros(B, H, K, V)
    o = v.new_empty(B, T, H, V)
    for c0 in range(0, T, C):
        sl = slice(c0, min(c0 + C, T))
        n = sl.stop - sl.start
        KH, AH, QF = (x[:, sl].transpose(1, 2) for x in (kh, ah, qf))   # [B, H, n, K]
        Vc = v[:, sl].transpose(1, 2)                                    # [B, H, n, V]
        eye = torch.eye(n, dtype=k.dtype, device=k.device)
        Tm = torch.linalg.inv(eye + torch.tril(KH @ AH.transpose(-1, -2), -1))
        Uc = Tm @ (Vc - KH @ Hs)
        Oc = QF @ Hs + torch.tril(QF @ AH.transpose(-1, -2)) @ Uc
        o[:, sl] = (Oc / den[:, sl].transpose(1, 2)[..., None]).transpose(1, 2)
        Hs = Hs + AH.transpose(-1, -2) @ Uc
    S = Hs.transpose(-1, -2)
    return {"o": o, "s": S if output_final_state else None, "a": A if output_final_state else None,
            "s_norm": None, "a_norm": a_norm}
