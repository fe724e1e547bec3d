"""The ``"triton"`` backend of ``specmem.backends.run`` against the float (golden) backend.

Same inputs ``[..., T, d]`` with leading batch dims, same output names; float32 kernels vs
float64 golden models, limits as in the kernel tests (1e-5 VLA, 5e-5 annihilation).
"""

import numpy as np
import pytest

from specmem.backends import run
from specmem.golden.common import SpecmemInputError
from specmem.kernels.annihilation.fused_recurrent import ORTH_TOL_FP32


def rel(ref, out):
    return float(np.sqrt(np.mean((out - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)))


@pytest.mark.parametrize("options, names", [
    pytest.param({}, ("o", "s", "a", "a_norm", "s_norm"), id="fused"),
    pytest.param(dict(mode="chunk", chunk_size=16), ("o", "s", "a"), id="chunk"),
    pytest.param(dict(mode="chunk", chunk_size=16, a_pass="sequential"), ("o", "s", "a", "a_norm"), id="chunk-seqA"),
])
def test_vla_triton_backend_matches_float(options, names):
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal((2, 21, 12)) for n in ("k", "v", "q", "u")}
    ref = run("vla", inputs, backend="float", params=["refresh_period=5"])
    out = run("vla", inputs, backend="triton", params=["refresh_period=5"], **options)
    assert set(out) == set(names)
    for n in names:
        assert out[n].shape == ref[n].shape
        assert rel(ref[n], out[n]) < 1e-5, n


def test_annihilation_triton_backend_matches_float():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 25, 10))
    x[1, 4] = 0
    params = {"k": 3, "orth_tol": ORTH_TOL_FP32}
    ref = run("annihilation", {"x": x}, backend="float", params=params)
    out = run("annihilation", {"x": x}, backend="triton", params=params)
    for n in ("u", "omega", "y"):
        assert out[n].shape == ref[n].shape
        assert rel(ref[n], out[n]) < 5e-5, n
    np.testing.assert_array_equal(out["orth"], ref["orth"])
    np.testing.assert_array_equal(out["count"], ref["count"])


@pytest.mark.parametrize("algo, inputs, params, options, match", [
    pytest.param("linear", dict(k=np.ones((4, 3)), v=np.ones((4, 3)), q=np.ones((4, 3))), None, {},
                 "^backend:", id="unsupported-algo"),
    pytest.param("vla", {n: np.ones((4, 3)) for n in "kvqu"}, None, dict(mode="parallel"), "^mode:", id="mode"),
    pytest.param("vla", {n: np.ones((4, 3)) for n in "kvqu"}, None, dict(chunk_size=16), "^chunk_size:",
                 id="chunk-option-without-chunk"),
    pytest.param("annihilation", dict(x=np.ones((4, 3))), dict(k=2, variant="literal"), {}, "^variant:", id="literal"),
    pytest.param("annihilation", dict(x=np.ones((4, 3))), dict(k=2, use_gram=True), {}, "^use_gram:", id="use_gram"),
])
def test_triton_backend_rejects(algo, inputs, params, options, match):
    with pytest.raises(SpecmemInputError, match=match):
        run(algo, inputs, backend="triton", params=params, **options)
