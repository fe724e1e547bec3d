"""Simulation helpers shared by the RTL tests: stream source/sink coroutines for Amaranth's
Python simulator (async testbenches) with optional random idle gaps and backpressure.

Both follow the ``amaranth.lib.stream`` rules: a source holds ``valid`` and ``payload`` until the
beat is accepted (``valid & ready`` at a clock edge) and never drops ``valid`` early; a sink may
toggle ``ready`` freely.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from amaranth.hdl import Cat, ClockDomain, Module
from amaranth.sim import Simulator

__all__ = ["stream_put", "stream_get", "stream_source", "stream_sink", "run_simulation", "axis_view",
           "with_sync_reset", "run_stalled_pipeline", "VectorBeats"]


async def stream_put(ctx, s, payload, *, rng: random.Random | None = None, idle: float = 0.0):
    """Send one beat on stream ``s``; with ``rng``, first wait a geometric number of idle cycles
    (each further cycle with probability ``idle``)."""
    if rng is not None:
        while rng.random() < idle:
            await ctx.tick()
    ctx.set(s.valid, 1)
    ctx.set(s.payload, payload)
    await ctx.tick().until(s.ready)
    ctx.set(s.valid, 0)


async def stream_get(ctx, s, *, rng: random.Random | None = None, stall: float = 0.0):
    """Receive one beat from stream ``s``; with ``rng``, hold ``ready`` low in each cycle with
    probability ``stall`` (random backpressure). Returns the payload as sampled at the transfer."""
    while True:
        ready = rng is None or rng.random() >= stall
        ctx.set(s.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(s.valid, s.payload)
        if ready and valid:
            ctx.set(s.ready, 0)
            return payload


def stream_source(s, payloads, *, seed: int | None = None, idle: float = 0.0):
    """A testbench coroutine that sends every payload in order (random idle gaps if ``seed``)."""
    rng = random.Random(seed) if seed is not None else None

    async def source(ctx):
        for p in payloads:
            await stream_put(ctx, s, p, rng=rng, idle=idle)
    return source


def stream_sink(s, count: int, into: list, *, seed: int | None = None, stall: float = 0.0, convert=None):
    """A testbench coroutine that receives ``count`` beats into ``into`` (random backpressure if
    ``seed``); ``convert`` maps each sampled payload (e.g. to plain ints) before storing."""
    rng = random.Random(seed) if seed is not None else None

    async def sink(ctx):
        for _ in range(count):
            p = await stream_get(ctx, s, rng=rng, stall=stall)
            into.append(convert(p) if convert is not None else p)
    return sink


def run_simulation(dut, *testbenches, processes=(), deadline_cycles: int = 100_000, vcd: str | None = None,
                   clock: bool = True):
    """Run ``dut`` with a 1 MHz ``sync`` clock (none for purely combinational designs with
    ``clock=False``) and the given async testbenches until all of them return; raise
    ``AssertionError`` if that takes more than ``deadline_cycles`` clock periods (a hang)."""
    sim = Simulator(dut)
    if clock:
        sim.add_clock(1e-6)
    for tb in testbenches:
        sim.add_testbench(tb)
    for p in processes:
        sim.add_process(p)

    async def watchdog(ctx):
        await ctx.delay(deadline_cycles * 1e-6)
        raise AssertionError(f"simulation did not finish within {deadline_cycles} cycles")
    sim.add_testbench(watchdog, background=True)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()


def axis_view(dut, prefix: str):
    """An AXI4-Stream port group (``<prefix>_tdata/tvalid/tready/tlast``) seen as a stream with
    ``payload = Cat(tdata, tlast)``, so :func:`stream_put` / :func:`stream_get` drive it."""
    return SimpleNamespace(
        valid=getattr(dut, f"{prefix}_tvalid"),
        ready=getattr(dut, f"{prefix}_tready"),
        payload=Cat(getattr(dut, f"{prefix}_tdata"), getattr(dut, f"{prefix}_tlast")),
        data_width=len(getattr(dut, f"{prefix}_tdata")),
    )


def with_sync_reset(dut):
    """Wrap ``dut`` with an explicit ``sync`` domain so a testbench can pulse its synchronous
    reset: returns ``(wrapper, rst)``."""
    m = Module()
    m.domains.sync = cd = ClockDomain("sync")
    m.submodules.dut = dut
    return m, cd.rst


def run_stalled_pipeline(dut, beats, *, stall: float = 0.0, seed: int = 0, drive=None, after=None) -> list:
    """Feed ``beats`` (``(valid, payload)``) through a block whose registers all advance while ``en``
    is high (``en``, ``i_valid``, ``i_data[k]``, ``o_valid``, ``o_data[k]``), with ``en`` low on a
    random ``stall`` fraction of cycles; return the ``o_data`` of every valid output, in order.

    ``drive(ctx, payload)`` sets the inputs (default: ``payload`` is the ``k`` lane values);
    ``after(ctx)`` (async) runs once the outputs are in, with ``en`` high and no valid input."""
    rng = random.Random(seed)
    want = sum(v for v, _ in beats)
    outs = []

    def lanes(ctx, payload):
        for lane, val in enumerate(payload):
            ctx.set(dut.i_data[lane], val)

    drive = drive or lanes

    async def bench(ctx):
        i = cycles = 0
        while len(outs) < want:
            en = rng.random() >= stall
            ctx.set(dut.en, en)
            if i < len(beats):
                v, payload = beats[i]
                ctx.set(dut.i_valid, v)
                drive(ctx, payload)
            else:
                ctx.set(dut.i_valid, 0)
            await ctx.tick()
            cycles += 1
            if en:
                i += 1
                if ctx.get(dut.o_valid):
                    outs.append([ctx.get(dut.o_data[lane]) for lane in range(dut.k)])
            if cycles > 20 * len(beats) + 100:
                raise AssertionError("pipeline did not drain")
        ctx.set(dut.en, 1)
        ctx.set(dut.i_valid, 0)
        if after is not None:
            await after(ctx)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return outs


class VectorBeats:
    """Collects the vectors a streaming unit puts out as ``beats`` beats of ``lanes`` elements
    (``o_valid``, ``o_first``, ``o_last``, ``o_data``, ``o_frac``), checking the framing flags:
    ``got`` holds ``(elements, frac)`` per finished vector."""

    def __init__(self, lanes: int, beats: int):
        self.lanes, self.n = lanes, lanes * beats
        self.cur: list[int] = []
        self.got: list[tuple[list[int], int]] = []

    def take(self, ctx, dut) -> None:
        """Read one advancing cycle's outputs (call after the tick)."""
        if not ctx.get(dut.o_valid):
            return
        assert ctx.get(dut.o_first) == (len(self.cur) == 0), "o_first off its vector's first beat"
        self.cur += [ctx.get(dut.o_data[lane]) for lane in range(self.lanes)]
        assert ctx.get(dut.o_last) == (len(self.cur) == self.n), "o_last off its vector's last beat"
        if len(self.cur) == self.n:
            self.got.append((self.cur, ctx.get(dut.o_frac)))
            self.cur = []


def token_beats(vectors, t: int, k: int) -> list:
    """Token ``t`` of the scaled cores as its beats: ``vectors`` are ``(raw [T, d], frac [T])``
    pairs in port order (``k``, ``v``, ``q``); each beat ``(k lanes, the vector's exponent)``."""
    return [(X[t, b * k:(b + 1) * k], int(f[t])) for X, f in vectors for b in range(X.shape[1] // k)]


def take_output(cur: list, outs: list, fracs: list, sampled, ready, d: int) -> None:
    """One sampled cycle of a scaled core's output port (``sampled``: ``o_valid``, ``o_first``,
    ``o_last``, ``o_data``, ``o_frac``; ``ready``: the ``o_ready`` driven): a taken beat's
    elements go to ``cur``, checked against the first/last flags; a finished vector moves to
    ``outs`` and its exponent to ``fracs``."""
    ov, of, ol, od, ofr = sampled
    if ov and ready:
        assert of == (len(cur) == 0)
        cur += [int(x) for x in od]
        assert ol == (len(cur) == d)
        if ol:
            outs.append(list(cur))
            fracs.append(int(ofr))
            cur.clear()


async def send_beats(ctx, dut, beats, rng, idle: float = 0.0):
    """Send ``beats`` on ``dut``'s ``i_valid`` / ``i_ready`` / ``i_data`` / ``i_frac`` / ``i_flush``
    (a beat of ``None`` is a flush), each after random idle cycles (``idle`` per beat)."""
    for beat in beats:
        while rng.random() < idle:
            ctx.set(dut.i_valid, 0)
            await ctx.tick()
        ctx.set(dut.i_valid, 1)
        ctx.set(dut.i_flush, int(beat is None))
        if beat is not None:
            for lane, x in enumerate(beat[0]):
                ctx.set(dut.i_data[lane], int(x))
            ctx.set(dut.i_frac, beat[1])
        await ctx.tick().until(dut.i_ready)
    ctx.set(dut.i_valid, 0)
