"""A small driver and monitor for ``amaranth.lib.stream`` ports (``<p>__valid``, ``<p>__ready``,
``<p>__payload``), for the directed testbenches of the engine and the scalar unit, whose ports
are Amaranth streams rather than AXI4-Stream (cocotbext-axi's bus classes expect the AXI names).

Same rules and timing convention as cocotbext-axi: both sample the handshake right after a rising
edge (the values that edge saw), so a transfer is stamped with the edge at which it happened. The
driver holds ``valid`` and the payload until the beat is taken and inserts random idle gaps only
between beats; the sink drives ``ready`` low with probability ``stall`` per cycle.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.triggers import Event, RisingEdge

from .axis import now_cycles

__all__ = ["pack", "unpack", "StreamDriver", "StreamMonitor"]


def pack(fields: list[dict], values: dict) -> int:
    """A payload word from ``{field name: int}`` and the manifest's field list (LSB first)."""
    word = 0
    for f in fields:
        v = int(values.get(f["name"], 0))
        word |= (v & ((1 << f["width"]) - 1)) << f["lsb"]
    return word


def unpack(fields: list[dict], word: int) -> dict:
    out = {}
    for f in fields:
        v = (word >> f["lsb"]) & ((1 << f["width"]) - 1)
        if f["signed"] and v >> (f["width"] - 1):
            v -= 1 << f["width"]
        out[f["name"]] = v
    return out


class StreamDriver:
    """Sends payload words on stream ``prefix`` with random idle gaps (probability ``idle``)."""

    def __init__(self, dut, prefix: str, clock, *, rng: random.Random, idle: float = 0.0):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clock, self.rng, self.idle = clock, rng, idle
        self.queue: deque[int] = deque()
        self.sent_cycles: list[int] = []
        self.valid.value = 0
        self.empty = Event()
        cocotb.start_soon(self._run())

    def send(self, words) -> None:
        self.queue.extend(int(w) for w in words)
        self.empty.clear()

    async def _run(self):
        busy = False
        while True:
            await RisingEdge(self.clock)
            if busy and int(self.ready.value):
                busy = False
                self.sent_cycles.append(now_cycles())
            if not busy:
                if self.queue and not (self.idle > 0 and self.rng.random() < self.idle):
                    self.payload.value = self.queue.popleft()
                    self.valid.value = 1
                    busy = True
                else:
                    self.valid.value = 0
                    if not self.queue:
                        self.empty.set()


class StreamMonitor:
    """Records the transfers on stream ``prefix``: passive, or as the sink driving ``ready``
    (low with probability ``stall`` per cycle). ``items`` holds ``(cycle, word)``; ``callback``
    (if given) sees each word as it is taken."""

    def __init__(self, dut, prefix: str, clock, *, sink: bool, rng: random.Random | None = None,
                 stall: float = 0.0, callback=None):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.clock, self.sink, self.stall = clock, sink, stall
        self.rng = rng or random.Random(0)
        self.items: list[tuple[int, int]] = []
        self.callback = callback
        self.event = Event()
        if sink:
            self.ready.value = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        ready = False
        while True:
            await RisingEdge(self.clock)
            took = int(self.valid.value) and (ready if self.sink else int(self.ready.value))
            if took:
                word = int(self.payload.value)
                self.items.append((now_cycles(), word))
                if self.callback is not None:
                    self.callback(word)
                self.event.set()
            if self.sink:
                ready = not (self.stall > 0 and self.rng.random() < self.stall)
                self.ready.value = int(ready)
