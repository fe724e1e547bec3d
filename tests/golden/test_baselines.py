"""Baselines (spec §3): linear attention, DeltaNet, Gated DeltaNet, and the shared delta-rule loop."""

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError, elu1, safe_normalize
from specmem.golden.deltanet import L2_EPS, delta_rule, deltanet, gated_deltanet
from specmem.golden.linear_attention import linear_attention


def _rng(seed):
    return np.random.default_rng(seed)


def _kvq(shape, seed, dv=None):
    rng = _rng(seed)
    k = rng.standard_normal(shape)
    q = rng.standard_normal(shape)
    v = rng.standard_normal(shape[:-1] + (dv or shape[-1],))
    return k, v, q


def _gates(shape, seed):
    rng = _rng(seed + 1000)
    return rng.uniform(0.05, 1.0, shape), rng.uniform(0.7, 1.0, shape)  # beta, g


def _max_rel(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


# --------------------------------------------------------------------------- linear attention


@pytest.mark.parametrize("shape,dv,seed", [((40, 8), None, 0), ((2, 3, 17, 5), 3, 1), ((1, 1), None, 2)])
def test_linear_attention_equals_non_recurrent_formula(shape, dv, seed):
    k, v, q = _kvq(shape, seed, dv)
    out = linear_attention(k, v, q)
    pk, pq = elu1(k), elu1(q)
    T = shape[-2]
    scores = np.einsum("...td,...sd->...ts", pq, pk) * np.tril(np.ones((T, T)))  # φ(k_s)ᵀφ(q_t), s <= t
    o_ref = np.einsum("...ts,...sv->...tv", scores, v) / np.maximum(scores.sum(-1), 1e-4)[..., None]
    np.testing.assert_allclose(out["o"], o_ref, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(out["s"], np.einsum("...tv,...td->...vd", v, pk), rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(out["z"], pk.sum(-2), rtol=1e-13)
    np.testing.assert_allclose(out["s_norm"][..., -1], np.linalg.norm(out["s"], axis=(-2, -1)), rtol=1e-12)


def test_linear_attention_normaliser_clamp():
    k, v, _ = _kvq((6, 4), 3)
    q = np.full((6, 4), -30.0)  # φ(q) ≈ 1e-13: zᵀφ(q) < eps, so o = S φ(q) / eps
    out = linear_attention(k, v, q, eps=1e-4)
    np.testing.assert_allclose(out["o"][-1], out["s"] @ elu1(q[-1]) / 1e-4, rtol=1e-12)


# --------------------------------------------------------------------------- DeltaNet family, float64 spec forms


def test_gated_deltanet_equals_spec_matrix_form():
    """S <- g S (I - beta k kᵀ) + beta v kᵀ with explicit matrices, o = S q, k and q unit."""
    T, d, dv = 30, 6, 4
    k, v, q = _kvq((T, d), 4, dv)
    beta, g = _gates((T,), 4)
    out = gated_deltanet(k, v, q, beta, g)
    kn, qn = safe_normalize(k, L2_EPS), safe_normalize(q, L2_EPS)
    S = np.zeros((dv, d))
    for t in range(T):
        S = g[t] * S @ (np.eye(d) - beta[t] * np.outer(kn[t], kn[t])) + beta[t] * np.outer(v[t], kn[t])
        np.testing.assert_allclose(out["o"][t], S @ qn[t], rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(out["s"], S, rtol=1e-11, atol=1e-13)


def test_deltanet_is_gated_with_unit_gate():
    k, v, q = _kvq((2, 25, 5), 5)
    beta, _ = _gates((2, 25), 5)
    a = deltanet(k, v, q, beta)
    b = gated_deltanet(k, v, q, beta, np.ones((2, 25)))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_deltanet_beta_one_recalls_orthonormal_keys_exactly():
    d, n = 8, 5
    rng = _rng(6)
    keys = np.linalg.qr(rng.standard_normal((d, d)))[0][:, :n].T * rng.uniform(0.5, 3, (n, 1))  # unnormalised
    v = rng.standard_normal((n, d))
    out = deltanet(keys, v, keys, np.ones(n))
    np.testing.assert_allclose(out["s"] @ safe_normalize(keys, L2_EPS).T, v.T, atol=1e-12)
    # overwriting the same key with beta = 1 replaces its value
    out2 = deltanet(np.vstack([keys, keys[:1]]), np.vstack([v, -v[:1]]), np.vstack([keys, keys[:1]]), np.ones(n + 1))
    np.testing.assert_allclose(out2["o"][-1], -v[0], atol=1e-12)


def test_zero_key_is_a_no_op_not_nan():
    k, v, q = _kvq((5, 3), 7)
    k[2] = 0.0
    out = deltanet(k, v, q, np.full(5, 0.5))
    assert np.all(np.isfinite(out["o"]))
    ref = deltanet(np.delete(k, 2, 0), np.delete(v, 2, 0), np.delete(q, 2, 0), np.full(4, 0.5))
    np.testing.assert_allclose(out["s"], ref["s"], rtol=1e-14)


@pytest.mark.parametrize("fn", ["deltanet", "gated_deltanet", "linear_attention"])
@pytest.mark.parametrize("shape,seed", [((1, 1), 8), ((9, 1), 9), ((1, 7), 10), ((2, 3, 11, 7), 11)])
def test_awkward_sizes_and_batch_equal_per_element_loop(fn, shape, seed):
    k, v, q = _kvq(shape, seed)
    beta, g = _gates(shape[:-1], seed)
    call = {
        "deltanet": lambda k, v, q, b, g: deltanet(k, v, q, b),
        "gated_deltanet": gated_deltanet,
        "linear_attention": lambda k, v, q, b, g: linear_attention(k, v, q),
    }[fn]
    out = call(k, v, q, beta, g)
    assert out["o"].shape == shape and out["s"].shape == shape[:-2] + (shape[-1], shape[-1])
    assert np.all(np.isfinite(out["o"]))
    batch = shape[:-2]
    for idx in np.ndindex(*batch):
        one = call(k[idx], v[idx], q[idx], beta[idx], g[idx])
        for name, val in one.items():
            np.testing.assert_allclose(out[name][idx], val, rtol=1e-13, atol=1e-15, err_msg=name)


def test_d1_deltanet_closed_form():
    """d = 1: unit keys are ±1, so S <- (1 - beta) S + beta v k and o = S q̂."""
    k, v, q = _kvq((12, 1), 12)
    beta, g = _gates((12,), 12)
    out = gated_deltanet(k, v, q, beta, g)
    s = 0.0
    for t in range(12):
        s = g[t] * (1 - beta[t]) * s + beta[t] * v[t, 0] * np.sign(k[t, 0])
        np.testing.assert_allclose(out["o"][t, 0], s * np.sign(q[t, 0]), rtol=1e-13, atol=1e-15)


# --------------------------------------------------------------------------- shared loop


def test_delta_rule_general_form_with_initial_state():
    T, dk, dv = 15, 5, 3
    rng = _rng(13)
    kr, kw, q = rng.standard_normal((3, T, dk))
    v = rng.standard_normal((T, dv))
    beta, g = _gates((T,), 13)
    s0 = rng.standard_normal((dv, dk))
    out = delta_rule(kr, kw, v, beta=beta, g=g, s0=s0, q=q)
    S = s0.copy()
    for t in range(T):
        S = g[t] * S @ (np.eye(dk) - beta[t] * np.outer(kr[t], kw[t])) + beta[t] * np.outer(v[t], kw[t])
        np.testing.assert_allclose(out["o"][t], S @ q[t], rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(out["s_norm"][t], np.linalg.norm(S), rtol=1e-12)
    np.testing.assert_allclose(out["s"], S, rtol=1e-11)
    plain = delta_rule(None, kw, v)  # no read key: S = Σ v kwᵀ
    np.testing.assert_allclose(plain["s"], v.T @ kw, rtol=1e-12)
    assert "o" not in plain


def test_delta_rule_bad_input():
    kw = np.ones((4, 3))
    with pytest.raises(SpecmemInputError, match=r"^k_read:"):
        delta_rule(np.ones((4, 2)), kw, kw)
    with pytest.raises(SpecmemInputError, match=r"^v:"):
        delta_rule(kw, kw, np.ones((5, 3)))
    with pytest.raises(SpecmemInputError, match=r"^s0:"):
        delta_rule(kw, kw, kw, s0=np.zeros((3, 2)))
    with pytest.raises(SpecmemInputError, match=r"^beta:"):
        delta_rule(kw, kw, kw, beta=np.ones(3))
    with pytest.raises(SpecmemInputError, match=r"^q:"):
        delta_rule(kw, kw, kw, q=np.ones((4, 2)))


# --------------------------------------------------------------------------- against fla (float32 references)

# fla's naive references compute in float32; over T = 64 steps the measured gap to the float64
# golden model is ~2e-7 of the largest entry. Tolerance: 1e-5 of the largest |entry|.
FLA_TOL = 1e-5


def _t(x):
    torch = pytest.importorskip("torch")
    return torch.tensor(np.ascontiguousarray(x), dtype=torch.float32)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")  # fla on CPU: triton/jit notices
@pytest.mark.parametrize("dv", [16, 8])
def test_deltanet_matches_fla_naive_recurrence(dv):
    pytest.importorskip("fla")
    from fla.ops.delta_rule.naive import delta_rule_recurrence

    B, H, T, d = 2, 3, 64, 16
    k, v, q = _kvq((B, H, T, d), 14, dv)
    beta, _ = _gates((B, H, T), 14)
    ours = deltanet(k, v, q, beta)
    # fla: [B, H, T, D] layout, does not normalise k or q, multiplies q by d_k**-0.5,
    # keeps the state as [d_k, d_v] (ours is [d_v, d_k]).
    kn = safe_normalize(k, L2_EPS)
    qn = safe_normalize(q, L2_EPS) * np.sqrt(d)
    o, S = delta_rule_recurrence(_t(qn), _t(kn), _t(v), _t(beta))
    o, S = o.double().numpy(), S.double().numpy().swapaxes(-1, -2)
    assert _max_rel(o, ours["o"]) < FLA_TOL
    assert _max_rel(S, ours["s"]) < FLA_TOL
    # and the gap is real float32 rounding, not zero (the comparison is live)
    assert _max_rel(o, ours["o"]) > 0


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")  # fla on CPU: triton/jit notices
def test_gated_deltanet_matches_fla_naive_recurrent_gated():
    pytest.importorskip("fla")
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    B, H, T, d = 2, 3, 64, 16
    k, v, q = _kvq((B, H, T, d), 15)
    beta, g = _gates((B, H, T), 15)
    ours = gated_deltanet(k, v, q, beta, g)
    # fla: [B, T, H, D] layout, gate in log space (h *= exp(g)), explicit scale=1.0 (default
    # would be d**-0.5), no normalisation of k or q, state [d_k, d_v].
    def bthd(x):
        return _t(np.swapaxes(x, 1, 2))

    o, S = naive_recurrent_gated_delta_rule(
        bthd(safe_normalize(q, L2_EPS)), bthd(safe_normalize(k, L2_EPS)), bthd(v), bthd(beta), bthd(np.log(g)),
        scale=1.0, output_final_state=True,
    )
    o = o.double().numpy().swapaxes(1, 2)
    S = S.double().numpy().swapaxes(-1, -2)
    assert _max_rel(o, ours["o"]) < FLA_TOL
    assert _max_rel(S, ours["s"]) < FLA_TOL


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "beta,g,name",
    [
        (0.0, 0.9, "beta"),
        (1.5, 0.9, "beta"),
        (-0.2, 0.9, "beta"),
        (np.nan, 0.9, "beta"),
        (np.ones(4), 0.9, "beta"),  # wrong shape
        (0.5, 0.0, "g"),
        (0.5, 1.01, "g"),
        (0.5, np.inf, "g"),
        (0.5, np.ones((2, 5)), "g"),
    ],
)
def test_gated_bad_gates(beta, g, name):
    k, v, q = _kvq((5, 3), 16)
    with pytest.raises(SpecmemInputError, match=rf"^{name}:"):
        gated_deltanet(k, v, q, beta, g)


def test_bad_arrays_and_scalars():
    k, v, q = _kvq((5, 3), 17)
    b = np.full(5, 0.5)
    with pytest.raises(SpecmemInputError, match=r"^beta:"):
        deltanet(k, v, q, np.zeros(5))
    with pytest.raises(SpecmemInputError, match=r"^q:"):
        deltanet(k, v, q[:, :2], b)
    with pytest.raises(SpecmemInputError, match=r"^v:"):
        deltanet(k, v[:4], q, b)
    with pytest.raises(SpecmemInputError, match=r"^eps:"):
        deltanet(k, v, q, b, eps=0)
    with pytest.raises(SpecmemInputError, match=r"^k:"):
        deltanet(k[0], v[0], q[0], 0.5)
    bad = k.copy()
    bad[1, 1] = np.nan
    with pytest.raises(SpecmemInputError, match=r"^k:.*NaN"):
        linear_attention(bad, v, q)
    with pytest.raises(SpecmemInputError, match=r"^eps:"):
        linear_attention(k, v, q, eps=-1.0)
    with pytest.raises(SpecmemInputError, match=r"^q:"):
        linear_attention(k, v, q[:4])
