""":class:`~specmem.rtl.board.BoardTop` on the ULX3S-85F (LFE5U-85F, CABGA381, speed 6), through
amaranth-boards' ``ULX3S_85F_Platform``: the 25 MHz oscillator (G2) clocks everything, the FTDI
UART carries the protocol (FPGA rx on M1 from the FTDI's TXD, FPGA tx on L4 to its RXD), LEDs
0..7 (B2 C2 C1 D2 D1 E2 E1 H3) show what ``rtl/board.py`` says. The platform's tool variables
(``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``) are pointed at the yowasp wheels by ``host/board.py``.
"""

from __future__ import annotations

from amaranth.hdl import Elaboratable, Module

from .board import BoardTop

__all__ = ["ULX3SBoard", "platform", "PINS"]

#: the pins used, as amaranth-boards 0.0.21's ``ulx3s.py`` assigns them (for the manifest and docs)
PINS = {"clk25": "G2", "uart_rx (from FTDI TXD)": "M1", "uart_tx (to FTDI RXD)": "L4",
        "leds[0..7]": "B2 C2 C1 D2 D1 E2 E1 H3"}


def platform():
    """amaranth-boards' ULX3S-85F platform with the open-source (Trellis) flow."""
    from amaranth_boards.ulx3s import ULX3S_85F_Platform

    return ULX3S_85F_Platform(toolchain="Trellis")


class ULX3SBoard(Elaboratable):
    """The board top on the ULX3S's pins (``divisor`` cycles of the 25 MHz clock per UART bit)."""

    pins = PINS

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, divisor: int):
        self.top = BoardTop(d, k, preset, divisor=divisor)

    def elaborate(self, platform):
        m = Module()
        m.submodules.top = top = self.top
        uart = platform.request("uart", 0)
        m.d.comb += [top.uart_rx.eq(uart.rx.i), uart.tx.o.eq(top.uart_tx)]
        for i in range(8):
            m.d.comb += platform.request("led", i).o.eq(top.leds[i])
        return m
