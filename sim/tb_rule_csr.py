"""cocotb test of a rule's top behind its register block (``rtl/csr_top.py``'s ``RuleCSRTop``: VLA,
linear attention, DeltaNet, Gated DeltaNet) in Verilator: tokens stream in through cocotbext-axi's
``AxiStreamSource`` while its ``AxiLiteMaster`` reads the counters.

Expected values are counts the testbench makes itself (tokens sent, tlast errors injected, VLA's
refreshes from its refresh period), never read from the design: ``TOKENS``, ``FRAMING_ERRORS``,
``REFRESHES`` (VLA), ``ORTH_INPUTS`` = 0, the output beats, ``STATUS.busy`` falling once the stream
is through; ``CTRL.clear_counters`` zeroes the registers, ``CTRL.soft_reset`` restarts the core.
"""

from __future__ import annotations

import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp, AxiStreamBus, AxiStreamFrame, AxiStreamSink, \
    AxiStreamSource

from specmem.sim.axis import CLOCK_PERIOD_NS, quiet_cocotbext
from specmem.sim.tbcase import Record, load_case

CASE = load_case()
RM = CASE.get("regmap", {"registers": []})
REGS = {r["name"]: r["offset"] for r in RM["registers"]}
RECORD = Record()
MAGIC = 0x534D454D  # "SMEM": hand-written


async def _setup(dut):
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    quiet_cocotbext(dut._name)   # the stream loggers; the AXI4-Lite master's below
    logging.getLogger(f"cocotb.{dut._name}.s_axil").setLevel(logging.WARNING)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_size=CASE["x_width"])
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_size=CASE["o_width"])
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    return master, src, sink


async def _read(master, name):
    resp = await master.read(REGS[name], 4)
    assert resp.resp == AxiResp.OKAY, (name, resp.resp)
    return int.from_bytes(resp.data, "little")


async def _write(master, name, value):
    resp = await master.write(REGS[name], value.to_bytes(4, "little"))
    assert resp.resp == AxiResp.OKAY, (name, resp.resp)


async def _send(src, rng, n_tokens, early=()):
    """``n_tokens`` tokens of random elements; a token in ``early`` goes as two frames split one beat
    before its end: its second-to-last beat carries tlast, the one beat whose tlast is wrong."""
    k, bpt, w = CASE["k"], CASE["beats_per_token"], CASE["x_width"]
    for t in range(n_tokens):
        elems = [rng.randint(-40, 40) & ((1 << w) - 1) for _ in range(k * bpt)]
        if t in early:
            await src.send(AxiStreamFrame(elems[:k * (bpt - 1)]))
            await src.send(AxiStreamFrame(elems[k * (bpt - 1):]))
        else:
            await src.send(AxiStreamFrame(elems))
    await src.wait()


async def _drain(dut, master, sink, beats):
    """Every output beat in, then STATUS.busy low (the core idle)."""
    got = 0
    for _ in range(200000):
        while not sink.empty():
            frame = sink.recv_nowait()
            got += len(frame.tdata) // CASE["k"]
        if got >= beats and not (await _read(master, "STATUS")) & 1:
            return got
        await ClockCycles(dut.clk, 8)
    raise AssertionError(f"{got} of {beats} output beats, or busy did not fall")


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def counters_clear_and_soft_reset(dut):
    master, src, sink = await _setup(dut)
    rng = random.Random(CASE.get("seed", 0))
    out_bpt, rp = CASE["out_beats_per_token"], CASE.get("refresh_period")
    rec = {}
    assert await _read(master, "ID") == MAGIC
    assert await _read(master, "PARAMS_DK") == (CASE["k"] << 16) | CASE["d"]
    assert (await _read(master, "PARAMS_CORE")) & 0xFF == CASE["core_code"]
    await _send(src, rng, 3, early=(1,))
    rec["beats"] = await _drain(dut, master, sink, 3 * out_bpt)
    assert rec["beats"] == 3 * out_bpt, rec
    rec["tokens"] = await _read(master, "TOKENS")
    rec["framing_errors"] = await _read(master, "FRAMING_ERRORS")
    assert (rec["tokens"], rec["framing_errors"]) == (3, 1), rec
    assert await _read(master, "ORTH_INPUTS") == 0
    if rp:  # one refresh at the last token of each period: tokens 0..2
        rec["refreshes"] = await _read(master, "REFRESHES")
        assert rec["refreshes"] == 3 // rp, rec
    await _write(master, "CTRL", 0b10)                      # clear the counters
    assert (await _read(master, "TOKENS"), await _read(master, "FRAMING_ERRORS")) == (0, 0)
    await _send(src, rng, 2)
    await _drain(dut, master, sink, 2 * out_bpt)
    assert await _read(master, "TOKENS") == 2
    if rp:
        assert await _read(master, "REFRESHES") == 5 // rp - 3 // rp
    await _write(master, "CTRL", 0b01)                      # soft reset: the core restarts from zero
    await ClockCycles(dut.clk, 4)
    assert await _read(master, "TOKENS") == 0
    await _send(src, rng, 1)
    await _drain(dut, master, sink, out_bpt)
    rec["after_reset"] = await _read(master, "TOKENS")
    assert rec["after_reset"] == 1
    assert await _read(master, "FRAMING_ERRORS") == 0
    RECORD.save("counters_clear_and_soft_reset", rec)
