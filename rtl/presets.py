"""The fixed-point presets the RTL implements: the legacy fixed-binary-point formats, with which
the generated hardware is bit-exact (``golden/fixed/formats.py``: ``RTL_PRESETS``).

The other golden-model presets (the scaled ``int8``, ``int18`` and the references ``int16``,
``wide``) are not built in RTL for every rule; :func:`check_rtl_preset` says so in its message
(``int8`` has the annihilation core v2 and the scaled linear-attention, DeltaNet and Gated
DeltaNet cores, whose callers check for them before this).
"""

from __future__ import annotations

from specmem.golden.fixed.formats import PRESETS, RTL_PRESETS

__all__ = ["RTL_PRESETS", "SCALED_CORE_ALGOS", "SCALED_DELTA_ALGOS", "SCALED_PRESETS", "scaled_core",
           "check_scaled_core", "rtl_preset_error",
           "check_rtl_preset"]

#: the rules and presets built by the scaled cores (``rtl/linear_attention_scaled.py``,
#: ``rtl/deltanet_scaled.py``: the delta rules', ``rtl/vla_scaled.py``)
SCALED_CORE_ALGOS = ("linear", "deltanet", "gated-deltanet", "vla")
SCALED_DELTA_ALGOS = ("deltanet", "gated-deltanet")
SCALED_PRESETS = ("int8",)


def scaled_core(algo, preset) -> bool:
    """Whether ``algo`` in ``preset`` is built by a scaled core (linear attention, DeltaNet, Gated
    DeltaNet, VLA in ``int8``)."""
    return algo in SCALED_CORE_ALGOS and preset in SCALED_PRESETS


def check_scaled_core(d, k, preset, eps):
    """A scaled core's shared parameters checked (``ValueError`` naming the argument): ``d`` and
    ``k`` integers with ``k`` dividing ``d``, ``preset`` a scaled preset, ``eps`` a positive finite
    number. Returns the :class:`~specmem.golden.fixed.formats.Preset`."""
    import math

    for name, v, lo in (("d", d, 2), ("k", k, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
    if d % k:
        raise ValueError(f"d: must be a multiple of k = {k}, got {d}")
    p = PRESETS.get(preset)
    if p is None or p.scheme != "scaled":
        raise ValueError(f"preset: the scaled core takes a scaled preset "
                         f"({', '.join(n for n, q in PRESETS.items() if q.scheme == 'scaled')}), got {preset!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"eps: must be a positive finite number, got {eps!r}")
    return p


def rtl_preset_error(preset, arg: str = "preset") -> str | None:
    """Why ``preset`` cannot be built in RTL (a message starting with the argument name ``arg``),
    or None when it can."""
    if isinstance(preset, str) and preset in RTL_PRESETS:
        return None
    msg = f"{arg}: the RTL implements {', '.join(RTL_PRESETS)} (fixed binary points)"
    p = PRESETS.get(preset) if isinstance(preset, str) else None
    if p is None:
        return f"{msg}, got {preset!r}"
    if p.scheme == "scaled":
        built = (" (its RTL so far: the annihilation core v2 and the scaled linear-attention, DeltaNet and Gated "
                 "DeltaNet cores)" if preset in SCALED_PRESETS else ", not built in RTL yet")
        return f"{msg}; {preset!r} is the scaled golden-model format{built}"
    legacy = f"legacy-{preset}"
    hint = f" (the RTL's {legacy!r} has its widths)" if legacy in RTL_PRESETS else ""
    return f"{msg}; {preset!r} is a golden-model preset, not built in RTL{hint}"


def check_rtl_preset(preset, exc: type[Exception] = ValueError, arg: str = "preset") -> str:
    """``preset`` when the RTL implements it, else raise ``exc`` with :func:`rtl_preset_error`'s message."""
    err = rtl_preset_error(preset, arg)
    if err is not None:
        raise exc(err)
    return preset
