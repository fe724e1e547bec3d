"""``rtl/uart.py`` in Amaranth's simulator: the transmitter's waveform against a bit-level 8N1
model (start 0, data LSB first, stop 1, ``divisor`` cycles each), the receiver against bytes
serialised by the same model, back to back, with bad stop bits, glitches and odd divisors."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from specmem.rtl.uart import UARTRx, UARTTx, check_divisor

DIVISORS = [4, 5, 7, 16]


def frame(byte: int, stop: int = 1) -> list[int]:
    """The line levels of one 8N1 frame, one entry per bit."""
    return [0] + [(byte >> i) & 1 for i in range(8)] + [stop]


def waveform(frames: list[tuple[int, int, int]], divisor: int) -> list[int]:
    """Per-cycle line levels: ``(idle bits before, byte, stop level)`` for each frame."""
    levels = [1] * (2 * divisor)
    for gap, byte, stop in frames:
        levels += [1] * gap * divisor
        for b in frame(byte, stop):
            levels += [b] * divisor
    return levels + [1] * (3 * divisor)


@pytest.mark.parametrize("divisor", DIVISORS)
def test_tx_waveform(divisor):
    rng = random.Random(divisor)
    data = [rng.randrange(256) for _ in range(12)] + [0x00, 0xFF, 0x55]
    dut = UARTTx(divisor)
    seen: list[int] = []

    async def source(ctx):
        for i, byte in enumerate(data):
            if i % 4 == 3:                       # a few idle cycles now and then
                for _ in range(rng.randrange(1, 3 * divisor)):
                    await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, byte)
            await ctx.tick().until(dut.i.ready)
            ctx.set(dut.i.valid, 0)

    async def line(ctx):
        while True:
            seen.append(ctx.get(dut.tx))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(line, background=True)
    sim.add_testbench(source)
    sim.run_until(1e-6 * (len(data) * 12 * divisor + 200))
    # decode the recorded line: each falling edge starts a frame of exactly 10 * divisor cycles
    got, i, widths = [], 0, set()
    while i < len(seen):
        if seen[i] == 0:
            bits = [seen[i + j * divisor + divisor // 2] for j in range(10)]
            assert bits[0] == 0 and bits[9] == 1, bits
            # every bit is held for exactly divisor cycles
            for j in range(10):
                assert len(set(seen[i + j * divisor: i + (j + 1) * divisor])) == 1
            got.append(sum(b << k for k, b in enumerate(bits[1:9])))
            i += 10 * divisor
        else:
            i += 1
    assert got == data
    assert seen[0] == 1


def _run_rx(divisor: int, levels: list[int]):
    dut = UARTRx(divisor)
    got, errors = [], []

    async def bench(ctx):
        for lv in levels:
            ctx.set(dut.rx, lv)
            await ctx.tick()
            if ctx.get(dut.o.valid):
                got.append(ctx.get(dut.o.payload))
            if ctx.get(dut.framing_error):
                errors.append(len(got))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got, errors


@pytest.mark.parametrize("divisor", DIVISORS)
def test_rx_random_bytes_back_to_back_and_gaps(divisor):
    rng = random.Random(100 + divisor)
    frames = [(rng.choice([0, 0, 1, 3]), rng.randrange(256), 1) for _ in range(40)]
    got, errors = _run_rx(divisor, waveform(frames, divisor))
    assert got == [b for _, b, _ in frames]
    assert errors == []


@pytest.mark.parametrize("divisor", [4, 7])
def test_rx_bad_stop_bit_is_a_framing_error(divisor):
    """A 0 stop bit: no byte, one error pulse; the bytes around it arrive."""
    frames = [(0, 0xA5, 1), (1, 0x3C, 0), (1, 0x81, 1), (0, 0x00, 0), (2, 0x7E, 1)]
    got, errors = _run_rx(divisor, waveform(frames, divisor))
    assert got == [0xA5, 0x81, 0x7E]
    assert errors == [1, 2]               # after the first and the second delivered byte


def test_rx_held_low_line_is_one_error():
    d = 5
    levels = [1] * 10 + [0] * (40 * d) + [1] * (2 * d) + waveform([(0, 0x42, 1)], d)
    got, errors = _run_rx(d, levels)
    assert got == [0x42] and errors == [0]


def test_rx_glitch_is_not_a_start_bit():
    """A low pulse shorter than half a bit: ignored."""
    d = 8
    levels = [1] * 10 + [0] * 2 + [1] * (3 * d) + waveform([(0, 0x99, 1)], d)
    got, errors = _run_rx(d, levels)
    assert got == [0x99] and errors == []


@pytest.mark.parametrize("divisor", [4, 6])
def test_loopback(divisor):
    """tx wired to rx: every byte comes back, at full rate."""
    from amaranth.hdl import Module

    m = Module()
    m.submodules.tx = tx = UARTTx(divisor)
    m.submodules.rx = rx = UARTRx(divisor)
    m.d.comb += rx.rx.eq(tx.tx)
    data = list(range(0, 256, 7)) + [255]
    got = []

    async def source(ctx):
        for b in data:
            ctx.set(tx.i.valid, 1)
            ctx.set(tx.i.payload, b)
            await ctx.tick().until(tx.i.ready)
        ctx.set(tx.i.valid, 0)

    async def sink(ctx):
        while len(got) < len(data):
            await ctx.tick()
            if ctx.get(rx.o.valid):
                got.append(ctx.get(rx.o.payload))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(source, background=True)
    sim.add_testbench(sink)
    sim.run()
    assert got == data


def test_divisor_is_checked():
    for bad in (3, 0, 4.5, True):
        with pytest.raises(ValueError, match="divisor"):
            check_divisor(bad)
    assert check_divisor(4) == 4
