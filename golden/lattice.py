"""Lattice (DEC form) float64 golden model: unit-norm memory slots updated orthogonally to themselves.

Spec §3 (seed ``001_7ed19f80967b338a.txt``, Eqs. 7, 13, 14). The state ``S`` is ``d x m``; its
columns ``s_i`` are the slots and stay on the unit sphere. Per token, with ``h = S k - v``
computed once from the previous state::

    Δs_i = -gamma k_i (I - s_i s_iᵀ) h
    s_i  <- (s_i + Δs_i) / sqrt(1 + ||Δs_i||²)
    o    = S q            (after the update)

Defaults: ``gamma = 1.0`` (the paper learns an input-dependent ``gamma_t`` and gives no value;
1.0 is the only fixed step it names, Table 1 caption, "fixed step size (gamma_t = 1)").
``s0 = I[:, :m]`` (the paper only says "initialize ... with orthonormal columns", §3.3; the
identity is orthonormal, deterministic and needs no RNG shared between implementations).
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_scalar

__all__ = ["lattice", "DEFAULT_GAMMA"]

DEFAULT_GAMMA = 1.0
_UNIT_TOL = 1e-8  # s0 columns must be unit norm to this tolerance (the normaliser assumes ||s_i|| = 1)


def _per_token(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    """A positive scalar or a ``[..., T]`` array of positive values, returned as ``[..., T]``."""
    if np.ndim(value) == 0:
        return np.full(shape, check_scalar(name, value, lo=0.0, lo_open=True))
    a = as_float_array(name, value, min_ndim=1)
    if a.shape != shape:
        raise SpecmemInputError(f"{name}: expected a scalar or shape {shape} ([..., T]), got shape {a.shape}")
    if np.any(a <= 0):
        bad = tuple(int(i) for i in np.argwhere(a <= 0)[0])
        raise SpecmemInputError(f"{name}: must be > 0, got {a[bad]!r} at index {bad}")
    return a


def lattice(k, v, q, gamma=DEFAULT_GAMMA, s0=None) -> dict[str, np.ndarray]:
    """Run Lattice-DEC over ``T`` tokens; return ``o`` ``[..., T, d]`` and final ``s`` ``[..., d, m]``.

    ``k``, ``q``: ``[..., T, m]`` codes (``k_i`` weights slot ``i``); ``v``: ``[..., T, d]``.
    ``gamma``: positive scalar or per-token ``[..., T]``. ``s0``: ``[d, m]`` or ``[..., d, m]``
    with unit-norm columns (default: first ``m`` columns of the identity, needs ``m <= d``).
    """
    k = as_float_array("k", k)
    v = as_float_array("v", v)
    q = as_float_array("q", q)
    if q.shape != k.shape:
        raise SpecmemInputError(f"q: shape {q.shape} does not match k shape {k.shape}")
    if v.shape[:-1] != k.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {v.shape[:-1]} ([..., T]) does not match k's {k.shape[:-1]}")
    batch, T, m = k.shape[:-2], k.shape[-2], k.shape[-1]
    d = v.shape[-1]
    g = _per_token("gamma", gamma, k.shape[:-1])

    if s0 is None:
        if m > d:
            raise SpecmemInputError(
                f"k: slot count m={m} must be <= d={d} when s0 is None (identity start); pass s0 for m > d"
            )
        S = np.broadcast_to(np.eye(d, m), batch + (d, m)).copy()
    else:
        s0 = as_float_array("s0", s0)
        if s0.shape[-2:] != (d, m):
            raise SpecmemInputError(f"s0: last two dimensions must be (d, m) = ({d}, {m}), got shape {s0.shape}")
        try:
            S = np.broadcast_to(s0, batch + (d, m)).copy()
        except ValueError:
            raise SpecmemInputError(f"s0: shape {s0.shape} does not broadcast to {batch + (d, m)}") from None
        col_err = np.max(np.abs(np.linalg.norm(S, axis=-2) - 1.0))
        if col_err > _UNIT_TOL:
            raise SpecmemInputError(f"s0: columns must have unit norm (max deviation {col_err:.3g})")

    o = np.empty(batch + (T, d))
    for t in range(T):
        kt = k[..., t, :]
        h = np.einsum("...dm,...m->...d", S, kt) - v[..., t, :]
        a = np.einsum("...dm,...d->...m", S, h)  # s_iᵀ h for every slot
        delta = -(g[..., t, None, None] * kt[..., None, :]) * (h[..., :, None] - S * a[..., None, :])
        S = (S + delta) / np.sqrt(1.0 + np.sum(delta * delta, axis=-2, keepdims=True))
        o[..., t, :] = np.einsum("...dm,...m->...d", S, q[..., t, :])
    return {"o": o, "s": S}
