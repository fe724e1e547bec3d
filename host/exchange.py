"""Reading and writing the ``.npz`` exchange format (spec §5) with clear errors."""

from __future__ import annotations

import json
import os
import sys
import zipfile

import numpy as np

from specmem.algorithms import Algorithm
from specmem.golden.common import SpecmemInputError

__all__ = ["load_inputs", "save_outputs"]


def load_inputs(path: str, algo: Algorithm) -> dict[str, np.ndarray]:
    """Load the arrays ``algo`` needs from ``path``; missing arrays are an error, extra ones a warning."""
    if not os.path.exists(path):
        raise SpecmemInputError(f"in: file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {name: f[name] for name in f.files}
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise SpecmemInputError(f"in: {path} is not a readable .npz file ({exc})") from None
    missing = [n for n in algo.inputs if n not in arrays]
    if missing:
        raise SpecmemInputError(
            f"in: {path} lacks array {missing[0]!r} needed by {algo.name} "
            f"(needs {', '.join(algo.inputs)}; has {', '.join(arrays) or 'nothing'})"
        )
    wanted = set(algo.inputs) | set(algo.optional_inputs)
    for extra in sorted(set(arrays) - wanted - {"meta"}):
        print(f"specmem: warning: ignoring array {extra!r} in {path} (not an input of {algo.name})", file=sys.stderr)
    return {n: arrays[n] for n in arrays if n in wanted}


def save_outputs(path: str, outputs: dict[str, np.ndarray], meta: dict) -> None:
    """Write outputs plus a ``meta`` JSON string; the file appears complete or not at all."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **outputs, meta=np.array(json.dumps(meta, sort_keys=True, default=str)))
    os.replace(tmp, path)
