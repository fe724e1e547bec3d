"""Lattice-DEC and Echo/SKA golden models against independent loop references and seed properties.

The references here are written from spec §3 directly (plain per-token, per-slot loops and
explicit inverses), never by calling the module under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError
from specmem.golden.lattice import lattice
from specmem.golden.ska import ska


def _orthonormal(rng, d, m):
    qm, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return qm[:, :m]


# ---------------------------------------------------------------- Lattice references


def ref_lattice(k, v, q, gamma, s0):
    """Per-token, per-slot loop of spec §3 (h from the previous state, then every slot)."""
    T = k.shape[0]
    gam = np.broadcast_to(np.asarray(gamma, dtype=float), (T,))
    S = np.array(s0, dtype=float)
    d, m = S.shape
    outs = []
    for t in range(T):
        h = S @ k[t] - v[t]
        new = np.empty_like(S)
        for i in range(m):
            s = S[:, i]
            ds = -gam[t] * k[t, i] * ((np.eye(d) - np.outer(s, s)) @ h)
            new[:, i] = (s + ds) / np.sqrt(1.0 + ds @ ds)
        S = new
        outs.append(S @ q[t])
    return np.array(outs), S


def _lattice_data(rng, T, d, m, batch=()):
    return (
        rng.standard_normal(batch + (T, m)),
        rng.standard_normal(batch + (T, d)),
        rng.standard_normal(batch + (T, m)),
    )


# Tolerance for loop-vs-vectorised: same float64 operations in a different order; each step's
# rounding is ~1e-16 and the normaliser is contractive, so 1e-12 leaves a wide margin over T=25.
LOOP_TOL = 1e-12


@pytest.mark.parametrize("gamma", [1.0, 0.3, "per_token"])
def test_lattice_slots_unit_norm_every_step(gamma):
    rng = np.random.default_rng(101)
    T, d, m = 40, 8, 6
    k, v, q = _lattice_data(rng, T, d, m)
    if gamma == "per_token":
        gamma = rng.uniform(0.05, 2.0, size=T)
    for t in range(1, T + 1):
        g = gamma if np.ndim(gamma) == 0 else gamma[:t]
        s = lattice(k[:t], v[:t], q[:t], gamma=g)["s"]
        # The normaliser divides by sqrt(1 + ||Δ||²), exact only while ||s_i|| = 1; rounding
        # adds ~1e-16 per step, so 1e-12 catches any systematic drift.
        np.testing.assert_allclose(np.linalg.norm(s, axis=0), 1.0, atol=1e-12, rtol=0)


@pytest.mark.parametrize("d,m", [(8, 8), (8, 5), (5, 9)])
def test_lattice_matches_per_slot_loop(d, m):
    rng = np.random.default_rng(202 + 10 * d + m)
    T = 25
    k, v, q = _lattice_data(rng, T, d, m)
    gamma = rng.uniform(0.1, 1.5, size=T)
    if m <= d:
        s0 = _orthonormal(rng, d, m)
    else:  # over-complete dictionary: unit-norm columns, not orthogonal
        s0 = rng.standard_normal((d, m))
        s0 /= np.linalg.norm(s0, axis=0)
    out = lattice(k, v, q, gamma=gamma, s0=s0)
    o_ref, s_ref = ref_lattice(k, v, q, gamma, s0)
    np.testing.assert_allclose(out["o"], o_ref, atol=LOOP_TOL, rtol=LOOP_TOL)
    np.testing.assert_allclose(out["s"], s_ref, atol=LOOP_TOL, rtol=LOOP_TOL)


def test_lattice_default_start_is_identity_and_default_gamma_is_one():
    rng = np.random.default_rng(303)
    T, d, m = 6, 7, 4
    k, v, q = _lattice_data(rng, T, d, m)
    out = lattice(k, v, q)
    o_ref, s_ref = ref_lattice(k, v, q, 1.0, np.eye(d, m))
    np.testing.assert_allclose(out["o"], o_ref, atol=LOOP_TOL, rtol=LOOP_TOL)
    np.testing.assert_allclose(out["s"], s_ref, atol=LOOP_TOL, rtol=LOOP_TOL)


def test_lattice_ignores_error_parallel_to_slot():
    """Seed §3.3: a slot takes in only the component of the error orthogonal to itself."""
    rng = np.random.default_rng(404)
    d = 6
    s0 = _orthonormal(rng, d, d)
    k = np.zeros((1, d))
    k[0, 2] = 0.7
    v = (3.0 * 0.7 * s0[:, 2])[None]  # h = 0.7 s_2 - 2.1 s_2, parallel to s_2: nothing new
    out = lattice(k, v, k, gamma=1.0, s0=s0)
    np.testing.assert_allclose(out["s"], s0, atol=1e-15, rtol=0)


def test_lattice_recalls_stored_pairs():
    """One-hot codes address one slot each; rewriting (e_j, v_j) rotates s_j onto unit v_j
    (error angle shrinks ~θ³/2 per write at gamma=1) and leaves every other slot untouched."""
    rng = np.random.default_rng(505)
    d, n, rounds = 8, 4, 6
    vals = rng.standard_normal((n, d))
    vals /= np.linalg.norm(vals, axis=1, keepdims=True)
    keys = np.eye(d)[:n]
    k = np.tile(keys, (rounds, 1))
    v = np.tile(vals, (rounds, 1))
    out = lattice(k, v, k, gamma=1.0)
    S = out["s"]
    # Cubic convergence from a random start reaches rounding level well inside 6 rounds.
    np.testing.assert_allclose(S @ keys.T, vals.T, atol=1e-10, rtol=0)
    np.testing.assert_array_equal(S[:, n:], np.eye(d)[:, n:])  # k_i = 0: Δs_i = 0 exactly
    # The read-out of the last round is the recalled value for each query.
    np.testing.assert_allclose(out["o"][-n:], vals, atol=1e-10, rtol=0)


def test_lattice_d1_slot_cannot_move():
    """In one dimension (I - s sᵀ) = 0, so the slot stays at ±1 and o = s q."""
    rng = np.random.default_rng(606)
    k, v, q = _lattice_data(rng, 9, 1, 1)
    out = lattice(k, v, q, gamma=0.8)
    np.testing.assert_array_equal(out["s"], [[1.0]])
    np.testing.assert_array_equal(out["o"], q)


def test_lattice_t1_and_d7():
    rng = np.random.default_rng(707)
    k, v, q = _lattice_data(rng, 1, 7, 3)
    s0 = _orthonormal(rng, 7, 3)
    out = lattice(k, v, q, gamma=0.5, s0=s0)
    o_ref, s_ref = ref_lattice(k, v, q, 0.5, s0)
    assert out["o"].shape == (1, 7) and out["s"].shape == (7, 3)
    np.testing.assert_allclose(out["o"], o_ref, atol=LOOP_TOL, rtol=LOOP_TOL)
    np.testing.assert_allclose(out["s"], s_ref, atol=LOOP_TOL, rtol=LOOP_TOL)


def test_lattice_batch_equals_loop():
    rng = np.random.default_rng(808)
    B = (2, 3)
    T, d, m = 11, 7, 5
    k, v, q = _lattice_data(rng, T, d, m, B)
    gamma = rng.uniform(0.1, 1.2, size=B + (T,))
    s0 = np.stack([[_orthonormal(rng, d, m) for _ in range(B[1])] for _ in range(B[0])])
    out = lattice(k, v, q, gamma=gamma, s0=s0)
    assert out["o"].shape == B + (T, d) and out["s"].shape == B + (d, m)
    for a in range(B[0]):
        for b in range(B[1]):
            one = lattice(k[a, b], v[a, b], q[a, b], gamma=gamma[a, b], s0=s0[a, b])
            np.testing.assert_allclose(out["o"][a, b], one["o"], atol=LOOP_TOL, rtol=LOOP_TOL)
            np.testing.assert_allclose(out["s"][a, b], one["s"], atol=LOOP_TOL, rtol=LOOP_TOL)
    shared = lattice(k, v, q, gamma=0.4)  # a shared [d, m] start broadcasts over the batch
    np.testing.assert_allclose(
        shared["o"][1, 2], lattice(k[1, 2], v[1, 2], q[1, 2], gamma=0.4)["o"], atol=LOOP_TOL, rtol=LOOP_TOL
    )


# ---------------------------------------------------------------- SKA references


def ref_ska_at(k, v, q, t, *, eta, gamma, eps, K):
    """Recompute SKA's read-out at step t (1-based) from the whole history, via the paper's
    whitened pipeline (Appendix F steps 4-10) with explicit inverses."""
    Z = k[:t] / np.linalg.norm(k[:t], axis=1, keepdims=True)
    zq = q[t - 1] / np.linalg.norm(q[t - 1])
    r = Z.shape[1]
    G = Z.T @ Z + eps * np.eye(r)
    M = Z[1:].T @ Z[:-1] if t > 1 else np.zeros((r, r))
    C = v[:t].T @ Z
    L = np.linalg.cholesky(G)
    Li = np.linalg.inv(L)
    Aw = Li @ M @ Li.T
    sigma = np.linalg.norm(Aw, 2)
    Aw_s = gamma / max(sigma, 1.0) * Aw
    Bv = C @ np.linalg.inv(G)
    y = eta * Bv @ L @ np.linalg.matrix_power(Aw_s, K) @ Li @ zq
    return y, G, M, C, sigma


@pytest.mark.parametrize("K", [0, 1, 2, 3])
def test_ska_matches_history_recompute(K):
    rng = np.random.default_rng(1000 + K)
    T, r, P = 14, 6, 5
    # Keys with random norms: the model must normalise them (scale-free in k and q).
    k = rng.standard_normal((T, r)) * rng.uniform(0.1, 10.0, size=(T, 1))
    v = rng.standard_normal((T, P))
    q = rng.standard_normal((T, r)) * 3.0
    kw = dict(eta=1.7, gamma=1.3, eps=1e-2, K=K)
    out = ska(k, v, q, **kw)
    assert out["o"].shape == (T, P)
    for t in (1, 2, 5, 9, T):
        y, G, M, C, _ = ref_ska_at(k, v, q, t, **kw)
        # Solves vs explicit inverses of G (cond <= ~T/eps = 1.4e3): agree to ~1e-13 relative.
        np.testing.assert_allclose(out["o"][t - 1], y, rtol=1e-9, atol=1e-11 * max(1.0, np.abs(y).max()))
    y, G, M, C, _ = ref_ska_at(k, v, q, T, **kw)
    np.testing.assert_allclose(out["g"], G, atol=1e-12, rtol=0)
    np.testing.assert_allclose(out["m"], M, atol=1e-12, rtol=0)
    np.testing.assert_allclose(out["c"], C, atol=1e-12, rtol=0)


def test_ska_defaults_and_spectral_bound():
    """c·σ_max(L⁻¹ M L⁻ᵀ) ≤ gamma at every step. With these sums σ_max < 1 always
    (Cauchy-Schwarz: |xᵀMy|² ≤ xᵀGx · yᵀGy), so c = gamma; a cyclic key sequence pushes σ
    towards 1 to exercise the edge."""
    rng = np.random.default_rng(1100)
    T, r, P = 30, 5, 4
    cyc = _orthonormal(rng, r, 3)
    k_cyc = np.stack([cyc[:, t % 3] for t in range(T)])
    k_rnd = rng.standard_normal((T, r))
    v = rng.standard_normal((T, P))
    q = rng.standard_normal((T, r))
    for k in (k_cyc, k_rnd):
        out = ska(k, v, q)  # defaults: eta=1, gamma=1, eps=1e-3, K=2
        sig_max_seen = 0.0
        for t in range(1, T + 1):
            y, _, _, _, sigma = ref_ska_at(k, v, q, t, eta=1.0, gamma=1.0, eps=1e-3, K=2)
            sig_max_seen = max(sig_max_seen, sigma)
            assert out["coef"][t - 1] * sigma <= 1.0 * (1 + 1e-12)
            assert sigma < 1.0
            np.testing.assert_allclose(out["o"][t - 1], y, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(out["coef"], 1.0, rtol=0, atol=0)
    assert sig_max_seen > 0.9  # the cyclic run really approached the normalisation threshold


def test_ska_k0_is_ridge_readout_and_recalls_orthonormal_pairs():
    rng = np.random.default_rng(1200)
    r, P, n, eps = 8, 6, 5, 1e-3
    keys = _orthonormal(rng, r, n).T  # n orthonormal keys
    vals = rng.standard_normal((n, P))
    # Batch over which key is queried at the final step; all batch rows see the same writes.
    k = np.broadcast_to(keys, (n, n, r))
    v = np.broadcast_to(vals, (n, n, P))
    q = rng.standard_normal((n, n, r))
    q[:, -1, :] = keys
    out = ska(k, v, q, K=0, eps=eps)
    last = out["o"][:, -1, :]
    # K = 0: o = C G⁻¹ ẑ_q; with orthonormal keys G⁻¹ k_j = k_j / (1 + eps), so o_j = v_j/(1+eps).
    np.testing.assert_allclose(last, vals / (1.0 + eps), rtol=1e-12, atol=1e-14)
    assert np.all(np.linalg.norm(last - vals, axis=1) <= 1.01 * eps * np.linalg.norm(vals, axis=1))
    # And in general: K = 0 is eta · C G⁻¹ ẑ_q at every step.
    k2, v2, q2 = rng.standard_normal((9, 4)), rng.standard_normal((9, 3)), rng.standard_normal((9, 4))
    out2 = ska(k2, v2, q2, K=0, eta=2.0)
    for t in range(1, 10):
        Z = k2[:t] / np.linalg.norm(k2[:t], axis=1, keepdims=True)
        G = Z.T @ Z + 1e-3 * np.eye(4)
        want = 2.0 * (v2[:t].T @ Z) @ np.linalg.inv(G) @ (q2[t - 1] / np.linalg.norm(q2[t - 1]))
        np.testing.assert_allclose(out2["o"][t - 1], want, rtol=1e-10, atol=1e-12)


def test_ska_awkward_sizes():
    rng = np.random.default_rng(1300)
    # T = 1: M = 0, so any K >= 1 reads out zero; K = 0 is the one-pair ridge read-out.
    k, v, q = rng.standard_normal((1, 7)), rng.standard_normal((1, 7)), rng.standard_normal((1, 7))
    np.testing.assert_array_equal(ska(k, v, q)["o"], np.zeros((1, 7)))
    y, *_ = ref_ska_at(k, v, q, 1, eta=1.0, gamma=1.0, eps=1e-3, K=0)
    np.testing.assert_allclose(ska(k, v, q, K=0)["o"][0], y, rtol=1e-12, atol=1e-15)
    # r = 1: ẑ = ±1, G = t + eps, M counts sign agreements.
    k, v, q = rng.standard_normal((6, 1)), rng.standard_normal((6, 1)), rng.standard_normal((6, 1))
    out = ska(k, v, q, K=2)
    for t in range(1, 7):
        y, *_ = ref_ska_at(k, v, q, t, eta=1.0, gamma=1.0, eps=1e-3, K=2)
        np.testing.assert_allclose(out["o"][t - 1], y, rtol=1e-12, atol=1e-14)
    # d = 7 with batch dims [2, 3, T, d] equals looping.
    B, T = (2, 3), 8
    k, v, q = (rng.standard_normal(B + (T, 7)) for _ in range(3))
    out = ska(k, v, q, gamma=1.2, K=3)
    assert out["o"].shape == B + (T, 7) and out["g"].shape == B + (7, 7) and out["coef"].shape == B + (T,)
    for a in range(B[0]):
        for b in range(B[1]):
            one = ska(k[a, b], v[a, b], q[a, b], gamma=1.2, K=3)
            for name in ("o", "g", "m", "c", "coef"):
                np.testing.assert_allclose(out[name][a, b], one[name], rtol=1e-12, atol=1e-13)


# ---------------------------------------------------------------- bad input


def _good(T=4, d=3):
    rng = np.random.default_rng(1400)
    return rng.standard_normal((T, d)), rng.standard_normal((T, d)), rng.standard_normal((T, d))


@pytest.mark.parametrize(
    "mutate,kwargs,name",
    [
        (lambda k, v, q: (k[0], v, q), {}, "k"),
        (lambda k, v, q: (k, v, q[:, :2]), {}, "q"),
        (lambda k, v, q: (k, v[:3], q), {}, "v"),
        (lambda k, v, q: (k, np.where(np.arange(3) == 1, np.nan, v), q), {}, "v"),
        (lambda k, v, q: (k, v, np.where(np.arange(3) == 0, np.inf, q)), {}, "q"),
        (lambda k, v, q: (k, v, q), {"gamma": 0.0}, "gamma"),
        (lambda k, v, q: (k, v, q), {"gamma": -1.0}, "gamma"),
        (lambda k, v, q: (k, v, q), {"gamma": np.array([1.0, 0.0, 1.0, 1.0])}, "gamma"),
        (lambda k, v, q: (k, v, q), {"gamma": np.ones(3)}, "gamma"),
        (lambda k, v, q: (k, v, q), {"gamma": np.nan}, "gamma"),
        (lambda k, v, q: (k, v, q), {"s0": np.eye(3, 2)}, "s0"),
        (lambda k, v, q: (k, v, q), {"s0": 2.0 * np.eye(3)}, "s0"),
        (lambda k, v, q: (k, v, q), {"s0": np.ones((2, 3, 3)) / np.sqrt(3)}, "s0"),
        (lambda k, v, q: (np.ones((4, 5)), v, np.ones((4, 5))), {}, "k"),  # m > d, no s0
    ],
)
def test_lattice_bad_input(mutate, kwargs, name):
    k, v, q = mutate(*_good())
    with pytest.raises(SpecmemInputError, match=rf"^{name}:"):
        lattice(k, v, q, **kwargs)


@pytest.mark.parametrize(
    "mutate,kwargs,name",
    [
        (lambda k, v, q: (k[0], v, q), {}, "k"),
        (lambda k, v, q: (k, v, q[:, :2]), {}, "q"),
        (lambda k, v, q: (k, v[:3], q), {}, "v"),
        (lambda k, v, q: (np.where(np.arange(3) == 2, np.nan, k), v, q), {}, "k"),
        (lambda k, v, q: (k, v, q), {"gamma": 0.0}, "gamma"),
        (lambda k, v, q: (k, v, q), {"eps": 0.0}, "eps"),
        (lambda k, v, q: (k, v, q), {"eps": -1e-3}, "eps"),
        (lambda k, v, q: (k, v, q), {"K": -1}, "K"),
        (lambda k, v, q: (k, v, q), {"K": 1.5}, "K"),
        (lambda k, v, q: (k, v, q), {"eta": 0.0}, "eta"),
        (lambda k, v, q: (k, v, q), {"eta": np.inf}, "eta"),
    ],
)
def test_ska_bad_input(mutate, kwargs, name):
    k, v, q = mutate(*_good())
    with pytest.raises(SpecmemInputError, match=rf"^{name}:"):
        ska(k, v, q, **kwargs)
