"""VLA's per-token chain, five vector passes (``chain="five-pass"``, the RTL's order before it
moved to two) against two (``chain="two-pass"``, the default and the RTL's now): the accuracy
measured first, as the co-design rule asks, before the RTL followed.

Two measurements per preset, each over ``seeds`` seeds (mean, standard deviation, worst):

* the output error against the float64 model, ``||o - o_ref|| / ||o_ref||`` per token, its median
  over a ``T``-token Gaussian stream (``specmem.vectors.make_vectors``);
* training-free recall (``specmem.golden.recall``, the ``vla`` and ``vla-eq8`` variants) at ``n``
  pairs, exact-match rate.

``python -m specmem.golden.fixed.chain_study [--out PATH] [--seeds N] [--quick]`` writes the
markdown report (default ``out/accuracy/vla_chain.md``).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from .vla import CHAINS, vla_fixed

__all__ = ["chain_study", "report"]

PRESETS = ("legacy-int8", "legacy-int16")
RECALL_IN_RANGE = 2.0   # as the accuracy report's recall section (elu1 of unit keys reaches 2)


def _stats(x):
    x = np.asarray(x, dtype=float)
    return {"mean": float(x.mean()), "std": float(x.std(ddof=1)) if x.size > 1 else 0.0,
            "worst": float(x.max()), "best": float(x.min()), "n": int(x.size)}


def chain_study(d: int = 32, T: int = 256, ns=(16, 32), seeds: int = 20, presets=PRESETS,
                progress=print) -> dict:
    """Output error and recall of every chain in :data:`CHAINS` under ``presets``."""
    from specmem.golden.recall import recall_accuracy
    from specmem.golden.vla import vla
    from specmem.vectors import make_vectors

    out = {"d": d, "T": T, "ns": list(ns), "seeds": seeds, "error": {}, "recall": {}}
    t0 = time.perf_counter()
    refs = []
    for s in range(seeds):
        vec = make_vectors("vla", T, d, s)
        refs.append((vec, vla(**vec)["o"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # legacy-int8 saturates on these inputs on purpose
        for p in presets:
            for ch in CHAINS:
                errs = []
                for vec, ref in refs:
                    o = vla_fixed(**vec, preset=p, chain=ch, trace=False)["o"]
                    errs.append(np.median(np.linalg.norm(o - ref, axis=-1) / np.linalg.norm(ref, axis=-1)))
                out["error"][(p, ch)] = _stats(errs)
                progress(f"chain study: {p} {ch}: output error over {seeds} seeds "
                         f"({time.perf_counter() - t0:.0f} s)")
                for rule in ("vla", "vla-eq8"):
                    for n in ns:
                        def run(algo, inputs, prm, p=p, ch=ch):
                            return vla_fixed(**inputs, **prm, preset=p, chain=ch, in_range=RECALL_IN_RANGE,
                                             trace=False)
                        acc = [recall_accuracy(rule, d, n, seed=s, run=run) for s in range(seeds)]
                        out["recall"][(p, ch, rule, n)] = _stats(acc)
                progress(f"chain study: {p} {ch}: recall ({time.perf_counter() - t0:.0f} s)")
        for rule in ("vla", "vla-eq8"):
            for n in ns:
                out["recall"][("float64", rule, n)] = _stats([recall_accuracy(rule, d, n, seed=s) for s in range(seeds)])
    out["seconds"] = time.perf_counter() - t0
    return out


def report(res: dict) -> str:
    """The study as markdown."""
    L = [f"# VLA's per-token chain: five vector passes against two (d = {res['d']}, {res['seeds']} seeds)", "",
         "`python -m specmem.golden.fixed.chain_study` (`golden/fixed/chain_study.py`); "
         "`chain=\"two-pass\"` is described in `golden/fixed/vla.py`. Mean ± standard deviation over "
         "the seeds, worst in brackets.", "",
         f"Output error against float64 (median over {res['T']} tokens of `||o - o_ref|| / ||o_ref||`):", "",
         "| preset | five-pass (the earlier RTL) | two-pass (the RTL) |", "|---|---|---|"]
    presets = sorted({p for p, _ in res["error"]}, key=PRESETS.index)
    for p in presets:
        cells = [f"{s['mean']:.4f} ± {s['std']:.4f} ({s['worst']:.4f})" for s in
                 (res["error"][(p, ch)] for ch in CHAINS)]
        L.append(f"| {p} | " + " | ".join(cells) + " |")
    L += ["", "Training-free recall (exact-match rate; V = 128 codebook):", "",
          "| preset | rule | pairs n | five-pass (the earlier RTL) | two-pass (the RTL) | float64 (reference) |",
          "|---|---|---|---|---|---|"]
    fmt = lambda s: f"{s['mean']:.3f} ± {s['std']:.3f} ({s['best']:.3f})"  # noqa: E731
    for p in presets:
        for rule in ("vla", "vla-eq8"):
            for n in res["ns"]:
                cells = [fmt(res["recall"][(p, ch, rule, n)]) for ch in CHAINS] + [fmt(res["recall"][("float64", rule, n)])]
                L.append(f"| {p} | {rule} | {n} | " + " | ".join(cells) + " |")
    L += ["", "(recall: worst = lowest seed in brackets)", "", f"{res['seconds']:.0f} s on this machine.", ""]
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specmem.golden.fixed.chain_study", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/accuracy/vla_chain.md", help="markdown report path")
    ap.add_argument("--seeds", type=int, default=20, help="seeds per configuration (>= 2)")
    ap.add_argument("--quick", action="store_true", help="d = 8, T = 64, n = 8: a smoke run")
    a = ap.parse_args(argv)
    if a.seeds < 2:
        ap.error("--seeds: at least 2 (the spread needs two)")
    kw = {"d": 8, "T": 64, "ns": (8,)} if a.quick else {}
    res = chain_study(seeds=a.seeds, progress=lambda s: print(s, file=sys.stderr), **kw)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(report(res))
    print(f"wrote {a.out} ({res['seconds']:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
