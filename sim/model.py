"""The reference side of the annihilation testbench: a model fed from the input monitor, an
in-order scoreboard, and the expected status counters.

:class:`AnnihilationModel` predicts with the bit-exact golden model
(:func:`specmem.golden.fixed.annihilation.annihilation_fixed`) run on exactly the tokens the input
monitor saw. The golden model runs a whole stream at once and is causal (token ``t``'s outputs
depend on tokens ``0..t`` only), so the model may run it ahead on the stream the driver *plans*
to send and hand out token ``t``'s prediction once the monitor has seen tokens ``0..t`` equal to
that plan; the moment an observed token differs from the plan (or there is no plan), it reruns
the golden model on the observed tokens. Either way every prediction is the golden model's
output for the observed prefix, at a cost linear in the stream length.

:class:`Scoreboard` compares every output element bit for bit, in order, and keeps the first
mismatch (token, element, beat, lane, expected, observed, cycle).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["AnnihilationModel", "Scoreboard", "Mismatch", "expected_saturations"]


def expected_saturations(sat: dict) -> int:
    """The hardware's saturation counter: every narrowing the golden model counts except the
    host-side quantisation of ``x`` (the manifest's ``status_saturations``)."""
    return int(sum(int(n) for name, n in sat.items() if name != "x"))


class AnnihilationModel:
    """Golden-model predictions for one configuration; :meth:`start` begins a stream (after a
    reset), :meth:`observe` takes each token the input monitor saw (raw ``x`` integers)."""

    def __init__(self, d: int, k: int, preset: str = "int8", in_range: float | None = None):
        from specmem.golden.fixed.formats import formats_for

        self.d, self.k, self.preset, self.in_range = d, k, preset, in_range
        self.fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})
        self.x_frac = self.fmt["x"].frac
        self.golden_runs = 0
        self.golden_seconds = 0.0
        self.start()

    def start(self, plan: np.ndarray | None = None) -> None:
        self.observed: list[np.ndarray] = []
        self._nonzero = 0       # nonzero tokens observed so far ...
        self._count: list[int] = []  # ... and the stored-direction count after each token
        self.plan = None if plan is None else np.asarray(plan, dtype=np.int64)
        self._basis = None      # the raw tokens of the last golden run
        self._result = None     # its outputs
        self._agree = 0         # leading observed tokens equal to the basis

    # -- golden -------------------------------------------------------------------------------
    def golden(self, X: np.ndarray) -> dict:
        """The golden model on raw tokens ``X`` ``[T, d]`` (dequantised exactly, then requantised
        by the model itself to the same integers)."""
        from specmem.golden.fixed.annihilation import annihilation_fixed

        t0 = time.perf_counter()
        self.golden_runs += 1
        x = np.ldexp(np.asarray(X, dtype=np.float64), -self.x_frac)
        out = annihilation_fixed(x, self.k, self.preset, in_range=self.in_range, trace=False)
        self.golden_seconds += time.perf_counter() - t0
        return out

    def _run_on(self, basis: np.ndarray) -> None:
        self._basis = basis
        self._result = self.golden(basis) if len(basis) else None
        n = min(len(self.observed), len(basis))
        agree = 0
        while agree < n and np.array_equal(self.observed[agree], basis[agree]):
            agree += 1
        self._agree = agree

    # -- monitor side -------------------------------------------------------------------------
    def observe(self, token: np.ndarray) -> int:
        """Record a token seen at the input; returns its index in the stream."""
        t = len(self.observed)
        token = np.asarray(token, dtype=np.int64)
        self.observed.append(token)
        self._nonzero += bool(np.any(token != 0))
        self._count.append(min(self.k, self._nonzero))  # warm-up stores each nonzero token
        if self._basis is None and self.plan is not None:
            self._run_on(self.plan)
        elif self._basis is not None and self._agree == t and t < len(self._basis) \
                and np.array_equal(self._basis[t], token):
            self._agree = t + 1
        return t

    def ready(self, t: int) -> bool:
        return t < len(self.observed)

    def predict(self, t: int) -> dict:
        """``{"y": raw y [d], "orth": bool, "count": int}`` for observed token ``t``."""
        if t >= len(self.observed):
            raise IndexError(f"token {t}: the input monitor has seen only {len(self.observed)} tokens")
        if self._basis is None or t >= self._agree:
            self._run_on(np.array(self.observed))
        r = self._result
        return {"y": r["y_raw"][t], "orth": bool(r["orth"][t]), "count": self._count[t]}

    def totals(self, n: int | None = None) -> dict:
        """Expected status after the first ``n`` observed tokens (default all): ``tokens``,
        ``saturations``, ``orth_count``, ``orth_flag``, ``count``, and the final state ``u_raw``."""
        n = len(self.observed) if n is None else n
        if self._result is not None and len(self._basis) == n and self._agree >= n:
            r = self._result  # the run that made the predictions covers exactly these tokens
            return {"tokens": n, "saturations": expected_saturations(r["sat"]), "orth_count": int(np.sum(r["orth"])),
                    "orth_flag": int(np.any(r["orth"])), "count": int(r["count"]), "u_raw": r["u_raw"],
                    "sat": {k: int(v) for k, v in r["sat"].items()}}
        if n == 0:
            return {"tokens": 0, "saturations": 0, "orth_count": 0, "orth_flag": 0, "count": 0,
                    "u_raw": np.zeros((self.d, self.k), dtype=np.int64)}
        r = self.golden(np.array(self.observed[:n]))
        return {"tokens": n, "saturations": expected_saturations(r["sat"]), "orth_count": int(np.sum(r["orth"])),
                "orth_flag": int(np.any(r["orth"])), "count": int(r["count"]), "u_raw": r["u_raw"],
                "sat": {k: int(v) for k, v in r["sat"].items()}}


@dataclass
class Mismatch:
    stream: int          # 0 before the first reset, 1 after it, ...
    token: int
    element: int
    beat: int
    lane: int
    expected: int
    observed: int
    cycle: int
    what: str = "y"

    def describe(self) -> str:
        return (f"stream {self.stream} token {self.token} element {self.element} (beat {self.beat}, lane "
                f"{self.lane}): expected {self.expected}, observed {self.observed} at cycle {self.cycle}")


@dataclass
class Scoreboard:
    """In-order comparison of observed output tokens with the model's predictions."""

    model: AnnihilationModel
    k: int
    stream: int = 0
    compared: int = 0           # tokens compared in the current stream
    total_compared: int = 0
    mismatched_tokens: int = 0
    errors: list[str] = field(default_factory=list)
    first: Mismatch | None = None
    first_cycles: list[int] = field(default_factory=list)   # per output token: first beat cycle
    last_cycles: list[int] = field(default_factory=list)    # ... and last beat cycle

    def new_stream(self) -> None:
        self.stream += 1
        self.compared = 0
        self.first_cycles, self.last_cycles = [], []

    def error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(msg)

    def check(self, y: np.ndarray, first_cycle: int, last_cycle: int, frame_len: int) -> bool:
        """Compare the next output token; returns whether it matched."""
        t = self.compared
        self.compared += 1
        self.total_compared += 1
        self.first_cycles.append(first_cycle)
        self.last_cycles.append(last_cycle)
        d = self.model.d
        if frame_len != d:
            self.error(f"stream {self.stream} token {t}: output frame of {frame_len} elements (tlast misplaced; "
                       f"expected one token of {d})")
        if not self.model.ready(t):
            self.error(f"stream {self.stream} token {t}: output before the input monitor saw token {t}")
            self.mismatched_tokens += 1
            return False
        exp = self.model.predict(t)["y"]
        y = np.asarray(y)
        if y.shape == exp.shape and np.array_equal(y, exp):
            return True
        self.mismatched_tokens += 1
        n = min(len(y), len(exp))
        bad = np.flatnonzero(y[:n] != exp[:n])
        i = int(bad[0]) if bad.size else n
        mm = Mismatch(self.stream, t, i, i // self.k, i % self.k, int(exp[i]) if i < len(exp) else None,
                      int(y[i]) if i < len(y) else None, last_cycle)
        if self.first is None:
            self.first = mm
        self.error(mm.describe() + f" ({bad.size} of {d} elements differ)")
        return False
