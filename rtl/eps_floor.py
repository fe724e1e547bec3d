"""The scaled models' floor ``max(1, rint(eps 2^f))`` of an exact integer at binary point ``f``,
as a table on ``f``: linear attention's ``den`` and VLA's ``delta`` take ``max(x, floor)`` before
the scalar unit, with ``f`` known at run time and ``eps`` a generic."""

from __future__ import annotations

import numpy as np

__all__ = ["eps_floor_table"]


def eps_floor_table(eps: float, width: int):
    """``(F0, rows)``: the model's floor ``max(1, rint(eps 2^f))`` is 1 for ``f <= F0`` and
    ``rows[f - F0 - 1]`` for ``F0 < f <= F0 + len(rows)``, every row below ``2^width``; beyond,
    the floor passes a ``width``-bit input."""
    def floor(f):
        return int(np.maximum(1, np.rint(np.ldexp(eps, f))))

    F0 = 0
    while floor(F0 + 1) == 1:
        F0 += 1
    while floor(F0) > 1:
        F0 -= 1
    rows, f = [], F0 + 1
    while floor(f) < (1 << width):
        rows.append(floor(f))
        f += 1
    return F0, rows
