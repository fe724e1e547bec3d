"""Spectral-annihilation memory (spec §1): float64 golden model, dense reference and O(dk) Gram-factor form.

A rank-``k`` PSD matrix ``Omega`` (``d x d``) holds at most ``k`` directions. Per token ``x``:

* ``x = 0`` (every element exactly zero): no-op; not counted, not flagged.
* Warm-up, while ``count < k``: ``Omega += x xᵀ`` (Gram form: ``U[:, count] = x``) and
  ``count += 1``, whether or not ``x`` depends on what is already stored.
* Full: ``r = Omega x``, ``y = r/||r||``, ``Omega <- (I - w wᵀ) Omega (I - w wᵀ) + x xᵀ`` with
  ``w = y`` (``exact``, the default and hardware target) or
  ``w ∝ x - (yᵀx)/(eps+1) y`` (``literal``, the note's formula as printed; dense form only).

Orthogonal inputs (spec §1, step 4). A full-memory step is orthogonal when
``||Omega x||² <= orth_tol * ||x||² * tr(Omega)²`` (Gram form: ``n² = aᵀg`` and
``tr(Omega) = ||U||_F²``): nothing conflicts with ``x``. Two policies, ``orth_policy``:

* ``"evict"`` (the default: it holds the most recent inputs, so a stream of mutually orthogonal
  inputs keeps its last ``k``): evict the weakest stored direction and store ``x`` in its place.
  Gram form: the column ``j`` of ``U`` with the smallest squared norm (``G``'s diagonal when
  ``G`` is kept, else ``||U[:, j]||²``), ties broken round-robin: a per-memory pointer, the
  first minimal column at or after it is taken and the pointer moves past it, so equal columns
  cycle (oldest first). Columns within ``EVICT_TIE_RTOL`` (relative) of the minimum count as
  ties: orthonormal keys come out of float64 with squared norms ``1 ± 1e-16``, which must cycle.
  Then ``U[:, j] = x``. Dense form (``Omega`` only): remove the eigen-direction of least energy,
  ``Omega <- Omega - lambda_min v vᵀ + x xᵀ`` with ``(lambda_min, v)`` the smallest eigenvalue
  above ``1e-9`` times the largest (the numerical column space, as :func:`rank`) and its
  eigenvector. ``Omega`` records no order, so among equal eigenvalues (e.g. orthonormal keys)
  the dense form's choice is ``eigh``'s, not round-robin: it matches the Gram form only where
  the energies differ.
* ``"skip"``: skip and flag: the state is left unchanged. A stream of mutually orthogonal
  inputs is then never admitted once the memory is full.

Either way ``y`` is zero for that token and ``orth[t]`` is True ("no conflict"). The test is on
``||Omega x||²`` rather than ``xᵀ Omega x`` because only the
former is resolvable in the dense form: for an ``x`` orthogonal to the stored span up to
rounding, ``xᵀ(Omega x)`` comes out at up to ~1e-17 relative with either sign, while
``||Omega x||² / (||x||² tr²)`` comes out near 1e-33 in both forms, far below the default
``orth_tol = 1e-24`` (``||Omega x|| <= 1e-12 ||x|| tr(Omega)``). Both quantities are zero exactly
when ``x`` is orthogonal to the column space, so the test is the same; only the threshold
scale differs.

Outputs follow the exchange format (spec §5): ``omega`` (final), ``y`` (per token, zero where
nothing was annihilated), ``u`` (final factor, Gram form), plus ``orth`` (per-token flag) and
``count`` (stored directions from warm-up, ``<= k``). Leading batch dims are vectorised with
masks, so batch elements may be in different phases (warm-up, full, skipped) at the same token.
"""

from __future__ import annotations

import numpy as np

from .common import SpecmemInputError, as_float_array, check_scalar

__all__ = [
    "annihilation",
    "annihilation_dense",
    "annihilation_gram",
    "rank",
    "erasure_residual",
    "retention",
    "ORTH_POLICIES",
    "EVICT_TIE_RTOL",
    "check_orth_policy",
    "evict_column",
]

_VARIANTS = ("exact", "literal")
_FORMS = ("gram", "dense")
#: orthogonal-input policies; the first is the default
ORTH_POLICIES = ("evict", "skip")
#: evict: column energies within this relative distance of the smallest are ties (round-robin)
EVICT_TIE_RTOL = 1e-9
#: evict, dense form: eigenvalues above this times the largest span the stored directions
_EVICT_EIG_RTOL = 1e-9


# ---------------------------------------------------------------------------------------------
# validation


def _validate(x, k, eps, orth_tol):
    """Check the shared arguments; return ``x`` flattened to ``[B, T, d]`` and its batch shape."""
    x = as_float_array("x", x)
    d = x.shape[-1]
    k = check_scalar("k", k, lo=1, integer=True)
    if k > d:
        raise SpecmemInputError(f"k: must be <= d ({d}), got {k}")
    eps = check_scalar("eps", eps, lo=0.0, lo_open=True)
    orth_tol = check_scalar("orth_tol", orth_tol, lo=0.0)
    batch = x.shape[:-2]
    return x.reshape((-1,) + x.shape[-2:]), batch, k, eps, orth_tol


def _check_variant(variant):
    if not isinstance(variant, str) or variant not in _VARIANTS:
        raise SpecmemInputError(f"variant: must be one of {_VARIANTS}, got {variant!r}")
    return variant


def check_orth_policy(orth_policy):
    """Validate ``orth_policy`` (``"evict"`` or ``"skip"``)."""
    if not isinstance(orth_policy, str) or orth_policy not in ORTH_POLICIES:
        raise SpecmemInputError(f"orth_policy: must be one of {ORTH_POLICIES}, got {orth_policy!r}")
    return orth_policy


def evict_column(c, ptr, tie_rtol=EVICT_TIE_RTOL):
    """The column to evict: the smallest of ``c`` [B, k] (column energies), ties (within
    ``tie_rtol`` of the minimum, relative) broken round-robin from ``ptr`` [B]: the first tied
    column at or after ``ptr``, cyclically. The caller moves the pointer to ``(j + 1) % k``."""
    k = c.shape[-1]
    m = np.min(c, axis=-1, keepdims=True)
    tied = c <= m + tie_rtol * np.abs(m)
    dist = (np.arange(k)[None, :] - np.asarray(ptr)[:, None]) % k
    return np.argmin(np.where(tied, dist, k), axis=-1)


def _sum(a, axis=-1):
    return np.sum(a, axis=axis)


# ---------------------------------------------------------------------------------------------
# dense reference


def annihilation_dense(x, k, variant="exact", eps=1e-3, orth_tol=1e-24, orth_policy="evict", *,
                       history=False) -> dict:
    """Plain dense reference on ``Omega`` (``d x d``), O(d²) per token; both variants.

    ``orth_policy="evict"`` removes the eigen-direction of least energy (the eigenvector of the
    smallest nonzero eigenvalue, ``Omega -= lambda v vᵀ``) and adds ``x xᵀ`` (O(d³), orthogonal
    tokens only; no round-robin among equal eigenvalues, see the module docstring);
    ``"skip"`` leaves ``Omega`` unchanged.

    Returns ``omega`` [..., d, d], ``y`` and ``w`` [..., T, d] (zero where no full step ran),
    ``orth`` [..., T] bool, ``count`` [...] int; with ``history=True`` also ``omega_hist``
    [..., T, d, d] (``Omega`` after each token).
    """
    xb, batch, k, eps, orth_tol = _validate(x, k, eps, orth_tol)
    variant = _check_variant(variant)
    evict = check_orth_policy(orth_policy) == "evict"
    B, T, d = xb.shape
    omega = np.zeros((B, d, d))
    count = np.zeros(B, dtype=np.int64)
    y_out = np.zeros((B, T, d))
    w_out = np.zeros((B, T, d))
    orth = np.zeros((B, T), dtype=bool)
    hist = np.zeros((B, T, d, d)) if history else None

    for t in range(T):
        xt = xb[:, t]
        nz = np.any(xt != 0.0, axis=-1)
        warm = nz & (count < k)
        full = nz & (count >= k)
        xx = xt[:, :, None] * xt[:, None, :]

        r = np.einsum("bij,bj->bi", omega, xt)
        n2 = _sum(r * r)
        x2 = _sum(xt * xt)
        tr = np.trace(omega, axis1=-2, axis2=-1)
        is_orth = full & (n2 <= orth_tol * x2 * tr * tr)
        upd = full & ~is_orth

        y = np.where(upd[:, None], r / np.sqrt(np.where(upd, n2, 1.0))[:, None], 0.0)
        if variant == "exact":
            w = y
        else:
            w = xt - (_sum(y * xt) / (eps + 1.0))[:, None] * y
            wn = np.linalg.norm(w, axis=-1)
            w = np.where(upd[:, None], w / np.where(wn > 0, wn, 1.0)[:, None], 0.0)
        # (I - w w^T) Omega (I - w w^T) expanded into rank-one terms: O(d^2), Omega symmetric.
        ow = np.einsum("bij,bj->bi", omega, w)
        wow = _sum(w * ow)
        ww = w[:, :, None] * w[:, None, :]
        omega_full = (omega - w[:, :, None] * ow[:, None, :] - ow[:, :, None] * w[:, None, :]
                      + wow[:, None, None] * ww + xx)

        omega = np.where(warm[:, None, None], omega + xx, np.where(upd[:, None, None], omega_full, omega))
        if evict and np.any(is_orth):
            e = np.flatnonzero(is_orth)
            ev, V = np.linalg.eigh(0.5 * (omega[e] + np.swapaxes(omega[e], -1, -2)))
            live = ev > _EVICT_EIG_RTOL * np.max(np.abs(ev), axis=-1, keepdims=True)
            i = np.argmin(np.where(live, ev, np.inf), axis=-1)  # smallest stored eigenvalue
            lam = ev[np.arange(e.size), i]
            v = V[np.arange(e.size), :, i]
            omega[e] = omega[e] - lam[:, None, None] * v[:, :, None] * v[:, None, :] + xx[e]
        count = count + warm
        y_out[:, t] = y
        w_out[:, t] = w
        orth[:, t] = is_orth
        if history:
            hist[:, t] = omega

    out = {
        "omega": omega.reshape(batch + (d, d)),
        "y": y_out.reshape(batch + (T, d)),
        "w": w_out.reshape(batch + (T, d)),
        "orth": orth.reshape(batch + (T,)),
        "count": count.reshape(batch),
    }
    if history:
        out["omega_hist"] = hist.reshape(batch + (T, d, d))
    return out


# ---------------------------------------------------------------------------------------------
# Gram-factor form


def _gram_step(U, xt, full, orth_tol, G=None):
    """One full step ``U -> U'`` (``Omega' = P Omega P + x xᵀ``, ``P = I - y yᵀ``) for the batch
    elements where ``full``; the operation order is the spec for the fixed-point model and RTL.

    Shapes: ``U`` [B, d, k], ``xt`` [B, d], ``full`` [B] bool, ``G`` [B, k, k] or None.
    Returns ``(U', y, G', orth)``; ``U'``/``G'`` equal the inputs where not updated (not ``full``,
    or orthogonal: ``n² <= orth_tol ||x||² ||U||_F⁴``), ``y`` is zero there.

    Derivation (row form). ``P U = U - r gᵀ/n²`` annihilates ``a``; ``H = I - beta v vᵀ`` with
    ``v = â + s e_j``, ``s = sign(â_j)``, ``beta = 1/(1+|â_j|)`` maps ``â -> -s e_j``, so column
    ``j`` of ``(P U) H`` is ``(P U)(-s â) = 0`` and takes ``x``. Row ``i`` of ``(P U) H`` is
        ``u_i - beta (u_i·v) v - r_i (H g)ᵀ/n²``,  ``u_i·v = r_i/||a|| + s U[i, j]``,
        ``H g = g - beta (g·v) v``,                 ``g·v  = n²/||a|| + s g_j``,
    which collapses to a rank-two row update ``u_i' = u_i + r_i p + U[i, j] q`` with the
    k-vectors ``p = (-g + beta s g_j v)/n²`` and ``q = -beta s v``.
    """
    k = U.shape[-1]

    # pass 1 (reduction over rows i): a = Uᵀx, ||U||_F² (= tr G when G is kept)
    a = np.einsum("bik,bi->bk", U, xt)
    if G is None:
        fro2 = _sum(U * U, axis=(-2, -1))
        # pass 2 (reduction over rows i): r_i = U[i,:]·a, g = Uᵀr
        r_pass2 = np.einsum("bik,bk->bi", U, a)
        g = np.einsum("bik,bi->bk", U, r_pass2)
    else:
        fro2 = np.trace(G, axis1=-2, axis2=-1)
        g = np.einsum("bkl,bl->bk", G, a)

    # k-vector work: orthogonality test, Householder vector, row-update vectors p and q
    n2 = _sum(a * g)  # = ||r||² = ||Omega x||²
    is_orth = full & (n2 <= orth_tol * _sum(xt * xt) * fro2 * fro2)
    upd = full & ~is_orth
    safe = upd  # batch elements where the divisions below are meaningful
    n2s = np.where(safe, n2, 1.0)
    a2 = _sum(a * a)  # = rᵀx
    an = np.sqrt(np.where(safe, a2, 1.0))
    ahat = a / an[:, None]
    j = np.argmax(np.abs(ahat), axis=-1)
    ej = np.arange(k)[None, :] == j[:, None]  # one-hot [B, k]
    ahat_j = np.take_along_axis(ahat, j[:, None], axis=-1)[:, 0]
    g_j = np.take_along_axis(g, j[:, None], axis=-1)[:, 0]
    s = np.where(ahat_j >= 0.0, 1.0, -1.0)
    beta = 1.0 / (1.0 + np.abs(ahat_j))
    v = ahat + s[:, None] * ej
    p = (-g + (beta * s * g_j)[:, None] * v) / n2s[:, None]
    q = -(beta * s)[:, None] * v

    # fused row pass: for each row i, r_i = U[i,:]·a, c_i = U[i,j];
    # U'[i,:] = U[i,:] + r_i p + c_i q, then U'[i,j] = x_i
    r = np.einsum("bik,bk->bi", U, a)
    c = np.take_along_axis(U, j[:, None, None], axis=-1)[:, :, 0]
    U_new = U + r[:, :, None] * p[:, None, :] + c[:, :, None] * q[:, None, :]
    U_new = np.where(ej[:, None, :], xt[:, :, None], U_new)
    y = r / np.sqrt(n2s)[:, None]

    U_out = np.where(upd[:, None, None], U_new, U)
    y = np.where(upd[:, None], y, 0.0)
    if G is None:
        return U_out, y, None, is_orth

    # O(k²) Gram update: G' = H (G - g gᵀ/n²) H, row/col j <- H (a - g ||a||²/n²), G'_jj = xᵀx
    H = np.eye(k)[None] - beta[:, None, None] * v[:, :, None] * v[:, None, :]
    M = G - g[:, :, None] * g[:, None, :] / n2s[:, None, None]
    G_new = H @ M @ H
    h = np.einsum("bkl,bl->bk", H, a - g * (a2 / n2s)[:, None])
    h = np.where(ej, _sum(xt * xt)[:, None], h)
    G_new = np.where(ej[:, :, None], h[:, None, :], G_new)
    G_new = np.where(ej[:, None, :], h[:, :, None], G_new)
    G_out = np.where(upd[:, None, None], G_new, G)
    return U_out, y, G_out, is_orth


def annihilation_gram(x, k, orth_tol=1e-24, orth_policy="evict", *, use_gram=False, history=False) -> dict:
    """O(dk)-per-token Gram-factor form (exact variant): state ``U`` (``d x k``), ``Omega = U Uᵀ``.

    ``use_gram=False`` computes ``g = Uᵀ(U a)`` with a second reduction pass; ``use_gram=True``
    maintains ``G = UᵀU`` algebraically and uses ``g = G a`` (then also returns ``gram``).
    ``orth_policy``: ``"evict"`` writes an orthogonal ``x`` over the column of least squared norm
    (``G``'s diagonal with ``use_gram``, else ``||U[:, j]||²``; ties round-robin), ``"skip"``
    drops it (module docstring).
    Returns ``u`` [..., d, k], ``omega`` [..., d, d], ``y`` [..., T, d], ``orth`` [..., T],
    ``count`` [...]; with ``history=True`` also ``u_hist`` [..., T, d, k].
    """
    xb, batch, k, _, orth_tol = _validate(x, k, 1.0, orth_tol)
    evict = check_orth_policy(orth_policy) == "evict"
    B, T, d = xb.shape
    U = np.zeros((B, d, k))
    G = np.zeros((B, k, k)) if use_gram else None
    count = np.zeros(B, dtype=np.int64)
    ptr = np.zeros(B, dtype=np.int64)  # evict: round-robin pointer
    y_out = np.zeros((B, T, d))
    orth = np.zeros((B, T), dtype=bool)
    hist = np.zeros((B, T, d, k)) if history else None
    cols = np.arange(k)[None, :]

    for t in range(T):
        xt = xb[:, t]
        nz = np.any(xt != 0.0, axis=-1)
        warm = nz & (count < k)
        full = nz & (count >= k)

        U_full, y, G_full, is_orth = _gram_step(U, xt, full, orth_tol, G)

        # warm-up: write x into column `count`; evict (orthogonal x): into the weakest column
        col = count
        ev = is_orth & evict
        if np.any(ev):
            energy = np.einsum("bkk->bk", G) if use_gram else _sum(U * U, axis=-2)
            j = evict_column(energy, ptr)
            col = np.where(ev, j, count)
            ptr = np.where(ev, (j + 1) % k, ptr)
        wcol = (warm | ev)[:, None] & (cols == col[:, None])
        U = np.where(wcol[:, None, :], xt[:, :, None], U_full)
        if use_gram:
            bvec = np.einsum("bik,bi->bk", U, xt)  # Uᵀx after the write; entry `col` is xᵀx
            G = np.where(wcol[:, :, None], bvec[:, None, :], G_full)
            G = np.where(wcol[:, None, :], bvec[:, :, None], G)
        count = count + warm
        y_out[:, t] = y
        orth[:, t] = is_orth
        if history:
            hist[:, t] = U

    out = {
        "u": U.reshape(batch + (d, k)),
        "omega": (U @ np.swapaxes(U, -1, -2)).reshape(batch + (d, d)),
        "y": y_out.reshape(batch + (T, d)),
        "orth": orth.reshape(batch + (T,)),
        "count": count.reshape(batch),
    }
    if use_gram:
        out["gram"] = G.reshape(batch + (k, k))
    if history:
        out["u_hist"] = hist.reshape(batch + (T, d, k))
    return out


# ---------------------------------------------------------------------------------------------
# dispatcher


def annihilation(x, k, variant="exact", form=None, eps=1e-3, orth_tol=1e-24, use_gram=False, orth_policy="evict", *,
                 history=False) -> dict:
    """Run the memory; ``form=None`` means ``"gram"`` for ``exact`` and ``"dense"`` for ``literal``.
    ``orth_policy``: ``"evict"`` (default) or ``"skip"``, what an input orthogonal to the stored
    span does once the memory is full (module docstring)."""
    variant = _check_variant(variant)
    check_orth_policy(orth_policy)
    if form is not None and (not isinstance(form, str) or form not in _FORMS):
        raise SpecmemInputError(f"form: must be one of {_FORMS}, got {form!r}")
    if variant == "literal" and form == "gram":
        raise SpecmemInputError(
            "variant: literal is only defined in the dense form (use form='dense'); "
            "the Gram-factor form implements the exact variant"
        )
    if form is None:
        form = "gram" if variant == "exact" else "dense"
    if form == "dense":
        if use_gram:
            raise SpecmemInputError("use_gram: only applies to form='gram'")
        return annihilation_dense(x, k, variant=variant, eps=eps, orth_tol=orth_tol, orth_policy=orth_policy,
                                  history=history)
    check_scalar("eps", eps, lo=0.0, lo_open=True)  # unused by the exact variant, still validated
    return annihilation_gram(x, k, orth_tol=orth_tol, orth_policy=orth_policy, use_gram=use_gram, history=history)


# ---------------------------------------------------------------------------------------------
# helpers for tests and reports


def _as_matrices(name, a):
    a = np.asarray(a, dtype=np.float64)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise SpecmemInputError(f"{name}: expected [..., d, d], got shape {a.shape}")
    return a


def _col_space(omega, rtol):
    """Eigenvectors of ``omega`` and the mask of those spanning its numerical column space."""
    ev, V = np.linalg.eigh(0.5 * (omega + np.swapaxes(omega, -1, -2)))
    top = np.max(np.abs(ev), axis=-1, keepdims=True)
    return V, ev > rtol * top


def rank(omega, rtol=1e-9):
    """Numerical rank: eigenvalues above ``rtol`` times the largest; int, or int array over [...]."""
    omega = _as_matrices("omega", omega)
    rtol = check_scalar("rtol", rtol, lo=0.0)
    _, mask = _col_space(omega, rtol)
    n = np.sum(mask, axis=-1)
    return int(n) if n.ndim == 0 else n


def erasure_residual(omega_t, x_t, y_t):
    """``||Omega_t y - x (xᵀy)|| / ||x||²`` over [...]: what survives along the erased ``y``.

    Zero for the exact variant up to rounding; NaN where ``x_t`` is zero.
    """
    omega_t = _as_matrices("omega_t", omega_t)
    x_t = np.asarray(x_t, dtype=np.float64)
    y_t = np.asarray(y_t, dtype=np.float64)
    res = np.einsum("...ij,...j->...i", omega_t, y_t) - x_t * _sum(x_t * y_t)[..., None]
    x2 = _sum(x_t * x_t)
    return np.where(x2 > 0, np.linalg.norm(res, axis=-1) / np.where(x2 > 0, x2, 1.0), np.nan)


def retention(omega, xs, rtol=1e-9):
    """``||proj_col(Omega) x_s|| / ||x_s||`` for each row of ``xs`` [..., S, d]; NaN for zero rows."""
    omega = _as_matrices("omega", omega)
    xs = np.asarray(xs, dtype=np.float64)
    V, mask = _col_space(omega, rtol)
    coeff = np.einsum("...ij,...si->...sj", V, xs) * mask[..., None, :]
    num = np.linalg.norm(coeff, axis=-1)
    den = np.linalg.norm(xs, axis=-1)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
