"""Seeded input streams for every rule, in the exchange format (spec §5)."""

from __future__ import annotations

import numpy as np

from specmem.algorithms import get_algorithm
from specmem.golden.common import SpecmemInputError, check_scalar

__all__ = ["make_vectors", "available_memory"]


def available_memory() -> int | None:
    """Bytes of ``MemAvailable`` (``/proc/meminfo``); None where the system does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def make_vectors(algo: str, T: int, d: int, seed: int = 0, batch: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """Standard-Gaussian vectors ``[*batch, T, d]`` for each input of ``algo``.

    Per-token scalars: DeltaNet's ``beta`` is a sigmoid of a Gaussian (in (0, 1));
    Gated DeltaNet's decay ``g`` is uniform in [0.9, 1.0].
    """
    spec = get_algorithm(algo)
    T = check_scalar("T", T, lo=1, integer=True)
    d = check_scalar("d", d, lo=1, integer=True)
    seed = check_scalar("seed", seed, lo=0, integer=True)
    for b in batch:
        check_scalar("batch", b, lo=1, integer=True)
    need = 8 * int(np.prod(batch, dtype=np.int64)) * T * (d * len(spec.inputs) + len(spec.inputs))
    avail = available_memory()
    if avail is not None and need > avail // 2:
        raise SpecmemInputError(f"T: {need / 2**30:.1f} GiB of vectors (batch {' x '.join(map(str, batch)) or '1'}, "
                                f"T={T}, d={d}, {len(spec.inputs)} arrays) do not fit in the {avail / 2**30:.1f} GiB "
                                "of memory available")
    rng = np.random.default_rng(seed)
    shape = (*batch, T)
    out = {}
    for name in spec.inputs:
        if name == "beta":
            out[name] = 1.0 / (1.0 + np.exp(-rng.standard_normal(shape)))
        elif name == "g":
            out[name] = rng.uniform(0.9, 1.0, size=shape)
        elif name in spec.token_scalars:
            raise SpecmemInputError(f"{name}: no generator for this per-token scalar")
        else:
            out[name] = rng.standard_normal((*shape, d))
    return out
