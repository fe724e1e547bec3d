"""``specmem bench golden``: steady-state tokens/s of the O(dk) Gram form against the dense reference.

Each rate is measured as a difference of two runs (``k + m`` and ``k + 2m``
tokens) so that the warm-up phase cancels; ``m`` grows until the difference
takes at least ``min_time`` seconds. Both forms run in the same process, side by side.
"""

from __future__ import annotations

import json
import os
import platform
import time

import numpy as np

from specmem.progress import Progress

__all__ = ["steady_rate", "bench_golden", "loglog_slope"]


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def steady_rate(fn, x: np.ndarray, k: int, *, min_time: float = 0.25, max_m: int = 1 << 14) -> float:
    """Tokens per second of ``fn(x[..., :T, :], k)`` in steady state (after k warm-up tokens)."""
    m = 2
    while True:
        need = k + 2 * m
        if need > x.shape[-2]:
            raise ValueError(f"stream too short: need {need} tokens")
        ta = _time(lambda: fn(x[..., : k + m, :], k))
        tb = _time(lambda: fn(x[..., : k + 2 * m, :], k))
        if tb < 2.0:  # cheap enough to repeat: keep the faster of two runs to damp noise
            ta = min(ta, _time(lambda: fn(x[..., : k + m, :], k)))
            tb = min(tb, _time(lambda: fn(x[..., : k + 2 * m, :], k)))
        if tb - ta >= min_time or m >= max_m:
            return m / max(tb - ta, 1e-12)
        m = min(m * (2 if tb - ta > min_time / 8 else 4), max_m)


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of log(ys) against log(xs)."""
    return float(np.polyfit(np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float)), 1)[0])


def bench_golden(out_json: str | None = None, quick: bool = False, progress=print) -> dict:
    """Time Gram vs dense for d in {64, 256, 1024}, k in {8, 32}, batch 1 and 64; print and save JSON."""
    from specmem.golden.annihilation import annihilation_dense, annihilation_gram

    ds = (64, 256) if quick else (64, 256, 1024)
    ks = (8, 32)
    batches = (1, 8) if quick else (1, 64)
    min_time = 0.1 if quick else 0.25
    rng = np.random.default_rng(0)
    rows = []
    grid = [(batch, d, k) for batch in batches for d in ds for k in ks if k <= d]
    with Progress(len(grid), "bench golden", unit="sizes") as bar:
        for i, (batch, d, k) in enumerate(grid, 1):
            max_m = 2048 if batch == 1 else 256
            x = rng.standard_normal((batch, k + 2 * max_m + 8, d))
            gram = steady_rate(lambda a, kk: annihilation_gram(a, kk), x, k, min_time=min_time, max_m=max_m)
            dense = steady_rate(lambda a, kk: annihilation_dense(a, kk), x, k, min_time=min_time,
                                max_m=min(max_m, 64))
            row = {"d": d, "k": k, "batch": batch,
                   "gram_tokens_per_s": gram * batch, "dense_tokens_per_s": dense * batch,
                   "speedup": gram / dense}
            rows.append(row)
            progress(f"bench golden: [{i}/{len(grid)}] batch={batch:3d} d={d:5d} k={k:3d}  "
                     f"gram {row['gram_tokens_per_s']:12.1f} tok/s  dense {row['dense_tokens_per_s']:12.1f} tok/s  "
                     f"x{row['speedup']:.1f}")
            bar.update()
    fits = {}
    for batch in batches:
        for k in ks:
            sel = [r for r in rows if r["batch"] == batch and r["k"] == k]
            if len(sel) >= 2:
                fits[f"gram_time_vs_d_slope_batch{batch}_k{k}"] = loglog_slope(
                    [r["d"] for r in sel], [1 / r["gram_tokens_per_s"] for r in sel])
        for d in ds:
            sel = [r for r in rows if r["batch"] == batch and r["d"] == d]
            if len(sel) >= 2:
                fits[f"gram_time_vs_k_slope_batch{batch}_d{d}"] = loglog_slope(
                    [r["k"] for r in sel], [1 / r["gram_tokens_per_s"] for r in sel])
    for name, s in fits.items():
        progress(f"bench golden: {name} = {s:.2f}")
    record = {"benchmark": "golden-annihilation", "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "numpy": np.__version__, "rows": rows, "loglog_slopes": fits,
              "method": "steady-state rate from the difference of two stream lengths; tokens/s counts batch"}
    if out_json:
        from specmem.exchange import write_atomic

        os.makedirs(os.path.dirname(os.path.abspath(out_json)), exist_ok=True)
        write_atomic(out_json, json.dumps(record, indent=2))  # no partial file if interrupted
        progress(f"bench golden: wrote {out_json}")
    return record
