"""The per-token chain (``token_chain``) and the row update (``row_update``) composed token by token
reproduce the whole model (``annihilation_fixed``, ``gram="coaccumulate"``): U, y and the flags."""

import numpy as np
import pytest

from specmem.golden.fixed.annihilation import annihilation_fixed, row_update, token_chain
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.scalar_unit import Scalar
from specmem.sim import stimulus


@pytest.mark.parametrize("preset,d,k", [("int18", 16, 4), ("int8", 16, 4), ("int16", 12, 3), ("int18", 16, 8)])
def test_chain_and_row_update_reproduce_the_model(preset, d, k):
    x = stimulus.evictions(7, 160, d, k)
    ref = annihilation_fixed(x, k, preset, gram="coaccumulate", history=True)
    fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
    dp = Datapath(fmt, trace=False)
    F = fmt
    fu, fm, fx, fr, fan = F["u"].frac, F["u_mul"].frac, F["x"].frac, F["r"].frac, F["a"].frac
    X = dp.quantize("x", x)
    U = np.zeros((d, k), np.int64)
    count, ptr, steps = 0, 0, 0
    for t in range(len(x)):
        xt = X[t]
        y = np.zeros(d, np.int64)
        orth = False
        if np.any(xt != 0) and count < k:
            U[:, count] = xt << (fu - fx)
            count += 1
        elif np.any(xt != 0):
            Um = dp.narrow("u_mul", U, fu)
            ch = token_chain(dp, (Um.T @ xt)[None], (Um.T @ Um)[None], np.array([ptr]))
            orth = bool(ch["orth"][0])
            if orth:
                j = int(ch["evict_j"][0])
                U[:, j] = xt << (fu - fx)
                ptr = (j + 1) % k
            else:
                steps += 1
                r = dp.narrow("r", Um @ ch["a_n"][0], fm + fan)
                U = row_update(dp, U[None], Um[None], r[None], ch["p"], ch["fp"], ch["q"], ch["j"], xt[None])[0]
                y = dp.scale("y", r, fr, Scalar(ch["ysc_m"][0], ch["ysc_f"][0]))
        assert orth == bool(ref["orth"][t]), t
        np.testing.assert_array_equal(U, ref["u_hist"][t], err_msg=f"U after token {t}")
        np.testing.assert_array_equal(y, ref["y_raw"][t], err_msg=f"y of token {t}")
    assert steps > len(x) // 2 and ref["orth"].sum() >= 4  # full steps and evictions both ran


def test_chain_flags_orthogonal_and_picks_the_least_energy_column():
    fmt = formats_for("annihilation", "int18", 8, {"k": 4, "in_range": None})
    dp = Datapath(fmt, trace=False)
    G = np.diag([50, 7, 9, 7]).astype(np.int64)[None]
    ch = token_chain(dp, np.zeros((1, 4), np.int64), G, np.array([2]))
    assert ch["orth"][0] and ch["evict_j"][0] == 3  # columns 1 and 3 tie; the pointer 2 picks 3 first
    ch = token_chain(dp, np.zeros((1, 4), np.int64), G, np.array([0]))
    assert ch["evict_j"][0] == 1
    ch = token_chain(dp, np.array([[0, 5, 0, 0]]), G, np.array([0]))
    assert not ch["orth"][0] and ch["j"][0] == 1 and ch["q"][0, 1] == 0 and ch["p"][0, 1] == 0
