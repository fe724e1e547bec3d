"""Echo / Spectral Koopman Attention (SKA) float64 golden model, causal per token.

Spec §3 (seed ``002_2fe100ae8735c8b7.txt``, Eqs. 4-6, 11-13, Appendix F steps 4-10). At step
``t`` the sums run over tokens ``1..t`` (inclusive) of L2-normalised keys ``ẑ``::

    G = Σ ẑ ẑᵀ + eps I,   M = Σ_{s=2..t} ẑ_s ẑ_{s-1}ᵀ,   C = Σ v ẑᵀ,   G = L Lᵀ
    c = gamma / max(σ_max(L⁻¹ M L⁻ᵀ), 1)
    y = eta · c^K · C G⁻¹ (M G⁻¹)^K ẑ_q

which equals the paper's whitened path ``eta · B_v L (c A_w)^K L⁻¹ ẑ_q`` since
``L (L⁻¹ M L⁻ᵀ) L⁻¹ = M G⁻¹``. σ_max is exact (the paper estimates it with 6 power iterations).

Defaults: ``eps = 1e-3`` (Eq. 4 and Table 5), ``K = 2`` (Eq. 13, Table 5), ``gamma = 1.0``
(learnable in [1.0, 1.5], Eq. 12, no init given; 1.0 keeps the filter contractive, Prop. D.2),
``eta = 1.0`` (the project's choice; the paper's learnable ``eta`` starts at 1.5, §3.2.3).
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_scalar, safe_normalize

__all__ = ["ska", "DEFAULT_EPS", "DEFAULT_GAMMA", "DEFAULT_K", "NORM_EPS"]

DEFAULT_EPS = 1e-3
DEFAULT_GAMMA = 1.0
DEFAULT_K = 2
NORM_EPS = 1e-6  # key/query norms are clamped here before dividing, as the paper clamps its scale (Eq. 3)


def ska(k, v, q, eta=1.0, gamma=DEFAULT_GAMMA, eps=DEFAULT_EPS, K=DEFAULT_K) -> dict[str, np.ndarray]:
    """Causal SKA read-out for every token.

    ``k``, ``q``: ``[..., T, r]``; ``v``: ``[..., T, P]``. Returns ``o`` ``[..., T, P]``, the final
    ``g`` (includes ``eps I``) and ``m`` ``[..., r, r]``, ``c`` ``[..., P, r]``, and ``coef``
    ``[..., T]``, the spectral scale ``c`` used at each step.
    """
    k = as_float_array("k", k)
    v = as_float_array("v", v)
    q = as_float_array("q", q)
    if q.shape != k.shape:
        raise SpecmemInputError(f"q: shape {q.shape} does not match k shape {k.shape}")
    if v.shape[:-1] != k.shape[:-1]:
        raise SpecmemInputError(f"v: leading shape {v.shape[:-1]} ([..., T]) does not match k's {k.shape[:-1]}")
    eta = check_scalar("eta", eta, lo=0.0, lo_open=True)
    gamma = check_scalar("gamma", gamma, lo=0.0, lo_open=True)
    eps = check_scalar("eps", eps, lo=0.0, lo_open=True)
    K = check_scalar("K", K, lo=0, integer=True)
    r = k.shape[-1]

    z = safe_normalize(k, NORM_EPS)
    zq = safe_normalize(q, NORM_EPS)
    # Running sums for every prefix at once: [..., T, r, r] and [..., T, P, r].
    G = np.cumsum(z[..., :, :, None] * z[..., :, None, :], axis=-3) + eps * np.eye(r)
    trans = np.zeros(G.shape)
    trans[..., 1:, :, :] = z[..., 1:, :, None] * z[..., :-1, None, :]
    M = np.cumsum(trans, axis=-3)
    C = np.cumsum(v[..., :, :, None] * z[..., :, None, :], axis=-3)

    L = np.linalg.cholesky(G)
    Y = np.linalg.solve(L, M)  # L⁻¹ M
    Aw = np.swapaxes(np.linalg.solve(L, np.swapaxes(Y, -1, -2)), -1, -2)  # L⁻¹ M L⁻ᵀ
    sigma = np.linalg.svd(Aw, compute_uv=False)[..., 0]
    coef = gamma / np.maximum(sigma, 1.0)

    x = zq[..., None]
    for _ in range(K):
        x = M @ np.linalg.solve(G, x)
    y = C @ np.linalg.solve(G, x)
    o = (eta * coef**K)[..., None] * y[..., 0]
    return {"o": o, "g": G[..., -1, :, :], "m": M[..., -1, :, :], "c": C[..., -1, :, :], "coef": coef}
