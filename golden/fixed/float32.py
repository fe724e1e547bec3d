"""float32 twins of the float64 golden loops, for the accuracy report's float32 column.

The golden models compute in float64 by contract; these loops repeat the same operations in
the same order with every array in float32, so the report can put IEEE single precision
beside the fixed-point presets. ``tests/fixed/test_float32.py`` keeps them within float32
rounding of the golden models.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError

__all__ = ["run_float32", "vla_a_steps_f32"]

F = np.float32
#: evict: column energies within this relative distance of the smallest are ties (float32
#: rounding of a squared norm is ~1e-7 relative; the float64 model uses ``EVICT_TIE_RTOL``)
EVICT_TIE_RTOL_F32 = 1e-5


def _elu1(x):
    return np.where(x > 0, x + F(1), np.exp(np.minimum(x, F(0))))


def _unit(x, eps):
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), F(eps))


def vla_a_steps_f32(k, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None):
    """Yield ``(A_t, ah_t)`` like ``golden.vla._a_steps``, in float32 (``k``, ``u``: ``[..., T, d]``)."""
    k, u = np.asarray(k, F), np.asarray(u, F)
    d = k.shape[-1]
    us = F(1.0 / np.sqrt(d)) if u_scale is None else F(u_scale)
    kh = _unit(_elu1(k), eps)
    un = _unit(u, eps) * us
    eye = np.eye(d, dtype=F)
    A = np.broadcast_to(eye / F(lambda0), k.shape[:-2] + (d, d)).copy()
    for t in range(1, k.shape[-2] + 1):
        ut = un[..., t - 1, :]
        zsm = np.einsum("...ij,...j->...i", A, ut)
        delta = np.maximum(F(1) + np.einsum("...i,...i->...", ut, zsm), F(eps))
        A = A - zsm[..., :, None] * zsm[..., None, :] / delta[..., None, None]
        if refresh_period and t % refresh_period == 0:
            A = A + F(eta) * eye
        yield A, _unit(np.einsum("...ij,...j->...i", A, kh[..., t - 1, :]), eps)


def _vla(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None):
    k, v, q = np.asarray(k, F), np.asarray(v, F), np.asarray(q, F)
    kf, qf = _elu1(k), _elu1(q)
    kh = _unit(kf, eps)
    den = np.maximum(np.einsum("...td,...td->...t", np.cumsum(kf, axis=-2), qf), F(eps))
    d, T = k.shape[-1], k.shape[-2]
    S = np.zeros(k.shape[:-2] + (d, d), F)
    o = np.empty(k.shape, F)
    s_norm, a_norm = np.empty(k.shape[:-1], F), np.empty(k.shape[:-1], F)
    A = None
    for t, (A, ah) in enumerate(vla_a_steps_f32(k, u, lambda0, eps, refresh_period, eta, u_scale)):
        e = v[..., t, :] - np.einsum("...ij,...j->...i", S, kh[..., t, :])
        S = S + e[..., :, None] * ah[..., None, :]
        o[..., t, :] = np.einsum("...ij,...j->...i", S, qf[..., t, :]) / den[..., t, None]
        s_norm[..., t] = np.sqrt(np.sum(S * S, axis=(-2, -1)))
        a_norm[..., t] = np.sqrt(np.sum(A * A, axis=(-2, -1)))
    return {"o": o, "s": S, "a": A, "s_norm": s_norm, "a_norm": a_norm}


def _delta(kr, kw, v, q, beta=None):
    d, T = kw.shape[-1], kw.shape[-2]
    S = np.zeros(kw.shape[:-2] + (v.shape[-1], d), F)
    o = np.empty(v.shape, F)
    for t in range(T):
        vt = v[..., t, :] if beta is None else beta[..., t, None] * v[..., t, :]
        if kr is not None:
            read = np.einsum("...ij,...j->...i", S, kr[..., t, :])
            if beta is not None:
                read = beta[..., t, None] * read
            S = S - read[..., :, None] * kw[..., t, None, :]
        S = S + vt[..., :, None] * kw[..., t, None, :]
        o[..., t, :] = np.einsum("...ij,...j->...i", S, q[..., t, :])
    return S, o


def _linear(k, v, q, eps=1e-4):
    k, v, q = np.asarray(k, F), np.asarray(v, F), np.asarray(q, F)
    kf, qf = _elu1(k), _elu1(q)
    S, o = _delta(None, kf, v, qf)
    den = np.maximum(np.einsum("...td,...td->...t", np.cumsum(kf, axis=-2), qf), F(eps))
    return {"o": o / den[..., None], "s": S}


def _deltanet(k, v, q, beta, eps=1e-6):
    k, v, q, beta = (np.asarray(a, F) for a in (k, v, q, beta))
    kn = _unit(k, eps)
    S, o = _delta(kn, kn, v, _unit(q, eps), beta=beta)
    return {"o": o, "s": S}


def _annihilation(x, k, orth_tol=1e-24, orth_policy="evict", history=False):
    """Gram form with ``g`` from a second pass (golden.annihilation._gram_step's order), float32;
    ``orth_policy`` as the golden model (evict: least-energy column, ties round-robin)."""
    from specmem.golden.annihilation import check_orth_policy, evict_column

    evict = check_orth_policy(orth_policy) == "evict"
    x = np.asarray(x, F)
    B = x.reshape((-1,) + x.shape[-2:])
    nb, T, d = B.shape
    U = np.zeros((nb, d, k), F)
    count = np.zeros(nb, np.int64)
    ptr = np.zeros(nb, np.int64)
    y_out = np.zeros((nb, T, d), F)
    hist = np.zeros((nb, T, d, k), F) if history else None
    cols, bi = np.arange(k), np.arange(nb)
    for t in range(T):
        xt = B[:, t]
        nz = np.any(xt != 0, axis=-1)
        warm, full = nz & (count < k), nz & (count >= k)
        a = np.einsum("bik,bi->bk", U, xt)
        r = np.einsum("bik,bk->bi", U, a)
        g = np.einsum("bik,bi->bk", U, r)
        n2 = np.sum(a * g, axis=-1)
        fro2 = np.sum(U * U, axis=(-2, -1))
        is_orth = full & (n2 <= F(orth_tol) * np.sum(xt * xt, axis=-1) * fro2 * fro2)
        upd = full & ~is_orth
        n2s = np.where(upd, n2, F(1))
        an = np.sqrt(np.where(upd, np.sum(a * a, axis=-1), F(1)))
        ahat = a / an[:, None]
        j = np.argmax(np.abs(ahat), axis=-1)
        ej = cols[None, :] == j[:, None]
        s = np.where(ahat[bi, j] >= 0, F(1), F(-1))
        beta = F(1) / (F(1) + np.abs(ahat[bi, j]))
        v = ahat + s[:, None] * ej.astype(F)
        p = (-g + (beta * s * g[bi, j])[:, None] * v) / n2s[:, None]
        qv = -(beta * s)[:, None] * v
        Un = U + r[:, :, None] * p[:, None, :] + U[bi, :, j][:, :, None] * qv[:, None, :]
        Un = np.where(ej[:, None, :], xt[:, :, None], Un)
        U = np.where(upd[:, None, None], Un, U)
        y_out[:, t] = np.where(upd[:, None], r / np.sqrt(n2s)[:, None], F(0))
        col, ev = count, is_orth & evict
        if np.any(ev):
            j = evict_column(np.sum(U * U, axis=-2), ptr, EVICT_TIE_RTOL_F32)
            col = np.where(ev, j, count)
            ptr = np.where(ev, (j + 1) % k, ptr)
        wcol = (warm | ev)[:, None] & (cols[None, :] == col[:, None])
        U = np.where(wcol[:, None, :], xt[:, :, None], U)
        count = count + warm
        if history:
            hist[:, t] = U
    batch = x.shape[:-2]
    out = {"u": U.reshape(batch + (d, k)), "omega": (U @ np.swapaxes(U, -1, -2)).reshape(batch + (d, d)),
           "y": y_out.reshape(batch + (T, d))}
    if history:
        out["u_hist"] = hist.reshape(batch + (T, d, k))
    return out


def run_float32(algo: str, inputs: dict, params: dict | None = None) -> dict:
    """Same inputs and output names as the golden models, computed in float32."""
    params = dict(params or {})
    if algo == "annihilation":
        return _annihilation(inputs["x"], int(params.pop("k")), **params)
    fn = {"vla": _vla, "linear": _linear, "deltanet": _deltanet}.get(algo)
    if fn is None:
        raise SpecmemInputError(f"algo: float32 twins exist for annihilation, vla, linear, deltanet; got {algo!r}")
    return fn(**inputs, **params)
