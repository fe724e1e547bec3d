"""The registry of update rules: input arrays, outputs and the float golden function of each.

Parameters are read from the golden function's own signature (keyword arguments
with defaults), so a rule's parameters are defined in exactly one place.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from specmem.golden.common import SpecmemInputError

__all__ = ["Algorithm", "ALGORITHMS", "get_algorithm", "parse_params"]


@dataclass(frozen=True)
class Algorithm:
    """One update rule as the CLI and the backends see it."""

    name: str
    summary: str
    function: str  # "module:attr" of the float64 golden function
    inputs: tuple[str, ...]  # arrays [..., T, d] (per-token scalars [..., T])
    outputs: tuple[str, ...]
    optional_inputs: tuple[str, ...] = ()
    token_scalars: tuple[str, ...] = ()  # inputs shaped [..., T]
    param_types: dict[str, type] = field(default_factory=dict)  # for parameters without a default
    hidden_params: tuple[str, ...] = ()  # keyword arguments not exposed on the command line

    def golden(self) -> Callable[..., dict]:
        mod, attr = self.function.split(":")
        return getattr(importlib.import_module(mod), attr)

    def params(self) -> dict[str, tuple[type, Any]]:
        """Exposed parameters: name -> (type, default); default is ``inspect.Parameter.empty`` if required."""
        out = {}
        for p in inspect.signature(self.golden()).parameters.values():
            if p.name in self.inputs or p.name in self.optional_inputs or p.name in self.hidden_params:
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if p.name in self.param_types:
                typ = self.param_types[p.name]
            elif p.default is None or p.default is p.empty:
                typ = float
            else:
                typ = type(p.default)
            out[p.name] = (typ, p.default)
        return out


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in [
        Algorithm(
            "annihilation",
            "spectral-annihilation memory, rank-k precision matrix (exact: w = y)",
            "specmem.golden.annihilation:annihilation",
            inputs=("x",),
            outputs=("omega", "y", "orth", "count"),  # the Gram form (default for exact) adds "u"
            param_types={"k": int, "variant": str, "form": str},
        ),
        Algorithm(
            "vla",
            "Variational Linear Attention, Algorithm 1",
            "specmem.golden.vla:vla",
            inputs=("k", "v", "q", "u"),
            outputs=("o", "s", "a", "s_norm", "a_norm"),
            param_types={"refresh_period": int},
            hidden_params=("return_trace",),
        ),
        Algorithm(
            "linear",
            "linear attention with the ELU+1 feature map",
            "specmem.golden.linear_attention:linear_attention",
            inputs=("k", "v", "q"),
            outputs=("o", "s"),
        ),
        Algorithm(
            "deltanet",
            "DeltaNet (L2-normalised keys and queries)",
            "specmem.golden.deltanet:deltanet",
            inputs=("k", "v", "q", "beta"),
            outputs=("o", "s"),
            token_scalars=("beta",),
        ),
        Algorithm(
            "gated-deltanet",
            "Gated DeltaNet (decay g applied first)",
            "specmem.golden.deltanet:gated_deltanet",
            inputs=("k", "v", "q", "beta", "g"),
            outputs=("o", "s"),
            token_scalars=("beta", "g"),
        ),
        Algorithm(
            "lattice",
            "Lattice, DEC form (float only)",
            "specmem.golden.lattice:lattice",
            inputs=("k", "v", "q"),
            outputs=("o", "s"),
            hidden_params=("s0",),
        ),
        Algorithm(
            "ska",
            "Echo / Spectral Koopman attention (float only)",
            "specmem.golden.ska:ska",
            inputs=("k", "v", "q"),
            outputs=("o", "g", "m", "c", "coef"),
            param_types={"K": int},
        ),
    ]
}


def get_algorithm(name: str) -> Algorithm:
    """Look up a rule by name; unknown names list the known ones."""
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise SpecmemInputError(
            f"algo: unknown algorithm {name!r}; choose one of {', '.join(ALGORITHMS)}"
        ) from None


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _convert(name: str, typ: type, text: str):
    if typ is bool:
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise SpecmemInputError(f"{name}: expected true or false, got {text!r}")
    if typ is int:
        try:
            return int(text)
        except ValueError:
            raise SpecmemInputError(f"{name}: expected an integer, got {text!r}") from None
    if typ is float:
        try:
            return float(text)
        except ValueError:
            raise SpecmemInputError(f"{name}: expected a number, got {text!r}") from None
    return text


def parse_params(algo: Algorithm, items: list[str] | dict | None) -> dict[str, Any]:
    """Turn ``NAME=VALUE`` strings (or a dict) into typed keyword arguments; reject unknown names."""
    known = algo.params()
    if items is None:
        items = []
    pairs = items.items() if isinstance(items, dict) else None
    if pairs is None:
        pairs = []
        for item in items:
            if "=" not in item:
                raise SpecmemInputError(f"param: expected NAME=VALUE, got {item!r}")
            name, value = item.split("=", 1)
            pairs.append((name.strip(), value.strip()))
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name not in known:
            raise SpecmemInputError(
                f"param: unknown parameter {name!r} for {algo.name}; known: {', '.join(known) or 'none'}"
            )
        if name in out:
            raise SpecmemInputError(f"param: {name} given twice")
        typ = known[name][0]
        out[name] = _convert(name, typ, value) if isinstance(value, str) else value
    missing = [n for n, (_, d) in known.items() if d is inspect.Parameter.empty and n not in out]
    if missing:
        raise SpecmemInputError(
            f"{missing[0]}: required parameter for {algo.name}; pass --param {missing[0]}=VALUE"
        )
    return out
