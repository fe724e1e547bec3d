"""One run interface over every backend: the same inputs in, the same output names out.

``run("vla", inputs, backend="float")`` and ``run("vla", inputs, backend="fixed",
format="int8")`` return dicts keyed by the exchange-format names, so comparing
backends takes a few lines. Backends register themselves here by name.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from specmem.algorithms import get_algorithm, parse_params
from specmem.golden.common import SpecmemInputError

__all__ = ["BACKENDS", "register_backend", "run"]

BackendFn = Callable[[str, dict[str, np.ndarray], dict[str, Any], dict[str, Any]], dict[str, np.ndarray]]


def _float_backend(algo: str, inputs: dict[str, np.ndarray], params: dict[str, Any], options: dict[str, Any]):
    if options:
        raise SpecmemInputError(f"backend: the float backend takes no options, got {', '.join(options)}")
    spec = get_algorithm(algo)
    out = spec.golden()(**inputs, **params)
    return {name: np.asarray(val) for name, val in out.items()}


def _fixed_backend(algo: str, inputs: dict[str, np.ndarray], params: dict[str, Any], options: dict[str, Any]):
    try:
        from specmem.golden.fixed import PRESETS, run_fixed
    except ImportError:
        raise SpecmemInputError("backend: the fixed-point backend is not available in this build") from None
    preset = options.pop("format", None)  # None: the rule's default format (DEFAULT_FORMAT)
    if preset is not None and preset not in PRESETS:
        raise SpecmemInputError(f"format: unknown fixed-point preset {preset!r}; choose one of {', '.join(PRESETS)}")
    if options:
        raise SpecmemInputError(f"backend: unknown option(s) for fixed: {', '.join(options)}")
    try:
        return run_fixed(algo, inputs, preset, params)
    except SpecmemInputError:
        raise
    except (ValueError, OverflowError) as exc:  # a parameter that pushes a format's shifts past its word
        given = ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
        raise SpecmemInputError(f"param: the fixed-point model of {algo} ({preset or 'default format'}) cannot "
                                f"represent these parameters ({given}): {exc}") from None


BACKENDS: dict[str, BackendFn] = {"float": _float_backend, "fixed": _fixed_backend}


def register_backend(name: str, fn: BackendFn) -> None:
    """Add a backend (Verilator, Triton, ...) under ``name``."""
    BACKENDS[name] = fn


def _lazy_backends() -> None:
    # Backends with heavy imports register on first use.
    if "verilator" not in BACKENDS:
        from specmem.backend_verilator import verilator_backend

        BACKENDS["verilator"] = verilator_backend
    if "triton" not in BACKENDS:
        try:
            from specmem.kernels import backend as _kb  # noqa: F401  (registers "triton")
        except ImportError:
            pass


def run(algo: str, inputs: dict[str, np.ndarray], backend: str = "float", params: dict | list | None = None,
        **options: Any) -> dict[str, np.ndarray]:
    """Run ``inputs`` through ``algo`` on ``backend``; ``params`` are the rule's parameters."""
    spec = get_algorithm(algo)
    kwargs = parse_params(spec, params)
    _lazy_backends()
    if backend not in BACKENDS:
        raise SpecmemInputError(f"backend: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    missing = [n for n in spec.inputs if n not in inputs]
    if missing:
        raise SpecmemInputError(f"{missing[0]}: input array missing for {algo}")
    for name, val in inputs.items():
        if np.iscomplexobj(val):
            raise SpecmemInputError(f"{name}: complex array; the rules take real inputs")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below, as one error
        out = BACKENDS[backend](algo, dict(inputs), kwargs, dict(options))
    _check_finite(algo, backend, kwargs, out)
    return out


def _check_finite(algo: str, backend: str, params: dict, out: dict[str, np.ndarray]) -> None:
    """Reject results with NaN or Inf: a parameter outside the range a model can represent (float
    overflow, or a fixed-point shift past its word) must not come back as numbers."""
    for name, val in out.items():
        a = np.asarray(val)
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            given = ", ".join(f"{k}={v}" for k, v in params.items()) or "defaults"
            raise SpecmemInputError(
                f"param: the {backend} model of {algo} overflows with these parameters ({given}): output {name!r} "
                "is not finite; choose parameters within the model's range")
