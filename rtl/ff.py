"""Flip-flops that synthesis keeps apart: copies of one register, each driving part of a fanout.

Yosys merges flip-flops with the same input and clock (``opt_merge``, whatever ``keep`` says), so a
register copied to split a wide fanout folds back into one net. On ECP5 a ``TRELLIS_FF`` instance
is a cell Yosys does not merge (simulated in Verilator through ``rtl/vendor/TRELLIS_FF.v``; the
Amaranth simulator cannot run it, so the portable style, plain registers, is what block tests
use). The reset tree's branches (:mod:`~specmem.rtl.reset_tree`) and the pass's select copies
(:mod:`~specmem.rtl.delta_pass`) and the scaled VLA core's feed-counter copies are built here.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Signal

__all__ = ["FF_STYLES", "trellis_ff", "replicas"]

#: ``registers``: plain ``sync`` registers (merged by synthesis); ``ecp5``: ``TRELLIS_FF`` cells
FF_STYLES = ("registers", "ecp5")


def trellis_ff(m, name: str, domain: str, di, q) -> None:
    """``q`` <= ``di`` on ``domain``'s clock in a ``TRELLIS_FF`` cell named ``{name}_ff`` (clock
    enable on, no set/reset, power-up 0: the configuration the Verilator model checks)."""
    m.submodules[f"{name}_ff"] = Instance(
        "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
        p_REGSET="RESET", p_SRMODE="LSR_OVER_CE",
        i_CLK=ClockSignal(domain), i_LSR=Const(0, 1), i_DI=di, o_Q=q)


def replicas(m, sig, n: int, name: str, style: str = "registers"):
    """``n`` registered copies of ``sig`` (one cycle later), each to drive its share of a fanout;
    with ``style="ecp5"`` one ``TRELLIS_FF`` per bit so that synthesis keeps the copies apart."""
    if style not in FF_STYLES:
        raise ValueError(f"style: must be one of {', '.join(FF_STYLES)}, got {style!r}")
    out = []
    for c in range(n):
        q = Signal(len(sig), name=f"{name}_c{c}", reset_less=True)
        if style == "ecp5":
            for b in range(len(sig)):
                trellis_ff(m, f"{name}_c{c}_{b}", "sync", sig[b], q[b])
        else:
            m.d.sync += q.eq(sig)
        out.append(q)
    return out
