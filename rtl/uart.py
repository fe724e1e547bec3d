"""UART transmitter and receiver, 8N1 (one start bit, eight data bits LSB first, one stop bit, no
parity), ``divisor`` clock cycles per bit: the serial link of the board build (``rtl/board.py``).

Both are registered: ``tx`` is a flip-flop, ``rx`` goes through a two-flop synchroniser before
any logic sees it. The receiver finds the start bit's falling edge, checks the start bit again at
its middle (a shorter low pulse is a glitch, ignored), then samples every bit at its middle; a
stop bit that reads 0 is a framing error (the byte is not delivered, ``framing_error`` pulses,
and the receiver waits for the line to go high again, so a held-low line is one error, not a
stream of 0x00 bytes). The receiver returns to idle at the middle of the stop bit, so bytes may
follow each other back to back.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UARTTx", "UARTRx", "check_divisor"]


def check_divisor(divisor) -> int:
    """Clock cycles per bit: an integer >= 4 (the receiver samples at ``divisor // 2``)."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 4:
        raise ValueError(f"divisor: clock cycles per bit must be an integer >= 4, got {divisor!r}")
    return divisor


class UARTTx(wiring.Component):
    """Serialises each byte accepted on ``i`` (a stream of 8-bit payloads) onto ``tx``; ``i.ready``
    is high while idle, so a byte offered the cycle the previous stop bit ends goes out next."""

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        shreg = Signal(10, init=0x3FF)          # stop, data[7:0], start: shifted out LSB first
        bits = Signal(range(11))                # bits left to send
        timer = Signal(range(self.divisor))
        m.d.comb += [self.tx.eq(shreg[0]), self.i.ready.eq(bits == 0)]
        with m.If(bits == 0):
            with m.If(self.i.valid):
                m.d.sync += [shreg.eq(Cat(0, self.i.payload, 1)), bits.eq(10), timer.eq(self.divisor - 1)]
        with m.Elif(timer == 0):
            m.d.sync += [shreg.eq(Cat(shreg[1:], 1)), bits.eq(bits - 1), timer.eq(self.divisor - 1)]
        with m.Else():
            m.d.sync += timer.eq(timer - 1)
        return m


class UARTRx(wiring.Component):
    """Deserialises ``rx`` into bytes on ``o`` (``o.valid`` is a one-cycle strobe: a UART cannot be
    held off, so there is no ``ready``); ``framing_error`` pulses for a byte whose stop bit is 0."""

    def __init__(self, divisor: int):
        self.divisor = check_divisor(divisor)
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8, always_ready=True)),
                          "framing_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        n = self.divisor
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(n))
        shreg = Signal(8)
        bit = Signal(range(8))
        m.d.sync += [self.o.valid.eq(0), self.framing_error.eq(0)]
        m.d.comb += self.o.payload.eq(shreg)
        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += timer.eq(n // 2 - 1)
                    m.next = "START"
            with m.State("START"):             # to the middle of the start bit
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):              # high again at the middle: a glitch
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += [timer.eq(n - 1), bit.eq(0)]
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [shreg.eq(Cat(shreg[1:], line)), bit.eq(bit + 1), timer.eq(n - 1)]
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(line):
                    m.d.sync += self.o.valid.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += self.framing_error.eq(1)
                    m.next = "BREAK"
            with m.State("BREAK"):             # after a framing error: wait for the idle level
                with m.If(line):
                    m.next = "IDLE"
        return m
