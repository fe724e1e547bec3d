"""Small elaboration helpers shared by the cores that keep k-lane vectors in memories.

``LaneHelpers(m, k, dk)`` binds a module, the lane count and the beats per vector; its methods
build a k-lane vector memory, a combinational read, a lane select and two address helpers.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, memory

__all__ = ["LaneHelpers", "lane_helpers"]


class LaneHelpers:
    """Per-elaboration helpers for k-lane vectors (``dk`` beats of ``k`` elements)."""

    def __init__(self, m: Module, k: int, dk: int):
        self.m, self.k, self.dk = m, k, dk

    def vec(self, name, shape, depth, granular=False):
        """A memory of ``depth`` k-lane words, added to the module; returns (memory, write port)."""
        # a depth of 2 at least: a one-word memory would have a zero-width address port
        mem = memory.Memory(shape=data.ArrayLayout(shape, self.k), depth=max(depth, 2), init=[])
        self.m.submodules[name] = mem
        return mem, mem.write_port(granularity=1 if granular else None)

    def rd(self, mem, addr):
        """A combinational read of ``mem`` at ``addr``."""
        port = mem.read_port(domain="comb")
        self.m.d.comb += port.addr.eq(addr)
        return port.data

    def sel(self, word, idx, shape, name):
        """Lane ``idx`` of an ``ArrayLayout`` word."""
        out = Signal(shape, name=name)
        if self.k == 1:
            self.m.d.comb += out.eq(word[0])
            return out
        with self.m.Switch(idx):
            for lane in range(self.k):
                with self.m.Case(lane):
                    self.m.d.comb += out.eq(word[lane])
        return out

    def saddr(self, slot, a):
        """Address of beat ``a`` of vector ``slot``."""
        return slot * self.dk + a

    @staticmethod
    def incr(sig, top):
        """``sig + 1``, wrapping to 0 after ``top``."""
        return Mux(sig == top, 0, sig + 1)


def lane_helpers(m: Module, k: int, dk: int):
    """``(vec, rd, sel, saddr, incr)`` bound to ``m``: the names the cores' elaborate() uses."""
    h = LaneHelpers(m, k, dk)
    return h.vec, h.rd, h.sel, h.saddr, h.incr
