"""Validation of the generics every core and block shares (``d``, ``k``), one wording for all:
``name: must be ...`` so the CLI's one-line errors name the argument."""

from __future__ import annotations

__all__ = ["check_dims"]


def check_dims(d, k, *, divides: bool = True, k_le_d: bool = True) -> None:
    """``d`` and ``k`` positive integers; ``k <= d`` (``k_le_d``); ``k`` divides ``d`` (``divides``)."""
    for name, v in (("d", d), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
    if k_le_d and k > d:
        raise ValueError(f"k: must be <= d ({d}), got {k}")
    if divides and d % k:
        raise ValueError(f"d: must be a multiple of k ({k}), got {d}")
