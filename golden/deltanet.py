"""DeltaNet and Gated DeltaNet float64 golden models (spec §3), and the shared delta-rule loop.

``delta_rule`` is the one plain loop behind DeltaNet, Gated DeltaNet, linear
attention (no read key) and VLA's linear-recurrence form (read key ``kh`` and
write key ``ah`` differ). States are ``d_v x d_k`` and are read as ``S @ key``.
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_same_shape, check_scalar, safe_normalize

__all__ = ["delta_rule", "deltanet", "gated_deltanet", "L2_EPS"]

# Keys and queries are L2-normalised as x / max(||x||, L2_EPS): a zero vector stays zero
# instead of becoming NaN. Same order as fla's l2norm eps (1e-6); only matters for ||x|| < 1e-6.
L2_EPS = 1e-6


def _per_token(name: str, x, shape: tuple, *, lo_open: bool, hi: float | None = None) -> np.ndarray:
    """Validate a per-token scalar stream (``[..., T]`` or a scalar broadcast to it) in (0, hi]."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SpecmemInputError(f"{name}: cannot convert to a float array ({exc})") from None
    if a.ndim == 0:
        a = np.broadcast_to(a, shape)
    if a.shape != shape:
        raise SpecmemInputError(f"{name}: expected shape {shape} (one value per token [..., T]), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise SpecmemInputError(f"{name}: contains NaN or Inf")
    if lo_open and np.any(a <= 0):
        raise SpecmemInputError(f"{name}: must be in (0, {hi}], got min {a.min()!r}")
    if hi is not None and np.any(a > hi):
        raise SpecmemInputError(f"{name}: must be in (0, {hi}], got max {a.max()!r}")
    return a


def delta_rule(k_read, k_write, v, beta=None, g=None, s0=None, q=None) -> dict:
    """Generalised delta rule, one token at a time, no normalisation inside.

    ``S_t = g_t S_{t-1} - beta_t (g_t S_{t-1} k_read_t) k_write_tᵀ + beta_t v_t k_write_tᵀ``,
    i.e. ``S_t = g_t S_{t-1} (I - beta_t k_read_t k_write_tᵀ) + beta_t v_t k_write_tᵀ``.
    ``k_read=None`` drops the erase term (pure additive memory, linear attention);
    ``beta``/``g`` default to 1; ``s0`` is the initial ``[..., d_v, d_k]`` state (default 0).
    Inputs ``[..., T, d_k]`` (``v``: ``[..., T, d_v]``), ``beta``/``g``: ``[..., T]`` or scalars.

    Returns ``s`` (final state), ``s_norm`` (``[..., T]``, Frobenius norm after each step) and,
    when ``q`` is given, ``o`` with ``o_t = S_t q_t`` (read after the update).
    Plain loop: ``beta`` and ``g`` are only checked for finiteness here, not range.
    """
    kw = as_float_array("k_write", k_write)
    vv = as_float_array("v", v)
    if vv.shape[:-1] != kw.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {vv.shape[:-1]} does not match k_write {kw.shape[:-1]}")
    kr = None
    if k_read is not None:
        kr = as_float_array("k_read", k_read)
        check_same_shape("k_write", kw, k_read=kr)
    qq = None
    if q is not None:
        qq = as_float_array("q", q)
        check_same_shape("k_write", kw, q=qq)
    tok = kw.shape[:-1]
    bt = None if beta is None else _per_token("beta", beta, tok, lo_open=False)
    gt = None if g is None else _per_token("g", g, tok, lo_open=False)
    batch, T, dk, dv = kw.shape[:-2], kw.shape[-2], kw.shape[-1], vv.shape[-1]
    if s0 is None:
        S = np.zeros(batch + (dv, dk))
    else:
        S = as_float_array("s0", s0).copy()
        if S.shape != batch + (dv, dk):
            raise SpecmemInputError(f"s0: expected shape {batch + (dv, dk)}, got {S.shape}")

    s_norm = np.empty(batch + (T,))
    o = np.empty(batch + (T, dv)) if qq is not None else None
    for t in range(T):
        if gt is not None:
            S = gt[..., t, None, None] * S
        vt = vv[..., t, :]
        if bt is not None:
            vt = bt[..., t, None] * vt
        if kr is not None:
            read = np.einsum("...ij,...j->...i", S, kr[..., t, :])
            if bt is not None:
                read = bt[..., t, None] * read
            S = S - read[..., :, None] * kw[..., t, None, :]
        S = S + vt[..., :, None] * kw[..., t, None, :]
        s_norm[..., t] = np.sqrt(np.einsum("...ij,...ij->...", S, S))
        if o is not None:
            o[..., t, :] = np.einsum("...ij,...j->...i", S, qq[..., t, :])
    out = {"s": S, "s_norm": s_norm}
    if o is not None:
        out["o"] = o
    return out


def _prepare(k, v, q):
    kk = as_float_array("k", k)
    vv = as_float_array("v", v)
    qq = as_float_array("q", q)
    check_same_shape("k", kk, q=qq)
    if vv.shape[:-1] != kk.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {vv.shape[:-1]} does not match k {kk.shape[:-1]}")
    return kk, vv, qq


def deltanet(k, v, q, beta, *, eps: float = L2_EPS) -> dict:
    """DeltaNet (spec §3): ``S <- S - beta (S k) kᵀ + beta v kᵀ``, ``o = S q``, k and q L2-normalised.

    ``k``, ``q``: ``[..., T, d_k]``; ``v``: ``[..., T, d_v]``; ``beta``: ``[..., T]`` in (0, 1].
    No query scaling (fla multiplies q by 1/sqrt(d_k) on top of this).
    Returns ``o`` ``[..., T, d_v]``, ``s`` ``[..., d_v, d_k]``, ``s_norm`` ``[..., T]``.
    """
    kk, vv, qq = _prepare(k, v, q)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    bt = _per_token("beta", beta, kk.shape[:-1], lo_open=True, hi=1.0)
    kn = safe_normalize(kk, eps)
    return delta_rule(kn, kn, vv, beta=bt, q=safe_normalize(qq, eps))


def gated_deltanet(k, v, q, beta, g, *, eps: float = L2_EPS) -> dict:
    """Gated DeltaNet (spec §3): ``S <- g S (I - beta k kᵀ) + beta v kᵀ``, ``o = S q``.

    As :func:`deltanet` with a per-token decay ``g`` ``[..., T]`` in (0, 1] applied first
    (``g`` is the decay itself; fla's gated kernels take ``log g``).
    """
    kk, vv, qq = _prepare(k, v, q)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    bt = _per_token("beta", beta, kk.shape[:-1], lo_open=True, hi=1.0)
    gt = _per_token("g", g, kk.shape[:-1], lo_open=True, hi=1.0)
    kn = safe_normalize(kk, eps)
    return delta_rule(kn, kn, vv, beta=bt, g=gt, q=safe_normalize(qq, eps))
