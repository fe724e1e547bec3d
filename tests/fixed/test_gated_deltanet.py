"""Gated DeltaNet in the RTL's fixed-binary-point presets (``golden/fixed/gated_deltanet.py``):
bit for bit DeltaNet's model at ``g = 1`` and a fresh start at ``g -> 0``, hand-derived decay
steps, and the error against the float64 golden model over 20 seeds per preset."""

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError
from specmem.golden.deltanet import deltanet, gated_deltanet
from specmem.golden.fixed.deltanet import deltanet_fixed
from specmem.golden.fixed.gated_deltanet import gated_deltanet_fixed, gated_deltanet_formats

LEGACY = ("legacy-int8", "legacy-int16", "legacy-wide")


def _stream(seed, T, d, batch=()):
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal(batch + (T, d)) for n in ("k", "v", "q")}
    x["beta"] = rng.uniform(0.1, 1.0, batch + (T,))
    return x, rng


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("preset", LEGACY)
@pytest.mark.parametrize("saturating", [False, True])
def test_unit_decay_is_deltanet_bit_for_bit(preset, saturating):
    """g = 1 is exact in UQ1.(M-1) and every product by it is a shift that the next rounding
    drops again: outputs, state and every saturation count equal DeltaNet's model."""
    x, _ = _stream(1, 40, 8, batch=(2,))
    params = {}
    if saturating:  # in_range = 1: inputs, e and o saturate
        x["v"] *= 3.0
        params["in_range"] = 1.0
    a = gated_deltanet_fixed(**x, g=np.ones((2, 40)), preset=preset, **params)
    b = deltanet_fixed(**x, preset=preset, **params)
    np.testing.assert_array_equal(a["o_raw"], b["o_raw"])
    np.testing.assert_array_equal(a["s_raw"], b["s_raw"])
    assert a["sat"] == {**b["sat"], "g": 0}
    if saturating:
        assert b["sat"]["e"] > 0 and b["sat"]["v"] > 0


@pytest.mark.parametrize("preset", LEGACY)
def test_decay_near_zero_restarts_the_state(preset):
    """A decay below half a step of g quantises to 0: the state is erased and the stream from
    that token on equals DeltaNet's model started fresh there, bit for bit."""
    T, d, cut = 24, 8, 9
    x, rng = _stream(2, T, d)
    g = rng.uniform(0.5, 1.0, T)
    gf = gated_deltanet_formats(preset, d)["g"]
    g[cut] = 0.4 * gf.lsb  # 1/320 at legacy-int8
    assert gf.quantize(g[cut])[0] == 0 and gf.quantize(gf.lsb)[0] == 1
    a = gated_deltanet_fixed(**x, g=g, preset=preset)
    tail = {n: v[cut:] for n, v in x.items()}
    b = gated_deltanet_fixed(**tail, g=np.concatenate([[1.0], g[cut + 1:]]), preset=preset)
    np.testing.assert_array_equal(a["o_raw"][cut:], b["o_raw"])
    np.testing.assert_array_equal(a["s_raw"], b["s_raw"])
    c = deltanet_fixed(**{n: v[cut:cut + 1] for n, v in x.items()}, preset=preset)
    np.testing.assert_array_equal(a["o_raw"][cut], c["o_raw"][0])


def test_decay_steps_by_hand_legacy_int8():
    """legacy-int8: k, v in Q2.5, kn in Q0.7 (1.0 saturates to 127), e in Q3.4, beta Q1.6,
    g UQ1.7, S in Q3.12. Token 1 writes v = (1, -0.5) along e1: e = (16, -8), S[:, 0] =
    round(e 127 2^-11 -> 2^-12) = (4064, -2032). Then keys e2 with v = 0 read nothing
    (S e2 = 0), so e = be = 0 and column 0 only decays: round_rne(g_raw s / 128)."""
    gs = [1.0, 0.75, 0.5, 1 / 128, 0.5, 0.5]
    T = len(gs)
    k = np.zeros((T, 2))
    k[0, 0] = 1.0
    k[1:, 1] = 1.0
    v = np.zeros((T, 2))
    v[0] = (1.0, -0.5)
    q = np.tile([1.0, 0.0], (T, 1))
    expect = [(4064, -2032), (3048, -1524), (1524, -762), (12, -6), (6, -3), (3, -2)]  # -3/2 -> -2: half to even
    for t in range(1, T + 1):
        out = gated_deltanet_fixed(k[:t], v[:t], q[:t], np.ones(t), np.array(gs[:t]))
        assert tuple(out["s_raw"][:, 0]) == expect[t - 1], t
        assert not out["s_raw"][:, 1].any()
    assert out["fmt"]["g"].qformat == "UQ1.7" and out["fmt"]["s"].frac == 12


@pytest.mark.parametrize("preset,tol_o,tol_s,tol_ratio", [
    ("legacy-int8", 0.10, 0.15, 1.5),       # measured max o 0.077, s 0.092; ratio of medians 1.28
    ("legacy-int16", 1e-3, 1.5e-3, 1.5),    # measured max o 6.1e-4, s 7.3e-4; ratio 1.34
    ("legacy-wide", 3e-7, 4e-7, 1.5),       # measured max o 1.5e-7, s 1.9e-7; ratio 1.36
])
def test_tracks_float64_over_20_seeds(preset, tol_o, tol_s, tol_ratio):
    """Relative Frobenius error of o and final S against float64 gated_deltanet, 20 seeds
    (d = 16, T = 128, g uniform in (0, 1] with some near 0); the median o error stays within
    ``tol_ratio`` of DeltaNet's own error in the same preset on the same k, v, q, beta (the
    decay adds one rounding of g S per write and the g step, not a new error regime)."""
    eo, es, ed = [], [], []
    for seed in range(20):
        x, rng = _stream(1000 + seed, 128, 16)
        g = np.maximum(rng.uniform(0.0, 1.0, 128), 1e-3)
        fx = gated_deltanet_fixed(**x, g=g, preset=preset, trace=False)
        ref = gated_deltanet(**x, g=g)
        eo.append(_rel(fx["o"], ref["o"]))
        es.append(_rel(fx["s"], ref["s"]))
        ed.append(_rel(deltanet_fixed(**x, preset=preset, trace=False)["o"], deltanet(**x)["o"]))
    print(f"{preset}: o median {np.median(eo):.3g} max {max(eo):.3g}; s median {np.median(es):.3g} "
          f"max {max(es):.3g}; deltanet o median {np.median(ed):.3g}")
    assert 0 < max(eo) <= tol_o and max(es) <= tol_s
    assert np.median(eo) <= tol_ratio * np.median(ed)


def test_formats_and_bad_input():
    F = gated_deltanet_formats("legacy-int16", 8)
    assert (F["g"].width, F["g"].frac, F["g"].signed) == (16, 15, False)
    assert F.algo == "gated-deltanet" and "g" in F.to_dict()["tensors"]
    x, _ = _stream(3, 4, 4)
    with pytest.raises(SpecmemInputError, match="^g: must be in"):
        gated_deltanet_fixed(**x, g=np.full(4, 1.5))
    with pytest.raises(SpecmemInputError, match="^g: must be in"):
        gated_deltanet_fixed(**x, g=np.zeros(4))
    with pytest.raises(SpecmemInputError, match="^preset: gated_deltanet_fixed models the fixed"):
        gated_deltanet_fixed(**x, g=np.ones(4), preset="int8")


def test_accuracy_reports_measure_the_legacy_presets():
    """``specmem accuracy --in`` (compare_formats) and the formats report's output-error rows measure Gated
    DeltaNet's fixed-binary-point presets beside the other rules; each row equals the error computed here
    from gated_deltanet_fixed against the float64 golden model."""
    from specmem.golden.fixed import targets
    from specmem.golden.fixed.compare import compare_formats, formats_for_algo

    assert set(LEGACY) <= set(formats_for_algo("gated-deltanet"))
    x, rng = _stream(7, 32, 8)
    g = rng.uniform(0.5, 1.0, 32)
    rows = {r["format"]: r for r in compare_formats("gated-deltanet", {**x, "g": g}, formats=LEGACY)["rows"]}
    ref = gated_deltanet(**x, g=g)
    for p in LEGACY:
        fx = gated_deltanet_fixed(**x, g=g, preset=p, trace=False)
        e = np.linalg.norm(fx["o"] - ref["o"], axis=-1) / np.linalg.norm(ref["o"], axis=-1)
        assert rows[p]["median_o_err"] == pytest.approx(float(np.median(e)), rel=1e-9), p
        assert rows[p]["max_o_err"] == pytest.approx(float(np.max(e)), rel=1e-9), p
        assert rows[p]["s_rel_err"] == pytest.approx(_rel(fx["s"], ref["s"]), rel=1e-9), p
    assert rows["legacy-wide"]["median_o_err"] < rows["legacy-int16"]["median_o_err"] \
        < rows["legacy-int8"]["median_o_err"]

    cfg = {**targets.CONFIGS["tiny"], "err_seeds": 2}
    err = targets._errors(cfg, lambda m: None)
    assert set(targets.FORMATS) == {f for a, f in err if a == "gated-deltanet"}  # legacy-int8 beside int8, int18
    es = []
    for s in range(2):
        vec = targets._gaussian("gated-deltanet", cfg["T_err"], cfg["d"], s)
        want = gated_deltanet(**vec)["o"]
        got = gated_deltanet_fixed(**vec, preset="legacy-int8", trace=False)["o"]
        es.append(np.linalg.norm(got - want, axis=-1) / np.linalg.norm(want, axis=-1))
    assert err[("gated-deltanet", "legacy-int8")]["median"] == pytest.approx(float(np.median(np.concatenate(es))),
                                                                             rel=1e-9)
