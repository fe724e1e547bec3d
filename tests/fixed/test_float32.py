"""The float32 twins (report column) stay within float32 rounding of the float64 golden models."""

import numpy as np
import pytest

from specmem.backends import run
from specmem.golden.fixed.float32 import run_float32
from specmem.vectors import make_vectors


@pytest.mark.parametrize("algo,names", [("annihilation", ("omega", "y")), ("vla", ("o", "s", "a", "s_norm", "a_norm")),
                                        ("linear", ("o", "s")), ("deltanet", ("o", "s"))])
def test_float32_twin_matches_golden(algo, names):
    vec = make_vectors(algo, 200, 16, seed=4)
    params = {"k": 4} if algo == "annihilation" else {}
    ref = run(algo, vec, params=params)
    out = run_float32(algo, vec, params)
    for n in names:
        assert out[n].dtype == np.float32
        err = np.linalg.norm(out[n] - ref[n]) / np.linalg.norm(ref[n])
        assert 0 < err < 1e-4, n  # float32 eps 6e-8, amplified over 200 tokens; 0 would mean float64 slipped in
