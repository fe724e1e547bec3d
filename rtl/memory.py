"""State memory for the Gram factor ``U`` (``d x k``): one RAM bank per lane, depth ``d``.

Bank ``l`` holds column ``l`` of ``U``; all banks share the row address, so one access moves a
whole row ``U[i, :]`` (one element per lane), which is what both passes of the annihilation step
need (the reduction pass reads rows, the fused row pass reads row ``i`` while writing back an
earlier row). Per-lane write enables let warm-up write a single column.

Ports (one synchronous read port and one write port per bank, shared addresses):
- read: ``rd_addr``, ``rd_en``; ``rd_data`` (``k`` signed words) is valid one cycle after ``rd_en``
  and holds its value while ``rd_en`` is low. A read of the row being written in the same cycle
  returns the old contents (read-before-write; the row pass never needs otherwise).
- write: ``wr_addr``, ``wr_en`` (lane mask, ``k`` bits), ``wr_data`` (``k`` signed words).

RAM contents are not touched by reset; the core clears them itself after reset.

``out_reg=True`` reads through the RAM's output register (``hardware.md``, "Timing
discipline"): ``rd_data`` is valid two cycles after ``rd_en`` (:attr:`latency`). ``style``
``"behavioural"`` writes it as ``lib.memory`` plus a register (simulation, portable);
``"ecp5"`` instantiates one ``DP16KD`` column per bank with ``REGMODE_B = "OUTREG"``
(:class:`~specmem.rtl.bram.RegisteredRAM`; Yosys does not absorb the register itself).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .bram import BRAM_STYLES, RegisteredRAM

__all__ = ["StateMemory"]


class StateMemory(wiring.Component):
    """``k`` banks of ``d`` signed ``width``-bit words (``U`` column ``l`` in bank ``l``).

    ``init`` (optional, ``d x k`` nested sequence of ints) preloads the banks, for tests.
    The banks are :attr:`banks` (``amaranth.lib.memory.Memory``); a simulator testbench can read
    ``ctx.get(mem.banks[l].data[i])``.
    """

    def __init__(self, d: int, k: int, width: int, *, init=None, out_reg: bool = False, style: str = "behavioural"):
        for name, v, lo in (("d", d, 1), ("k", k, 1), ("width", width, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if style not in BRAM_STYLES:
            raise ValueError(f"bram: must be one of {', '.join(BRAM_STYLES)}, got {style!r}")
        if style == "ecp5" and init is not None:
            raise ValueError("init: only the behavioural style takes initial contents (tests)")
        self.d, self.k, self.width = d, k, width
        self.style = style
        self.out_reg = bool(out_reg) or style == "ecp5"
        #: cycles from ``rd_en`` to ``rd_data``
        self.latency = 2 if self.out_reg else 1
        #: the ``ecp5`` style's RAMs (one per bank; they check the depth)
        self.rams = [RegisteredRAM(d, width, "ecp5") for _ in range(k)] if style == "ecp5" else []
        self.row_layout = data.ArrayLayout(signed(width), k)
        cols = [[0] * d for _ in range(k)]
        if init is not None:
            if len(init) != d or any(len(row) != k for row in init):
                raise ValueError(f"init: must be {d} rows of {k} values")
            for i, row in enumerate(init):
                for l, v in enumerate(row):
                    cols[l][i] = int(v)
        self.banks = ([memory.Memory(shape=signed(width), depth=d, init=cols[l]) for l in range(k)]
                      if style == "behavioural" else [])
        super().__init__({
            "rd_addr": In(range(d)),
            "rd_en": In(1),
            "rd_data": Out(self.row_layout),
            "wr_addr": In(range(d)),
            "wr_en": In(k),
            "wr_data": In(self.row_layout),
        })

    def elaborate(self, platform):
        m = Module()
        for l, ram in enumerate(self.rams):
            m.submodules[f"ram{l}"] = ram
            m.d.comb += [ram.rd_addr.eq(self.rd_addr), ram.rd_en.eq(self.rd_en), ram.rd_oce.eq(1),
                         self.rd_data[l].eq(ram.rd_data), ram.wr_addr.eq(self.wr_addr), ram.wr_en.eq(self.wr_en[l]),
                         ram.wr_data.eq(self.wr_data[l])]
        if self.rams:
            return m
        for l, bank in enumerate(self.banks):
            m.submodules[f"bank{l}"] = bank
            rp = bank.read_port(domain="sync")
            wp = bank.write_port(domain="sync")
            m.d.comb += [
                rp.addr.eq(self.rd_addr),
                rp.en.eq(self.rd_en),
                wp.addr.eq(self.wr_addr),
                wp.en.eq(self.wr_en[l]),
                wp.data.eq(self.wr_data[l]),
            ]
            if self.out_reg:
                out = Signal(signed(self.width), name=f"rd_reg{l}", reset_less=True)
                m.d.sync += out.eq(rp.data)
                m.d.comb += self.rd_data[l].eq(out)
            else:
                m.d.comb += self.rd_data[l].eq(rp.data)
        return m
