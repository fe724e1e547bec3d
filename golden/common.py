"""Shared helpers for every golden model: the ELU+1 feature map, safe norms, and input checks.

Every model raises :class:`SpecmemInputError` (a ``ValueError``) whose message
starts with the offending argument's name, so the CLI can print one clear line.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "SpecmemInputError",
    "elu1",
    "safe_normalize",
    "as_float_array",
    "check_same_shape",
    "check_scalar",
]


class SpecmemInputError(ValueError):
    """Bad input to a golden model or CLI command; the message names the argument."""


def elu1(x: np.ndarray) -> np.ndarray:
    """ELU+1 feature map: ``x + 1`` for ``x > 0`` else ``exp(x)`` (always positive)."""
    x = np.asarray(x, dtype=np.float64)
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def safe_normalize(x: np.ndarray, eps: float) -> np.ndarray:
    """``x / max(||x||, eps)`` along the last axis, as in VLA's Algorithm 1."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, eps)


def as_float_array(name: str, x, *, min_ndim: int = 2, last_dim: int | None = None) -> np.ndarray:
    """Return ``x`` as float64 ``[..., T, d]``; reject wrong rank, empty axes, NaN and Inf."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise SpecmemInputError(f"{name}: cannot convert to a float array ({exc})") from None
    if a.ndim < min_ndim:
        raise SpecmemInputError(
            f"{name}: expected at least {min_ndim} dimensions [..., T, d], got shape {a.shape}"
        )
    if any(s == 0 for s in a.shape):
        raise SpecmemInputError(f"{name}: empty array of shape {a.shape}")
    if last_dim is not None and a.shape[-1] != last_dim:
        raise SpecmemInputError(f"{name}: last dimension must be {last_dim}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        raise SpecmemInputError(f"{name}: contains NaN or Inf (first at index {tuple(int(i) for i in bad)})")
    return a


def check_same_shape(ref_name: str, ref: np.ndarray, **others: np.ndarray) -> None:
    """Require every array in ``others`` to have ``ref``'s shape."""
    for name, a in others.items():
        if a.shape != ref.shape:
            raise SpecmemInputError(f"{name}: shape {a.shape} does not match {ref_name} shape {ref.shape}")


def check_scalar(name: str, value, *, lo=None, hi=None, lo_open=False, hi_open=False, integer=False):
    """Validate a scalar parameter against a range; return it as float (or int)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise SpecmemInputError(f"{name}: expected a number, got {value!r}") from None
    if not np.isfinite(v):
        raise SpecmemInputError(f"{name}: must be finite, got {value!r}")
    if integer:
        if v != int(v):
            raise SpecmemInputError(f"{name}: expected an integer, got {value!r}")
        v = int(v)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise SpecmemInputError(f"{name}: must be {'>' if lo_open else '>='} {lo}, got {value!r}")
    if hi is not None and (v >= hi if hi_open else v > hi):
        raise SpecmemInputError(f"{name}: must be {'<' if hi_open else '<='} {hi}, got {value!r}")
    return v
