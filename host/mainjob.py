"""``specmem main``: the main job on the small default configuration.

Stages, in order: seeded vectors and a float64 golden run of every rule
(exchange-format files under ``out/main``), then the claims ledger
(``docs/claims.md``). Later stages (Verilog, Verilator, accuracy report) are
added here as they land.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from specmem.algorithms import ALGORITHMS
from specmem.backends import run
from specmem.vectors import make_vectors
from specmem.exchange import save_outputs

__all__ = ["DEFAULTS", "main_job"]

# The small default configuration shared by the main job and the tests.
DEFAULTS = {"d": 16, "k": 4, "T": 256, "seed": 0}


def main_job(out_dir: str = "out/main", docs_dir: str = "docs", progress=print) -> int:
    """Run every stage; return 0 on success (any failure raises)."""
    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    d, k, T, seed = DEFAULTS["d"], DEFAULTS["k"], DEFAULTS["T"], DEFAULTS["seed"]
    summary = {"config": dict(DEFAULTS), "golden": {}}
    for name in ALGORITHMS:
        vec = make_vectors(name, T, d, seed)
        params = {"k": k} if name == "annihilation" else {}
        t1 = time.perf_counter()
        out = run(name, vec, backend="float", params=params)
        dt = time.perf_counter() - t1
        save_outputs(os.path.join(out_dir, f"{name}.in.npz"), vec, {"algo": name, **DEFAULTS})
        save_outputs(os.path.join(out_dir, f"{name}.float.npz"), out, {"algo": name, "backend": "float", **params})
        finite = all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in out.values())
        if not finite:
            raise RuntimeError(f"{name}: golden output contains NaN or Inf")
        summary["golden"][name] = {"seconds": dt, "outputs": sorted(out)}
        progress(f"main: golden {name:15s} T={T} d={d}: {dt * 1e3:8.1f} ms")
    from specmem.claims import write_claims

    summary["claims"] = write_claims(out_dir=docs_dir, full=False, progress=progress)
    summary["seconds"] = time.perf_counter() - t0
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    progress(f"main: done in {summary['seconds']:.1f} s; outputs in {out_dir}, ledger in {summary['claims']}")
    return 0
