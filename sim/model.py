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

#: design parameters that change the hardware only (multiplier and RAM registers), not the arithmetic
RTL_ONLY_PARAMS = ("dsp", "bram")

__all__ = ["RTL_ONLY_PARAMS", "StreamModel", "AnnihilationModel", "VLAModel", "BaselineModel", "Scoreboard", "Mismatch",
           "expected_saturations", "V2_SAT_TENSORS"]


#: the tensors whose saturations the annihilation core v2 counts (its manifest's
#: ``status_saturation_tensors``): the ``U`` writes, ``Um`` (``u_mul``), ``r``, ``ahat``, ``q``, ``t`` and ``y``
V2_SAT_TENSORS = ("u", "u_mul", "r", "ahat", "q", "t", "p", "y")


def expected_saturations(sat: dict, tensors=None) -> int:
    """The hardware's saturation counter: every narrowing the golden model counts except the
    host-side quantisation of ``x`` (the manifest's ``status_saturations``); with ``tensors``
    (core v2: :data:`V2_SAT_TENSORS`) the saturations of those tensors only."""
    if tensors is not None:
        return int(sum(int(sat[name]) for name in tensors))
    return int(sum(int(n) for name, n in sat.items() if name != "x"))


class StreamModel:
    """Golden-model predictions for one configuration, fed from the input monitor: :meth:`start`
    begins a stream (after a reset), :meth:`observe` takes each raw token the monitor saw,
    :meth:`predict` gives token ``t``'s expected outputs, :meth:`totals` the expected status after
    ``n`` tokens. Subclasses say how to run the golden model (:meth:`golden`) and what a
    prediction (:meth:`_prediction`) and the totals (:meth:`_totals`) are."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8"):
        self.d, self.k, self.preset = d, k, preset
        self.golden_runs = 0
        self.golden_seconds = 0.0
        self.start()

    def start(self, plan: np.ndarray | None = None) -> None:
        self.observed: list[np.ndarray] = []
        self.plan = None if plan is None else np.asarray(plan, dtype=np.int64)
        self._basis = None      # the raw tokens of the last golden run
        self._result = None     # its outputs
        self._agree = 0         # leading observed tokens equal to the basis

    # -- golden -------------------------------------------------------------------------------
    def golden(self, X: np.ndarray) -> dict:
        t0 = time.perf_counter()
        self.golden_runs += 1
        out = self._golden(np.asarray(X, dtype=np.int64))
        self.golden_seconds += time.perf_counter() - t0
        return out

    def _golden(self, X: np.ndarray) -> dict:  # pragma: no cover - abstract
        raise NotImplementedError

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
        self._on_observe(token)
        if self._basis is None and self.plan is not None:
            self._run_on(self.plan)
        elif self._basis is not None and self._agree == t and t < len(self._basis) \
                and np.array_equal(self._basis[t], token):
            self._agree = t + 1
        return t

    def _on_observe(self, token: np.ndarray) -> None:
        pass

    def ready(self, t: int) -> bool:
        return t < len(self.observed)

    def predict(self, t: int) -> dict:
        """Token ``t``'s expected outputs: ``y`` (raw output elements ``[d]``), optionally
        ``user`` (the expected ``tuser`` of its beats), and algorithm-specific fields."""
        if t >= len(self.observed):
            raise IndexError(f"token {t}: the input monitor has seen only {len(self.observed)} tokens")
        if self._basis is None or t >= self._agree:
            self._run_on(np.array(self.observed))
        return self._prediction(self._result, t)

    def totals(self, n: int | None = None) -> dict:
        """Expected status (and final state) after the first ``n`` observed tokens (default all)."""
        n = len(self.observed) if n is None else n
        if self._result is not None and len(self._basis) == n and self._agree >= n:
            return self._totals(self._result, n)  # the run that made the predictions covers exactly these
        if n == 0:
            return self._empty_totals()
        return self._totals(self.golden(np.array(self.observed[:n])), n)


class AnnihilationModel(StreamModel):
    """The annihilation memory: raw ``x`` tokens ``[d]``; predictions ``y``, ``orth``, ``count``.

    ``core``: ``"v1"`` (the legacy presets: the golden model's defaults for them, the recomputed
    Gram and skip; every saturation but ``x`` counted) or ``"v2"`` (``int18``/``int16``/``int8``:
    ``gram="coaccumulate"``, ``orth_policy="evict"``, stated explicitly; the saturations of
    :data:`V2_SAT_TENSORS` counted)."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", in_range: float | None = None,
                 core: str = "v1"):
        from specmem.golden.fixed.formats import formats_for

        if core not in ("v1", "v2"):
            raise ValueError(f"core: must be v1 or v2, got {core!r}")
        self.core = core
        self.sat_tensors = V2_SAT_TENSORS if core == "v2" else None
        self.golden_kwargs = {"gram": "coaccumulate", "orth_policy": "evict"} if core == "v2" else {}
        self.in_range = in_range
        self.fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})
        self.x_frac = self.fmt["x"].frac
        super().__init__(d, k, preset)

    def start(self, plan: np.ndarray | None = None) -> None:
        super().start(plan)
        self._nonzero = 0       # nonzero tokens observed so far ...
        self._count: list[int] = []  # ... and the stored-direction count after each token

    def _golden(self, X: np.ndarray) -> dict:
        """The golden model on raw tokens ``X`` ``[T, d]`` (dequantised exactly, then requantised
        by the model itself to the same integers)."""
        from specmem.golden.fixed.annihilation import annihilation_fixed

        x = np.ldexp(np.asarray(X, dtype=np.float64), -self.x_frac)
        return annihilation_fixed(x, self.k, self.preset, in_range=self.in_range, trace=False, **self.golden_kwargs)

    def _on_observe(self, token: np.ndarray) -> None:
        self._nonzero += bool(np.any(token != 0))
        self._count.append(min(self.k, self._nonzero))  # warm-up stores each nonzero token

    def _prediction(self, r: dict, t: int) -> dict:
        """``{"y": raw y [d], "orth": bool, "count": int}``."""
        return {"y": r["y_raw"][t], "orth": bool(r["orth"][t]), "count": self._count[t]}

    def _totals(self, r: dict, n: int) -> dict:
        """``tokens``, ``saturations``, ``orth_count``, ``orth_flag``, ``count``, ``u_raw``, ``sat``."""
        return {"tokens": n, "saturations": expected_saturations(r["sat"], self.sat_tensors),
                "orth_count": int(np.sum(r["orth"])),
                "orth_flag": int(np.any(r["orth"])), "count": int(r["count"]), "u_raw": r["u_raw"],
                "sat": {k: int(v) for k, v in r["sat"].items()}}

    def _empty_totals(self) -> dict:
        return {"tokens": 0, "saturations": 0, "orth_count": 0, "orth_flag": 0, "count": 0,
                "u_raw": np.zeros((self.d, self.k), dtype=np.int64)}


VLA_TENSORS = ("k", "v", "q", "u")


class VLAModel(StreamModel):
    """Variational linear attention: a raw token is ``4d`` integers, the ``k``, ``v``, ``q``, ``u``
    vectors one after the other (the manifest's beat order: ``d/k`` beats of each, element ``i``
    in lane ``i % k`` of beat ``i // k``, so the element stream is the concatenation); predictions
    ``y`` = ``o_raw[t]`` and ``user`` = ``o_frac[t]``; totals ``tokens``, ``saturations``
    (every tensor but the host-quantised inputs), ``refreshes``, and the final ``a_raw``,
    ``s_raw``. ``params``: ``vla_fixed``'s (``lambda0``, ``eps``, ``refresh_period``, ``eta``,
    ``u_scale``, ``in_range``), the ones the design was generated with."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", params: dict | None = None):
        from specmem.golden.fixed.formats import formats_for
        from specmem.golden.vla import _prepare

        self.params = dict(params or {})
        one = np.zeros((1, d))
        *_, (lambda0, _eps, rp, eta, u_scale) = _prepare(one, one, one, one, *(
            self.params.get(n, dflt) for n, dflt in (("lambda0", 0.1), ("eps", 1e-4), ("refresh_period", 20),
                                                    ("eta", 1e-3), ("u_scale", None))))
        self.refresh_period = int(rp)
        self.fmt = formats_for("vla", preset, d, {"lambda0": lambda0, "u_scale": u_scale,
                                                  "in_range": self.params.get("in_range")})
        # the status counter starts at the saturations of the constants 1/lambda0 and eta
        self.const_saturations = int(self.fmt["a"].quantize(1.0 / lambda0)[1] + self.fmt["a"].quantize(eta)[1])
        super().__init__(d, k, preset)

    def quantize(self, x: dict) -> np.ndarray:
        """Float ``{k, v, q, u}`` ``[T, d]`` -> the raw tokens ``[T, 4d]`` the driver sends (the
        host-side quantisation, as the golden model quantises)."""
        return np.concatenate([np.asarray(self.fmt[n].quantize(np.asarray(x[n], dtype=np.float64))[0], dtype=np.int64)
                               for n in VLA_TENSORS], axis=-1)

    def split(self, X: np.ndarray) -> dict:
        """Raw tokens ``[T, 4d]`` -> ``{k, v, q, u}`` raw ``[T, d]``."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, 4, self.d)
        return {n: X[:, i] for i, n in enumerate(VLA_TENSORS)}

    def _golden(self, X: np.ndarray) -> dict:
        from specmem.golden.fixed.vla import vla_fixed

        x = {n: np.ldexp(v.astype(np.float64), -self.fmt[n].frac) for n, v in self.split(X).items()}
        return vla_fixed(x["k"], x["v"], x["q"], x["u"], self.preset, **self.params, trace=False)

    def _prediction(self, r: dict, t: int) -> dict:
        return {"y": r["o_raw"][t], "user": int(r["o_frac"][t])}

    def refreshes(self, n: int) -> int:
        return n // self.refresh_period if self.refresh_period else 0

    def _totals(self, r: dict, n: int) -> dict:
        sat = {k: int(v) for k, v in r["sat"].items()}
        return {"tokens": n, "saturations": sum(v for name, v in sat.items() if name not in VLA_TENSORS),
                "refreshes": self.refreshes(n), "a_raw": r["a_raw"], "s_raw": r["s_raw"], "sat": sat}

    def _empty_totals(self) -> dict:
        a0 = int(self.fmt["a"].quantize(1.0 / self.params.get("lambda0", 0.1))[0])
        return {"tokens": 0, "saturations": self.const_saturations, "refreshes": 0,
                "a_raw": np.eye(self.d, dtype=np.int64) * a0, "s_raw": np.zeros((self.d, self.d), dtype=np.int64)}


class BaselineModel(StreamModel):
    """Linear attention (``algo="linear"``), DeltaNet (``algo="deltanet"``) or Gated DeltaNet
    (``algo="gated-deltanet"``): a raw token is the ``k``, ``v``, ``q`` vectors one after the other
    (``3d`` integers) and, for the delta rules, the scalar beats: scalar ``j`` (``beta``, then the
    gated core's ``g``) is element ``3d + j`` (beat ``3d/k + j // k``, lane ``j % k``), the other
    lanes zero: ``3d + k`` integers (``3d + 2`` at ``k = 1`` for the gated core), the order of the
    manifest's beats. ``g`` is unsigned (``UQ1.(M-1)``, ``g = 1`` is ``2^(M-1)``): its lane holds
    its bits, which the raw token keeps as the signed ``M``-bit value the input monitor reads
    (``g = 1`` is ``-2^(M-1)``); :meth:`split` masks them back. Predictions ``y`` = ``o_raw[t]``;
    totals ``tokens``, ``saturations`` (every tensor but the host-quantised inputs), the final
    ``s_raw`` and, for linear attention, ``z_raw``. ``params``: the golden model's (``eps``,
    ``in_range``), the ones the design was generated with."""

    ALGOS = ("linear", "deltanet", "gated-deltanet")
    #: the per-token scalars of each rule, in beat order
    SCALARS = {"linear": (), "deltanet": ("beta",), "gated-deltanet": ("beta", "g")}

    def __init__(self, algo: str, d: int, k: int, preset: str = "legacy-int8", params: dict | None = None):
        params = {n: v for n, v in (params or {}).items() if n not in RTL_ONLY_PARAMS}
        from specmem.golden.fixed.formats import formats_for

        if algo not in self.ALGOS:
            raise ValueError(f"algo: must be one of {', '.join(self.ALGOS)}, got {algo!r}")
        self.algo = algo
        self.params = dict(params or {})
        if algo == "gated-deltanet":
            from specmem.golden.fixed.gated_deltanet import gated_deltanet_formats

            self.fmt = gated_deltanet_formats(preset, d, self.params.get("in_range"))
        else:
            self.fmt = formats_for(algo, preset, d, {"in_range": self.params.get("in_range")})
        self.scalars = self.SCALARS[algo]
        self.tensors = ("k", "v", "q") + self.scalars
        super().__init__(d, k, preset)

    @property
    def token_len(self) -> int:
        """Integers per raw token (the input elements of one token's beats)."""
        n = len(self.scalars)
        return 3 * self.d + -(-n // self.k) * self.k

    def quantize(self, x: dict) -> np.ndarray:
        """Float ``{k, v, q[, beta[, g]]}`` (``[T, d]``; the scalars ``[T]``) -> the raw tokens
        ``[T, token_len]`` the driver sends (the host-side quantisation, as the golden model's)."""
        parts = [np.asarray(self.fmt[n].quantize(np.asarray(x[n], dtype=np.float64))[0], dtype=np.int64)
                 for n in ("k", "v", "q")]
        if self.scalars:
            lead = parts[0].shape[:-1]
            lanes = np.zeros(lead + (self.token_len - 3 * self.d,), dtype=np.int64)
            for j, n in enumerate(self.scalars):
                raw = np.asarray(self.fmt[n].quantize(np.asarray(x[n], dtype=np.float64))[0], dtype=np.int64)
                if not self.fmt[n].signed:  # the lane's bits, as the monitor reads them back (signed)
                    w = int(self.fmt[n].width)
                    raw = np.where(raw >> (w - 1) & 1, raw - (1 << w), raw)
                lanes[..., j] = raw
            parts.append(lanes)
        return np.concatenate(parts, axis=-1)

    def split(self, X: np.ndarray) -> dict:
        """Raw tokens ``[T, token_len]`` -> ``{k, v, q[, beta[, g]]}`` raw (the scalars ``[T]``,
        unsigned ones masked back to their bits)."""
        X = np.asarray(X, dtype=np.int64).reshape(-1, self.token_len)
        d = self.d
        out = {n: X[:, i * d:(i + 1) * d] for i, n in enumerate(("k", "v", "q"))}
        for j, n in enumerate(self.scalars):
            raw = X[:, 3 * d + j]
            if not self.fmt[n].signed:
                raw = raw & ((1 << int(self.fmt[n].width)) - 1)
            out[n] = raw
        return out

    def _golden(self, X: np.ndarray) -> dict:
        x = {n: np.ldexp(v.astype(np.float64), -self.fmt[n].frac) for n, v in self.split(X).items()}
        # a beta or g that quantised to 0 (the float models want them > 0): a value that quantises to 0
        for n in self.scalars:
            x[n] = np.where(x[n] == 0, np.ldexp(1.0, -self.fmt[n].frac - 2), x[n])
        if self.algo == "linear":
            from specmem.golden.fixed.linear_attention import linear_attention_fixed

            return linear_attention_fixed(x["k"], x["v"], x["q"], preset=self.preset, **self.params, trace=False)
        if self.algo == "gated-deltanet":
            from specmem.golden.fixed.gated_deltanet import gated_deltanet_fixed

            return gated_deltanet_fixed(x["k"], x["v"], x["q"], x["beta"], x["g"], self.preset, **self.params,
                                        trace=False)
        from specmem.golden.fixed.deltanet import deltanet_fixed

        return deltanet_fixed(x["k"], x["v"], x["q"], x["beta"], self.preset, **self.params, trace=False)

    def _prediction(self, r: dict, t: int) -> dict:
        return {"y": r["o_raw"][t]}

    def _totals(self, r: dict, n: int) -> dict:
        sat = {k: int(v) for k, v in r["sat"].items()}
        out = {"tokens": n, "saturations": sum(v for name, v in sat.items() if name not in self.tensors),
               "s_raw": r["s_raw"], "sat": sat}
        if self.algo == "linear":
            out["z_raw"] = r["z_raw"]
        return out

    def _empty_totals(self) -> dict:
        out = {"tokens": 0, "saturations": 0, "s_raw": np.zeros((self.d, self.d), dtype=np.int64)}
        if self.algo == "linear":
            out["z_raw"] = np.zeros(self.d, dtype=np.int64)
        return out


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
        what = "" if self.what == "y" else f"{self.what}: "
        return (f"{what}stream {self.stream} token {self.token} element {self.element} (beat {self.beat}, lane "
                f"{self.lane}): expected {self.expected}, observed {self.observed} at cycle {self.cycle}")


@dataclass
class Scoreboard:
    """In-order comparison of observed output tokens with the model's predictions."""

    model: StreamModel
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

    def check(self, y: np.ndarray, first_cycle: int, last_cycle: int, frame_len: int,
              user: np.ndarray | None = None) -> bool:
        """Compare the next output token (and, where the model predicts one, the ``tuser`` of
        every beat: ``user`` per element, signed); returns whether it matched."""
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
        pred = self.model.predict(t)
        exp = pred["y"]
        y = np.asarray(y)
        if "user" in pred:
            u = np.zeros(0, dtype=np.int64) if user is None else np.asarray(user)
            bad_u = np.flatnonzero(u != pred["user"]) if len(u) == len(y) else np.arange(max(len(y), 1))
            if bad_u.size:
                i = int(bad_u[0])
                mm = Mismatch(self.stream, t, i, i // self.k, i % self.k, int(pred["user"]),
                              int(u[i]) if i < len(u) else None, last_cycle, what="tuser")
                self.first = self.first or mm
                self.mismatched_tokens += 1
                self.error(mm.describe() + f" ({bad_u.size} of {d} elements' tuser differ)")
                return False
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
