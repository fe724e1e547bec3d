"""``rtl/csr_top.py``: the annihilation top behind its register block, in Amaranth's simulator.
Tokens stream through while the AXI4-Lite side reads the counters; clear and soft reset act on
the real core; the Verilog lints clean."""

from __future__ import annotations

import random

from amaranth.back import verilog
from amaranth.sim import Simulator

from specmem.rtl.csr_top import AnnihilationCSRTop
from specmem.rtl.testing import axis_view, stream_get, stream_put

from .test_csr import OKAY, axil_read, axil_write

TOKENS, FRAMING, STATUS, CTRL = 0x40, 0x4C, 0x20, 0x10


def test_counters_clear_and_soft_reset_on_the_core():
    d, k = 16, 4
    dut = AnnihilationCSRTop(d, k)
    s_axis, m_axis = axis_view(dut, "s_axis"), axis_view(dut, "m_axis")
    xw = dut.top.core.fmt["x"].width
    bpt = d // k
    rng = random.Random(7)
    got = {"beats": 0}

    def word(last):
        v = sum((rng.choice([rng.randint(-100, -1), rng.randint(1, 100)]) & ((1 << xw) - 1)) << (xw * l)
                for l in range(k))
        return v | (int(last) << (xw * k))

    async def send(ctx, n_tokens, wrong=()):
        for n in range(n_tokens * bpt):
            last = (n % bpt == bpt - 1) != (n in wrong)
            await stream_put(ctx, s_axis, word(last))

    async def idle(ctx, beats):
        for _ in range(2000):
            if got["beats"] >= beats:
                status, _ = await axil_read(ctx, dut, STATUS)
                if not status & 1:  # STATUS.busy
                    return
            await ctx.tick()
        raise AssertionError("the core did not go idle")

    async def sink(ctx):
        while True:
            await stream_get(ctx, m_axis)
            got["beats"] += 1

    async def bench(ctx):
        assert await axil_read(ctx, dut, 0x00) == (0x534D454D, OKAY)
        assert await axil_read(ctx, dut, 0x08) == ((4 << 16) | 16, OKAY)
        await send(ctx, 3, wrong=(1, 3))         # tlast early on beat 1 and missing on beat 3: 2 errors
        await idle(ctx, 3 * bpt)
        assert await axil_read(ctx, dut, TOKENS) == (3, OKAY)
        assert await axil_read(ctx, dut, FRAMING) == (2, OKAY)
        status, _ = await axil_read(ctx, dut, STATUS)
        assert status >> 2 == 3                  # STATUS.count: three directions stored
        assert await axil_write(ctx, dut, CTRL, 0b10) == OKAY          # clear counters
        assert await axil_read(ctx, dut, TOKENS) == (0, OKAY)
        assert await axil_read(ctx, dut, FRAMING) == (0, OKAY)
        assert ctx.get(dut.top.status_tokens) == 3                     # the core itself keeps counting
        await send(ctx, 1)
        await idle(ctx, 4 * bpt)
        assert await axil_read(ctx, dut, TOKENS) == (1, OKAY)
        assert await axil_write(ctx, dut, CTRL, 0b01) == OKAY          # soft reset: the core restarts
        for _ in range(3):
            await ctx.tick()
        assert ctx.get(dut.top.status_tokens) == 0
        status, _ = await axil_read(ctx, dut, STATUS)
        assert status >> 2 == 0                                        # no stored directions
        assert await axil_read(ctx, dut, TOKENS) == (0, OKAY)
        await send(ctx, 2)
        await idle(ctx, 6 * bpt)
        assert await axil_read(ctx, dut, TOKENS) == (2, OKAY)
        assert await axil_read(ctx, dut, FRAMING) == (0, OKAY)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(bench)
    sim.run()


def test_ports_and_lint(tmp_path):
    from specmem.rtl.generate import lint

    dut = AnnihilationCSRTop(16, 4)
    names = set(dut.signature.members)
    assert {"s_axil_awaddr", "s_axil_rdata", "s_axis_tdata", "m_axis_tlast"} <= names
    assert not any(n.startswith("status_") for n in names)
    assert dut.manifest()["registers"]["registers"][0]["name"] == "ID"
    path = tmp_path / "specmem_annihilation_csr.v"
    path.write_text(verilog.convert(dut, name="specmem_annihilation_csr"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.output[-2000:]
