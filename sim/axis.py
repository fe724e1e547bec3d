"""AXI4-Stream verification components for the annihilation top, built on cocotbext-axi.

cocotbext-axi 0.1.28 works under cocotb 2.1 (it still calls a few APIs cocotb 2 deprecates:
``setimmediatevalue``, ``Edge``, ``Task.kill``; they warn, nothing more), so its classes are used
as they are: :class:`TokenDriver` wraps ``AxiStreamSource`` (random idle gaps from a pause
generator), :class:`TokenMonitor` wraps ``AxiStreamMonitor`` (the input side, passive) or
``AxiStreamSink`` (the output side, random backpressure from a pause generator). One cocotbext
"byte" is one stream element (``byte_size`` = the element width), so the frame's element ``i``
sits in lane ``i % k`` of beat ``i // k``, the packing the manifest states.

Both monitors timestamp transfers at clock edges: a frame's ``sim_time_start`` / ``sim_time_end``
are the edges at which its first and last beats were accepted; :func:`cycles` turns them into
clock cycles.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass

import numpy as np

__all__ = ["random_pause", "to_unsigned", "to_signed", "TokenDriver", "TokenMonitor", "ObservedToken",
           "CLOCK_PERIOD_NS", "cycles", "now_cycles", "quiet_cocotbext"]

CLOCK_PERIOD_NS = 10


def cycles(sim_steps) -> int:
    """Clock cycles since time zero at a cocotb simulation time given in simulator steps."""
    from cocotb.simtime import convert

    return int(round(convert(sim_steps, "step", to="ns") / CLOCK_PERIOD_NS))


def now_cycles() -> int:
    """The current simulation time in clock cycles."""
    from cocotb.simtime import get_sim_time

    return int(round(get_sim_time("ns") / CLOCK_PERIOD_NS))


def random_pause(rng: random.Random, probability: float):
    """An endless pause pattern for cocotbext-axi: each cycle paused with ``probability`` (on a
    source: an idle gap, no beat offered; on a sink: ``tready`` low, backpressure)."""
    if probability <= 0:
        while True:
            yield False
    while True:
        yield rng.random() < probability


def to_unsigned(raw: np.ndarray, width: int) -> list[int]:
    """Two's-complement lane values as the unsigned words cocotbext-axi packs."""
    return [int(v) & ((1 << width) - 1) for v in np.asarray(raw).reshape(-1)]


def to_signed(words, width: int) -> np.ndarray:
    """Unsigned lane words back to signed integers."""
    w = np.asarray(list(words), dtype=np.int64)
    return np.where(w >> (width - 1) & 1, w - (1 << width), w)


def quiet_cocotbext(dut_name: str, level=logging.WARNING) -> None:
    """cocotbext-axi logs every frame at INFO; keep its loggers at ``level``."""
    for suffix in ("", ".s_axis", ".m_axis"):
        logging.getLogger(f"cocotb.{dut_name}{suffix}").setLevel(level)


class TokenDriver:
    """Sends tokens (``d`` signed elements each, ``d/k`` beats, ``tlast`` on the last) through an
    ``AxiStreamSource`` with random idle gaps (probability ``idle`` per cycle)."""

    def __init__(self, dut, prefix: str, clock, reset, width: int, *, rng: random.Random, idle: float = 0.0):
        from cocotbext.axi import AxiStreamBus, AxiStreamSource

        self.width = width
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, prefix), clock, reset, byte_size=width)
        if idle > 0:  # a pause generator costs a coroutine step every cycle; none at full rate
            self.source.set_pause_generator(random_pause(rng, idle))

    def send(self, tokens: np.ndarray, tokens_per_frame: int = 1) -> None:
        """Queue ``tokens`` (``[T, d]`` raw integers); ``tokens_per_frame > 1`` puts several tokens
        in one frame (``tlast`` only on the frame's last beat: a framing error per missing tlast)."""
        from cocotbext.axi import AxiStreamFrame

        tokens = np.asarray(tokens)
        for n in range(0, len(tokens), tokens_per_frame):
            self.source.send_nowait(AxiStreamFrame(to_unsigned(tokens[n:n + tokens_per_frame], self.width)))

    def clear(self) -> None:
        """Drop every queued frame (used with a reset in the middle of a stream)."""
        self.source.clear()

    def idle(self) -> bool:
        return self.source.idle()


@dataclass
class ObservedToken:
    """One token seen on a stream: its elements and the cycles of its first and last beats."""

    raw: np.ndarray
    first_cycle: int
    last_cycle: int
    frame_len: int  # elements in the frame it came in (d when tlast framing is right)
    user: np.ndarray | None = None  # per element: tuser (unsigned) of its beat, where the port has tuser


class TokenMonitor:
    """Observes tokens on an AXI4-Stream port: passive (``AxiStreamMonitor``) or as the sink that
    drives ``tready`` (``AxiStreamSink``, random backpressure with probability ``stall``).
    ``recv()`` returns the tokens of the next frame, split into ``d``-element tokens."""

    def __init__(self, dut, prefix: str, clock, reset, width: int, d: int, *, sink: bool,
                 rng: random.Random | None = None, stall: float = 0.0):
        from cocotbext.axi import AxiStreamBus, AxiStreamMonitor, AxiStreamSink

        self.width, self.d = width, d
        cls = AxiStreamSink if sink else AxiStreamMonitor
        self.port = cls(AxiStreamBus.from_prefix(dut, prefix), clock, reset, byte_size=width)
        if sink and stall > 0:
            self.port.set_pause_generator(random_pause(rng or random.Random(0), stall))

    async def recv(self) -> list[ObservedToken]:
        frame = await self.port.recv()
        vals = to_signed(frame.tdata, self.width)
        first, last = cycles(frame.sim_time_start), cycles(frame.sim_time_end)
        n = len(vals)
        user = None
        if isinstance(frame.tuser, list) and len(frame.tuser) == n:  # one value per element
            user = np.asarray(frame.tuser, dtype=np.int64)
        elif isinstance(frame.tuser, int):  # one for all (a normalised frame)
            user = np.full(n, frame.tuser, dtype=np.int64)
        if n % self.d:
            # a frame whose length is not a whole number of tokens (tlast misplaced): keep the
            # elements in order; the caller re-splits the element stream
            return [ObservedToken(vals, first, last, n, user)]
        return [ObservedToken(vals[i:i + self.d], first if i == 0 else last, last, n,
                              None if user is None else user[i:i + self.d]) for i in range(0, n, self.d)]
