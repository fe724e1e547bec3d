"""``vla_fixed(chain="two-pass")``, the design study of a shorter per-token chain
(``golden/fixed/chain_study.py``): it tracks the float64 model as closely as the RTL's
five-pass chain, its bounded block exponent never clips ``alpha``, and bad values are refused."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.chain_study import chain_study, report
from specmem.golden.fixed.vla import _block_by, vla_fixed
from specmem.golden.vla import vla
from specmem.vectors import make_vectors


@pytest.mark.parametrize("preset,tol", [("legacy-int8", 0.02), ("legacy-int16", 0.0002)])
def test_two_pass_error_tracks_five_pass(preset, tol):
    """Median output error against float64 over 4 seeds: the two chains within ``tol`` of each
    other (the int8 error itself is about 0.06, the int16 one about 0.0004), refresh tokens included."""
    errs = {"five-pass": [], "two-pass": []}
    for seed in range(4):
        vec = make_vectors("vla", 48, 16, seed)
        ref = vla(**vec, refresh_period=7)["o"]
        for ch in errs:
            o = vla_fixed(**vec, preset=preset, refresh_period=7, chain=ch, trace=False)["o"]
            errs[ch].append(np.median(np.linalg.norm(o - ref, axis=-1) / np.linalg.norm(ref, axis=-1)))
    five, two = np.mean(errs["five-pass"]), np.mean(errs["two-pass"])
    assert abs(two - five) < tol, (five, two)
    assert two < 10 * tol  # and both are small


def test_the_chains_differ():
    """The variant is a different model (a test that could not tell them apart would prove nothing)."""
    vec = make_vectors("vla", 24, 8, 3)
    a = vla_fixed(**vec, preset="legacy-int8", chain="five-pass", trace=False)["o_raw"]
    b = vla_fixed(**vec, preset="legacy-int8", chain="two-pass", trace=False)["o_raw"]
    assert not np.array_equal(a, b)


def test_block_by_bound():
    raw = np.array([[100, -37, 5], [0, 0, 0], [-128, 127, 1]])
    out = _block_by(raw, np.array([100, 0, 128]), 8, "rne")
    assert out.tolist()[1] == [0, 0, 0]
    assert np.all(np.abs(out) < 128)
    assert np.abs(out[0]).max() >= 64  # the bound is the max here: full precision
    with pytest.raises(AssertionError, match="below a magnitude"):
        _block_by(raw, np.array([10, 0, 128]), 8, "rne")


def test_bad_chain_refused():
    vec = make_vectors("vla", 4, 8, 0)
    with pytest.raises(ValueError, match="chain: one of"):
        vla_fixed(**vec, preset="legacy-int8", chain="three-pass")


def test_study_report_smoke():
    res = chain_study(d=8, T=16, ns=(4,), seeds=2, presets=("legacy-int8",), progress=lambda s: None)
    md = report(res)
    assert "| legacy-int8 | vla | 4 |" in md and "five-pass" in md
