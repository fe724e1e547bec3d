"""A reset tree for a core: each block reset from a flip-flop of its own, one cycle after ``rst``.

The domain reset of an Amaranth design is one net to every flip-flop with a reset value: on the
ECP5-85F, 2,379 of them in the scaled DeltaNet core at d = 32, k = 4, a 11.6 ns route from the
shell's reset register that set its fmax at 79.5 MHz (``docs/hardware.md``). Here the core's own
logic (``ctl``) and each block it adds run in a reset-less local domain ``tree`` on the same clock,
and each is reset through Amaranth's ``ResetInserter`` by a *branch*: a register of ``rst``, so
the shell's reset drives one flip-flop per block and each branch only its block's flip-flops.

Every branch is one register deep, so the whole core is reset together, one cycle late: a reset
held for cycles ``c .. c + L - 1`` resets every register at the edges ending ``c + 1 .. c + L``.
While ``rst`` or the gate branch is high (:attr:`ResetTree.quiet`) the core must neither take nor
give a beat (its state is about to be cleared): the core gates its ``i_ready`` and output
``*_valid`` ports with it.

Yosys merges identical flip-flops (``opt_merge``, whatever ``keep`` says on the wires:
``rtl/lane_control.py``), which would fold every branch back into one net; with ``style="ecp5"``
each branch is a ``TRELLIS_FF`` instance (:func:`~specmem.rtl.ff.trellis_ff`, simulated in Verilator
through ``rtl/vendor/TRELLIS_FF.v``), which it does not merge. The portable style uses registers.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Module, ResetInserter, ResetSignal, Signal

from .ff import trellis_ff

__all__ = ["ResetTree", "RESET_STYLES", "TREE_DOMAIN"]

RESET_STYLES = ("registers", "ecp5")
#: the local domain the core runs in (reset-less: every reset comes from a branch)
TREE_DOMAIN = "tree"


class ResetTree:
    """Collects a core's blocks (:meth:`add`) and builds the core (:meth:`build`) with a branch
    per block and one for the core's own logic; :attr:`quiet` is high while a reset is pending."""

    #: cycles from ``rst`` to the registers' reset
    latency = 1

    def __init__(self, style: str = "registers"):
        if style not in RESET_STYLES:
            raise ValueError(f"style: must be one of {', '.join(RESET_STYLES)}, got {style!r}")
        self.style = style
        self.blocks: list[tuple[str, object]] = []
        self.quiet = Signal(name="rst_quiet")
        self._built = False

    def add(self, name: str, block):
        """``block`` becomes a submodule ``name`` of the core with a branch of its own."""
        if self._built:
            raise RuntimeError("ResetTree.add after build")
        if name == "ctl" or any(n == name for n, _ in self.blocks):
            raise ValueError(f"block name {name!r} is taken")
        self.blocks.append((name, block))
        return block

    def _branch(self, m: Module, name: str) -> Signal:
        """A flip-flop of ``rst`` in the tree's domain."""
        q = Signal(name=name, reset_less=True)
        if self.style == "ecp5":
            trellis_ff(m, name, TREE_DOMAIN, ResetSignal("sync"), q)
        else:
            m.d[TREE_DOMAIN] += q.eq(ResetSignal("sync"))
        return q

    def build(self, ctl: Module) -> Module:
        """The core: ``ctl`` (its own logic, written in ``sync``) and the blocks, each in the
        tree's domain behind its branch."""
        self._built = True
        m = Module()
        cd = ClockDomain(TREE_DOMAIN, local=True, reset_less=True)
        m.domains += cd
        m.d.comb += cd.clk.eq(ClockSignal("sync"))
        gate = self._branch(m, "rst_gate")
        m.d.comb += self.quiet.eq(ResetSignal("sync") | gate)
        for name, block in [("ctl", ctl)] + self.blocks:
            branch = self._branch(m, f"rst_{name}")
            m.submodules[name] = DomainRenamer({"sync": TREE_DOMAIN})(ResetInserter({"sync": branch})(block))
        return m
