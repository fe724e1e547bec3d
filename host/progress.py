"""Progress lines for long work, on stderr, for every long-running specmem command.

* :class:`Progress` counts a known number of units: ``label: 40/120 runs (33%), 2.1 runs/s, ETA 0:38``
  every few seconds, and the total time at the end.
* :class:`Heartbeat` covers one step of unknown length (a Verilator build, a Verilog conversion,
  Yosys or nextpnr): ``label: 1:20 elapsed, about 0:40 left (...)`` while it stays silent, with an
  estimate where an earlier run's duration is known and what ``status()`` reports (e.g. how far
  nextpnr's log got).
* :func:`stage` is one named step of a command: its name when it starts, a heartbeat while it
  runs and ``name: done in 0:12`` at the end (the stage lines go to the command's own log).

The periodic lines are shown only where someone is watching: stderr is a terminal and ``CI`` is
unset. ``SPECMEM_PROGRESS=1`` forces them on (``=0`` off), e.g. to see them through a pipe; CI logs
stay quiet. ``SPECMEM_PROGRESS_EVERY=SECONDS`` sets the interval of every progress line.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

__all__ = ["Heartbeat", "Progress", "progress_enabled", "progress_every", "stage"]


#: when any progress line was last printed (time.monotonic): a heartbeat stays quiet while counted
#: lines (or an inner heartbeat) already show that the work moves
_last_line = [float("-inf")]
#: the clock of ``_last_line`` (a module attribute so that tests can drive it)
_now = time.monotonic


def progress_enabled(stream=None) -> bool:
    """True when progress lines should be printed to ``stream`` (default stderr)."""
    forced = os.environ.get("SPECMEM_PROGRESS")
    if forced is not None and forced.strip() != "":
        return forced.strip() not in ("0", "no", "false", "off")
    if os.environ.get("CI"):
        return False
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def progress_every(default: float) -> float:
    """The interval of progress lines: ``SPECMEM_PROGRESS_EVERY`` (seconds) where set, else ``default``."""
    text = os.environ.get("SPECMEM_PROGRESS_EVERY", "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        return default
    return value if value >= 0 else default


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """Counts ``total`` units of work; :meth:`update` prints a line at most every ``every`` seconds.

    ``with Progress(120, "claims: rank") as p: ... p.update()``; the last line (on exit) gives the
    elapsed time. Nothing is printed when :func:`progress_enabled` is false.
    """

    def __init__(self, total: int, label: str, unit: str = "steps", every: float = 2.0, stream=None,
                 enabled: bool | None = None, clock=time.monotonic):
        self.total, self.label, self.unit, self.every = max(int(total), 0), label, unit, progress_every(every)
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.clock = clock
        self.done = 0
        self.t0 = self._last = clock()
        self.lines = 0

    def line(self) -> str:
        """The current progress line (count, percentage, rate, ETA)."""
        dt = max(self.clock() - self.t0, 1e-9)
        rate = self.done / dt
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        eta = (f", ETA {_clock((self.total - self.done) / rate)}" if rate > 0 and self.done < self.total
               else "")
        return f"{self.label}: {self.done}/{self.total} {self.unit}{pct}, {rate:.3g} {self.unit}/s{eta}"

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done (a line when ``every`` seconds have passed since the last)."""
        self.done += n
        now = self.clock()
        if self.enabled and now - self._last >= self.every and self.done < self.total:
            self._last = now
            self._emit(self.line())

    def _emit(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)
        self.lines += 1
        _last_line[0] = _now()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled and self.lines:  # close a run that printed anything with its total time
            self._emit(f"{self.label}: {self.done}/{self.total} {self.unit} in {_clock(self.clock() - self.t0)}")


class Heartbeat:
    """While one step of unknown length runs: a line on ``stream`` whenever ``every`` seconds pass
    without one (nor any other progress line), ``label: 1:20 elapsed, about 0:40 left (note); status``.

    ``expect_s``: how long the step took before (an earlier run), for the estimate of the rest;
    ``note``: what that estimate rests on; ``status``: a callable whose text ends the line (e.g.
    how far a tool's log got; errors in it are ignored). :meth:`relay` wraps a command's own
    log callable so that its lines count as signs of life (the heartbeat stays silent while the
    step logs by itself) and its last line is quoted. A background thread prints; nothing at all
    when :func:`progress_enabled` is false.
    """

    def __init__(self, label: str, every: float = 10.0, *, expect_s: float | None = None, note: str | None = None,
                 status=None, stream=None, enabled: bool | None = None, clock=time.monotonic):
        self.label, self.every, self.expect_s, self.note, self.status = label, progress_every(every), expect_s, note, status
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.clock = clock
        self.t0 = self._last = clock()
        self.last_message: str | None = None
        self._said = self.t0  # when the step last logged by itself (relay)
        self.lines = 0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        """The current heartbeat line (elapsed time, the estimate of the rest, the status)."""
        el = self.clock() - self.t0
        text = f"{self.label}: {_clock(el)} elapsed"
        if self.expect_s:
            left = self.expect_s - el
            text += f", about {_clock(left)} left" if left > 0 else f", longer than the {_clock(self.expect_s)} expected"
        if self.note:
            text += f" ({self.note})"
        extra = None
        if self.status is not None:
            try:
                extra = self.status()
            except Exception:  # a status is a nicety: never let it break the work it reports on
                extra = None
        if extra:
            text += f"; {extra}"
        elif self.last_message:
            text += f"; {_clock(self.clock() - self._said)} since: {self.last_message}"
        return text

    def relay(self, fn):
        """``fn`` (a log callable taking one message) wrapped to record each message as a sign of life."""
        def relayed(msg, *args, **kwargs):
            self._last = self._said = self.clock()
            self.last_message = str(msg).strip()
            return fn(msg, *args, **kwargs)

        return relayed

    def tick(self) -> bool:
        """One check of the background thread: print a line if the step (and every other progress
        line) has been quiet for ``every`` seconds; True when it printed."""
        quiet_for = min(self.clock() - self._last, _now() - _last_line[0])
        if not self.enabled or quiet_for < self.every:
            return False
        self._last = self.clock()
        print(f"[{time.strftime('%H:%M:%S')}] {self.line()}", file=self.stream, flush=True)
        self.lines += 1
        _last_line[0] = _now()
        return True

    def _run(self) -> None:
        wait = max(min(self.every / 4, 1.0), 0.01)
        while not self._stop.wait(wait):
            self.tick()

    def __enter__(self) -> "Heartbeat":
        if self.enabled:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name=f"heartbeat {self.label}", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._stop = None


@contextlib.contextmanager
def stage(label: str, say=None, every: float = 10.0, *, expect_s: float | None = None, note: str | None = None,
          status=None):
    """One named step of a command: ``say(label)`` when it starts, a :class:`Heartbeat` while it
    runs, ``say(f"{label}: done in 0:12")`` when it ends (``say``: the command's log callable,
    default none). Yields the heartbeat."""
    say = say or (lambda msg: None)
    say(label)
    t0 = time.monotonic()
    with Heartbeat(label, every, expect_s=expect_s, note=note, status=status) as hb:
        yield hb
    say(f"{label}: done in {_clock(time.monotonic() - t0)}")
