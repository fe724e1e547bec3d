"""Bit-exact fixed-point golden models: the specification of the RTL.

``run_fixed(algo, inputs, preset, params)`` runs one rule on float inputs and returns the
dequantised outputs under the float golden model's names, the raw integers as
``<name>_raw``, per-tensor saturation counts as ``sat_<tensor>`` and the formats as a JSON
string under ``formats``. Presets (``formats.PRESETS``, ``docs/fixed-point.md``): the scaled
``int8`` and ``int18`` (per-vector scales, block-floating-point states; ``scaled/``) for the
delta-rule family, ``int18`` the annihilation memory's default, the fixed-binary-point
references ``int16`` and ``wide``, and the RTL's formats ``legacy-int8/int16/wide``.

Modules: :mod:`.fxtype` (the one fixed-point type), :mod:`.scalar_unit` (reciprocal and
rsqrt), :mod:`.formats` (presets, per-tensor formats), :mod:`.datapath` (the rounding
primitives), one module per rule, :mod:`.scaled` (the scaled formats: block floating point),
:mod:`.accuracy`, :mod:`.targets` and :mod:`.compare` (the reports).
"""

from __future__ import annotations

import warnings

import numpy as np

from specmem.golden.common import SpecmemInputError

from .formats import PRESETS, FixedFormat, Preset, formats_for
from .fxtype import FxType, requantize, round_shift
from .scalar_unit import Scalar, ScalarUnit

__all__ = [
    "run_fixed",
    "FIXED_ALGOS",
    "FxType",
    "requantize",
    "round_shift",
    "Scalar",
    "ScalarUnit",
    "Preset",
    "PRESETS",
    "FixedFormat",
    "formats_for",
    "DEFAULT_FORMAT",
    "SaturationWarning",
]

# algo -> (inputs, accepted parameters). Parameters of the float model that the fixed model
# does not use are accepted only at values that do not change the result (see _check_params).
FIXED_ALGOS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "annihilation": (("x",), ("k", "variant", "form", "eps", "orth_tol", "use_gram", "orth_policy", "gram",
                                "in_range")),
    "vla": (("k", "v", "q", "u"), ("lambda0", "eps", "refresh_period", "eta", "u_scale", "in_range")),
    "linear": (("k", "v", "q"), ("eps", "in_range")),
    "deltanet": (("k", "v", "q", "beta"), ("eps", "in_range")),
    "gated-deltanet": (("k", "v", "q", "beta", "g"), ("eps", "in_range")),
}
#: the format a rule runs in when none is named: each rule's recommended hardware format
DEFAULT_FORMAT = {"annihilation": "int18"}
_SCALED_OUT = {
    "vla": ("o", "s", "a", "s_norm", "a_norm", "o_raw", "o_frac", "s_raw", "s_frac", "a_raw", "a_frac",
            "a_diag_raw", "a_diag_frac"),
    "linear": ("o", "s", "z", "s_norm", "o_raw", "o_frac", "s_raw", "s_frac", "z_raw", "z_frac"),
    "deltanet": ("o", "s", "s_norm", "o_raw", "o_frac", "s_raw", "s_frac"),
    "gated-deltanet": ("o", "s", "s_norm", "o_raw", "o_frac", "s_raw", "s_frac"),
}
_ALIASES = {"linear_attention": "linear", "gated_deltanet": "gated-deltanet"}


def _check_params(algo: str, params: dict) -> dict:
    known = FIXED_ALGOS[algo][1]
    for name in params:
        if name not in known:
            raise SpecmemInputError(
                f"{name}: not a parameter of the fixed-point {algo} model; known: {', '.join(known)}")
    p = dict(params)
    if algo == "annihilation":
        if "k" not in p:
            raise SpecmemInputError("k: required parameter for annihilation (number of stored directions)")
        if p.pop("variant", "exact") != "exact":
            raise SpecmemInputError("variant: the fixed-point model implements the exact variant only")
        if p.pop("form", None) not in (None, "gram"):
            raise SpecmemInputError("form: the fixed-point model implements the Gram form only")
        if p.pop("use_gram", False):
            raise SpecmemInputError(
                "use_gram: an algebraically maintained G drifts in fixed point; the fixed-point model recomputes "
                "g = Uᵀ r (gram='recompute') or co-accumulates the exact Gram of the stored rows "
                "(gram='coaccumulate')")
        # eps (literal variant only) and orth_tol (the float threshold) do not apply: the fixed
        # model's orthogonality test is exact (a == 0 or n² == 0 after quantisation)
        p.pop("eps", None)
        p.pop("orth_tol", None)
        # orth_policy ("evict"/"skip") and gram ("recompute"/"coaccumulate") apply; absent or None:
        # the preset's default (legacy-*: skip, recompute)
    return p


class SaturationWarning(UserWarning):
    """A fixed-point run narrowed values that did not fit (the count is also in ``sat_<tensor>``)."""


def _run_scaled(algo: str, args: dict, pr: Preset, p: dict) -> dict:
    if algo == "vla":
        from .scaled.vla import vla_scaled

        return vla_scaled(**args, preset=pr, **p)
    if algo == "linear":
        from .scaled.linear_attention import linear_attention_scaled

        return linear_attention_scaled(**args, preset=pr, **p)
    from .scaled.deltanet import deltanet_scaled

    return deltanet_scaled(args["k"], args["v"], args["q"], args["beta"], args.get("g"), pr, **p)


def run_fixed(algo: str, inputs: dict, preset: str | None = None, params: dict | None = None) -> dict:
    """Run ``algo`` in fixed point under ``preset`` (None: the rule's default, ``DEFAULT_FORMAT``,
    else ``int8``); see the module docstring for the outputs."""
    if not isinstance(algo, str):
        raise SpecmemInputError(f"algo: expected a name, got {algo!r}")
    algo = _ALIASES.get(algo, algo)
    if algo not in FIXED_ALGOS:
        raise SpecmemInputError(
            f"algo: the fixed-point model covers {', '.join(FIXED_ALGOS)}; got {algo!r}")
    if preset is None:
        preset = DEFAULT_FORMAT.get(algo, "int8")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise SpecmemInputError(f"format: must be one of {', '.join(PRESETS)}, got {preset!r}")
    pr = PRESETS[preset]
    scaled = pr.scheme == "scaled" and algo != "annihilation"
    if not isinstance(inputs, dict):
        raise SpecmemInputError(f"inputs: expected a dict of arrays, got {type(inputs).__name__}")
    names = FIXED_ALGOS[algo][0]
    for n in names:
        if n not in inputs:
            raise SpecmemInputError(f"{n}: input array missing for {algo}")
    for n in inputs:
        if n not in names:
            raise SpecmemInputError(f"{n}: not an input of the fixed-point {algo} model (inputs: {', '.join(names)})")
    p = _check_params(algo, dict(params or {}))
    args = {n: inputs[n] for n in names}

    if scaled:
        if p.get("in_range") is not None:
            raise SpecmemInputError(
                f"in_range: applies to fixed-binary-point formats only; {preset} scales every vector by its own max")
        p.pop("in_range", None)
        r = _run_scaled(algo, args, pr, p)
        out = {n: r[n] for n in _SCALED_OUT[algo]}
    elif algo == "annihilation":
        from .annihilation import annihilation_fixed

        r = annihilation_fixed(args["x"], p.pop("k"), preset, **p)
        out = {n: r[n] for n in ("omega", "y", "u", "orth", "count", "u_raw", "y_raw")}
    elif algo == "vla":
        from .vla import vla_fixed

        r = vla_fixed(**args, preset=preset, **p)
        out = {n: r[n] for n in ("o", "s", "a", "s_norm", "a_norm", "o_raw", "o_frac", "s_raw", "a_raw")}
    elif algo == "linear":
        from .linear_attention import linear_attention_fixed

        r = linear_attention_fixed(**args, preset=preset, **p)
        out = {n: r[n] for n in ("o", "s", "z", "s_norm", "o_raw", "s_raw", "z_raw")}
    elif algo == "gated-deltanet":
        from .gated_deltanet import gated_deltanet_fixed

        r = gated_deltanet_fixed(**args, preset=preset, **p)
        out = {n: r[n] for n in ("o", "s", "s_norm", "o_raw", "s_raw")}
    else:
        from .deltanet import deltanet_fixed

        r = deltanet_fixed(**args, preset=preset, **p)
        out = {n: r[n] for n in ("o", "s", "s_norm", "o_raw", "s_raw")}
    for name, n in r["sat"].items():
        if n:
            warnings.warn(f"{algo} in {preset}: {n} saturated value(s) in {name}", SaturationWarning, stacklevel=2)
        out[f"sat_{name}"] = np.int64(n)
    out["formats"] = r["fmt"].to_json()
    return out
