"""Exponent and shift ranges of the scaled delta-rule models: what the RTL's exponent registers
and its row read/write shifters must hold (``docs/fixed-point.md``, "Exponents and shifts").

Runs :func:`~.deltanet.deltanet_scaled` (DeltaNet and Gated DeltaNet) on unit-variance Gaussian
streams, ``seeds`` of them batched, and reports every traced exponent's ``[min, max]`` over all
tokens and seeds beside the analytic bounds the hardware is sized by::

    python -m specmem.golden.fixed.scaled.exponents --d 64 --tokens 2000 --seeds 20
"""

from __future__ import annotations

import argparse

import numpy as np

from ..formats import PRESETS
from .deltanet import deltanet_scaled

__all__ = ["measure", "shift_bounds", "main"]

#: the decay streams measured for Gated DeltaNet: g uniform in (lo, 1]
DECAYS = (0.8, 0.5)


def shift_bounds(preset: str = "int8") -> dict[str, tuple[int | None, int | None]]:
    """The shifts' analytic ranges (right-positive; None: unbounded on that side).

    * ``read_shift`` (a row's ``Ws``-bit mantissas to ``M`` bits): ``msb - (M - 2) + carry`` with
      the row's ``msb <= Ws - 2`` (the write's bound), so at most ``Ws - M + 1``; a row that
      cancelled to a few LSBs is shifted left, by at most ``M - 2``.
    * ``write_shift_old`` (the old row to the new exponent): ``fnew <= Ws - 2 - row_exp`` gives
      at least ``msb + 3 - Ws >= 3 - Ws``; no upper bound (a new term far above the row).
    * ``write_shift_prod`` (``bh_i kn_j`` to the new exponent, ``bh_i != 0``): the row's bound
      ``msb(bh_i) + msb(max |kn|) + 2`` (over the product's exponent) sits at bit ``Ws - 2`` or
      below, and ``max |kn|`` fills its block (msb ``M - 2``), so at least
      ``msb(bh_i) + M + 2 - Ws >= M + 2 - Ws``; no upper bound (an old row far above it).
    """
    p = PRESETS[preset]
    M, Ws = p.mul_bits, p.state_bits
    return {"read_shift": (-(M - 2), Ws - M + 1), "write_shift_old": (3 - Ws, None),
            "write_shift_prod": (M + 2 - Ws, None)}


def measure(d: int, tokens: int, seeds: int, preset: str = "int8", decay: float | None = None) -> dict:
    """``{name: [min, max]}`` over ``seeds`` Gaussian streams (seed ``s`` for stream ``s``); ``decay``
    None is DeltaNet, else Gated DeltaNet with ``g ~ U(decay, 1)``."""
    ks, vs, qs, bs, gs = [], [], [], [], []
    for s in range(seeds):
        rng = np.random.default_rng(s)
        ks.append(rng.standard_normal((tokens, d)))
        vs.append(rng.standard_normal((tokens, d)))
        qs.append(rng.standard_normal((tokens, d)))
        bs.append(rng.uniform(0.05, 1.0, tokens))
        gs.append(1.0 - rng.uniform(0.0, 1.0 - decay, tokens) if decay is not None else None)
    g = np.stack(gs) if decay is not None else None
    out = deltanet_scaled(np.stack(ks), np.stack(vs), np.stack(qs), np.stack(bs), g, PRESETS[preset], trace=True)
    return out["exponents"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specmem.golden.fixed.scaled.exponents",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--preset", default="int8", choices=[n for n, p in PRESETS.items() if p.scheme == "scaled"])
    a = ap.parse_args(argv)
    if a.d < 1 or a.tokens < 1 or a.seeds < 1:
        ap.error("--d, --tokens and --seeds must be positive")
    runs = {"deltanet": measure(a.d, a.tokens, a.seeds, a.preset)}
    for lo in DECAYS:
        runs[f"gated-deltanet, g ~ U({lo}, 1]"] = measure(a.d, a.tokens, a.seeds, a.preset, lo)
    names = sorted({n for r in runs.values() for n in r})
    bounds = shift_bounds(a.preset)
    print(f"{a.preset}, d = {a.d}, {a.tokens} tokens x {a.seeds} seeds (min .. max over all)\n")
    print("| exponent or shift | " + " | ".join(runs) + " | analytic bound |")
    print("|---|" + "---|" * (len(runs) + 1))
    for n in names:
        cells = [f"{r[n][0]} .. {r[n][1]}" if n in r else "" for r in runs.values()]
        lo, hi = bounds.get(n, (None, None))
        bnd = "" if n not in bounds else f"{'-inf' if lo is None else lo} .. {'+inf' if hi is None else hi}"
        print(f"| `{n}` | " + " | ".join(cells) + f" | {bnd} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
