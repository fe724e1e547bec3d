"""The memory recurrences in pure PyTorch (autograd, CPU or GPU): sequential references and chunked forms.

Layout follows the golden models: leading dims ``[...]`` (batch, heads), then ``[T, K]``;
states are ``[..., V, K]`` and are read as ``S @ key`` (spec ``algorithms.md`` conventions).

* :func:`recurrent_delta_rule` / :func:`chunk_delta_rule`: the generalised delta rule
  ``S_t = g_t S_{t-1} (I - beta_t kr_t kw_tᵀ) + beta_t v_t kw_tᵀ``, ``o_t = S_t q_t`` (read key
  ``kr`` and write key ``kw`` may differ; ``kr=None`` drops the erase term: linear attention).
  The chunk form is the WY/UT form: per chunk one unit-lower-triangular solve.
* :func:`recurrent_vla_a` / :func:`chunk_vla_a`: VLA's ``A`` loop (spec §2) giving the write keys
  ``ah``; the chunk form is spec §2's exact segment form (Cholesky per segment, segments end
  at refreshes).
* :func:`vla`, :func:`deltanet`, :func:`gated_deltanet`, :func:`linear_attention`: the rules on
  raw pre-projected vectors, with the golden models' feature maps and defaults, ``mode``
  ``"chunk"`` or ``"recurrent"``.
"""

from __future__ import annotations

import math

import torch

from specmem.golden.common import SpecmemInputError

__all__ = [
    "elu1",
    "safe_normalize",
    "recurrent_delta_rule",
    "chunk_delta_rule",
    "recurrent_vla_a",
    "chunk_vla_a",
    "vla",
    "deltanet",
    "gated_deltanet",
    "linear_attention",
    "MODES",
]

MODES = ("chunk", "recurrent")
L2_EPS = 1e-6  # same as specmem.golden.deltanet.L2_EPS


def elu1(x: torch.Tensor) -> torch.Tensor:
    """ELU+1 exactly as the golden model writes it: ``x + 1`` for ``x > 0`` else ``exp(x)``."""
    return torch.where(x > 0, x + 1, torch.exp(torch.clamp(x, max=0)))


def safe_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / max(||x||, eps)`` along the last axis (VLA's Algorithm 1 and the golden models)."""
    return x / torch.clamp(torch.linalg.vector_norm(x, dim=-1, keepdim=True), min=eps)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise SpecmemInputError(f"mode: must be one of {', '.join(MODES)}, got {mode!r}")


def _check_chunk(chunk_size) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise SpecmemInputError(f"chunk_size: expected a positive integer, got {chunk_size!r}")
    return chunk_size


def _check_qkv(q, k, v, *more):
    for name, x in (("q", q), ("k", k), ("v", v)) + more:
        if not isinstance(x, torch.Tensor):
            raise SpecmemInputError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
        if x.ndim < 2 or x.shape[-2] == 0 or x.shape[-1] == 0:
            raise SpecmemInputError(f"{name}: expected a non-empty [..., T, d] tensor, got shape {tuple(x.shape)}")
    if q.shape != k.shape:
        raise SpecmemInputError(f"q: shape {tuple(q.shape)} does not match k shape {tuple(k.shape)}")
    if v.shape[:-1] != k.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {tuple(v.shape[:-1])} does not match k {tuple(k.shape[:-1])}")
    for name, x in more:
        if x.shape != k.shape:
            raise SpecmemInputError(f"{name}: shape {tuple(x.shape)} does not match k shape {tuple(k.shape)}")


def _initial_s(initial_state, batch, V, K, ref):
    if initial_state is None:
        return ref.new_zeros(batch + (V, K))
    if tuple(initial_state.shape) != batch + (V, K):
        raise SpecmemInputError(f"initial_state: expected shape {batch + (V, K)}, got {tuple(initial_state.shape)}")
    return initial_state.to(ref.dtype)


# ------------------------------------------------------------------------------------------
# the generalised delta rule


def recurrent_delta_rule(q, kr, kw, v, beta=None, g=None, initial_state=None):
    """Sequential reference: ``S_t = g_t S_{t-1}(I - beta_t kr_t kw_tᵀ) + beta_t v_t kw_tᵀ``, ``o_t = S_t q_t``.

    ``q, kw``: ``[..., T, K]``; ``kr``: same or None (no erase); ``v``: ``[..., T, V]``;
    ``beta``, ``g``: ``[..., T]`` or None (1). Returns ``(o [..., T, V], S_T [..., V, K])``.
    """
    batch, T, K, V = kw.shape[:-2], kw.shape[-2], kw.shape[-1], v.shape[-1]
    S = _initial_s(initial_state, batch, V, K, kw)
    outs = []
    for t in range(T):
        if g is not None:
            S = g[..., t, None, None] * S
        vt = v[..., t, :]
        if kr is not None:
            vt = vt - torch.einsum("...ij,...j->...i", S, kr[..., t, :])
        if beta is not None:
            vt = beta[..., t, None] * vt
        S = S + vt[..., :, None] * kw[..., t, None, :]
        outs.append(torch.einsum("...ij,...j->...i", S, q[..., t, :]))
    return torch.stack(outs, dim=-2), S


def chunk_delta_rule(q, kr, kw, v, beta=None, g=None, initial_state=None, chunk_size: int = 64):
    """Chunked (WY/UT) form of :func:`recurrent_delta_rule`, same arguments and results.

    Per chunk of ``n`` tokens with in-chunk decay products ``gam_t = prod_{i<=t} g_i`` and
    ``Gam[t, i] = gam_t / gam_i`` (i <= t, from log differences, so never above 1):
    ``(I + diag(beta) strict_tril(Gam * KR KWᵀ)) U = diag(beta) (V - diag(gam) KR S0ᵀ)``,
    ``O = diag(gam) Q S0ᵀ + tril(Gam * Q KWᵀ) U``, ``S = gam_n S0 + (U * gam_n/gam)ᵀ KW``.
    """
    chunk_size = _check_chunk(chunk_size)
    batch, T, K, V = kw.shape[:-2], kw.shape[-2], kw.shape[-1], v.shape[-1]
    S = _initial_s(initial_state, batch, V, K, kw)
    outs = []
    for s in range(0, T, chunk_size):
        e = min(s + chunk_size, T)
        n = e - s
        Q, KW, Vc = q[..., s:e, :], kw[..., s:e, :], v[..., s:e, :]
        lower = torch.ones(n, n, dtype=torch.bool, device=kw.device).tril()
        if g is not None:
            lg = torch.cumsum(torch.log(g[..., s:e]), dim=-1)  # [..., n]
            diff = lg[..., :, None] - lg[..., None, :]
            Gam = torch.exp(torch.where(lower, diff, torch.full_like(diff, -math.inf)))
            gam = torch.exp(lg)
        else:
            Gam = lower.to(kw.dtype)
            gam = None
        rhs = Vc
        if kr is not None:
            KR = kr[..., s:e, :]
            read = KR @ S.mT  # rows S0 kr_t
            if gam is not None:
                read = gam[..., :, None] * read
            rhs = Vc - read
        if beta is not None:
            rhs = beta[..., s:e, None] * rhs
        if kr is not None:
            M = torch.tril(Gam * (KR @ KW.mT), diagonal=-1)
            if beta is not None:
                M = beta[..., s:e, None] * M
            eye = torch.eye(n, dtype=kw.dtype, device=kw.device)
            U = torch.linalg.solve_triangular(eye + M, rhs, upper=False, unitriangular=True)
        else:
            U = rhs
        base = Q @ S.mT
        if gam is not None:
            base = gam[..., :, None] * base
        outs.append(base + (Gam * (Q @ KW.mT)) @ U)
        if gam is not None:
            w = torch.exp(lg[..., -1:] - lg)  # gam_n / gam_i
            S = gam[..., -1, None, None] * S + (U * w[..., :, None]).mT @ KW
        else:
            S = S + U.mT @ KW
    return torch.cat(outs, dim=-2), S


# ------------------------------------------------------------------------------------------
# VLA's A loop


def _eye_like(A):
    return torch.eye(A.shape[-1], dtype=A.dtype, device=A.device)


def recurrent_vla_a(kh, un, A0, t0: int = 0, eps: float = 1e-4, refresh_period: int = 20, eta: float = 1e-3):
    """Sequential reference of spec §2's ``A`` loop from ``A0`` (``[..., d, d]``), token offset ``t0``.

    ``kh``, ``un``: ``[..., T, d]`` (normalised key; normalised, scaled ``u``). Returns
    ``(alpha [..., T, d], A_T)`` with ``alpha_t = A_t kh_t`` (before normalisation).
    """
    A = A0
    eye = _eye_like(A0)
    alphas = []
    for t in range(kh.shape[-2]):
        u = un[..., t, :]
        zsm = torch.einsum("...ij,...j->...i", A, u)
        delta = torch.clamp(1 + (u * zsm).sum(-1), min=eps)
        A = A - zsm[..., :, None] * zsm[..., None, :] / delta[..., None, None]
        if refresh_period and (t0 + t + 1) % refresh_period == 0:
            A = A + eta * eye
        alphas.append(torch.einsum("...ij,...j->...i", A, kh[..., t, :]))
    return torch.stack(alphas, dim=-2), A


def _segments(T: int, t0: int, refresh_period: int, chunk_size: int):
    """``(start, end, refresh_after_end)`` covering ``[0, T)``: segments end at refreshes and at ``chunk_size``."""
    s = 0
    while s < T:
        e = min(s + chunk_size, T)
        refresh = False
        if refresh_period:
            nxt = refresh_period - (t0 + s) % refresh_period  # tokens up to and including the next refresh
            if s + nxt <= e:
                e, refresh = s + nxt, True
        yield s, e, refresh
        s = e


def chunk_vla_a(kh, un, A0, t0: int = 0, eps: float = 1e-4, refresh_period: int = 20, eta: float = 1e-3,
                chunk_size: int = 64):
    """Exact segment form of :func:`recurrent_vla_a` (spec §2): one sequential step per segment.

    Per segment (rows ``U``, ``KH``): ``P = U A0``, ``L Lᵀ = I + P Uᵀ``, ``W = L⁻¹ P``,
    ``alpha = KH A0 - triu(W KHᵀ)ᵀ W`` (row t is ``A_t kh_t``), ``A_end = A0 - WᵀW``; a refresh
    after the segment's last token adds ``eta kh`` to its alpha and ``eta I`` to ``A_end``.
    Exact only while ``1 + uᵀ A u`` stays above ``eps`` (always, for positive definite ``A``).
    ``eps`` is accepted for the signature's sake: the segment form has no clamp.
    """
    chunk_size = _check_chunk(chunk_size)
    A = A0
    eye = _eye_like(A0)
    alphas = []
    for s, e, refresh in _segments(kh.shape[-2], t0, refresh_period, chunk_size):
        U, KH = un[..., s:e, :], kh[..., s:e, :]
        n = e - s
        P = U @ A
        L = torch.linalg.cholesky(torch.eye(n, dtype=A.dtype, device=A.device) + P @ U.mT)
        W = torch.linalg.solve_triangular(L, P, upper=False)
        alpha = KH @ A - torch.triu(W @ KH.mT).mT @ W
        A = A - W.mT @ W
        if refresh:
            bump = torch.zeros_like(alpha)
            bump[..., -1, :] = eta
            alpha = alpha + bump * KH
            A = A + eta * eye
        alphas.append(alpha)
    return torch.cat(alphas, dim=-2), A


# ------------------------------------------------------------------------------------------
# the rules on raw vectors


def vla(q, k, v, u, *, lambda0: float = 0.1, eps: float = 1e-4, refresh_period: int = 20, eta: float = 1e-3,
        u_scale: float | None = None, initial_state: dict | None = None, mode: str = "chunk",
        chunk_size: int = 64):
    """VLA (spec §2, Algorithm 1) on raw ``q, k, v, u`` ``[..., T, d]``; returns ``(o, state)``.

    ``u_scale=None`` is Algorithm 1's ``1/sqrt(d)``; ``1`` is eq. (8). ``state`` is a dict
    ``{"s": [..., d, d], "a": [..., d, d], "z": [..., d], "t": tokens seen}`` and may be passed
    back as ``initial_state`` (the refresh schedule continues from ``t``).
    """
    _check_qkv(q, k, v, ("u", u))
    _check_mode(mode)
    d = k.shape[-1]
    batch = k.shape[:-2]
    if lambda0 <= 0 or eps <= 0 or eta < 0 or refresh_period < 0:
        raise SpecmemInputError("lambda0, eps: must be > 0; eta, refresh_period: must be >= 0")
    us = 1.0 / math.sqrt(d) if u_scale is None else float(u_scale)
    if initial_state is None:
        A0 = (torch.eye(d, dtype=k.dtype, device=k.device) / lambda0).expand(batch + (d, d))
        S0, z0, t0 = None, None, 0
    else:
        try:
            S0, A0, z0, t0 = initial_state["s"], initial_state["a"], initial_state["z"], int(initial_state["t"])
        except (KeyError, TypeError):
            raise SpecmemInputError("initial_state: expected the dict {s, a, z, t} a previous call returned") from None
    kf = elu1(k)
    kh = safe_normalize(kf, eps)
    un = safe_normalize(u, eps) * us
    qf = elu1(q)
    a_fn = chunk_vla_a if mode == "chunk" else recurrent_vla_a
    kw_args = {"chunk_size": chunk_size} if mode == "chunk" else {}
    alpha, A = a_fn(kh, un, A0, t0, eps, refresh_period, eta, **kw_args)
    ah = safe_normalize(alpha, eps)
    if mode == "chunk":
        o, S = chunk_delta_rule(qf, kh, ah, v, initial_state=S0, chunk_size=chunk_size)
    else:
        o, S = recurrent_delta_rule(qf, kh, ah, v, initial_state=S0)
    zk = torch.cumsum(kf, dim=-2)
    if z0 is not None:
        zk = zk + z0[..., None, :]
    den = torch.clamp((zk * qf).sum(-1), min=eps)
    return o / den[..., None], {"s": S, "a": A, "z": zk[..., -1, :], "t": t0 + k.shape[-2]}


def _delta_family(q, k, v, beta, g, eps, initial_state, mode, chunk_size):
    _check_qkv(q, k, v)
    _check_mode(mode)
    for name, x in (("beta", beta), ("g", g)):
        if x is not None and tuple(x.shape) != tuple(k.shape[:-1]):
            raise SpecmemInputError(f"{name}: expected shape {tuple(k.shape[:-1])} (one value per token), "
                                    f"got {tuple(x.shape)}")
    kn, qn = safe_normalize(k, eps), safe_normalize(q, eps)
    if mode == "chunk":
        return chunk_delta_rule(qn, kn, kn, v, beta, g, initial_state, chunk_size)
    return recurrent_delta_rule(qn, kn, kn, v, beta, g, initial_state)


def deltanet(q, k, v, beta, *, eps: float = L2_EPS, initial_state=None, mode: str = "chunk", chunk_size: int = 64):
    """DeltaNet (spec §3) on raw ``q, k`` (L2-normalised here), ``v``, ``beta`` ``[..., T]``; returns ``(o, S)``."""
    return _delta_family(q, k, v, beta, None, eps, initial_state, mode, chunk_size)


def gated_deltanet(q, k, v, beta, g, *, eps: float = L2_EPS, initial_state=None, mode: str = "chunk",
                   chunk_size: int = 64):
    """Gated DeltaNet (spec §3): as :func:`deltanet` with the decay ``g`` ``[..., T]`` in (0, 1] applied first."""
    return _delta_family(q, k, v, beta, g, eps, initial_state, mode, chunk_size)


def linear_attention(q, k, v, *, eps: float = 1e-4, initial_state: dict | None = None, mode: str = "chunk",
                     chunk_size: int = 64):
    """ELU+1 linear attention with normaliser (spec §3); state ``{"s": [..., V, K], "z": [..., K]}``."""
    _check_qkv(q, k, v)
    _check_mode(mode)
    S0 = z0 = None
    if initial_state is not None:
        try:
            S0, z0 = initial_state["s"], initial_state["z"]
        except (KeyError, TypeError):
            raise SpecmemInputError("initial_state: expected the dict {s, z} a previous call returned") from None
    kf, qf = elu1(k), elu1(q)
    if mode == "chunk":
        o, S = chunk_delta_rule(qf, None, kf, v, initial_state=S0, chunk_size=chunk_size)
    else:
        o, S = recurrent_delta_rule(qf, None, kf, v, initial_state=S0)
    zk = torch.cumsum(kf, dim=-2)
    if z0 is not None:
        zk = zk + z0[..., None, :]
    den = torch.clamp((zk * qf).sum(-1), min=eps)
    return o / den[..., None], {"s": S, "z": zk[..., -1, :]}
