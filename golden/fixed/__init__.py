"""Bit-exact fixed-point golden models: the specification of the RTL.

``run_fixed(algo, inputs, preset, params)`` runs one rule on float inputs and returns the
dequantised outputs under the float golden model's names, the raw integers as
``<name>_raw``, per-tensor saturation counts as ``sat_<tensor>`` and the formats as a JSON
string under ``formats``. Presets: ``int8``, ``int16``, ``wide`` (see ``formats.PRESETS`` and
``docs/fixed-point.md``).

Modules: :mod:`.fxtype` (the one fixed-point type), :mod:`.scalar_unit` (reciprocal and
rsqrt), :mod:`.formats` (presets, per-tensor formats), :mod:`.datapath` (the rounding
primitives), one module per rule, :mod:`.accuracy` (the report).
"""

from __future__ import annotations

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
]

# algo -> (inputs, accepted parameters). Parameters of the float model that the fixed model
# does not use are accepted only at values that do not change the result (see _check_params).
FIXED_ALGOS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "annihilation": (("x",), ("k", "variant", "form", "eps", "orth_tol", "use_gram", "in_range")),
    "vla": (("k", "v", "q", "u"), ("lambda0", "eps", "refresh_period", "eta", "u_scale", "in_range")),
    "linear": (("k", "v", "q"), ("eps", "in_range")),
    "deltanet": (("k", "v", "q", "beta"), ("eps", "in_range")),
}
_ALIASES = {"linear_attention": "linear"}


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
                "use_gram: the fixed-point model computes g = Uᵀ r in a second reduction pass (use_gram=False)")
        # eps (literal variant only) and orth_tol (the float threshold) do not apply: the fixed
        # model's orthogonality test is exact (a == 0 or n² == 0 after quantisation)
        p.pop("eps", None)
        p.pop("orth_tol", None)
    return p


def run_fixed(algo: str, inputs: dict, preset: str = "int8", params: dict | None = None) -> dict:
    """Run ``algo`` in fixed point under ``preset``; see the module docstring for the outputs."""
    if not isinstance(algo, str):
        raise SpecmemInputError(f"algo: expected a name, got {algo!r}")
    algo = _ALIASES.get(algo, algo)
    if algo not in FIXED_ALGOS:
        raise SpecmemInputError(
            f"algo: the fixed-point model covers {', '.join(FIXED_ALGOS)}; got {algo!r}")
    if not isinstance(preset, str) or preset not in PRESETS:
        raise SpecmemInputError(f"preset: must be one of {', '.join(PRESETS)}, got {preset!r}")
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

    if algo == "annihilation":
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
    else:
        from .deltanet import deltanet_fixed

        r = deltanet_fixed(**args, preset=preset, **p)
        out = {n: r[n] for n in ("o", "s", "s_norm", "o_raw", "s_raw")}
    for name, n in r["sat"].items():
        out[f"sat_{name}"] = np.int64(n)
    out["formats"] = r["fmt"].to_json()
    return out
