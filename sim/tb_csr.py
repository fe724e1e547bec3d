"""cocotb test of the AXI4-Lite register block (``rtl/csr.py``'s ``CSRBlock``) in Verilator, driven
by cocotbext-axi's ``AxiLiteMaster``.

Expected values come from the register description in the case (``case["regmap"]``, the
``RegisterMap.to_dict()`` the block was elaborated from) and from hand-written constants (the
magic word, the SLVERR code). A protocol monitor runs beside every test: at most one write and
one read outstanding, ``bvalid``/``rvalid`` and their payloads held until the handshake.
"""

from __future__ import annotations

import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from specmem.sim.axis import CLOCK_PERIOD_NS
from specmem.sim.tbcase import Record, load_case

CASE = load_case()
RM = CASE.get("regmap", {"registers": [], "addr_width": 8})
REGS = {r["name"]: r for r in RM["registers"]}
RECORD = Record()
MAGIC = 0x534D454D  # "SMEM": hand-written, not read from the description


def _field(reg: str, name: str) -> dict:
    return next(f for f in REGS[reg]["fields"] if f["name"] == name)


def _word(data: bytes) -> int:
    return int.from_bytes(data, "little")


class Monitor:
    """Checks the slave's side of the protocol every cycle; ``errors`` lists violations."""

    def __init__(self, dut):
        self.dut = dut
        self.errors: list[str] = []
        self.counts = {"aw": 0, "w": 0, "b": 0, "ar": 0, "r": 0}
        self.pulses = {"ctrl_soft_reset": 0, "ctrl_clear_counters": 0}
        self.order = {"aw_first": 0, "w_first": 0, "together": 0}  # which channel of a write came first
        cocotb.start_soon(self._run())

    async def _run(self):
        d = self.dut
        held_b = held_r = None
        cyc = 0
        while True:
            await FallingEdge(d.clk)  # the master drives after the rising edge: values here decide the next edge
            cyc += 1
            if int(d.rst.value):
                continue
            for p in self.pulses:
                self.pulses[p] += int(getattr(d, p).value)
            bv, rv = int(d.s_axil_bvalid.value), int(d.s_axil_rvalid.value)
            b = (bv, int(d.s_axil_bresp.value))
            r = (rv, int(d.s_axil_rdata.value), int(d.s_axil_rresp.value))
            if held_b is not None and b != held_b:
                self.errors.append(f"cycle {cyc}: B changed {held_b} -> {b} before bready")
            if held_r is not None and r != held_r:
                self.errors.append(f"cycle {cyc}: R changed {held_r} -> {r} before rready")
            hs = {ch: int(getattr(d, f"s_axil_{ch}valid").value) and int(getattr(d, f"s_axil_{ch}ready").value)
                  for ch in self.counts}
            held_b = b if bv and not hs["b"] else None
            held_r = r if rv and not hs["r"] else None
            c = self.counts
            if hs["aw"] and hs["w"]:
                self.order["together"] += 1
            elif hs["aw"] and c["w"] == c["b"]:     # this write's W not in yet
                self.order["aw_first"] += 1
            elif hs["w"] and c["aw"] == c["b"]:
                self.order["w_first"] += 1
            for ch, h in hs.items():
                self.counts[ch] += bool(h)
            c = self.counts
            if c["aw"] - c["b"] > 1 or c["w"] - c["b"] > 1 or c["ar"] - c["r"] > 1:
                self.errors.append(f"cycle {cyc}: more than one transaction outstanding: {dict(c)}")
            if len(self.errors) > 20:
                break


async def _setup(dut, name: str):
    cocotb.start_soon(Clock(dut.clk, CLOCK_PERIOD_NS, unit="ns").start())
    for r in RM["registers"]:
        for f in r["fields"]:
            if f["access"] in ("status", "counter"):
                getattr(dut, f["port"]).value = 0
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    logging.getLogger(f"cocotb.{dut._name}.s_axil").setLevel(logging.WARNING)
    for ch in ("aw", "w", "b", "ar", "r"):
        logging.getLogger(f"cocotb.{dut._name}.s_axil.{ch}").setLevel(logging.WARNING)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    return master, Monitor(dut)


async def _read(master, addr):
    resp = await master.read(addr, 4)
    return _word(resp.data), resp.resp


async def _write(master, addr, value, nbytes=4):
    resp = await master.write(addr, value.to_bytes(4, "little")[addr % 4: addr % 4 + nbytes])
    return resp.resp


def _finish(name: str, mon: Monitor, errors: list[str], **extra):
    errors = errors + mon.errors
    RECORD.save(name, {"errors": errors[:20], "counts": dict(mon.counts), "order": dict(mon.order), **extra})
    assert not errors, errors[:5]


@cocotb.test(timeout_time=200, timeout_unit="us")
async def identification(dut):
    """Every register reads its reset value from the description; ID is the hand-written magic."""
    master, mon = await _setup(dut, "identification")
    errors = []
    for r in RM["registers"]:
        got, resp = await _read(master, r["offset"])
        if (got, resp) != (r["reset"], AxiResp.OKAY):
            errors.append(f"{r['name']} @ {r['offset']:#x}: read {got:#x} {resp!r}, expected {r['reset']:#x} OKAY")
    got, _ = await _read(master, REGS["ID"]["offset"])
    if got != MAGIC:
        errors.append(f"ID: {got:#x}")
    p = RM["params"]
    dk, _ = await _read(master, REGS["PARAMS_DK"]["offset"])
    if (dk & 0xFFFF, dk >> 16) != (p["d"], p["k"]):
        errors.append(f"PARAMS_DK {dk:#x} for d={p['d']}, k={p['k']}")
    _finish("identification", mon, errors)


@cocotb.test(timeout_time=200, timeout_unit="us")
async def counters_clear_and_soft_reset(dut):
    master, mon = await _setup(dut, "counters")
    errors = []
    counters = [r for r in RM["registers"] if r["fields"][0]["access"] == "counter"]
    rng = random.Random(CASE.get("seed", 0))
    vals = {r["name"]: rng.getrandbits(32) for r in counters}
    for r in counters:
        getattr(dut, r["fields"][0]["port"]).value = vals[r["name"]]
    for r in counters:
        got, resp = await _read(master, r["offset"])
        if (got, resp) != (vals[r["name"]], AxiResp.OKAY):
            errors.append(f"{r['name']}: {got:#x} {resp!r}, expected {vals[r['name']]:#x}")
    ctrl = REGS["CTRL"]["offset"]
    clear = 1 << _field("CTRL", "clear_counters")["lsb"]
    soft = 1 << _field("CTRL", "soft_reset")["lsb"]
    await _write(master, ctrl, clear)
    await ClockCycles(dut.clk, 2)
    if mon.pulses != {"ctrl_soft_reset": 0, "ctrl_clear_counters": 1}:
        errors.append(f"after clear: pulse cycles {mon.pulses}")
    for r in counters:
        got, _ = await _read(master, r["offset"])
        if got != 0:
            errors.append(f"{r['name']} after clear: {got:#x}")
    # the core counts on (wrapping at 2^32): each register reads the increment since the clear
    incs = {r["name"]: rng.randrange(1, 1000) for r in counters}
    for r in counters:
        getattr(dut, r["fields"][0]["port"]).value = (vals[r["name"]] + incs[r["name"]]) & 0xFFFF_FFFF
    for r in counters:
        got, _ = await _read(master, r["offset"])
        if got != incs[r["name"]]:
            errors.append(f"{r['name']} after clear + {incs[r['name']]}: {got:#x}")
    # soft reset: one pulse; the core's counters restart at 0, the registers with them
    await _write(master, ctrl, soft)
    for r in counters:
        getattr(dut, r["fields"][0]["port"]).value = 0
    await ClockCycles(dut.clk, 2)
    if mon.pulses != {"ctrl_soft_reset": 1, "ctrl_clear_counters": 1}:
        errors.append(f"after soft reset: pulse cycles {mon.pulses}")
    first = counters[0]
    getattr(dut, first["fields"][0]["port"]).value = 3
    got, _ = await _read(master, first["offset"])
    if got != 3:
        errors.append(f"{first['name']} after soft reset: {got:#x}, expected 3")
    got, _ = await _read(master, ctrl)
    if got != 0:
        errors.append(f"CTRL reads {got:#x}, expected 0")
    # both bits in one write: one pulse each
    await _write(master, ctrl, soft | clear)
    await ClockCycles(dut.clk, 2)
    if mon.pulses != {"ctrl_soft_reset": 2, "ctrl_clear_counters": 2}:
        errors.append(f"after both: pulse cycles {mon.pulses}")
    if "STATUS" in REGS:
        val = 0
        for f in REGS["STATUS"]["fields"]:
            v = rng.getrandbits(f["width"])
            getattr(dut, f["port"]).value = v
            val |= v << f["lsb"]
        got, _ = await _read(master, REGS["STATUS"]["offset"])
        if got != val:
            errors.append(f"STATUS: {got:#x}, expected {val:#x}")
    _finish("counters_clear_and_soft_reset", mon, errors, pulses=dict(mon.pulses))


@cocotb.test(timeout_time=200, timeout_unit="us")
async def write_strobes(dut):
    """Byte and half-word writes to SCRATCH (cocotbext-axi sets wstrb from the address and length)."""
    master, mon = await _setup(dut, "strobes")
    errors = []
    a = REGS["SCRATCH"]["offset"]
    model = 0
    steps = [(0, 0x11223344, 4), (1, 0xAABBCCDD, 1), (2, 0x00EE0000, 1), (0, 0x99, 1), (2, 0x77660000, 2),
             (1, 0x00005500, 2), (3, 0xF0000000, 1)]
    for off, val, n in steps:
        if await _write(master, a + off, val, n) != AxiResp.OKAY:
            errors.append(f"write {a + off:#x}: not OKAY")
        mask = ((1 << (8 * n)) - 1) << (8 * off)
        model = (model & ~mask) | (val & mask)
        got, _ = await _read(master, a)
        if got != model:
            errors.append(f"after {n} byte(s) at +{off}: {got:#010x}, expected {model:#010x}")
    if model != 0xF0005599:  # the steps above, worked by hand
        errors.append(f"model {model:#x}")
    if "CONFIG" in REGS:
        f = REGS["CONFIG"]["fields"][0]
        await _write(master, REGS["CONFIG"]["offset"], 0xFFFF_FFFF)
        got, _ = await _read(master, REGS["CONFIG"]["offset"])
        want = ((1 << f["width"]) - 1) << f["lsb"]
        if got != want or int(getattr(dut, f["port"]).value) != (1 << f["width"]) - 1:
            errors.append(f"CONFIG after all ones: {got:#x}, expected {want:#x}")
    _finish("write_strobes", mon, errors)


@cocotb.test(timeout_time=400, timeout_unit="us")
async def unmapped_addresses(dut):
    """Every word of the window that maps no register: SLVERR, rdata 0, writes change nothing."""
    master, mon = await _setup(dut, "unmapped")
    errors = []
    mapped = {r["offset"] for r in RM["registers"]}
    unmapped = [a for a in range(0, 1 << RM["addr_width"], 4) if a not in mapped]
    a_s = REGS["SCRATCH"]["offset"]
    await _write(master, a_s, 0x5EED5EED)
    for a in unmapped:
        got, resp = await _read(master, a)
        if (got, resp) != (0, AxiResp.SLVERR):
            errors.append(f"read {a:#x}: {got:#x} {resp!r}, expected 0 SLVERR")
        if await _write(master, a, 0xFFFF_FFFF) != AxiResp.SLVERR:
            errors.append(f"write {a:#x}: not SLVERR")
    for r in RM["registers"]:
        if r["name"] in ("SCRATCH", "CTRL") or any(f["access"] in ("status", "counter") for f in r["fields"]):
            continue
        got, _ = await _read(master, r["offset"])
        if got != r["reset"]:
            errors.append(f"{r['name']} changed by unmapped writes: {got:#x}")
    got, _ = await _read(master, a_s)
    if got != 0x5EED5EED:
        errors.append(f"SCRATCH changed by unmapped writes: {got:#x}")
    # read-only registers: OKAY, unchanged
    if await _write(master, REGS["ID"]["offset"], 0) != AxiResp.OKAY:
        errors.append("write to ID: not OKAY")
    got, _ = await _read(master, REGS["ID"]["offset"])
    if got != MAGIC:
        errors.append(f"ID after a write: {got:#x}")
    _finish("unmapped_addresses", mon, errors, unmapped=len(unmapped))


@cocotb.parametrize(order=["w_first", "aw_first", "random"])
@cocotb.test(timeout_time=1000, timeout_unit="us")
async def channel_ordering(dut, order):
    """AW held back (W first), W held back (AW first), or random pauses on every channel with
    B/R backpressure; writes and reads issued concurrently by the master. SCRATCH and the model agree."""
    master, mon = await _setup(dut, f"ordering-{order}")
    rng = random.Random({"w_first": 1, "aw_first": 2, "random": 3}[order] + CASE.get("seed", 0))
    wr, rd = master.write_if, master.read_if

    def pauses(p):
        while True:
            yield rng.random() < p

    def hold(n):
        while True:
            for _ in range(n):
                yield True
            yield False

    if order == "w_first":
        wr.aw_channel.set_pause_generator(hold(3))
    elif order == "aw_first":
        wr.w_channel.set_pause_generator(hold(3))
    else:
        for ch in (wr.aw_channel, wr.w_channel, wr.b_channel, rd.ar_channel, rd.r_channel):
            ch.set_pause_generator(pauses(0.4))
    errors = []
    a = REGS["SCRATCH"]["offset"]
    # concurrent writes: the master queues them, the slave takes one at a time, in order
    values = [rng.getrandbits(32) for _ in range(12)]
    events = [master.init_write(a, v.to_bytes(4, "little")) for v in values]
    for e in events:
        await e.wait()
        if e.data.resp != AxiResp.OKAY:
            errors.append(f"write: {e.data.resp!r}")
    got, _ = await _read(master, a)
    if got != values[-1]:
        errors.append(f"SCRATCH {got:#x}, expected the last of the queued writes {values[-1]:#x}")
    # interleaved single writes and reads, each checked
    model = got
    for i in range(30):
        if rng.random() < 0.5:
            model = rng.getrandbits(32)
            if await _write(master, a, model) != AxiResp.OKAY:
                errors.append(f"write {i}: not OKAY")
        else:
            got, resp = await _read(master, a)
            if (got, resp) != (model, AxiResp.OKAY):
                errors.append(f"read {i}: {got:#x} {resp!r}, expected {model:#x}")
    # concurrent reads of several registers
    reads = [(r, master.init_read(r["offset"], 4)) for r in RM["registers"]
             if r["fields"][0]["access"] == "const"]
    for r, e in reads:
        await e.wait()
        if _word(e.data.data) != r["reset"]:
            errors.append(f"{r['name']}: {_word(e.data.data):#x}")
    _finish(f"channel_ordering/order={order}", mon, errors, writes=mon.counts["b"], reads=mon.counts["r"])
