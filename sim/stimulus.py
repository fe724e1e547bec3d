"""Seeded input streams for the annihilation testbenches (float tokens, quantised on the host).

Every generator returns float64 tokens ``[T, d]``; :func:`quantize` turns them into the raw
integers of the ``x`` format that the driver sends (the host-side quantisation, the only
narrowing the hardware does not do itself).
"""

from __future__ import annotations

import numpy as np

__all__ = ["x_format", "quantize", "gaussian", "with_orthogonal", "with_zeros", "saturating", "evictions", "units",
           "KINDS", "make",
           "VLA_KINDS", "vla_make", "BASELINE_KINDS", "baseline_make", "gated_decays"]


def x_format(d: int, k: int, preset: str = "legacy-int8", in_range: float | None = None):
    """The ``x`` :class:`~specmem.golden.fixed.fxtype.FxType` of the annihilation formats."""
    from specmem.golden.fixed.formats import formats_for

    return formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})["x"]


def quantize(x: np.ndarray, k: int, preset: str = "legacy-int8", in_range: float | None = None) -> np.ndarray:
    """Raw ``x`` integers ``[T, d]`` (round and saturate, as the golden model quantises)."""
    x = np.asarray(x, dtype=np.float64)
    raw, _ = x_format(x.shape[-1], k, preset, in_range).quantize(x)
    return np.asarray(raw, dtype=np.int64)


def gaussian(seed: int, T: int, d: int, scale: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((T, d)) * scale


def with_orthogonal(x: np.ndarray, k: int, at) -> np.ndarray:
    """Make the tokens ``at`` orthogonal to the warm-up tokens (disjoint supports: the first ``k``
    tokens live on the first half of the coordinates, the orthogonal ones on the second), so that
    ``a = Uᵀx`` is exactly zero: the skip-and-flag path."""
    x = np.array(x)
    d = x.shape[-1]
    x[:k, d // 2:] = 0
    for t in np.atleast_1d(at):
        x[t, :d // 2] = 0
    return x


def with_zeros(x: np.ndarray, at) -> np.ndarray:
    """All-zero tokens at ``at`` (no update, ``y = 0``)."""
    x = np.array(x)
    x[np.atleast_1d(at)] = 0
    return x


def saturating(seed: int, T: int, d: int) -> np.ndarray:
    """Large tokens close to one sign pattern, alternating sign: the stored columns align, so
    ``r = U a`` overflows its format and saturates (and ``x`` clips on the host)."""
    rng = np.random.default_rng(seed)
    base = 3.5 * np.sign(rng.standard_normal(d))
    x = base + 0.8 * rng.standard_normal((T, d))
    x[1::2] *= -1
    return x


def evictions(seed: int, T: int, d: int, k: int) -> np.ndarray:
    """For the annihilation core v2 (orthogonal inputs evict a column): Gaussian tokens on the first
    half of the coordinates, and every 9th token from ``k + 3`` on a unit vector ``1.25 e_i`` on the
    second half (``i`` cycling through it), orthogonal to everything stored until that coordinate
    was stored: evictions, then updates of the evicted-into columns; a zero token (2), one that
    quantises to zero (``k + 1``) and a few tokens scaled by 3 (as ``tests/rtl/test_annihilation_v2.py``'s
    ``_stream``)."""
    rng = np.random.default_rng(seed)
    x = np.zeros((T, d))
    h = d // 2
    x[:, :h] = rng.standard_normal((T, h))
    for m, t in enumerate(range(k + 3, T, 9)):
        x[t] = 0
        x[t, h + m % (d - h)] = 1.25
    if T > 2:
        x[2] = 0
    if T > k + 1:
        x[k + 1] *= 1e-9
    big = rng.choice(T, size=max(1, T // 20), replace=False)
    x[big] *= 3
    return x


def units(seed: int, T: int, d: int) -> np.ndarray:
    """Unit vectors ``1.25 e_t`` for the first ``d`` tokens (warm-up, then evictions among columns of
    equal energy: the round-robin pointer decides which), then Gaussian tokens whose ``y`` depends on
    which columns were kept."""
    x = np.random.default_rng(seed).standard_normal((T, d))
    n = min(T, d)
    x[:n] = 1.25 * np.eye(d)[:n]
    return x


KINDS = ("gaussian", "mixed", "saturating", "orthogonal", "zeros", "evictions", "units")


def make(kind: str, seed: int, T: int, d: int, k: int) -> np.ndarray:
    """Float tokens ``[T, d]`` of one of :data:`KINDS`; ``mixed`` is Gaussian with a zero token,
    an orthogonal token and a few tokens scaled by 3 (saturation) sprinkled in."""
    if kind == "gaussian":
        return gaussian(seed, T, d)
    if kind == "saturating":
        return saturating(seed, T, d)
    if kind == "evictions":
        return evictions(seed, T, d, k)
    if kind == "units":
        return units(seed, T, d)
    rng = np.random.default_rng(seed + 7919)
    x = gaussian(seed, T, d)
    if kind == "orthogonal":
        return with_orthogonal(x, k, [t for t in (k, k + 2) if t < T])
    if kind == "zeros":
        return with_zeros(x, [t for t in (0, k // 2, k + 1, k + 3) if t < T])
    if kind == "mixed":
        if T > k + 1:
            x = with_orthogonal(x, k, k)
        n = max(1, T // 16)
        zeros = rng.choice(np.arange(k + 1, T), size=min(n, max(T - k - 1, 0)), replace=False) if T > k + 1 else []
        x = with_zeros(x, zeros)
        big = rng.choice(T, size=max(1, T // 20), replace=False)
        x[big] *= 3
        return x
    raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")


# ------------------------------------------------------------------------------------------------
# VLA: a token is four float vectors k, v, q, u (quantised with VLAModel.quantize)

VLA_KINDS = ("gaussian", "mixed", "saturating")


def vla_make(kind: str, seed: int, T: int, d: int) -> dict:
    """Float ``{k, v, q, u}`` ``[T, d]`` of one of :data:`VLA_KINDS`. ``mixed``: Gaussian with an
    all-zero ``u`` and a few tokens scaled by 3; ``saturating``: one-hot-like keys (``kh``
    saturates), large values (``e`` saturates), zero-feature and all-zero-``u`` tokens (the eps
    clamps), as ``tests/rtl/test_vla.py``'s saturating stream."""
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal((T, d)) for n in ("k", "v", "q", "u")}
    if kind == "gaussian":
        return x
    if kind == "mixed":
        if T > 2:
            x["u"][T // 2] = 0.0
        for t in rng.choice(T, size=max(1, T // 8), replace=False):
            for n in x:
                x[n][t] *= 3.0
        return x
    if kind == "saturating":
        x["k"][::2] = -4.0
        x["k"][2::2, 0] = 4.0
        x["v"] *= 3.0
        x["u"][1::3] = 0.0
        x["u"][1::3, 2] = 3.0
        if T > 3:
            x["u"][3] = 0.0
        return x
    raise ValueError(f"kind: must be one of {VLA_KINDS}, got {kind!r}")


# ------------------------------------------------------------------------------------------------
# linear attention, DeltaNet, Gated DeltaNet: a token is k, v, q (and beta, g), quantised with
# BaselineModel.quantize

BASELINE_KINDS = ("gaussian", "mixed", "saturating")


def gated_decays(rng: np.random.Generator, T: int) -> np.ndarray:
    """Gated DeltaNet's decays ``g`` ``[T]``: uniform in ``[0.8, 1]`` (the state persists) with the
    edge cases sprinkled in: ``g = 1`` exactly (the first token and every 7th), ``0`` (the state
    erased; every 23rd from 5), tiny (``2^-7``, one step at legacy-int8, and ``10^-3``, below half a
    step there: 0 after quantisation; every 17th from 3 / 31st from 9) and near 1 (``1 - 2^-7``, the
    largest below 1 at legacy-int8, and ``0.999``, which rounds to 1 there; every 5th from 2 / 13th
    from 4)."""
    g = rng.uniform(0.8, 1.0, T)
    g[4::13] = 0.999
    g[2::5] = 1.0 - 2.0 ** -7
    g[9::31] = 1e-3
    g[3::17] = 2.0 ** -7
    g[5::23] = 0.0
    g[::7] = 1.0
    return g


def baseline_make(algo: str, kind: str, seed: int, T: int, d: int) -> dict:
    """Float ``{k, v, q}`` ``[T, d]`` (and for DeltaNet ``beta`` ``[T]`` in ``[0.1, 1]``, the
    first 1.0; for Gated DeltaNet also ``g`` ``[T]``, :func:`gated_decays`) of one of
    :data:`BASELINE_KINDS`. ``mixed``: Gaussian with an all-zero key, an all-zero query and a few
    tokens scaled by 3; ``saturating``: linear attention: keys and values at the top of the input
    range (``S`` saturates from about token 26 at legacy-int8); the delta rules: one-hot keys
    (``kn`` saturates at +1), large values and a zero key (the ``||k||`` clamp), as
    ``tests/rtl/test_baselines.py``'s (Gated DeltaNet with its decays as in the other kinds)."""
    if algo not in ("linear", "deltanet", "gated-deltanet"):
        raise ValueError(f"algo: must be linear, deltanet or gated-deltanet, got {algo!r}")
    rng = np.random.default_rng(seed)
    x = {n: rng.standard_normal((T, d)) for n in ("k", "v", "q")}
    if algo != "linear":
        x["beta"] = rng.uniform(0.1, 1.0, T)
        x["beta"][0] = 1.0
    if algo == "gated-deltanet":
        x["g"] = gated_decays(rng, T)
    if kind == "gaussian":
        return x
    if kind == "mixed":
        if T > 3:
            x["k"][T // 3] = 0.0
            x["q"][2 * T // 3] = 0.0
        for t in rng.choice(T, size=max(1, T // 8), replace=False):
            for n in ("k", "v", "q"):
                x[n][t] *= 3.0
        return x
    if kind == "saturating":
        if algo == "linear":  # kf and v at the top of their ranges: S saturates after ~26 tokens
            x["k"] = np.abs(x["k"]) * 2 + 3
            x["v"] = np.abs(x["v"]) * 3 + 3
        else:
            x["k"][::2] = 0.0
            x["k"][::2, 1] = 3.0
            x["v"] *= 3.0
            if T > 3:
                x["k"][3] = 0.0
        return x
    raise ValueError(f"kind: must be one of {BASELINE_KINDS}, got {kind!r}")
