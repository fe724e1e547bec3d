# amaranth: UnusedElaboratable=no
"""``rtl/delay_line.py``: every style is a shift register of ``n`` stages that load while ``en`` is
high, checked in Amaranth's simulator against a Python list of the samples taken in advancing
cycles, under random stalls; the ring buffer never reads the word it writes; generics checked."""

import random

import pytest
from amaranth.sim import Simulator

from specmem.rtl.delay_line import DELAY_STYLES, MIN_RAM_DELAY, DelayLine


@pytest.mark.parametrize("style, fabric_out, n, p_en", [
    (style, fo, n, p)
    for style, fo in (("registers", False), ("behavioural", False), ("behavioural", True), ("lutram", False))
    for n, p in ((2, 0.7), (3, 1.0), (3, 0.6), (4, 1.0), (4, 0.6), (5, 0.7), (7, 0.5), (16, 0.9), (17, 1.0),
                 (25, 0.8), (32, 1.0), (34, 0.9))
    if n - fo >= (2 if style == "lutram" else 3)])
def test_output_is_the_input_n_advancing_cycles_ago(style, fabric_out, n, p_en):
    width = 13
    rng = random.Random(n * 7 + int(p_en * 10))
    dut = DelayLine(width, n, style, fabric_out=fabric_out)
    samples, errors, checked, collisions = [], [], 0, 0

    async def bench(ctx):
        nonlocal checked, collisions
        for cyc in range(400 + 4 * n):
            if len(samples) >= n:
                checked += 1
                if ctx.get(dut.o) != samples[-n]:
                    errors.append((cyc, ctx.get(dut.o), samples[-n]))
            en, v = rng.random() < p_en, rng.getrandbits(width)
            ctx.set(dut.en, int(en))
            ctx.set(dut.i, v)
            if style in ("behavioural", "ecp5") and en:
                ram = dut.ram
                collisions += ctx.get(ram.wr_addr) == ctx.get(ram.rd_addr)
            await ctx.tick()
            if en:
                samples.append(v)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert checked > 200 and not errors, errors[:5]
    assert collisions == 0


def test_ram_depth_and_costs():
    d = DelayLine(224, 23, "ecp5")
    assert d.depth == 32 and d.primitives == 13 and d.flip_flops == 10
    assert DelayLine(18, 3, "ecp5").depth == 2
    assert DelayLine(18, 4, "behavioural").depth == 4 and DelayLine(18, 4, "behavioural").primitives == 0
    assert DelayLine(10, 5).flip_flops == 50
    assert DelayLine(3, 3, "behavioural").depth == 2   # the shortest: the RAM and its two read registers
    f = DelayLine(224, 24, "ecp5", fabric_out=True)
    assert f.depth == 32 and f.flip_flops == 10 + 224
    lut = DelayLine(168, 12, "lutram")  # a block normaliser's wait: 2016 flip-flops as registers
    assert lut.depth == 16 and lut.flip_flops == 8 + 168 and lut.primitives == 0
    assert DelayLine(4, 16, "lutram").depth == 16 and DelayLine(4, 17, "lutram").depth == 32
    assert DelayLine(4, 2, "lutram").depth == 2


def test_lutram_pointers_never_meet():
    """The read pointer trails the write pointer by ``n - 1`` words in a ``depth >= n`` ring."""
    for n in range(2, 40):
        d = DelayLine(4, n, "lutram")
        assert d.depth >= n and (n - 1) % d.depth != 0


@pytest.mark.parametrize("kw, match", [
    (dict(width=0, n=3), "^width:"), (dict(width=4, n=0), "^n:"), (dict(width=4, n=True), "^n:"),
    (dict(width=4, n=MIN_RAM_DELAY - 1, style="ecp5"), "^n: a block-RAM"),
    (dict(width=4, n=MIN_RAM_DELAY, style="ecp5", fabric_out=True), "fabric output register"),
    (dict(width=4, n=5, style="srl"), "^style:"),
    (dict(width=4, n=1, style="lutram"), "^n: a distributed-RAM"),
    (dict(width=4, n=5, style="lutram", fabric_out=True), "^fabric_out:")])
def test_bad_generics(kw, match):
    with pytest.raises(ValueError, match=match):
        DelayLine(**kw)
    assert "registers" in DELAY_STYLES
