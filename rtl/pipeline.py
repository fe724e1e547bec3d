"""Pipeline-register helpers shared by the pipelined blocks: every register of a block advances
together while its enable is high (a pipeline-wide stall), so a block builds them through one
function instead of each writing its own."""

from __future__ import annotations

from amaranth.hdl import Signal

__all__ = ["stage_register", "register_chain", "tree4_levels"]


def stage_register(m, en):
    """``reg(value, shape, name)``: a ``sync`` register of ``shape`` loading ``value`` while ``en`` is high."""
    def reg(value, shape, name):
        r = Signal(shape, name=name)
        with m.If(en):
            m.d.sync += r.eq(value)
        return r
    return reg


def register_chain(m, sig, shape, n: int, name: str):
    """``sig`` through ``n`` free-running ``sync`` registers named ``{name}_d1`` .. ``{name}_dn``:
    the tags (valid, address, phase) that ride beside a fixed-latency pipeline."""
    for i in range(n):
        r = Signal(shape, name=f"{name}_d{i + 1}")
        m.d.sync += r.eq(sig)
        sig = r
    return sig


def tree4_levels(n: int) -> int:
    """Registered levels of a tree that combines four terms per level over ``n`` leaves (the OR
    trees of the normalisers, the saturation-count trees): ``ceil(log4 n)``, 0 for one leaf."""
    levels = 0
    while n > 1:
        n = -(-n // 4)
        levels += 1
    return levels
