"""``rtl/csr_top.py``: the annihilation top (core v1 and core v2) and the other rules' tops (VLA,
linear attention, DeltaNet, Gated DeltaNet) behind their register blocks, in Amaranth's simulator.
Tokens stream through while the AXI4-Lite side reads the counters; clear and soft reset act on the
real core; the Verilog lints clean."""

from __future__ import annotations

import random

from amaranth.back import verilog
from amaranth.sim import Simulator

import pytest

from specmem.rtl.csr import CORE_CODES, FORMAT_CODES
from specmem.rtl.csr_top import AnnihilationCSRTop, RuleCSRTop
from specmem.rtl.testing import axis_view, stream_get, stream_put

from .test_csr import OKAY, axil_read, axil_write

TOKENS, FRAMING, STATUS, CTRL, PARAMS_CORE = 0x40, 0x4C, 0x20, 0x10, 0x0C


class _Stream:
    """Token beats into ``s_axis`` (``bpt`` a token, tlast on the last unless the beat is in
    ``wrong``), output beats counted from ``m_axis``, and a wait for STATUS.busy to fall."""

    def __init__(self, dut, k, xw, bpt, rng, element, max_cycles):
        self.dut, self.k, self.xw, self.bpt, self.rng, self.element = dut, k, xw, bpt, rng, element
        self.s_axis, self.m_axis = axis_view(dut, "s_axis"), axis_view(dut, "m_axis")
        self.max_cycles, self.beats = max_cycles, 0

    def word(self, last):
        xw = self.xw
        v = sum((self.element(self.rng) & ((1 << xw) - 1)) << (xw * l) for l in range(self.k))
        return v | (int(last) << (xw * self.k))

    async def send(self, ctx, n_tokens, wrong=()):
        for n in range(n_tokens * self.bpt):
            last = (n % self.bpt == self.bpt - 1) != (n in wrong)
            await stream_put(ctx, self.s_axis, self.word(last))

    async def idle(self, ctx, beats):
        for _ in range(self.max_cycles):
            if self.beats >= beats:
                status, _ = await axil_read(ctx, self.dut, STATUS)
                if not status & 1:  # STATUS.busy
                    return
            await ctx.tick()
        raise AssertionError("the core did not go idle")

    async def sink(self, ctx):
        while True:
            await stream_get(ctx, self.m_axis)
            self.beats += 1


@pytest.mark.parametrize("d,k,preset,heads", [(16, 4, "legacy-int8", 1), (16, 4, "int18", 1), (8, 2, "int8", 2)])
def test_counters_clear_and_soft_reset_on_the_core(d, k, preset, heads):
    """Core v1 and core v2 (one head, and two heads interleaved) behind the same register block."""
    dut = AnnihilationCSRTop(d, k, preset, heads=heads)
    assert dut.core_version == ("v1" if preset.startswith("legacy-") else "v2")
    bpt = d // k
    st = _Stream(dut, k, dut.top.core.fmt["x"].width, bpt, random.Random(7),
                 lambda r: r.choice([r.randint(-100, -1), r.randint(1, 100)]), 20000)
    send, idle, sink = st.send, st.idle, st.sink

    async def bench(ctx):
        assert await axil_read(ctx, dut, 0x00) == (0x534D454D, OKAY)
        assert await axil_read(ctx, dut, 0x08) == ((k << 16) | d, OKAY)
        core_word, _ = await axil_read(ctx, dut, PARAMS_CORE)
        assert (core_word & 0xFF, (core_word >> 8) & 0xFF, (core_word >> 16) & 0xFF) == (1, FORMAT_CODES[preset], heads)
        await send(ctx, 3, wrong=(1, 3))         # tlast early on beat 1 and missing on beat 3: 2 errors
        await idle(ctx, 3 * bpt)
        assert await axil_read(ctx, dut, TOKENS) == (3, OKAY)
        assert await axil_read(ctx, dut, FRAMING) == (2, OKAY)
        status, _ = await axil_read(ctx, dut, STATUS)
        # STATUS.count: head 0's stored directions (tokens alternate between heads; k at most)
        assert status >> 2 == min(k, -(-3 // heads))
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


@pytest.mark.parametrize("make,tuser", [(lambda: AnnihilationCSRTop(16, 4), False),
                                         (lambda: RuleCSRTop("vla", 8, 2), True),
                                         (lambda: RuleCSRTop("gated-deltanet", 8, 2), False)],
                         ids=["annihilation", "vla", "gated-deltanet"])
def test_ports_and_lint(tmp_path, make, tuser):
    from specmem.rtl.generate import lint

    dut = make()
    names = set(dut.signature.members)
    assert {"s_axil_awaddr", "s_axil_rdata", "s_axis_tdata", "m_axis_tlast"} <= names
    assert ("m_axis_tuser" in names) == tuser   # VLA's block exponent passes through
    assert not any(n.startswith("status_") for n in names)
    assert dut.manifest()["registers"]["registers"][0]["name"] == "ID"
    path = tmp_path / "t.v"
    path.write_text(verilog.convert(dut, name="t"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.output[-2000:]


def test_core_options_go_to_the_core_that_takes_them():
    with pytest.raises(ValueError, match="heads: only the annihilation core v2"):
        AnnihilationCSRTop(16, 4, "legacy-int8", heads=2)
    with pytest.raises(ValueError, match="in_range: core v2"):
        AnnihilationCSRTop(16, 4, "int18", in_range=2.0)
    assert AnnihilationCSRTop(16, 4, "int18", heads=3, chains=2).top.core.heads == 3


# VLA with eta = 100: the constant saturates, so its saturation count starts at 1 (the elements do not)
@pytest.mark.parametrize("algo,d,k,params", [("vla", 8, 2, {"refresh_period": 2, "eta": 100.0}), ("linear", 8, 4, {}),
                                             ("deltanet", 8, 2, {}), ("gated-deltanet", 8, 4, {})])
def test_rule_tops_count_clear_and_soft_reset(algo, d, k, params):
    """Tokens stream through the real core; the counters read over AXI4-Lite follow it (framing
    errors from wrong tlast, VLA's refreshes: one per refresh_period tokens, the first at the
    period's last token), clear zeroes the registers, not the core; soft reset restarts the core."""
    dut = RuleCSRTop(algo, d, k, **params)
    bpt = 4 * (d // k) if algo == "vla" else dut.top.core.beats_per_token
    out_bpt = d // k
    # full-scale elements: the cores saturate, so SATURATIONS has a nonzero count to carry
    st = _Stream(dut, k, dut.top.x_width, bpt, random.Random(11), lambda r: r.choice([-128, 127, r.randint(-128, 127)]),
                 40000)
    send, idle, sink = st.send, st.idle, st.sink
    regs = {r.name: r.offset for r in dut.regmap.registers}
    assert (algo == "vla") == ("REFRESHES" in regs)

    async def read(ctx, name):
        v, resp = await axil_read(ctx, dut, regs[name])
        assert resp == OKAY
        return v

    async def bench(ctx):
        assert await read(ctx, "ID") == 0x534D454D
        assert await read(ctx, "PARAMS_DK") == (k << 16) | d
        core_word = await read(ctx, "PARAMS_CORE")
        assert (core_word & 0xFF, (core_word >> 8) & 0xFF) == (CORE_CODES[algo], FORMAT_CODES["legacy-int8"])
        await send(ctx, 3, wrong=(1, bpt + 2))   # tlast early on two beats: 2 framing errors
        await idle(ctx, 3 * out_bpt)
        assert await read(ctx, "TOKENS") == 3
        assert await read(ctx, "FRAMING_ERRORS") == 2
        assert await read(ctx, "ORTH_INPUTS") == 0
        sats = ctx.get(dut.top.status_saturations)   # the core's count: checked against the model elsewhere
        assert sats > 0 and await read(ctx, "SATURATIONS") == sats
        if algo == "vla":
            assert await read(ctx, "REFRESHES") == 1     # tokens 0, 1, 2 with refresh_period 2
        assert await axil_write(ctx, dut, regs["CTRL"], 0b10) == OKAY       # clear counters
        assert await read(ctx, "TOKENS") == 0
        assert await read(ctx, "FRAMING_ERRORS") == 0
        assert ctx.get(dut.top.status_tokens) == 3                          # the core keeps counting
        await send(ctx, 1)
        await idle(ctx, 4 * out_bpt)
        assert await read(ctx, "TOKENS") == 1
        if algo == "vla":
            assert await read(ctx, "REFRESHES") == 1     # token 3 ends the second period
        assert await axil_write(ctx, dut, regs["CTRL"], 0b01) == OKAY       # soft reset: the core restarts
        for _ in range(3):
            await ctx.tick()
        assert ctx.get(dut.top.status_tokens) == 0
        assert await read(ctx, "TOKENS") == 0
        await send(ctx, 2)
        await idle(ctx, 6 * out_bpt)
        assert await read(ctx, "TOKENS") == 2
        assert await read(ctx, "FRAMING_ERRORS") == 0

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(bench)
    sim.run()


def test_rule_top_rejects_what_it_does_not_build():
    with pytest.raises(ValueError, match="algo: one of vla"):
        RuleCSRTop("annihilation", 8, 2)
    with pytest.raises(ValueError, match="format: the vla RTL with a register block implements .*the scaled vla core "
                                         "in 'int8' has no register block yet"):
        RuleCSRTop("vla", 8, 2, "int8")
