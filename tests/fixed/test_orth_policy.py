"""Orthogonal-input policy of the fixed-point annihilation memory (spec §1): evict (the default of
every preset but the RTL's ``legacy-*``, which skip) and skip, plus the float32 twin.

Orthogonal streams are signed Hadamard rows over 4: exact in every input format (two fraction
bits), so ``a = Uᵀx = 0`` holds exactly after quantisation and every column has the same energy.
Random orthonormal keys would not do: quantised, they are no longer exactly orthogonal, and the
fixed model's orthogonality test is exact (``a == 0`` or ``n² == 0``).
"""

import numpy as np
import pytest
from scipy.linalg import hadamard

from specmem.backends import run
from specmem.golden.annihilation import rank, retention
from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed import run_fixed
from specmem.golden.fixed.annihilation import annihilation_fixed, default_orth_policy
from specmem.golden.fixed.float32 import run_float32

D = 16
H = hadamard(D) / 4.0


def hadamard_stream(seed, n):
    """``n <= 16`` distinct signed Hadamard rows, mutually orthogonal with equal norms."""
    rng = np.random.default_rng(seed)
    return H[rng.permutation(D)[:n]] * rng.choice([-1.0, 1.0], size=(n, 1))


def evicted_columns(u_hist, k):
    """Which column changed at each token after warm-up (exactly one per orthogonal token)."""
    changed = np.any(u_hist[k:] != u_hist[k - 1 : -1], axis=-2)
    assert np.all(changed.sum(-1) == 1)
    return np.argmax(changed, axis=-1).tolist()


@pytest.mark.parametrize("preset", ["int8", "int18"])
def test_evict_default_keeps_last_k_of_orthogonal_stream(preset):
    """3k orthogonal inputs: the default (evict) holds the last k, skip the first k; rank k."""
    k = 5
    x = hadamard_stream(1, 3 * k)
    assert default_orth_policy(preset) == "evict"
    for policy in (None, "evict", "skip"):
        out = annihilation_fixed(x, k, preset, orth_policy=policy)
        assert out["orth"].tolist() == [False] * k + [True] * 2 * k
        assert not out["y_raw"][k:].any() and out["count"] == k
        assert rank(out["omega"]) == k
        ret = retention(out["omega"], x)
        if policy == "skip":
            assert ret[-k:].max() <= 1e-6 and ret[:k].min() >= 0.99
        else:
            assert ret[-k:].min() >= 0.99 and ret[:-k].max() <= 1e-6
            np.testing.assert_array_equal(out["u"], x[2 * k :].T)  # column t % k holds token t


@pytest.mark.parametrize("preset", ["int8", "int18", "legacy-int8"])
def test_evict_round_robin_and_weakest_first(preset):
    """k equal columns, k orthogonal inputs: each column is evicted once, in pointer order.
    Energies 4, 1, 1, 4: only columns 1 and 2 are evicted, alternately."""
    k = 4
    out = annihilation_fixed(H[: 2 * k], k, preset, orth_policy="evict", history=True)
    assert evicted_columns(out["u_hist"], k) == [0, 1, 2, 3]
    x = np.concatenate([H[:k] * np.array([2.0, 1.0, 1.0, 2.0])[:, None], H[k : 2 * k]])
    out = annihilation_fixed(x, k, preset, orth_policy="evict", history=True)
    assert evicted_columns(out["u_hist"], k) == [1, 2, 1, 2]
    np.testing.assert_array_equal(out["u"][:, [0, 3]], x[[0, 3]].T)
    np.testing.assert_array_equal(out["u"][:, [1, 2]], x[[6, 7]].T)


def test_round_robin_pointer_is_per_batch_element():
    """Batch elements evict independently: the orthogonal token arrives at different times."""
    k = 4
    x = np.stack([H[: 2 * k], np.concatenate([H[:k], H[[1]] + 0.5 * H[[2]], H[5:8]])])
    out = annihilation_fixed(x, k, "int18", history=True)
    assert evicted_columns(out["u_hist"][0], k) == [0, 1, 2, 3]
    assert out["orth"].tolist() == [[False] * k + [True] * k, [False] * (k + 1) + [True] * (k - 1)]
    for b in range(2):
        one = annihilation_fixed(x[b], k, "int18")
        for name in ("u_raw", "y_raw", "orth", "count"):
            np.testing.assert_array_equal(out[name][b], one[name], err_msg=f"{b} {name}")


@pytest.mark.parametrize("preset", ["int8", "int18", "legacy-int8"])
def test_evict_and_skip_bit_identical_without_orthogonal_inputs(preset):
    """Gaussian inputs with d > k never hit the orthogonal case: both policies, bit for bit."""
    k, T = 4, 300
    x = np.random.default_rng(2).standard_normal((2, T, D))
    ev = annihilation_fixed(x, k, preset, orth_policy="evict")
    sk = annihilation_fixed(x, k, preset, orth_policy="skip")
    assert not ev["orth"].any()
    for name in ("u_raw", "y_raw", "orth", "count"):
        np.testing.assert_array_equal(ev[name], sk[name], err_msg=name)
    assert ev["sat"] == sk["sat"]


@pytest.mark.parametrize("preset", ["legacy-int8", "legacy-int16"])
def test_legacy_default_is_skip_bit_for_bit(preset):
    """The RTL's presets keep skip-and-flag: the default equals orth_policy="skip" exactly (on a
    stream with orthogonal tokens amid Gaussian ones), and differs from evict."""
    k = 4
    assert default_orth_policy(preset) == "skip"
    x = np.concatenate([H[:k], H[[k]], np.random.default_rng(3).standard_normal((40, D)), H[[k + 1]]])
    dflt = annihilation_fixed(x, k, preset)
    sk = annihilation_fixed(x, k, preset, orth_policy="skip")
    ev = annihilation_fixed(x, k, preset, orth_policy="evict")
    assert dflt["orth"][k]
    for name in ("u_raw", "y_raw", "orth", "count"):
        np.testing.assert_array_equal(dflt[name], sk[name], err_msg=name)
    assert not np.array_equal(dflt["u_raw"], ev["u_raw"])
    # the run interface passes the preset default through (no orth_policy given) and the parameter
    out = run("annihilation", {"x": x}, backend="fixed", params={"k": k}, format=preset)
    np.testing.assert_array_equal(out["u_raw"], sk["u_raw"])
    out = run("annihilation", {"x": x}, backend="fixed", params={"k": k, "orth_policy": "evict"}, format=preset)
    np.testing.assert_array_equal(out["u_raw"], ev["u_raw"])


def test_run_fixed_accepts_orth_policy_and_ignores_orth_tol():
    k = 3
    x = hadamard_stream(4, 3 * k)
    ev = run_fixed("annihilation", {"x": x}, "int18", {"k": k, "orth_tol": 1e-3})
    sk = run_fixed("annihilation", {"x": x}, "int18", {"k": k, "orth_policy": "skip", "orth_tol": 1e-3})
    np.testing.assert_array_equal(ev["u"], x[2 * k :].T)
    np.testing.assert_array_equal(sk["u"], x[:k].T)


@pytest.mark.parametrize("call", [
    lambda: annihilation_fixed(H[:4], 2, "int18", orth_policy="drop"),
    lambda: annihilation_fixed(H[:4], 2, "legacy-int8", orth_policy=1),
    lambda: run_fixed("annihilation", {"x": H[:4]}, "int18", {"k": 2, "orth_policy": "Evict"}),
    lambda: run_float32("annihilation", {"x": H[:4]}, {"k": 2, "orth_policy": "none"}),
])
def test_bad_orth_policy(call):
    with pytest.raises(SpecmemInputError, match=r"^orth_policy: must be one of \('evict', 'skip'\)"):
        call()


def test_float32_twin_evict_and_skip():
    """The float32 twin on 3k random orthonormal keys (squared norms 1 ± ~1e-7 in float32: ties
    within its 1e-5 tolerance): evict holds the last k, skip the first k."""
    k = 5
    q, _ = np.linalg.qr(np.random.default_rng(5).standard_normal((D, D)))
    x = q[:, : 3 * k].T
    for policy, keep in (("evict", slice(2 * k, 3 * k)), ("skip", slice(0, k))):
        out = run_float32("annihilation", {"x": x}, {"k": k, "orth_policy": policy, "orth_tol": 1e-10})
        assert out["u"].dtype == np.float32
        np.testing.assert_allclose(out["u"], x[keep].T.astype(np.float32), rtol=0, atol=0)
