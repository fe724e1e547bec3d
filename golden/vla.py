"""Variational Linear Attention (VLA), float64 golden model of spec §2 (the paper's Algorithm 1).

``vla`` runs Algorithm 1 token by token as written; ``vla_recurrence`` runs the same ``A``
loop and then the state as the linear recurrence ``S_t = S_{t-1} (I - kh ahᵀ) + v ahᵀ``
(a delta rule with read key ``kh`` and write key ``ah``). ``vla_a_explicit`` and the
Jacobian-norm helpers exist for tests and reports.
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_same_shape, check_scalar, elu1, safe_normalize
from .deltanet import delta_rule

__all__ = [
    "vla",
    "vla_recurrence",
    "vla_a_explicit",
    "jacobian_spectral_norm",
    "jacobian_norm_closed_form",
]


def _check_params(d, lambda0, eps, refresh_period, eta, u_scale):
    lambda0 = check_scalar("lambda0", lambda0, lo=0, lo_open=True)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    if isinstance(refresh_period, (bool, np.bool_)):
        raise SpecmemInputError(f"refresh_period: expected an integer, got {refresh_period!r}")
    refresh_period = check_scalar("refresh_period", refresh_period, lo=0, integer=True)
    eta = check_scalar("eta", eta, lo=0)
    u_scale = 1.0 / np.sqrt(d) if u_scale is None else check_scalar("u_scale", u_scale, lo=0, lo_open=True)
    return lambda0, eps, refresh_period, eta, u_scale


def _prepare(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale):
    kk = as_float_array("k", k)
    vv = as_float_array("v", v)
    qq = as_float_array("q", q)
    uu = as_float_array("u", u)
    check_same_shape("k", kk, v=vv, q=qq, u=uu)
    params = _check_params(kk.shape[-1], lambda0, eps, refresh_period, eta, u_scale)
    return kk, vv, qq, uu, params


def _a_steps(kh, un, lambda0, eps, refresh_period, eta):
    """Yield ``(A_t, delta_t, ah_t)`` for t = 1..T: the RLS/Sherman–Morrison loop on ``u``.

    ``kh``, ``un``: ``[..., T, d]`` (normalised key, normalised and scaled ``u``).
    ``A`` never depends on ``S``, so both forms of VLA share this loop.
    """
    batch, T, d = kh.shape[:-2], kh.shape[-2], kh.shape[-1]
    eye = np.eye(d)
    A = np.broadcast_to(eye / lambda0, batch + (d, d)).copy()
    for t in range(1, T + 1):
        u = un[..., t - 1, :]
        zsm = np.einsum("...ij,...j->...i", A, u)
        delta = np.maximum(1.0 + np.einsum("...i,...i->...", u, zsm), eps)
        A = A - zsm[..., :, None] * zsm[..., None, :] / delta[..., None, None]
        if refresh_period and t % refresh_period == 0:
            A = A + eta * eye
        alpha = np.einsum("...ij,...j->...i", A, kh[..., t - 1, :])
        yield A, delta, safe_normalize(alpha, eps)


def _frob(M):
    return np.sqrt(np.einsum("...ij,...ij->...", M, M))


def _features(kk, qq, uu, eps, u_scale):
    kf = elu1(kk)
    kh = safe_normalize(kf, eps)
    un = safe_normalize(uu, eps) * u_scale
    qf = elu1(qq)
    zk = np.cumsum(kf, axis=-2)  # zk after token t; same summation order as zk += kf
    den = np.maximum(np.einsum("...td,...td->...t", zk, qf), eps)
    return kh, un, qf, den


def vla(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
        return_trace=False) -> dict:
    """VLA exactly as spec §2 Algorithm 1, vectorised over leading batch dims.

    Inputs ``k, v, q, u``: ``[..., T, d]`` (raw, before feature maps). ``u_scale=None`` means
    ``1/sqrt(d)`` (Algorithm 1); ``u_scale=1`` is the paper's eq. (8). ``refresh_period=0``
    turns the ``+eta I`` refresh off.
    Returns ``o`` ``[..., T, d]``, final ``s`` and ``a`` ``[..., d, d]``, ``s_norm`` and
    ``a_norm`` ``[..., T]`` (Frobenius norms after step t); with ``return_trace`` also
    ``kh``, ``ah`` ``[..., T, d]`` and ``delta`` ``[..., T]``.
    """
    kk, vv, qq, uu, (lambda0, eps, refresh_period, eta, u_scale) = _prepare(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    kh, un, qf, den = _features(kk, qq, uu, eps, u_scale)
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]

    S = np.zeros(batch + (d, d))
    o = np.empty(batch + (T, d))
    ah_tr = np.empty(batch + (T, d))
    delta_tr = np.empty(batch + (T,))
    s_norm = np.empty(batch + (T,))
    a_norm = np.empty(batch + (T,))
    A = None
    for t, (A, delta, ah) in enumerate(_a_steps(kh, un, lambda0, eps, refresh_period, eta)):
        e = vv[..., t, :] - np.einsum("...ij,...j->...i", S, kh[..., t, :])
        S = S + e[..., :, None] * ah[..., None, :]
        o[..., t, :] = np.einsum("...ij,...j->...i", S, qf[..., t, :]) / den[..., t, None]
        ah_tr[..., t, :], delta_tr[..., t] = ah, delta
        s_norm[..., t], a_norm[..., t] = _frob(S), _frob(A)
    out = {"o": o, "s": S, "a": A, "s_norm": s_norm, "a_norm": a_norm}
    if return_trace:
        out.update(kh=kh, ah=ah_tr, delta=delta_tr)
    return out


def vla_recurrence(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                   return_trace=False) -> dict:
    """VLA with the state run as its true linear recurrence ``S_t = S_{t-1}(I - kh ahᵀ) + v ahᵀ``.

    First the whole ``A`` loop (giving ``kh``, ``ah``), then :func:`delta_rule` with read key
    ``kh`` and write key ``ah``. Same arguments and outputs as :func:`vla`.
    """
    kk, vv, qq, uu, (lambda0, eps, refresh_period, eta, u_scale) = _prepare(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    kh, un, qf, den = _features(kk, qq, uu, eps, u_scale)
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]

    ah_tr = np.empty(batch + (T, d))
    delta_tr = np.empty(batch + (T,))
    a_norm = np.empty(batch + (T,))
    A = None
    for t, (A, delta, ah) in enumerate(_a_steps(kh, un, lambda0, eps, refresh_period, eta)):
        ah_tr[..., t, :], delta_tr[..., t], a_norm[..., t] = ah, delta, _frob(A)
    r = delta_rule(kh, ah_tr, vv, q=qf)
    out = {"o": r["o"] / den[..., None], "s": r["s"], "a": A, "s_norm": r["s_norm"], "a_norm": a_norm}
    if return_trace:
        out.update(kh=kh, ah=ah_tr, delta=delta_tr)
    return out


def vla_a_explicit(u, lambda0=0.1, u_scale=None, eps=1e-4) -> np.ndarray:
    """``(lambda0 I + Σ_t ũ_t ũ_tᵀ)^-1`` with ``ũ = u / max(||u||, eps) * u_scale``: VLA's ``A`` with refresh off.

    ``u``: ``[..., T, d]``; returns ``[..., d, d]``. Direct inverse, for tests and reports.
    """
    uu = as_float_array("u", u)
    d = uu.shape[-1]
    lambda0, eps, _, _, u_scale = _check_params(d, lambda0, eps, 0, 0.0, u_scale)
    un = safe_normalize(uu, eps) * u_scale
    P = lambda0 * np.eye(d) + np.einsum("...ti,...tj->...ij", un, un)
    return np.linalg.inv(P)


def jacobian_spectral_norm(kh, ah) -> np.ndarray:
    """``||I - ah khᵀ||_2`` by SVD, over leading dims: ``kh``, ``ah`` ``[..., d]`` -> ``[...]``.

    (``I - kh ahᵀ``, the recurrence's transition, is its transpose: same norm.)
    """
    kk = as_float_array("kh", kh, min_ndim=1)
    aa = as_float_array("ah", ah, min_ndim=1)
    check_same_shape("kh", kk, ah=aa)
    M = np.eye(kk.shape[-1]) - aa[..., :, None] * kk[..., None, :]
    return np.linalg.svd(M, compute_uv=False)[..., 0]


def jacobian_norm_closed_form(c) -> np.ndarray:
    """Largest singular value of ``I - a kᵀ`` for unit ``a``, ``k`` with ``c = aᵀk`` in [-1, 1].

    ``sqrt(((3-2c) + sqrt((3-2c)^2 - 4(1-c)^2)) / 2)``, which equals ``(1 + sqrt(5-4c)) / 2``:
    1 only at ``c = 1``, the golden ratio at ``c = 0``. Values within 1e-12 outside [-1, 1]
    (rounding of a dot product of unit vectors) are clipped.
    """
    try:
        cc = np.asarray(c, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SpecmemInputError(f"c: cannot convert to a float array ({exc})") from None
    if not np.all(np.isfinite(cc)):
        raise SpecmemInputError("c: contains NaN or Inf")
    if np.any(np.abs(cc) > 1 + 1e-12):
        raise SpecmemInputError(f"c: must be in [-1, 1] (cosine of unit vectors), got {cc[np.abs(cc) > 1 + 1e-12].flat[0]!r}")
    cc = np.clip(cc, -1.0, 1.0)
    b = 3.0 - 2.0 * cc
    return np.sqrt((b + np.sqrt(b * b - 4.0 * (1.0 - cc) ** 2)) / 2.0)
