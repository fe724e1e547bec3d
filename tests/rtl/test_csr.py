"""``rtl/csr.py`` in Amaranth's simulator: the register map's layout against hand-written
constants, and the AXI4-Lite block (ID and parameters, counters with clear and soft reset, write
strobes, SLVERR for unmapped addresses, AW/W in either order, one transaction outstanding).
The Verilator run with cocotbext-axi's master is ``tests/sim/test_csr.py``."""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from specmem.rtl.csr import CSRBlock, Field, Register, RegisterMap, core_register_map, register_map

OKAY, SLVERR = 0, 2


def _test_map():
    return register_map("annihilation", 64, 8, "legacy-int16", heads=2,
                        status=(("busy", 1, "busy"), ("orth_flag", 1, "flag"), ("count", 4, "count")),
                        extra_counters=(("framing_errors", "framing"),), orth_policies=("skip", "evict"))


# ---------------------------------------------------------------------------------------------
# the description


def test_layout_hand_constants():
    rm = _test_map()
    offsets = {r.name: r.offset for r in rm.registers}
    assert offsets == {"ID": 0x00, "VERSION": 0x04, "PARAMS_DK": 0x08, "PARAMS_CORE": 0x0C, "CTRL": 0x10,
                       "CONFIG": 0x14, "SCRATCH": 0x18, "STATUS": 0x20, "TOKENS": 0x40, "SATURATIONS": 0x44,
                       "ORTH_INPUTS": 0x48, "FRAMING_ERRORS": 0x4C}
    assert rm["ID"].reset == 0x534D454D                     # "SMEM"
    assert rm["VERSION"].reset == 0x0001_0001               # 1.1 (1.0 + the gated-deltanet core code)
    assert rm["PARAMS_DK"].reset == (8 << 16) | 64
    # core 1 (annihilation), format 2 (legacy-int16), 2 heads, 4 counters
    assert rm["PARAMS_CORE"].reset == 0x04_02_02_01
    assert rm["CONFIG"].field("orth_policy").reset == 0      # skip, the first policy given
    assert [(f.name, f.lsb, f.width) for f in rm["STATUS"].fields] == [("busy", 0, 1), ("orth_flag", 1, 1),
                                                                          ("count", 2, 4)]
    assert rm["CTRL"].field("clear_counters").mask == 0b10


def test_core_maps():
    a = core_register_map("annihilation", 16, 4)
    assert "CONFIG" not in a  # today's annihilation core has one policy (skip and flag)
    assert a["STATUS"].field("count").width == 3           # range(k + 1) for k = 4
    v = core_register_map("vla", 16, 4)
    assert [r.name for r, _ in v.counters] == ["TOKENS", "SATURATIONS", "ORTH_INPUTS", "REFRESHES", "FRAMING_ERRORS"]
    assert v["PARAMS_CORE"].reset & 0xFF == 2


@pytest.mark.parametrize("bad, msg", [
    (lambda: register_map("annihilation", 16, 4, "int4"), "format"),
    (lambda: register_map("annihilation", 0, 4, "legacy-int8"), "d:"),
    (lambda: register_map("nope", 16, 4, "legacy-int8"), "core"),
    (lambda: register_map("vla", 16, 4, "legacy-int8", extra_counters=(("tokens", "again"),)), "named twice"),
    (lambda: Register("X", 0, "", (Field("a", 0, 8, "const"), Field("b", 4, 8, "const"))), "overlaps"),
    (lambda: Register("X", 2, "", ()), "multiple of 4"),
    (lambda: RegisterMap("m", "", (Register("X", 0x100, "", ()),), addr_width=8), "outside"),
    (lambda: Field("p", 0, 2, "pulse", port="p"), "one bit"),
])
def test_bad_descriptions(bad, msg):
    with pytest.raises(ValueError, match=msg):
        bad()


# ---------------------------------------------------------------------------------------------
# the block, driven as an AXI4-Lite master would


async def _wait_handshake(ctx, valid, ready):
    ctx.set(valid, 1)
    while True:
        rdy = ctx.get(ready)
        await ctx.tick()
        if rdy:
            break
    ctx.set(valid, 0)


async def axil_write(ctx, dut, addr, data, strb=0xF, order="together", gap=0):
    ctx.set(dut.s_axil_awaddr, addr)
    ctx.set(dut.s_axil_wdata, data)
    ctx.set(dut.s_axil_wstrb, strb)
    if order == "together":
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wvalid, 1)
        pending = {"aw", "w"}
        while pending:
            aw = "aw" in pending and ctx.get(dut.s_axil_awready)
            w = "w" in pending and ctx.get(dut.s_axil_wready)
            await ctx.tick()
            if aw:
                pending.discard("aw")
                ctx.set(dut.s_axil_awvalid, 0)
            if w:
                pending.discard("w")
                ctx.set(dut.s_axil_wvalid, 0)
    else:
        first, second = (("aw", "w") if order == "aw_first" else ("w", "aw"))
        await _wait_handshake(ctx, getattr(dut, f"s_axil_{first}valid"), getattr(dut, f"s_axil_{first}ready"))
        for _ in range(gap):
            # the held channel is not accepted again, and no response comes before the other one
            assert not ctx.get(getattr(dut, f"s_axil_{first}ready")) and not ctx.get(dut.s_axil_bvalid)
            await ctx.tick()
        await _wait_handshake(ctx, getattr(dut, f"s_axil_{second}valid"), getattr(dut, f"s_axil_{second}ready"))
    ctx.set(dut.s_axil_bready, 1)
    while True:
        bv, resp = ctx.get(dut.s_axil_bvalid), ctx.get(dut.s_axil_bresp)
        await ctx.tick()
        if bv:
            break
    ctx.set(dut.s_axil_bready, 0)
    return resp


async def axil_read(ctx, dut, addr):
    ctx.set(dut.s_axil_araddr, addr)
    await _wait_handshake(ctx, dut.s_axil_arvalid, dut.s_axil_arready)
    ctx.set(dut.s_axil_rready, 1)
    while True:
        rv, data, resp = ctx.get(dut.s_axil_rvalid), ctx.get(dut.s_axil_rdata), ctx.get(dut.s_axil_rresp)
        await ctx.tick()
        if rv:
            break
    ctx.set(dut.s_axil_rready, 0)
    return data, resp


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_id_params_and_status():
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        expect = {0x00: 0x534D454D, 0x04: 0x0001_0001, 0x08: 0x0008_0040, 0x0C: 0x0402_0201,
                  0x14: 0, 0x18: 0, 0x20: 0}
        for addr, want in expect.items():
            assert await axil_read(ctx, dut, addr) == (want, OKAY), hex(addr)
        assert await axil_read(ctx, dut, 0x10) == (0, OKAY)        # CTRL: pulses read 0
        ctx.set(dut.status_busy, 1)
        ctx.set(dut.status_count, 0b1011)
        assert await axil_read(ctx, dut, 0x20) == ((0b1011 << 2) | 1, OKAY)
        ctx.set(dut.status_orth_flag, 1)
        assert await axil_read(ctx, dut, 0x20) == ((0b1011 << 2) | 0b11, OKAY)

    _run(dut, bench)


def test_counters_clear_and_soft_reset():
    dut = CSRBlock(_test_map())
    ports = ["counter_tokens", "counter_saturations", "counter_orth_inputs", "counter_framing_errors"]

    async def bench(ctx):
        vals = [100, 0xFFFF_FFF0, 7, 3]
        for p, v in zip(ports, vals):
            ctx.set(getattr(dut, p), v)
        for i, v in enumerate(vals):
            assert await axil_read(ctx, dut, 0x40 + 4 * i) == (v, OKAY)
        # clear: the pulse is high for exactly one cycle, then counters read from 0
        ctx.set(dut.s_axil_awaddr, 0x10)
        ctx.set(dut.s_axil_wdata, 0b10)
        ctx.set(dut.s_axil_wstrb, 0xF)
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wvalid, 1)
        ctx.set(dut.s_axil_bready, 1)
        seen = []
        for _ in range(6):
            await ctx.tick()
            ctx.set(dut.s_axil_awvalid, 0)
            ctx.set(dut.s_axil_wvalid, 0)
            seen.append((ctx.get(dut.ctrl_clear_counters), ctx.get(dut.ctrl_soft_reset)))
        ctx.set(dut.s_axil_bready, 0)
        assert [c for c, _ in seen].count(1) == 1 and not any(s for _, s in seen)
        for i in range(4):
            assert await axil_read(ctx, dut, 0x40 + 4 * i) == (0, OKAY)
        # the core counts on: 0xFFFFFFF0 + 0x20 wraps to 0x10; the register reads 0x20
        for p, v in zip(ports, [105, 0x10, 9, 3]):
            ctx.set(getattr(dut, p), v)
        assert [await axil_read(ctx, dut, 0x40 + 4 * i) for i in range(4)] == [(5, OKAY), (0x20, OKAY),
                                                                               (2, OKAY), (0, OKAY)]
        # soft reset: one pulse; the core's counters restart at 0 and so do the registers
        assert await axil_write(ctx, dut, 0x10, 0b01) == OKAY
        for p in ports:
            ctx.set(getattr(dut, p), 0)
        assert await axil_read(ctx, dut, 0x40) == (0, OKAY)
        ctx.set(dut.counter_tokens, 4)
        assert await axil_read(ctx, dut, 0x40) == (4, OKAY)

    _run(dut, bench)


def test_soft_reset_pulse_one_cycle_and_strobe_gated():
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        # bit 0 in byte 0 written with strobe 0b1110: no pulse
        highs = 0

        async def write_and_count(data, strb):
            nonlocal highs
            ctx.set(dut.s_axil_awaddr, 0x10)
            ctx.set(dut.s_axil_wdata, data)
            ctx.set(dut.s_axil_wstrb, strb)
            ctx.set(dut.s_axil_awvalid, 1)
            ctx.set(dut.s_axil_wvalid, 1)
            ctx.set(dut.s_axil_bready, 1)
            highs = 0
            for _ in range(6):
                await ctx.tick()
                ctx.set(dut.s_axil_awvalid, 0)
                ctx.set(dut.s_axil_wvalid, 0)
                highs += ctx.get(dut.ctrl_soft_reset)
            ctx.set(dut.s_axil_bready, 0)
            return highs

        assert await write_and_count(0b01, 0b1110) == 0
        assert await write_and_count(0b01, 0b0001) == 1
        assert await write_and_count(0b00, 0b1111) == 0

    _run(dut, bench)


def test_write_strobes_and_config():
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        assert await axil_write(ctx, dut, 0x18, 0x11223344) == OKAY
        assert await axil_read(ctx, dut, 0x18) == (0x11223344, OKAY)
        assert await axil_write(ctx, dut, 0x18, 0xAABBCCDD, strb=0b0101) == OKAY
        assert await axil_read(ctx, dut, 0x18) == (0x11BB33DD, OKAY)
        assert await axil_write(ctx, dut, 0x18, 0xEEFF0000, strb=0b1000) == OKAY
        assert await axil_read(ctx, dut, 0x18) == (0xEEBB33DD, OKAY)
        assert await axil_write(ctx, dut, 0x18, 0, strb=0) == OKAY        # no byte enabled: no change
        assert await axil_read(ctx, dut, 0x18) == (0xEEBB33DD, OKAY)
        assert ctx.get(dut.config_orth_policy) == 0
        assert await axil_write(ctx, dut, 0x14, 0xFFFF_FFFF) == OKAY      # only bit 0 is stored
        assert await axil_read(ctx, dut, 0x14) == (1, OKAY)
        assert ctx.get(dut.config_orth_policy) == 1

    _run(dut, bench)


def test_unmapped_and_read_only():
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        for addr in (0x1C, 0x24, 0x3C, 0x50, 0xFC):
            assert await axil_read(ctx, dut, addr) == (0, SLVERR), hex(addr)
        assert await axil_write(ctx, dut, 0x50, 0x1234) == SLVERR
        assert await axil_write(ctx, dut, 0x1C, 0x1234) == SLVERR
        # a write to a read-only register: OKAY, no effect
        assert await axil_write(ctx, dut, 0x00, 0) == OKAY
        assert await axil_read(ctx, dut, 0x00) == (0x534D454D, OKAY)
        # low address bits are ignored: 0x1B reads SCRATCH (0x18)
        assert await axil_write(ctx, dut, 0x1A, 0xCAFE) == OKAY
        assert await axil_read(ctx, dut, 0x1B) == (0xCAFE, OKAY)

    _run(dut, bench)


@pytest.mark.parametrize("order, gap", [("aw_first", 0), ("aw_first", 3), ("w_first", 0), ("w_first", 4),
                                        ("together", 0)])
def test_aw_w_in_any_order(order, gap):
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        assert await axil_write(ctx, dut, 0x18, 0x5A5A0000 | gap, order=order, gap=gap) == OKAY
        assert await axil_read(ctx, dut, 0x18) == (0x5A5A0000 | gap, OKAY)

    _run(dut, bench)


def test_one_write_outstanding():
    """While B waits for bready, neither AW nor W is accepted; the next write goes through after."""
    dut = CSRBlock(_test_map())

    async def bench(ctx):
        ctx.set(dut.s_axil_awaddr, 0x18)
        ctx.set(dut.s_axil_wdata, 1)
        ctx.set(dut.s_axil_wstrb, 0xF)
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wvalid, 1)
        await ctx.tick()                                   # both accepted at this edge
        ctx.set(dut.s_axil_wdata, 2)                       # a second write offered at once
        for _ in range(5):
            await ctx.tick()
            assert ctx.get(dut.s_axil_bvalid)
            assert not ctx.get(dut.s_axil_awready) and not ctx.get(dut.s_axil_wready)
        ctx.set(dut.s_axil_bready, 1)
        await ctx.tick()                                   # first B taken
        pending = {"aw", "w"}
        for _ in range(10):
            aw = "aw" in pending and ctx.get(dut.s_axil_awready)
            w = "w" in pending and ctx.get(dut.s_axil_wready)
            await ctx.tick()
            if aw:
                pending.discard("aw")
                ctx.set(dut.s_axil_awvalid, 0)
            if w:
                pending.discard("w")
                ctx.set(dut.s_axil_wvalid, 0)
            if not pending:
                break
        assert not pending
        for _ in range(10):
            if ctx.get(dut.s_axil_bvalid):
                break
            await ctx.tick()
        assert ctx.get(dut.s_axil_bvalid) and ctx.get(dut.s_axil_bresp) == OKAY
        await ctx.tick()
        ctx.set(dut.s_axil_bready, 0)
        assert await axil_read(ctx, dut, 0x18) == (2, OKAY)

    _run(dut, bench)


def test_verilog_lints_clean(tmp_path):
    """``verilator --lint-only -Wall`` with the project waivers: no warning, with and without CONFIG."""
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    for n, rm in enumerate((_test_map(), core_register_map("vla", 16, 4))):
        path = tmp_path / f"csr{n}.v"
        path.write_text(verilog.convert(CSRBlock(rm), name=f"csr{n}"))
        res = lint(path)
        assert res.returncode == 0 and not res.warnings, res.output[-2000:]
