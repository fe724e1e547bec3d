"""``specmem.shift_range``: the golden model's ``p_fp``/``updated`` trace and the measurement built on it."""

import numpy as np
import pytest

from specmem.golden.fixed.annihilation import annihilation_fixed, token_chain
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.shift_range import STREAMS, covered_range, main, p_shift_samples


def test_p_fp_trace_matches_the_token_chain_from_the_state_before():
    """Every updating token's ``p_fp`` equals the chain's ``fp`` recomputed from ``U`` one token
    earlier (``u_hist``) and the token's ``x``; tokens that did not update carry neither."""
    d, k, preset = 16, 4, "int18"
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 30, d))
    out = annihilation_fixed(x, k, preset, history=True, trace=False)
    F = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
    dp = Datapath(F, trace=False)
    Xq = dp.quantize("x", x)
    checked = 0
    for b in range(2):
        for t in range(1, 30):
            U = out["u_hist"][b, t - 1]
            Um = dp.narrow("u_mul", U, F["u"].frac)
            ch = token_chain(dp, (Um.T @ Xq[b, t])[None], (Um.T @ Um)[None], np.zeros(1, np.int64))
            if out["updated"][b, t]:
                assert not ch["orth"][0]
                assert out["p_fp"][b, t] == ch["fp"][0]
                checked += 1
            else:
                assert out["p_fp"][b, t] == 0
    assert checked >= 40  # warm-up is k tokens per stream; the rest update


def test_samples_lie_inside_the_covered_range_and_cli_reports_every_stream(capsys):
    lo, hi = covered_range(16, 4)
    assert lo < 0 < hi
    s = p_shift_samples("gaussian", 16, 4, streams=2, T=20)
    assert s.size == 2 * (20 - 4)
    assert lo <= s.min() and s.max() <= hi
    assert main(["--d", "16", "--k", "4", "--streams", "2", "--T", "12"]) == 0
    text = capsys.readouterr().out
    for name in STREAMS:
        assert name in text


def test_bad_inputs():
    with pytest.raises(ValueError, match="stream"):
        p_shift_samples("uniform", 16, 4)
    with pytest.raises(SystemExit):
        main(["--d", "4", "--k", "8"])


def test_unknown_preset_is_a_usage_error_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--preset", "BAD", "--d", "16", "--k", "4"])
    assert e.value.code == 2
    assert "preset" in capsys.readouterr().err


def test_window_effect_counts_against_a_direct_comparison():
    from specmem.shift_range import window_effect

    w = window_effect("anisotropic 1..1e-4", 16, 4, streams=3, T=40)
    x = STREAMS["anisotropic 1..1e-4"](np.random.default_rng(1), 3, 40, 16, 4)
    a = annihilation_fixed(x, 4, "int18", trace=False, p_window=False)
    b = annihilation_fixed(x, 4, "int18", trace=False, p_window=True)
    assert w["streams"] == 3 and w["identical"] == sum(
        np.array_equal(a["y_raw"][i], b["y_raw"][i]) and np.array_equal(a["u_raw"][i], b["u_raw"][i]) for i in range(3))
    assert w["outside"] == 0 and w["identical"] == 3 and w["max_u_lsb"] == 0
    assert np.array_equal(w["samples"], p_shift_samples("anisotropic 1..1e-4", 16, 4, streams=3, T=40))
