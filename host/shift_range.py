"""The range of the annihilation row unit's run-time shift ``p_shift = fr + fp - fu`` that streams
actually use, against the range the row unit's ``RoundShiftVar`` covers (``docs/annihilation.md``,
"The row unit's shift"). Measured on the golden fixed-point model: the number that decides how
narrow that shifter could be made by a clamp of ``p``'s block exponent. Beside it, the clamped
model (``p_window=True``: ``p_shift`` held in :func:`p_shift_window`, 16 values) against the
unclamped one on the same streams: the tokens it clamps, its ``p`` saturations, and the streams
whose every output and final state are bit-identical (the accuracy the clamp costs).

    python -m specmem.shift_range --d 64 --k 8 --preset int18 --streams 20 --T 300
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from specmem.golden.fixed.annihilation import annihilation_fixed, p_shift_window
from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed.formats import formats_for

__all__ = ["STREAMS", "p_shift_samples", "window_effect", "covered_range", "main"]


def _rank_half(rng, B, T, d, k):
    r = max(1, k // 2)
    return rng.standard_normal((B, T, r)) @ rng.standard_normal((r, d)) / np.sqrt(r)


STREAMS = {
    "gaussian": lambda rng, B, T, d, k: rng.standard_normal((B, T, d)),
    "rank k/2": _rank_half,
    "student t(2)": lambda rng, B, T, d, k: rng.standard_t(2, (B, T, d)),
    "anisotropic 1..1e-4": lambda rng, B, T, d, k: rng.standard_normal((B, T, d)) * np.logspace(0, -4, d),
}


def p_shift_samples(stream: str, d: int, k: int, preset: str = "int18", *, streams: int = 20, T: int = 300,
                    seed: int = 1) -> np.ndarray:
    """``p_shift`` of every updating token of ``streams`` independent streams of kind ``stream``."""
    if stream not in STREAMS:
        raise ValueError(f"stream: one of {sorted(STREAMS)}, got {stream!r}")
    F = formats_for("annihilation", preset, d, {"k": k, "in_range": None})
    x = STREAMS[stream](np.random.default_rng(seed), streams, T, d, k)
    out = annihilation_fixed(x, k, preset, trace=False, p_window=False)
    return out["p_fp"][out["updated"]] + F["r"].frac - F["u"].frac


def window_effect(stream: str, d: int, k: int, preset: str = "int18", *, streams: int = 20, T: int = 300,
                  seed: int = 1) -> dict:
    """The clamped model against the unclamped one on the streams of :func:`p_shift_samples`:
    ``outside`` (updates whose unclamped shift leaves the window), ``p_sat`` (the clamped model's
    ``p`` saturations), ``identical`` (streams whose ``y`` and final ``U`` agree bit for bit),
    ``streams``, ``max_u_lsb`` (the largest final-state difference, in ``u`` LSBs), ``samples`` (the
    unclamped model's shifts, as :func:`p_shift_samples` returns them)."""
    if stream not in STREAMS:
        raise ValueError(f"stream: one of {sorted(STREAMS)}, got {stream!r}")
    x = STREAMS[stream](np.random.default_rng(seed), streams, T, d, k)
    a = annihilation_fixed(x, k, preset, trace=False, p_window=False)
    b = annihilation_fixed(x, k, preset, trace=False, p_window=True)
    F = a["fmt"]
    lo, hi = p_shift_window(F, k)
    ps = a["p_fp"][a["updated"]] + F["r"].frac - F["u"].frac
    same = np.all(a["y_raw"] == b["y_raw"], axis=(-2, -1)) & np.all(a["u_raw"] == b["u_raw"], axis=(-2, -1))
    return {"window": (lo, hi), "outside": int(np.sum((ps < lo) | (ps > hi))), "p_sat": int(b["sat"].get("p", 0)),
            "identical": int(same.sum()), "streams": streams,
            "max_u_lsb": int(np.max(np.abs(a["u_raw"] - b["u_raw"]))), "samples": ps}


def covered_range(d: int, k: int, preset: str = "int18") -> tuple[int, int]:
    """The shifts the row unit handles exactly today: left up to ``max_left``, right up to ``W + 1``."""
    from specmem.rtl.row_unit import RowUnit
    ru = RowUnit(d, k, preset)
    W = ru.wr + ru.wp  # the product r_i p_l
    return -ru.max_left, W + 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m specmem.shift_range", description=__doc__.split("\n\n")[0])
    p.add_argument("--d", type=int, default=64)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--preset", default="int18")
    p.add_argument("--streams", type=int, default=20, help="independent streams per kind (default 20)")
    p.add_argument("--T", type=int, default=300, help="tokens per stream (default 300)")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.k < 1 or a.d < a.k or a.streams < 1 or a.T < 1:
        p.error("need 1 <= k <= d, streams >= 1, T >= 1")
    try:
        lo, hi = covered_range(a.d, a.k, a.preset)
    except (SpecmemInputError, ValueError) as e:
        p.error(str(e))
    F = formats_for("annihilation", a.preset, a.d, {"k": a.k, "in_range": None})
    wlo, whi = p_shift_window(F, a.k)
    print(f"d={a.d} k={a.k} {a.preset}: the row unit covers p_shift in [{lo}, {hi}]; the clamped model's "
          f"window is [{wlo}, {whi}]")
    print(f"{'stream':22s} {'updates':>8s} {'min':>4s} {'p0.1':>5s} {'median':>6s} {'max':>4s} "
          f"{'outside':>8s} {'p sat':>6s} {'identical':>10s}")
    for name in STREAMS:
        w = window_effect(name, a.d, a.k, a.preset, streams=a.streams, T=a.T, seed=a.seed)
        s = w["samples"]
        if s.size == 0:
            print(f"{name:22s} {0:8d}  (no updating tokens)")
            continue
        print(f"{name:22s} {s.size:8d} {s.min():4d} {np.percentile(s, 0.1):5.0f} {np.median(s):6.0f} {s.max():4d} "
              f"{w['outside']:8d} {w['p_sat']:6d} {w['identical']:>4d} of {w['streams']:<3d}"
              + (f" (max |dU| {w['max_u_lsb']} LSB)" if w["identical"] < w["streams"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
