"""cocotb testbench of the board design (``rtl/board.py``'s :class:`BoardTop`: UART bridge, the
annihilation top, its register block) in Verilator, driven at the pins.

:class:`PinTransport` is a :class:`~specmem.board.Transport` that serialises bytes onto
``uart_rx`` and deserialises ``uart_tx`` (8N1, the build's ``divisor`` clock cycles per bit, each
bit sampled at its middle, a bad stop bit recorded), so ``host/board.py``'s :class:`BoardLink`,
:func:`run_stream` and :func:`check_against_model`, the code ``specmem board run`` runs against
the real board, drive the simulated one. The case (from ``tests/sim/test_board.py``) gives the
raw input tokens; what the board answered goes to the record, for the test to compare with the
golden model on its own as well.
"""

from __future__ import annotations

import copy

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer

from specmem.board import (BoardError, BoardLink, BoardMismatch, BoardTimeout, Transport, check_against_model,
                           check_identity, expected_outputs, run_stream)
from specmem.sim.axis import CLOCK_PERIOD_NS
from specmem.sim.tbcase import Record, load_case

CASE = load_case()
MANIFEST = CASE.get("manifest", {})
RECORD = Record()


class PinTransport(Transport):
    """Bytes as UART frames on the design's pins; ``read`` gives up after ``timeout_bytes`` byte
    times without a complete reply (:class:`BoardTimeout`, as the serial port's timeout)."""

    def __init__(self, dut, divisor: int, timeout_bytes: int = 400):
        self.dut, self.bit_ns = dut, divisor * CLOCK_PERIOD_NS
        self.timeout_bytes = timeout_bytes
        self.buffer = bytearray()
        self.stop_errors = 0
        self.sent = self.received = 0
        dut.uart_rx.value = 1
        cocotb.start_soon(self._receive())

    async def write(self, data: bytes) -> None:
        await FallingEdge(self.dut.clk)
        for byte in data:
            for level in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                self.dut.uart_rx.value = level
                await Timer(self.bit_ns, "ns")
            self.sent += 1

    async def _receive(self):
        tx = self.dut.uart_tx
        while True:
            await FallingEdge(tx)
            await Timer(self.bit_ns // 2, "ns")             # middle of the start bit
            if int(tx.value):
                continue                                   # not a start bit
            byte = 0
            for i in range(8):
                await Timer(self.bit_ns, "ns")
                byte |= int(tx.value) << i
            await Timer(self.bit_ns, "ns")
            if not int(tx.value):
                self.stop_errors += 1
            self.buffer.append(byte)
            self.received += 1

    async def read(self, n: int) -> bytes:
        waited = 0
        while len(self.buffer) < n:
            if waited >= self.timeout_bytes:
                raise BoardTimeout(f"simulated board: no answer within {self.timeout_bytes} byte times "
                                   f"({len(self.buffer)} of {n} bytes)")
            await Timer(10 * self.bit_ns, "ns")
            waited += 1
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out


class CorruptingTransport(Transport):
    """A mutant link: flips bit ``bit`` of data byte ``byte`` of the ``beat``-th output beat read
    (counting READ replies that carried a beat: flags bit 0 set), as a bad cable or a broken bridge
    would; everything else passes through."""

    def __init__(self, inner: Transport, nb_out: int, beat: int, byte: int, bit: int):
        self.inner, self.nb_out, self.beat, self.byte, self.bit = inner, nb_out, beat, byte, bit
        self.beats = 0
        self.last_command = b""

    async def write(self, data: bytes) -> None:
        self.last_command = data
        await self.inner.write(data)

    async def read(self, n: int) -> bytes:
        data = bytearray(await self.inner.read(n))
        if self.last_command[:1] == b"\x20" and n == 1 + self.nb_out and data[0] & 1:
            if self.beats == self.beat:
                data[1 + self.byte] ^= 1 << self.bit
            self.beats += 1
        return bytes(data)


async def _setup(dut):
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    dut.uart_rx.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)
    br = MANIFEST["bridge"]
    pins = PinTransport(dut, br["divisor"])
    return pins, BoardLink(pins, br["nb_in"], br["nb_out"])


def _tokens(name: str) -> np.ndarray:
    return np.array(CASE[name], dtype=np.int64).reshape(-1, int(MANIFEST["parameters"]["d"]))


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def stream_and_check(dut):
    """The stream through the pins: outputs, tlast and counters equal the golden model."""
    pins, link = await _setup(dut)
    X = _tokens("tokens")
    hw = await run_stream(link, X, MANIFEST)
    verdict = None
    try:
        check_against_model(hw, expected_outputs(X, MANIFEST))
    except BoardMismatch as exc:
        verdict = str(exc)
    RECORD.save("stream_and_check", {
        "y_raw": hw["y_raw"].tolist(), "last": hw["last"].tolist(),
        **{n: int(hw[n]) for n in ("tokens", "saturations", "orth_count", "framing_errors", "count", "orth_flag",
                                   "busy")},
        "mismatch": verdict, "stop_errors": pins.stop_errors, "bytes_sent": pins.sent, "bytes_received": pins.received,
        "leds": int(dut.leds.value)})
    assert verdict is None, verdict
    assert pins.stop_errors == 0


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def corrupted_reply_is_named(dut):
    """A flipped bit in one reply byte: the check names the token and the element."""
    pins, _ = await _setup(dut)
    br = MANIFEST["bridge"]
    c = CASE["corrupt"]
    link = BoardLink(CorruptingTransport(pins, br["nb_out"], c["beat"], c["byte"], c["bit"]), br["nb_in"], br["nb_out"])
    X = _tokens("corrupt_tokens")
    hw = await run_stream(link, X, MANIFEST)
    try:
        check_against_model(hw, expected_outputs(X, MANIFEST))
        rec = {"mismatch": None}
    except BoardMismatch as exc:
        rec = {"mismatch": str(exc), "token": exc.token, "field": exc.field, "got": exc.got, "want": exc.want}
    RECORD.save("corrupted_reply_is_named", rec)
    assert rec["mismatch"] is not None


@cocotb.test(timeout_time=100, timeout_unit="ms")
async def refusals(dut):
    """A manifest with another k, an unknown opcode, an unmapped register: each a clear error."""
    pins, link = await _setup(dut)
    rec = {}
    other = copy.deepcopy(MANIFEST)
    other["parameters"]["k"] = int(MANIFEST["parameters"]["k"]) * 2
    try:
        await check_identity(link, other)
        rec["wrong_k"] = None
    except BoardError as exc:
        rec["wrong_k"] = str(exc)
    rec["identity"] = await check_identity(link, MANIFEST)
    await pins.write(bytes([0x7F]))
    rec["bad_opcode_reply"] = (await pins.read(1))[0]
    try:
        await link.csr_read(0xFC, "unmapped")
        rec["unmapped"] = None
    except BoardError as exc:
        rec["unmapped"] = str(exc)
    # the bridge still answers after all that
    rec["ping"] = list(await link.ping())
    # a reply that never comes (a READ with no bytes of reply expected is impossible; read past it)
    try:
        await pins.read(1)
        rec["silence"] = None
    except BoardTimeout as exc:
        rec["silence"] = str(exc)
    RECORD.save("refusals", rec)
