"""Fixed-point models: tracking float64, determinism, batch = loop, saturation counting, semantics, bad input."""

import json

import numpy as np
import pytest

from specmem.golden.annihilation import annihilation_gram, rank
from specmem.golden.common import SpecmemInputError, elu1
from specmem.golden.deltanet import deltanet
from specmem.golden.fixed import FIXED_ALGOS, PRESETS, run_fixed
from specmem.golden.fixed.annihilation import annihilation_fixed
from specmem.golden.fixed.datapath import Datapath
from specmem.golden.fixed.formats import formats_for
from specmem.golden.fixed.vla import vla_fixed
from specmem.golden.linear_attention import linear_attention
from specmem.golden.vla import vla
from specmem.vectors import make_vectors

ALGOS = [a for a in FIXED_ALGOS if a != "gated-deltanet"]  # the legacy models (scaled: test_scaled.py)
FIXED_PRESETS = [n for n, p in PRESETS.items() if p.scheme == "fixed"]
FLOAT = {
    "annihilation": lambda x, k: annihilation_gram(x, k),
    "vla": lambda **kw: vla(**kw),
    "linear": lambda **kw: linear_attention(**kw),
    "deltanet": lambda **kw: deltanet(**kw),
}
# outputs compared with float64 (annihilation's U is compared through Omega = U Uᵀ: U itself is
# only defined up to the Householder choices, which a near-tie in argmax|a| can flip)
COMPARED = {"annihilation": ("omega", "y"), "vla": ("o", "s", "a", "s_norm", "a_norm"),
            "linear": ("o", "s"), "deltanet": ("o", "s")}


def _inputs(algo, T, d, seed=0, batch=()):
    return make_vectors(algo, T, d, seed, batch)


def _params(algo, d):
    return {"k": max(1, d // 4)} if algo == "annihilation" else {}


def _float(algo, vec, params):
    if algo == "annihilation":
        return FLOAT[algo](vec["x"], params["k"])
    return FLOAT[algo](**vec)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("d,T", [pytest.param(16, 256, id="main-defaults"), pytest.param(64, 300, id="d64")])
def test_wide_tracks_float64(algo, d, T):
    """Relative Frobenius error <= 1e-5 per output; VLA's o (which decays like 1/t) per token too."""
    vec, params = _inputs(algo, T, d), _params(algo, d)
    ref = _float(algo, vec, params)
    out = run_fixed(algo, vec, "legacy-wide", params)
    for name in COMPARED[algo]:
        assert _rel(out[name], ref[name]) <= 1e-5, name
    if algo == "vla":
        per_tok = np.linalg.norm(out["o"] - ref["o"], axis=-1) / np.linalg.norm(ref["o"], axis=-1)
        assert per_tok.max() <= 1e-5
    assert all(int(out[f"sat_{n}"]) == 0 for n in json.loads(out["formats"])["tensors"])


@pytest.mark.parametrize("preset,tol", [("legacy-int16", 5e-3), ("legacy-int8", 0.5)])
@pytest.mark.parametrize("algo", ["vla", "linear", "deltanet"])
def test_narrow_presets_are_close_but_not_exact(algo, preset, tol):
    """Coarse sanity: int16 within 0.5 %, int8 within 50 % (relative o error), and neither exact."""
    vec, params = _inputs(algo, 128, 16, seed=3), _params(algo, 16)
    err = _rel(run_fixed(algo, vec, preset, params)["o"], _float(algo, vec, params)["o"])
    assert 0 < err <= tol


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("preset", FIXED_PRESETS)
def test_deterministic_pure_integer(algo, preset):
    vec, params = _inputs(algo, 40, 8, seed=1), _params(algo, 8)
    a = run_fixed(algo, vec, preset, params)
    b = run_fixed(algo, {n: v.copy() for n, v in vec.items()}, preset, params)
    fmts = json.loads(a["formats"])["tensors"]
    raws = [n for n in a if n.endswith("_raw")]
    assert raws
    for n in raws:
        assert a[n].dtype == np.int64
        np.testing.assert_array_equal(a[n], b[n])
        base = n[:-4]
        if base == "o" and algo == "vla":  # block-floating output: o = o_raw 2^-o_frac
            np.testing.assert_array_equal(a["o"], np.ldexp(a["o_raw"].astype(float), -a["o_frac"][..., None]))
        else:
            key = {"z": "z"}.get(base, base)
            np.testing.assert_array_equal(a[base], np.ldexp(a[n].astype(float), -fmts[key]["frac"]))
            assert a[n].min() >= -(1 << (fmts[key]["width"] - 1)) and a[n].max() < 1 << (fmts[key]["width"] - 1)
    for n in a:
        if n.startswith("sat_"):
            assert int(a[n]) == int(b[n]) >= 0


@pytest.mark.parametrize("algo", ALGOS)
def test_batch_equals_loop_awkward_sizes(algo):
    d, T = 7, 13
    vec = _inputs(algo, T, d, seed=5, batch=(2, 3))
    params = {"k": 3} if algo == "annihilation" else {}
    full = run_fixed(algo, vec, "legacy-int16", params)
    raws = [n for n in full if n.endswith("_raw") or n in ("o_frac", "orth", "count")]
    for i in range(2):
        for j in range(3):
            one = run_fixed(algo, {n: v[i, j] for n, v in vec.items()}, "legacy-int16", params)
            for n in raws:
                np.testing.assert_array_equal(full[n][i, j], one[n], err_msg=n)


def test_saturation_counts_inputs_exactly():
    vec = _inputs("deltanet", 20, 8, seed=2)
    vec = {**vec, "k": 30 * vec["k"], "v": 30 * vec["v"]}
    out = run_fixed("deltanet", vec, "legacy-int8", {})
    t = json.loads(out["formats"])["tensors"]["k"]
    lsb = 2.0 ** -t["frac"]
    hi, lo = ((1 << (t["width"] - 1)) - 1) * lsb, -(1 << (t["width"] - 1)) * lsb
    for n in ("k", "v", "q"):
        x = vec[n]
        expect = int(np.sum((np.rint(x / lsb) * lsb > hi) | (np.rint(x / lsb) * lsb < lo)))
        assert int(out[f"sat_{n}"]) == expect
    assert int(out["sat_k"]) > 100 and int(out["sat_q"]) == 0


def test_state_saturates_and_is_counted():
    """A constant stream drives linear attention's S = t v kfᵀ past its range: every element pins."""
    T, d = 200, 4
    k = np.full((T, d), 3.0)
    v = np.full((T, d), 3.0)
    out = run_fixed("linear", {"k": k, "v": v, "q": k}, "legacy-int8", {})
    fs = json.loads(out["formats"])["tensors"]["s"]
    smax = (1 << (fs["width"] - 1)) - 1
    # S grows by 3*4 = 12 per token; the range 2^(int bits) = 512 is crossed near token 43
    first = int(np.ceil(smax * 2.0 ** -fs["frac"] / 12.0))
    np.testing.assert_array_equal(out["s_raw"], smax)
    assert int(out["sat_s"]) == d * d * (T - first + 1)
    # o = v = 3 in float (a convex combination of equal values); fixed tracks it within int8's
    # scalar-unit bound (2^-7 relative, plus one output LSB) until S pins, then decays as t grows
    np.testing.assert_allclose(out["o"][: first - 1], 3.0, rtol=2 ** -7, atol=2 ** -10)
    assert out["o"][-1].max() < 0.3 * 3.0


# ---------------------------------------------------------------------------------------
# annihilation semantics


def test_annihilation_k1_keeps_last_input_exactly():
    """k = 1: P U = 0, so U' = x after every full step (bit-exact), and y = ±(previous x)/||x||."""
    x = np.random.default_rng(4).standard_normal((30, 5))
    r = annihilation_fixed(x, 1, "legacy-int16")
    f = r["fmt"]
    xq, _ = f["x"].quantize(x)
    np.testing.assert_array_equal(r["u_raw"][:, 0], xq[-1] << (f["u"].frac - f["x"].frac))
    prev = x[-2] / np.linalg.norm(x[-2])
    assert abs(abs(r["y"][-1] @ prev) - 1) < 1e-3


def test_annihilation_new_column_is_x_and_rank_k():
    d, k, T = 10, 3, 60
    x = np.random.default_rng(6).standard_normal((T, d))
    r = annihilation_fixed(x, k, "legacy-int8", history=True)
    f = r["fmt"]
    xq, _ = f["x"].quantize(x)
    xs = xq << (f["u"].frac - f["x"].frac)
    for t in range(T):  # x is stored bit-exactly in some column after its step
        assert np.any(np.all(r["u_hist"][t] == xs[t][:, None], axis=0)), t
    assert rank(r["omega"]) == k
    assert not r["orth"].any()


def test_annihilation_orthogonal_input_is_skipped_and_flagged():
    e = np.eye(6)
    x = np.stack([e[0], e[1], np.zeros(6), e[2], 2 * e[0] + e[1]])
    r = annihilation_fixed(x, 2, "legacy-int8", history=True)
    np.testing.assert_array_equal(r["orth"], [False, False, False, True, False])
    np.testing.assert_array_equal(r["u_hist"][3], r["u_hist"][1])  # e2 ⟂ span(e0, e1): unchanged
    np.testing.assert_array_equal(r["u_hist"][2], r["u_hist"][1])  # x = 0: no-op, not flagged
    assert not r["y"][:4].any() and r["y"][4].any()
    assert int(r["count"]) == 2
    ref = annihilation_gram(x, 2)
    np.testing.assert_array_equal(ref["orth"], r["orth"])  # same policy as the float model


# ---------------------------------------------------------------------------------------
# hardware ELU+1, VLA refresh


@pytest.mark.parametrize("preset", FIXED_PRESETS)
def test_elu1_within_one_lsb_plus_interpolation(preset):
    fmt = formats_for("linear", preset, 8)
    dp = Datapath(fmt)
    R = fmt["k"].max_value
    x = np.linspace(fmt["k"].min_value, R, 20001)
    raw, _ = fmt["k"].quantize(x)
    y = fmt["kf"].to_float(dp.elu1("kf", raw, fmt["k"]))
    ref = elu1(fmt["k"].to_float(raw))
    L = fmt.preset.exp_lut_bits
    interp = (np.log(2) * 2.0 ** -L) ** 2 / 8  # linear interpolation of 2^-phi, relative
    assert np.max(np.abs(y - ref) - (0.5 + 2 ** -4) * fmt["kf"].lsb - interp * ref) <= 0
    assert np.all(y >= 0) and dp.sat["kf"] == 0


def test_vla_refresh_below_half_lsb_is_lost_in_int8():
    """eta = 1e-4 is 0.2 LSB of int8's A (Q4.11): the refresh rounds to zero and changes nothing."""
    vec = _inputs("vla", 60, 8, seed=9)
    a = vla_fixed(**vec, preset="legacy-int8", eta=1e-4)
    b = vla_fixed(**vec, preset="legacy-int8", refresh_period=0)
    assert a["eta_raw"] == 0
    np.testing.assert_array_equal(a["a_raw"], b["a_raw"])
    c = vla_fixed(**vec, preset="legacy-int8", eta=1e-3)  # 2 LSB: kept
    assert c["eta_raw"] == 2 and not np.array_equal(c["a_raw"], b["a_raw"])


def test_vla_a_stays_symmetric_bit_exactly():
    out = vla_fixed(**_inputs("vla", 50, 8, seed=8), preset="legacy-int8")
    np.testing.assert_array_equal(out["a_raw"], np.swapaxes(out["a_raw"], -1, -2))


# ---------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("call,match", [
    (lambda v: run_fixed("vla", v, "int4", {}), "^format:"),
    (lambda v: run_fixed("nope", v, "legacy-int8", {}), "^algo:"),
    (lambda v: run_fixed("vla", {n: a for n, a in v.items() if n != "u"}, "legacy-int8", {}), "^u: input array missing"),
    (lambda v: run_fixed("vla", {**v, "x": v["k"]}, "legacy-int8", {}), "^x: not an input"),
    (lambda v: run_fixed("vla", v, "legacy-int8", {"gamma": 1}), "^gamma: not a parameter"),
    (lambda v: run_fixed("vla", {**v, "k": np.where(v["k"] > 1, np.nan, v["k"])}, "legacy-int8", {}), "^k: contains NaN"),
    (lambda v: run_fixed("vla", {**v, "q": v["q"][:, :3]}, "legacy-int8", {}), "^q: shape"),
    (lambda v: run_fixed("vla", v, "legacy-int8", {"lambda0": -1}), "^lambda0:"),
    (lambda v: run_fixed("vla", v, "legacy-int8", {"in_range": 0}), "^max_abs|^in_range"),
    (lambda v: run_fixed("annihilation", {"x": v["k"]}, "legacy-int8", {}), "^k: required"),
    (lambda v: run_fixed("annihilation", {"x": v["k"]}, "legacy-int8", {"k": 9}), "^k: must be <= d"),
    (lambda v: run_fixed("annihilation", {"x": v["k"]}, "legacy-int8", {"k": 2, "use_gram": True}), "^use_gram:"),
    (lambda v: run_fixed("annihilation", {"x": v["k"]}, "legacy-int8", {"k": 2, "variant": "literal"}), "^variant:"),
    (lambda v: run_fixed("deltanet", {**{n: v[n] for n in "kvq"}, "beta": np.full(10, 1.5)}, "legacy-int8", {}), "^beta:"),
    (lambda v: run_fixed("linear", {n: v[n] for n in "kvq"}, "legacy-int8", {"eps": 0}), "^eps:"),
])
def test_bad_input_names_the_argument(call, match):
    vec = _inputs("vla", 10, 8, seed=0)
    with pytest.raises(SpecmemInputError, match=match):
        call(vec)


def test_accumulator_width_is_checked():
    with pytest.raises(SpecmemInputError, match="^d: accumulator"):
        formats_for("vla", "legacy-wide", 1 << 12)


@pytest.mark.parametrize("algo", ALGOS)
def test_only_the_quantised_inputs_matter(algo):
    """After quantisation everything is integer: inputs moved by 1e-3 LSB (off ties) give the same bits."""
    vec, params = _inputs(algo, 30, 8, seed=12), _params(algo, 8)
    base = run_fixed(algo, vec, "legacy-int8", params)
    fmts = json.loads(base["formats"])["tensors"]
    moved = {}
    for n, x in vec.items():
        lsb = 2.0 ** -fmts[n]["frac"]
        q = np.rint(x / lsb) * lsb  # grid points: far from every tie
        moved[n] = q + 1e-3 * lsb * np.sign(np.random.default_rng(1).standard_normal(x.shape))
        vec[n] = q
    base = run_fixed(algo, vec, "legacy-int8", params)
    other = run_fixed(algo, moved, "legacy-int8", params)
    for n in base:
        if n.endswith("_raw"):
            np.testing.assert_array_equal(base[n], other[n], err_msg=n)


def test_wide_vla_large_eta_refresh_does_not_overflow():
    # Regression (found by the bit-exact RTL): eta * kh in the wide preset exceeds int64 for eta >= 2**-7.
    from specmem.golden.fixed import run_fixed
    from specmem.golden.vla import vla

    rng = np.random.default_rng(11)
    k, v, q, u = (rng.standard_normal((40, 8)) for _ in range(4))
    params = {"eta": 0.05, "refresh_period": 3}
    ref = vla(k, v, q, u, **params)
    out = run_fixed("vla", {"k": k, "v": v, "q": q, "u": u}, "legacy-wide", params)
    rel = np.linalg.norm(out["o"] - ref["o"]) / np.linalg.norm(ref["o"])
    assert rel < 1e-5, rel
    np.testing.assert_allclose(out["a"], ref["a"], rtol=0, atol=1e-5 * np.abs(ref["a"]).max())
