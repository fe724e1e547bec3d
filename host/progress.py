"""Progress lines for long work: ``label: 40/120 (33%), 2.1 steps/s, ETA 0:38`` every few seconds.

Shown only where someone is watching: stderr is a terminal and ``CI`` is unset. ``SPECMEM_PROGRESS=1``
forces the lines on (``=0`` off), e.g. to see them through a pipe; CI logs stay quiet.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["Progress", "progress_enabled"]


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
        self.total, self.label, self.unit, self.every = max(int(total), 0), label, unit, every
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
        self.done += n
        now = self.clock()
        if self.enabled and now - self._last >= self.every and self.done < self.total:
            self._last = now
            self._emit(self.line())

    def _emit(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)
        self.lines += 1

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled and self.lines:  # close a run that printed anything with its total time
            self._emit(f"{self.label}: {self.done}/{self.total} {self.unit} in {_clock(self.clock() - self.t0)}")
