"""VLA golden model (spec §2): the A loop is RLS, both state forms agree, refresh, read-out, Jacobian."""

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError, elu1, safe_normalize
from specmem.golden.vla import (
    jacobian_norm_closed_form,
    jacobian_spectral_norm,
    vla,
    vla_a_explicit,
    vla_recurrence,
)

GOLDEN_RATIO = (1 + np.sqrt(5)) / 2


def _inputs(shape, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(4)]  # k, v, q, u


def _sm_step(A, u_tilde):
    """One Sherman–Morrison step written from the spec, for one sequence (no batch)."""
    z = A @ u_tilde
    return A - np.outer(z, z) / max(1.0 + u_tilde @ z, 1e-4)


# --------------------------------------------------------------------------- A loop


@pytest.mark.parametrize("d,T,u_scale,seed", [(4, 30, None, 0), (16, 80, None, 1), (16, 80, 1.0, 2), (33, 50, 0.3, 3)])
def test_a_equals_explicit_inverse_with_refresh_off(d, T, u_scale, seed):
    k, v, q, u = _inputs((2, T, d), seed)
    out = vla(k, v, q, u, refresh_period=0, u_scale=u_scale, return_trace=True)
    ref = vla_a_explicit(u, lambda0=0.1, u_scale=u_scale)
    # Sherman–Morrison accumulates rounding over T steps of a matrix with cond <= 1 + T/(lambda0 d);
    # 1e-8 relative to the largest entry is far above that and far below any algorithmic error.
    np.testing.assert_allclose(out["a"], ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
    assert np.all(out["delta"] >= 1.0)  # A stays positive definite, so the eps clamp never acts


def test_a_explicit_is_positive_definite_and_a_norm_traces_it():
    k, v, q, u = _inputs((12, 8), 4)
    out = vla(k, v, q, u, refresh_period=0)
    for t in (1, 5, 12):
        ref = vla_a_explicit(u[:t])
        assert np.all(np.linalg.eigvalsh(ref) > 0)
        np.testing.assert_allclose(out["a_norm"][t - 1], np.linalg.norm(ref), rtol=1e-10)


@pytest.mark.parametrize("period", [1, 5])
def test_refresh_adds_eta_identity_exactly_at_multiples(period):
    d, T, eta = 6, 17, 0.05
    k, v, q, u = _inputs((T, d), 5)
    u_tilde = safe_normalize(u, 1e-4) / np.sqrt(d)
    A_prev = np.eye(d) / 0.1
    for t in range(1, T + 1):
        out = vla(k[:t], v[:t], q[:t], u[:t], refresh_period=period, eta=eta, return_trace=True)
        A_t = out["a"]
        jump = A_t - _sm_step(A_prev, u_tilde[t - 1])
        expected = eta * np.eye(d) if t % period == 0 else np.zeros((d, d))
        np.testing.assert_allclose(jump, expected, rtol=0, atol=1e-10, err_msg=f"t={t}")
        # ah is read from the refreshed A of the same step
        np.testing.assert_allclose(out["ah"][-1], safe_normalize(A_t @ out["kh"][-1], 1e-4), rtol=1e-12)
        A_prev = A_t


def test_refresh_breaks_closed_form_only_from_first_multiple():
    d, P = 8, 7
    k, v, q, u = _inputs((3 * P, d), 6)
    for t in range(1, 3 * P + 1):
        a = vla(k[:t], v[:t], q[:t], u[:t], refresh_period=P)["a"]
        ref = vla_a_explicit(u[:t])
        err = np.abs(a - ref).max() / np.abs(ref).max()
        assert (err < 1e-10) == (t < P), f"t={t} err={err}"


def test_refresh_period_zero_and_eta_zero_are_both_no_refresh():
    k, v, q, u = _inputs((2, 45, 5), 7)
    a0 = vla(k, v, q, u, refresh_period=0)
    a1 = vla(k, v, q, u, refresh_period=20, eta=0.0)
    for name in ("o", "s", "a", "s_norm", "a_norm"):
        np.testing.assert_array_equal(a0[name], a1[name])


# --------------------------------------------------------------------------- state


@pytest.mark.parametrize("shape,period,seed", [((60, 8), 20, 8), ((2, 3, 41, 5), 4, 9), ((30, 1), 3, 10)])
def test_linear_recurrence_form_equals_algorithm_1(shape, period, seed):
    k, v, q, u = _inputs(shape, seed)
    a = vla(k, v, q, u, refresh_period=period, return_trace=True)
    b = vla_recurrence(k, v, q, u, refresh_period=period, return_trace=True)
    # Same math, different rounding order (S + (v - S kh) ahᵀ vs S - (S kh) ahᵀ + v ahᵀ).
    for name in ("o", "s", "s_norm"):
        np.testing.assert_allclose(b[name], a[name], rtol=1e-10, atol=1e-12, err_msg=name)
    for name in ("a", "a_norm", "kh", "ah", "delta"):  # the shared A loop: bit-identical
        np.testing.assert_array_equal(b[name], a[name], err_msg=name)


def test_state_is_the_matrix_recurrence_with_asymmetric_keys():
    """S_t = S_{t-1}(I - kh ahᵀ) + v ahᵀ with explicit d x d transition matrices."""
    T, d = 25, 6
    k, v, q, u = _inputs((T, d), 11)
    out = vla(k, v, q, u, refresh_period=6, return_trace=True)
    S = np.zeros((d, d))
    for t in range(T):
        kh, ah = out["kh"][t], out["ah"][t]
        S = S @ (np.eye(d) - np.outer(kh, ah)) + np.outer(v[t], ah)
    np.testing.assert_allclose(out["s"], S, rtol=1e-10, atol=1e-12)
    assert out["s"].shape == (d, d) and out["s_norm"].shape == (T,) and out["o"].shape == (T, d)
    np.testing.assert_allclose(out["s_norm"][-1], np.linalg.norm(S), rtol=1e-10)


def test_t1_state_is_outer_product_of_v_and_ah():
    d = 7
    k, v, q, u = _inputs((1, d), 12)
    out = vla(k, v, q, u, return_trace=True)
    np.testing.assert_allclose(out["s"], np.outer(v[0], out["ah"][0]), rtol=1e-14)
    np.testing.assert_allclose(out["a"], vla_a_explicit(u), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(out["ah"][0]), 1.0, rtol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(out["kh"][0]), 1.0, rtol=1e-14)


def test_d1_state_is_the_last_value():
    """d = 1: kh = ah = 1 (elu1 > 0, A > 0), so S_t = v_t and o_t = v_t / zk_t."""
    T = 9
    k, v, q, u = _inputs((T, 1), 13)
    out = vla(k, v, q, u, refresh_period=3)
    np.testing.assert_allclose(out["s"][0, 0], v[-1, 0], rtol=1e-14)
    np.testing.assert_allclose(out["o"][:, 0], v[:, 0] / np.cumsum(elu1(k[:, 0])), rtol=1e-13)


# --------------------------------------------------------------------------- read-out


def test_o_normaliser():
    T, d = 10, 5
    k, v, q, u = _inputs((T, d), 14)
    out = vla(k, v, q, u)
    kf, qf = elu1(k), elu1(q)
    for t in (1, 4, 10):
        S_t = vla(k[:t], v[:t], q[:t], u[:t])["s"]
        den = max(kf[:t].sum(0) @ qf[t - 1], 1e-4)
        np.testing.assert_allclose(out["o"][t - 1], S_t @ qf[t - 1] / den, rtol=1e-12)
    # very negative queries: zkᵀqf < eps, so the clamp is active and o = S qf / eps
    qneg = np.full((T, d), -30.0)
    o2 = vla(k, v, qneg, u)
    assert kf.sum(0) @ elu1(qneg[-1]) < 1e-4
    np.testing.assert_allclose(o2["o"][-1], out["s"] @ elu1(qneg[-1]) / 1e-4, rtol=1e-12)


def test_batch_dims_equal_per_element_loop():
    k, v, q, u = _inputs((2, 3, 13, 7), 15)
    out = vla(k, v, q, u, refresh_period=4, return_trace=True)
    for i in range(2):
        for j in range(3):
            one = vla(k[i, j], v[i, j], q[i, j], u[i, j], refresh_period=4, return_trace=True)
            for name, val in one.items():
                np.testing.assert_allclose(out[name][i, j], val, rtol=1e-13, atol=1e-15, err_msg=name)
    assert out["s"].shape == (2, 3, 7, 7) and out["a_norm"].shape == (2, 3, 13)


def test_zero_u_leaves_a_unchanged():
    k, v, q, _ = _inputs((6, 4), 16)
    out = vla(k, v, q, np.zeros((6, 4)), refresh_period=0, return_trace=True)
    np.testing.assert_array_equal(out["a"], np.eye(4) / 0.1)
    np.testing.assert_array_equal(out["delta"], 1.0)
    # with A ∝ I the write key is the read key and VLA is DeltaNet-like with beta = 1
    np.testing.assert_allclose(out["ah"], out["kh"], rtol=1e-14)


# --------------------------------------------------------------------------- Jacobian


@pytest.mark.parametrize("d", [2, 7, 32, 128])
def test_jacobian_closed_form_matches_svd(d):
    rng = np.random.default_rng(d)
    kh = safe_normalize(rng.standard_normal((50, d)), 1e-12)
    ah = safe_normalize(rng.standard_normal((50, d)), 1e-12)
    # mix in near-aligned and anti-aligned pairs
    ah[:10] = safe_normalize(kh[:10] + 0.05 * ah[:10], 1e-12)
    ah[10:15] = safe_normalize(-kh[10:15] + 0.3 * ah[10:15], 1e-12)
    c = np.sum(ah * kh, axis=-1)
    svd = jacobian_spectral_norm(kh, ah)
    closed = jacobian_norm_closed_form(c)
    np.testing.assert_allclose(closed, svd, rtol=1e-12)
    np.testing.assert_allclose(closed, (1 + np.sqrt(5 - 4 * c)) / 2, rtol=1e-14)
    assert np.all(svd > 1.0)


def test_jacobian_special_values():
    np.testing.assert_allclose(jacobian_norm_closed_form(0.0), GOLDEN_RATIO, rtol=1e-15)
    np.testing.assert_allclose(jacobian_norm_closed_form(1.0), 1.0, rtol=1e-15)
    np.testing.assert_allclose(jacobian_norm_closed_form(-1.0), 2.0, rtol=1e-15)
    e = np.eye(5)
    np.testing.assert_allclose(jacobian_spectral_norm(e[0], e[0]), 1.0, rtol=1e-14)
    np.testing.assert_allclose(jacobian_spectral_norm(e[0], e[1]), GOLDEN_RATIO, rtol=1e-14)
    c = np.linspace(-1, 1, 201)[:-1]
    assert np.all(jacobian_norm_closed_form(c) > 1.0)
    assert np.all(np.diff(jacobian_norm_closed_form(c)) < 0)  # grows as the keys part


def test_vla_jacobian_above_one_and_c_positive():
    """Proposition 2's '= 1' fails along a real VLA trace: c = ahᵀkh in (0, 1), norm in (1, phi)."""
    k, v, q, u = _inputs((200, 32), 17)
    tr = vla(k, v, q, u, return_trace=True)
    c = np.sum(tr["ah"] * tr["kh"], axis=-1)
    assert np.all(c > 0) and np.all(c < 1)
    j = jacobian_spectral_norm(tr["kh"], tr["ah"])
    np.testing.assert_allclose(j, jacobian_norm_closed_form(c), rtol=1e-12)
    assert np.all(j > 1.0) and np.all(j < GOLDEN_RATIO)
    assert j[50:].mean() > 1.0005


# --------------------------------------------------------------------------- bad input


def _ok(shape=(5, 3)):
    return _inputs(shape, 18)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(lambda0=0.0), "lambda0"),
        (dict(lambda0=-1.0), "lambda0"),
        (dict(eps=0.0), "eps"),
        (dict(eta=-1e-3), "eta"),
        (dict(eta=float("nan")), "eta"),
        (dict(refresh_period=-1), "refresh_period"),
        (dict(refresh_period=2.5), "refresh_period"),
        (dict(refresh_period=True), "refresh_period"),
        (dict(refresh_period="x"), "refresh_period"),
        (dict(u_scale=0.0), "u_scale"),
        (dict(u_scale=-2.0), "u_scale"),
    ],
)
@pytest.mark.parametrize("fn", [vla, vla_recurrence])
def test_bad_scalars(fn, kwargs, name):
    with pytest.raises(SpecmemInputError, match=rf"^{name}:"):
        fn(*_ok(), **kwargs)


@pytest.mark.parametrize("fn", [vla, vla_recurrence])
def test_bad_arrays(fn):
    k, v, q, u = _ok()
    with pytest.raises(SpecmemInputError, match=r"^v:"):
        fn(k, v[:4], q, u)
    with pytest.raises(SpecmemInputError, match=r"^u:"):
        fn(k, v, q, u[:, :2])
    bad = q.copy()
    bad[2, 1] = np.nan
    with pytest.raises(SpecmemInputError, match=r"^q:.*NaN"):
        fn(k, v, bad, u)
    bad = k.copy()
    bad[0, 0] = np.inf
    with pytest.raises(SpecmemInputError, match=r"^k:"):
        fn(bad, v, q, u)
    with pytest.raises(SpecmemInputError, match=r"^k:"):
        fn(k[0], v[0], q[0], u[0])  # 1-D: no token axis
    with pytest.raises(SpecmemInputError, match=r"^k:"):
        fn(k[:0], v[:0], q[:0], u[:0])  # T = 0


def test_bad_helper_inputs():
    with pytest.raises(SpecmemInputError, match=r"^lambda0:"):
        vla_a_explicit(np.ones((3, 2)), lambda0=0)
    with pytest.raises(SpecmemInputError, match=r"^ah:"):
        jacobian_spectral_norm(np.ones(3), np.ones(4))
    with pytest.raises(SpecmemInputError, match=r"^c:"):
        jacobian_norm_closed_form(1.5)
    with pytest.raises(SpecmemInputError, match=r"^c:"):
        jacobian_norm_closed_form([0.0, np.nan])
