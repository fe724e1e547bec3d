""":class:`~specmem.rtl.board.BoardTop` on the ULX3S-85F (LFE5U-85F, CABGA381, speed 6), through
amaranth-boards' ``ULX3S_85F_Platform``: the 25 MHz oscillator (G2) feeds an ECP5 PLL
(``EHXPLLL``) whose output clocks everything (the annihilation core closes timing at 8 to 22 MHz,
``docs/hardware.md``), held in reset until the PLL locks; the FTDI UART carries the protocol (FPGA
rx on M1 from the FTDI's TXD, FPGA tx on L4 to its RXD); LEDs 0..7 (B2 C2 C1 D2 D1 E2 E1 H3) show
what ``rtl/board.py`` says. The PLL's parameters come from ``ecppll`` (``host/board.py`` runs it);
the platform's tool variables (``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``) are pointed at the yowasp
wheels by ``host/board.py`` too.
"""

from __future__ import annotations

from amaranth.hdl import ClockDomain, Elaboratable, Instance, Module, Signal
from amaranth.lib import io
from amaranth.lib.cdc import ResetSynchronizer

from .board import BoardTop

__all__ = ["ULX3SBoard", "platform", "PINS"]

#: the pins used, as amaranth-boards 0.0.21's ``ulx3s.py`` assigns them (for the manifest and docs)
PINS = {"clk25 (to the PLL)": "G2", "uart_rx (from FTDI TXD)": "M1", "uart_tx (to FTDI RXD)": "L4",
        "leds[0..7]": "B2 C2 C1 D2 D1 E2 E1 H3"}


def platform():
    """amaranth-boards' ULX3S-85F platform with the open-source (Trellis) flow."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    return ULX3S_85F_Platform(toolchain="Trellis")


class ULX3SBoard(Elaboratable):
    """The board top on the ULX3S's pins. ``pll``: ``{"mhz": achieved output frequency,
    "params": {...}, "attrs": {...}}`` of an ``EHXPLLL`` with its feedback from CLKOP (as
    ``ecppll`` writes it); ``divisor`` counts cycles of that clock per UART bit."""

    pins = PINS

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, divisor: int, pll: dict):
        self.top = BoardTop(d, k, preset, divisor=divisor)
        self.pll = pll

    def elaborate(self, platform):
        m = Module()
        clk25 = platform.request("clk25", 0, dir="-")
        m.submodules.clk25_buf = clk25_buf = io.Buffer("i", clk25)
        m.domains.sync = cd = ClockDomain("sync")
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            **{f"a_{n}": v for n, v in self.pll["attrs"].items()},
            **{f"p_{n}": v for n, v in self.pll["params"].items()},
            i_CLKI=clk25_buf.i, o_CLKOP=cd.clk, i_CLKFB=cd.clk, o_LOCK=locked,
            i_RST=0, i_STDBY=0, i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0)
        m.submodules.reset = ResetSynchronizer(~locked, domain="sync")
        # no clock constraint here: nextpnr derives the PLL output's from the oscillator's (25 MHz)
        # and the PLL's dividers ("Derived frequency constraint of 12.5 MHz for net clk")
        m.submodules.top = top = self.top
        uart = platform.request("uart", 0, dir="-")
        m.submodules.rx_buf = rx_buf = io.Buffer("i", uart.rx)
        m.submodules.tx_buf = tx_buf = io.Buffer("o", uart.tx)
        m.d.comb += [top.uart_rx.eq(rx_buf.i), tx_buf.o.eq(top.uart_tx)]
        for i in range(8):
            m.submodules[f"led{i}_buf"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(top.leds[i])
        return m
