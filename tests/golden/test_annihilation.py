"""Spectral-annihilation golden model (spec §1): rank, erasure, Gram == dense, policy edges (orthogonal
inputs: evict and skip), input checks."""

import numpy as np
import pytest

from specmem.algorithms import get_algorithm, parse_params
from specmem.golden.annihilation import (
    ORTH_POLICIES,
    annihilation,
    annihilation_dense,
    annihilation_gram,
    erasure_residual,
    rank,
    retention,
)
from specmem.golden.common import SpecmemInputError


def gauss(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def omega_of(u):
    return u @ np.swapaxes(u, -1, -2)


def rel_fro(a, b):
    return np.linalg.norm(a - b, axis=(-2, -1)) / np.linalg.norm(b, axis=(-2, -1))


GRAM_FORMS = [pytest.param(False, id="g-from-U"), pytest.param(True, id="use_gram")]


# ---------------------------------------------------------------------------------------------
# exact variant: rank exactly k, y erased, Gram form == dense form


@pytest.mark.parametrize("d,k,T,seed", [(16, 4, 3000, 11), (32, 8, 3000, 12)])
def test_exact_dense_rank_k_and_erasure(d, k, T, seed):
    x = gauss(seed, T, d)
    out = annihilation_dense(x, k, history=True)
    hist = out["omega_hist"]
    # warm-up grows the rank one per token, then it stays exactly k
    assert np.array_equal(rank(hist[:k]), np.arange(1, k + 1))
    assert np.all(rank(hist[k:]) == k)
    assert not out["orth"].any() and out["count"] == k
    # every full step erases y: Omega_t y = x (xᵀy); float64 rounding gives ~1e-15, bound 1e-10
    assert np.all(np.linalg.norm(out["y"][k:], axis=-1) > 0.999)
    res = erasure_residual(hist[k:], x[k:], out["y"][k:])
    assert np.max(res) <= 1e-10
    np.testing.assert_array_equal(out["w"], out["y"])


@pytest.mark.parametrize("use_gram", GRAM_FORMS)
@pytest.mark.parametrize("d,k,T,seed", [(16, 4, 3000, 21), (32, 8, 3000, 22)])
def test_exact_gram_rank_k_erasure_and_matches_dense(d, k, T, seed, use_gram):
    x = gauss(seed, T, d)
    gram = annihilation_gram(x, k, use_gram=use_gram, history=True)
    dense = annihilation_dense(x, k, history=True)
    om = omega_of(gram["u_hist"])
    assert np.all(rank(om[k:]) == k)
    assert np.max(erasure_residual(om[k:], x[k:], gram["y"][k:])) <= 1e-10
    # Same maths, different rounding paths; the measured gap grows to ~4e-12 after 3000 steps,
    # so 1e-9 relative leaves >100x margin while a wrong formula is off by O(1).
    assert np.max(rel_fro(om, dense["omega_hist"])) <= 1e-9
    np.testing.assert_allclose(gram["omega"], dense["omega"], rtol=0, atol=1e-9 * np.abs(dense["omega"]).max())
    np.testing.assert_allclose(gram["y"], dense["y"], rtol=0, atol=1e-9)  # y is unit length
    np.testing.assert_array_equal(gram["orth"], dense["orth"])
    assert gram["count"] == dense["count"] == k
    if use_gram:
        # the algebraically maintained G stays the Gram matrix of U (float64 drift ~1e-15)
        uu = gram["u"].T @ gram["u"]
        assert np.max(np.abs(gram["gram"] - uu)) <= 1e-12 * np.max(np.abs(uu))


def test_gram_row_pass_equals_explicit_formula():
    """One full step against the written-out (U - r gᵀ/n²) H with column j replaced by x."""
    d, k = 9, 4
    x = gauss(31, k + 1, d)
    U = x[:k].T.copy()
    xt = x[k]
    a = U.T @ xt
    r = U @ a
    g = U.T @ r
    n2 = a @ g
    ahat = a / np.linalg.norm(a)
    j = int(np.argmax(np.abs(ahat)))
    target = -np.sign(ahat[j]) * np.eye(k)[j]
    v = ahat - target
    H = np.eye(k) - 2 * np.outer(v, v) / (v @ v)
    np.testing.assert_allclose(H @ ahat, target, atol=1e-15)
    PU_H = (U - np.outer(r, g) / n2) @ H
    assert np.max(np.abs(PU_H[:, j])) <= 1e-13 * np.max(np.abs(U))  # the Householder empties column j
    expected = PU_H.copy()
    expected[:, j] = xt
    for use_gram in (False, True):
        out = annihilation_gram(x, k, use_gram=use_gram)
        np.testing.assert_allclose(out["u"], expected, rtol=0, atol=1e-13 * np.max(np.abs(U)))
        np.testing.assert_allclose(out["y"][k], r / np.sqrt(n2), atol=1e-15)


# ---------------------------------------------------------------------------------------------
# literal variant (the note's formula as printed)


def test_literal_rank_grows_and_stale_direction_survives():
    d, k, T, eps = 32, 6, 200, 1e-3
    x = gauss(41, T, d)
    out = annihilation(x, k, variant="literal", eps=eps, history=True)
    hist, y, w = out["omega_hist"], out["y"], out["w"]
    ranks = rank(hist)
    assert ranks[k] > k  # one full step already leaves rank k
    assert np.all(np.diff(ranks) >= 0) and ranks[-1] == d
    # wᵀy follows the Sherman-Morrison formula: (yᵀx)·eps/(1+eps) / ||x - (yᵀx)/(1+eps) y||
    yx = np.sum(y[k:] * x[k:], axis=-1)
    wu = np.linalg.norm(x[k:] - (yx / (1 + eps))[:, None] * y[k:], axis=-1)
    wy = np.sum(w[k:] * y[k:], axis=-1)
    np.testing.assert_allclose(wy, yx * eps / (1 + eps) / wu, rtol=1e-9, atol=1e-15)
    assert np.mean(np.abs(wy)) < 5e-3  # spec: ~0.001 at eps=1e-3
    # the congruence keeps most of the old response along y: ||P Omega P y|| / ||Omega_prev y||
    cong = hist[k:] - x[k:, :, None] * x[k:, None, :]
    kept = np.linalg.norm(np.einsum("tij,tj->ti", cong, y[k:]), axis=-1)
    before = np.linalg.norm(np.einsum("tij,tj->ti", hist[k - 1 : -1], y[k:]), axis=-1)
    assert 0.9 < np.mean(kept / before) < 1.0  # spec: ≈ 0.96
    assert np.median(erasure_residual(hist[k:], x[k:], y[k:])) > 0.1


def test_exact_variant_erases_where_literal_does_not():
    d, k, T = 16, 4, 50
    x = gauss(42, T, d)
    ex = annihilation_dense(x, k, variant="exact", history=True)
    lit = annihilation_dense(x, k, variant="literal", history=True)
    # identical up to the first full step, then they diverge
    np.testing.assert_array_equal(ex["omega_hist"][:k], lit["omega_hist"][:k])
    np.testing.assert_array_equal(ex["y"][k], lit["y"][k])
    assert erasure_residual(ex["omega_hist"][k], x[k], ex["y"][k]) < 1e-12
    assert erasure_residual(lit["omega_hist"][k], x[k], lit["y"][k]) > 1e-2


# ---------------------------------------------------------------------------------------------
# orthogonal input, zero input, warm-up


def _stored_and_orthogonal(seed, d, k):
    xs = gauss(seed, k, d)
    q, _ = np.linalg.qr(xs.T)
    z = gauss(seed + 1, d)
    return xs, z - q @ (q.T @ z)  # orthogonal to the stored span up to rounding


def _run(form, x, k, **kw):
    if form == "dense":
        out = annihilation_dense(x, k, history=True, **kw)
        return out, out["omega_hist"]
    out = annihilation_gram(x, k, history=True, use_gram=(form == "use_gram"), **kw)
    return out, out["u_hist"]


FORMS = ["dense", "gram", "use_gram"]


@pytest.mark.parametrize("form", FORMS)
def test_orthogonal_input_skipped_and_flagged(form):
    d, k = 12, 4
    xs, xo = _stored_and_orthogonal(51, d, k)
    after = gauss(53, 3, d)
    x = np.concatenate([xs, xo[None], after])
    out, hist = _run(form, x, k, orth_policy="skip")
    assert out["orth"].tolist() == [False] * k + [True] + [False] * 3
    np.testing.assert_array_equal(hist[k], hist[k - 1])  # state untouched, bit for bit
    np.testing.assert_array_equal(out["y"][k], np.zeros(d))
    assert out["count"] == k
    # the following tokens are ordinary full steps
    om = hist if form == "dense" else omega_of(hist)
    assert np.all(np.linalg.norm(out["y"][k + 1 :], axis=-1) > 0.999)
    assert np.max(erasure_residual(om[k + 1 :], x[k + 1 :], out["y"][k + 1 :])) <= 1e-10
    assert np.all(rank(om[k:]) == k)


@pytest.mark.parametrize("form", FORMS)
def test_orthogonal_exact_basis_and_threshold_direction(form):
    d, k = 6, 2
    e = np.eye(d)
    x = np.stack([e[0] + e[1], 2 * e[1], e[4], e[0]])
    out, hist = _run(form, x, k, orth_policy="skip")
    assert out["orth"].tolist() == [False, False, True, False]
    np.testing.assert_array_equal(hist[2], hist[1])
    # a clearly non-orthogonal input is flagged once orth_tol is 1 (the ratio is <= 1 always)
    out1, hist1 = _run(form, gauss(54, 8, d), k, orth_tol=1.0, orth_policy="skip")
    assert out1["orth"][k:].all() and not out1["orth"][:k].any()
    np.testing.assert_array_equal(hist1[-1], hist1[k - 1])


@pytest.mark.parametrize("form", FORMS)
def test_nearly_orthogonal_input_is_processed(form):
    """An in-span component of 1e-6 (ratio ~1e-13 >> orth_tol) is an ordinary step; forms agree."""
    d, k = 12, 4
    xs, xo = _stored_and_orthogonal(55, d, k)
    xn = xo + 1e-6 * np.linalg.norm(xo) * xs[0] / np.linalg.norm(xs[0])
    x = np.concatenate([xs, xn[None]])
    out, hist = _run(form, x, k)
    ref = annihilation_dense(x, k)
    assert not out["orth"].any()
    om = hist[-1] if form == "dense" else omega_of(hist[-1])
    assert rank(om) == k
    assert erasure_residual(om, xn, out["y"][-1]) <= 1e-10
    # dense y carries rounding/||r|| ~ 1e-16/1e-6 relative error, hence 1e-7
    np.testing.assert_allclose(out["y"][-1], ref["y"][-1], atol=1e-7)


@pytest.mark.parametrize("form", FORMS)
def test_zero_input_is_noop(form):
    d, k, T = 8, 3, 20
    x = gauss(61, T, d)
    zero_at = [0, 2, 3, 9, 19]
    xz = x.copy()
    xz[zero_at] = 0.0
    keep = [t for t in range(T) if t not in zero_at]
    out, hist = _run(form, xz, k)
    ref, ref_hist = _run(form, xz[keep], k)
    np.testing.assert_array_equal(hist[-1], ref_hist[-1])
    np.testing.assert_array_equal(out["y"][keep], ref["y"])
    assert not out["y"][zero_at].any() and not out["orth"][zero_at].any()
    assert out["count"] == ref["count"] == k
    for t in zero_at[1:]:
        np.testing.assert_array_equal(hist[t], hist[t - 1])


@pytest.mark.parametrize("form", FORMS)
def test_warmup_short_sequence(form):
    d, k, T = 10, 5, 3
    x = gauss(71, T, d)
    out, _ = _run(form, x, k)
    assert out["count"] == T
    assert not out["y"].any() and not out["orth"].any()
    np.testing.assert_allclose(out["omega"], x.T @ x, rtol=0, atol=1e-13)
    if form != "dense":
        np.testing.assert_array_equal(out["u"], np.concatenate([x.T, np.zeros((d, k - T))], axis=1))


@pytest.mark.parametrize("form", FORMS)
def test_warmup_counts_dependent_inputs(form):
    d, k = 6, 3
    x0 = gauss(72, d)
    x = np.stack([x0, -2 * x0, x0, gauss(73, d)])
    out, hist = _run(form, x, k)
    om = hist if form == "dense" else omega_of(hist)
    assert out["count"] == k
    assert rank(om[k - 1]) == 1  # three dependent writes, one direction
    assert not out["orth"][k]  # x has a component along x0, so the step runs
    np.testing.assert_allclose(om[k], annihilation_dense(x, k)["omega"], atol=1e-12)


# ---------------------------------------------------------------------------------------------
# awkward sizes, batch


@pytest.mark.parametrize("form", FORMS)
def test_d1_k1(form):
    x = np.array([[2.0], [-3.0], [0.0], [0.5]])
    out, _ = _run(form, x, 1)
    np.testing.assert_allclose(out["omega"], [[0.25]], rtol=1e-15)
    np.testing.assert_array_equal(out["y"][:, 0], [0.0, -1.0, 0.0, 1.0])
    assert out["count"] == 1
    if form != "dense":
        np.testing.assert_allclose(np.abs(out["u"]), [[0.5]], rtol=1e-15)


@pytest.mark.parametrize("d,k,T", [(7, 3, 40), (5, 5, 30), (7, 3, 1), (4, 1, 25)])
def test_awkward_sizes_gram_matches_dense(d, k, T):
    x = gauss(81 + d + k + T, T, d)
    dense = annihilation_dense(x, k)
    for use_gram in (False, True):
        gram = annihilation_gram(x, k, use_gram=use_gram)
        assert gram["u"].shape == (d, k)
        np.testing.assert_allclose(gram["omega"], dense["omega"], atol=1e-10 * np.abs(dense["omega"]).max())
        np.testing.assert_allclose(gram["y"], dense["y"], atol=1e-10)
        assert gram["count"] == dense["count"] == min(T, k)
        assert rank(gram["omega"]) == min(T, k)


@pytest.mark.parametrize("form", FORMS + ["literal"])
def test_batch_equals_loop(form):
    d, k, T = 8, 3, 30
    x = gauss(91, 2, 3, T, d)
    # put the batch elements in different phases: zeros of different lengths, an orthogonal token
    x[0, 1, :5] = 0.0
    x[1, 2, 3:9] = 0.0
    xs, xo = _stored_and_orthogonal(92, d, k)
    x[1, 0, :k] = xs
    x[1, 0, k] = xo
    if form == "literal":
        run = lambda a: annihilation(a, k, variant="literal")  # noqa: E731
    elif form == "dense":
        run = lambda a: annihilation(a, k, form="dense")  # noqa: E731
    else:
        run = lambda a: annihilation(a, k, use_gram=(form == "use_gram"))  # noqa: E731
    out = run(x)
    assert out["omega"].shape == (2, 3, d, d) and out["y"].shape == (2, 3, T, d)
    assert out["orth"].shape == (2, 3, T) and out["count"].shape == (2, 3)
    assert out["orth"][1, 0, k]
    for b in np.ndindex(2, 3):
        one = run(x[b])
        for name, val in one.items():
            # batched and single BLAS calls may round differently; 1e-12 is far below any real bug
            np.testing.assert_allclose(out[name][b], val, rtol=0, atol=1e-12 * max(1.0, np.abs(val).max()))


# ---------------------------------------------------------------------------------------------
# orthogonal-input policy: evict (default) and skip


def _orthonormal_stream(seed, d, n):
    """``n <= d`` mutually orthonormal rows (random rotation): squared norms ``1 ± 1e-16``."""
    q, _ = np.linalg.qr(gauss(seed, d, d))
    return q[:, :n].T.copy()


@pytest.mark.parametrize("form", ["gram", "use_gram"])
def test_evict_keeps_last_k_of_orthonormal_stream_gram(form):
    """3k orthonormal inputs: evict holds the last k (round-robin over equal columns), skip the
    first k. Retention is 1 to rounding; 0.99 is the stated target."""
    d, k = 16, 5
    x = _orthonormal_stream(131, d, 3 * k)
    for policy in ORTH_POLICIES:
        out, _ = _run(form, x, k, orth_policy=policy)
        assert out["orth"].tolist() == [False] * k + [True] * 2 * k  # flagged either way
        assert not out["y"][k:].any() and out["count"] == k
        assert rank(out["omega"]) == k
        ret = retention(out["omega"], x)
        if policy == "evict":
            assert ret[-k:].min() >= 0.99 and ret[:-k].max() <= 1e-6
            # column t % k holds token t (the pointer cycles 0..k-1), exactly
            np.testing.assert_array_equal(out["u"], x[2 * k :].T)
        else:
            assert ret[-k:].max() <= 1e-6 and ret[:k].min() >= 0.99
    assert annihilation(x, k)["orth"][k:].all()  # the default is evict:
    np.testing.assert_array_equal(annihilation(x, k)["u"], x[2 * k :].T)


def test_evict_dense_removes_least_energy_direction():
    """Dense form: evict removes the eigen-direction of least energy. With distinct energies
    (orthogonal inputs of growing norm, so the weakest is the oldest) it holds the last k and
    agrees with the Gram form; skip holds the first k. With equal energies (orthonormal inputs)
    Omega records no order: rank stays k and the newest input is held, the rest is eigh's choice."""
    d, k = 16, 4
    x = _orthonormal_stream(132, d, 3 * k) * (1.0 + 0.05 * np.arange(3 * k))[:, None]
    for variant in ("exact", "literal"):
        ev = annihilation_dense(x, k, variant=variant)
        sk = annihilation_dense(x, k, variant=variant, orth_policy="skip")
        assert ev["orth"][k:].all() and sk["orth"][k:].all() and not ev["y"][k:].any()
        assert rank(ev["omega"]) == k and rank(sk["omega"]) == k
        assert retention(ev["omega"], x)[-k:].min() >= 0.99
        assert retention(sk["omega"], x)[-k:].max() <= 1e-6
    # Omega = sum of the last k x xᵀ: the Gram form's result to rounding (1e-12 relative)
    np.testing.assert_allclose(annihilation_dense(x, k)["omega"], annihilation_gram(x, k)["omega"],
                               rtol=0, atol=1e-12 * np.abs(x).max() ** 2)
    xe = _orthonormal_stream(133, d, 3 * k)
    out = annihilation_dense(xe, k)
    assert rank(out["omega"]) == k
    np.testing.assert_allclose(retention(out["omega"], xe[-1:]), 1.0, rtol=1e-12)
    # the stored energy stays k unit directions: tr(Omega) = k
    np.testing.assert_allclose(np.trace(out["omega"]), k, rtol=1e-12)


def _evicted_columns(u_hist, k):
    """Which column changed at each token after warm-up (exactly one per orthogonal token)."""
    changed = np.any(u_hist[k:] != u_hist[k - 1 : -1], axis=-2)  # [T - k, k]
    assert np.all(changed.sum(-1) == 1)
    return np.argmax(changed, axis=-1).tolist()


@pytest.mark.parametrize("form", ["gram", "use_gram"])
def test_evict_round_robin_and_weakest_first(form):
    """k equal columns, k orthogonal inputs: each column is evicted once, in order (not the same
    one k times). Unequal columns: only the weakest are evicted, cycling among themselves."""
    from scipy.linalg import hadamard

    d, k = 16, 4
    h = hadamard(d) / 4.0  # orthonormal rows, exact in binary: equal norms exactly
    out, hist = _run(form, h[: 2 * k], k)
    assert _evicted_columns(hist, k) == [0, 1, 2, 3]
    np.testing.assert_array_equal(out["u"], h[k : 2 * k].T)
    # energies 4, 1, 1, 4 then unit inputs: columns 1 and 2 alternate, 0 and 3 stay
    x = np.concatenate([h[:k] * np.array([2.0, 1.0, 1.0, 2.0])[:, None], h[k : 2 * k]])
    out, hist = _run(form, x, k)
    assert _evicted_columns(hist, k) == [1, 2, 1, 2]
    np.testing.assert_array_equal(out["u"][:, [0, 3]], x[[0, 3]].T)
    np.testing.assert_array_equal(out["u"][:, [1, 2]], x[[6, 7]].T)


@pytest.mark.parametrize("form", FORMS + ["literal"])
def test_evict_and_skip_agree_without_orthogonal_inputs(form):
    """Gaussian inputs with d > k are never orthogonal to the stored span: both policies run the
    same operations, bit for bit."""
    d, k, T = 16, 4, 300
    x = gauss(134, 2, T, d)
    if form == "literal":
        run = lambda pol: annihilation(x, k, variant="literal", orth_policy=pol)  # noqa: E731
    else:
        run = lambda pol: _run(form, x, k, orth_policy=pol)[0]  # noqa: E731
    ev, sk = run("evict"), run("skip")
    assert not ev["orth"].any()
    assert ev.keys() == sk.keys()
    for name in ev:
        np.testing.assert_array_equal(ev[name], sk[name], err_msg=name)


@pytest.mark.parametrize("form", ["gram", "use_gram"])
def test_evict_then_full_steps(form):
    """An eviction amid ordinary steps: the maintained G stays the Gram of U, the forms agree, the
    evicted token is held and later steps erase as usual."""
    d, k = 12, 4
    xs, xo = _stored_and_orthogonal(135, d, k)
    x = np.concatenate([xs, xo[None], gauss(136, 6, d)])
    out, hist = _run(form, x, k)
    assert out["orth"].tolist() == [False] * k + [True] + [False] * 6
    np.testing.assert_allclose(retention(omega_of(hist[k]), xo[None]), 1.0, rtol=1e-12)
    assert rank(out["omega"]) == k
    om = omega_of(hist)
    assert np.max(erasure_residual(om[k + 1 :], x[k + 1 :], out["y"][k + 1 :])) <= 1e-10
    ref = annihilation_gram(x, k)
    np.testing.assert_allclose(out["omega"], ref["omega"], rtol=0, atol=1e-10 * np.abs(ref["omega"]).max())
    if form == "use_gram":
        np.testing.assert_allclose(out["gram"], out["u"].T @ out["u"], rtol=0, atol=1e-10 * np.abs(out["gram"]).max())


def test_orth_policy_parameter_in_registry():
    algo = get_algorithm("annihilation")
    assert algo.params()["orth_policy"] == (str, "evict")
    assert parse_params(algo, ["k=4", "orth_policy=skip"]) == {"k": 4, "orth_policy": "skip"}


# ---------------------------------------------------------------------------------------------
# dispatcher, helpers, input checks


def test_dispatcher_forms():
    x = gauss(101, 12, 6)
    assert "u" in annihilation(x, 2)  # exact defaults to the Gram form
    lit = annihilation(x, 2, variant="literal")
    assert "w" in lit and "u" not in lit
    np.testing.assert_array_equal(annihilation(x, 2, form="dense")["omega"], annihilation_dense(x, 2)["omega"])
    with pytest.raises(SpecmemInputError, match=r"^variant: literal is only defined in the dense form"):
        annihilation(x, 2, variant="literal", form="gram")
    with pytest.raises(SpecmemInputError, match=r"^use_gram:"):
        annihilation(x, 2, form="dense", use_gram=True)


def test_helpers():
    d = 6
    xs = gauss(111, 3, d)
    omega = xs.T @ xs
    assert rank(omega) == 3 and rank(np.zeros((d, d))) == 0
    np.testing.assert_array_equal(rank(np.stack([omega, np.eye(d)])), [3, d])
    np.testing.assert_allclose(retention(omega, xs), 1.0, rtol=1e-12)
    q, _ = np.linalg.qr(xs.T, mode="complete")
    np.testing.assert_allclose(retention(omega, q[:, 3:].T), 0.0, atol=1e-12)
    mixed = q[:, 0] + q[:, 4]
    np.testing.assert_allclose(retention(omega, mixed[None]), [np.sqrt(0.5)], rtol=1e-12)
    assert np.isnan(retention(omega, np.zeros((1, d)))[0])
    assert np.isnan(erasure_residual(omega, np.zeros(d), xs[0]))
    # the last written token is fully retained after an exact step
    x = gauss(112, 20, d)
    out = annihilation(x, 3)
    np.testing.assert_allclose(retention(out["omega"], x[-1:]), 1.0, rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs,argname",
    [
        ({"k": 0}, "k"),
        ({"k": 2.5}, "k"),
        ({"k": "four"}, "k"),
        ({"eps": 0.0, "form": "dense"}, "eps"),
        ({"eps": -1.0}, "eps"),
        ({"orth_tol": -1e-3}, "orth_tol"),
        ({"variant": "fast"}, "variant"),
        ({"form": "sparse"}, "form"),
        ({"orth_policy": "drop"}, "orth_policy"),
        ({"orth_policy": None}, "orth_policy"),
        ({"orth_policy": "skip", "form": "dense", "variant": "literal", "eps": 0.0}, "eps"),
        ({"orth_policy": "evict ", "form": "dense"}, "orth_policy"),
    ],
)
def test_invalid_arguments(kwargs, argname):
    x = gauss(121, 5, 16)
    args = {"k": 4} | kwargs
    with pytest.raises(SpecmemInputError, match=rf"^{argname}:"):
        annihilation(x, **args)


def test_invalid_k_message_and_x():
    x = gauss(122, 5, 16)
    with pytest.raises(SpecmemInputError, match=r"^k: must be <= d \(16\), got 20$"):
        annihilation_gram(x, 20)
    with pytest.raises(SpecmemInputError, match=r"^k: must be <= d \(16\), got 20$"):
        annihilation_dense(x, 20)
    x[2, 3] = np.nan
    for fn in (annihilation_gram, annihilation_dense):
        with pytest.raises(SpecmemInputError, match=r"^x: contains NaN"):
            fn(x, 4)
    with pytest.raises(SpecmemInputError, match=r"^x:"):
        annihilation(np.ones(16), 4)
