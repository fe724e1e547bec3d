"""Reading and writing the ``.npz`` exchange format (spec §5) with clear errors, and the checks
every command runs on its output paths (so a bad ``--out`` fails before any work, in one line)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import zipfile
import zlib

import numpy as np

from specmem.algorithms import Algorithm
from specmem.golden.common import SpecmemInputError

__all__ = ["load_inputs", "save_outputs", "write_atomic", "check_out_file", "check_out_dir"]


def load_inputs(path: str, algo: Algorithm) -> dict[str, np.ndarray]:
    """Load the arrays ``algo`` needs from ``path``; missing arrays are an error, extra ones a warning."""
    if not os.path.exists(path):
        raise SpecmemInputError(f"in: file not found: {path}")
    if os.path.isdir(path):
        raise SpecmemInputError(f"in: {path} is a directory, not an .npz file")
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head and not (head.startswith(b"PK") or head.startswith(b"\x93NUMPY")):
        raise SpecmemInputError(f"in: {path} is not a readable .npz file (neither a zip archive nor a .npy "
                                f"array; write one with numpy.savez(path, {', '.join(f'{n}=...' for n in algo.inputs)}))")
    try:
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise SpecmemInputError(f"in: {path} holds a single array (.npy), not an .npz archive of named arrays "
                                    f"(write one with numpy.savez(path, {', '.join(f'{n}=...' for n in algo.inputs)}))")
        with f:
            arrays = {name: f[name] for name in f.files}
    except SpecmemInputError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, zlib.error, KeyError) as exc:
        why = str(exc) or type(exc).__name__
        if os.path.getsize(path) == 0:
            why = "the file is empty"
        raise SpecmemInputError(f"in: {path} is not a readable .npz file ({why})") from None
    missing = [n for n in algo.inputs if n not in arrays]
    if missing:
        raise SpecmemInputError(
            f"in: {path} lacks array {missing[0]!r} needed by {algo.name} "
            f"(needs {', '.join(algo.inputs)}; has {', '.join(arrays) or 'nothing'})"
        )
    wanted = set(algo.inputs) | set(algo.optional_inputs)
    for extra in sorted(set(arrays) - wanted - {"meta"}):
        print(f"specmem: warning: ignoring array {extra!r} in {path} (not an input of {algo.name})", file=sys.stderr)
    for name in sorted(wanted & set(arrays)):
        kind = arrays[name].dtype.kind
        if kind == "c":
            raise SpecmemInputError(f"in: array {name!r} in {path} is complex; the rules take real inputs (float or int)")
        if kind not in "fiub":
            raise SpecmemInputError(f"in: array {name!r} in {path} has dtype {arrays[name].dtype}; expected real numbers")
    return {n: arrays[n] for n in arrays if n in wanted}


def _tmp_beside(path: str, suffix: str) -> str:
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix,
                               dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    return tmp


def save_outputs(path: str, outputs: dict[str, np.ndarray], meta: dict) -> None:
    """Write outputs plus a ``meta`` JSON string; the file appears complete or not at all."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = _tmp_beside(path, ".npz")
    try:
        np.savez(tmp, **outputs, meta=np.array(json.dumps(meta, sort_keys=True, default=str)))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename: complete or absent."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = _tmp_beside(path, ".tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _probe_writable(arg: str, folder: str) -> None:
    """Create and remove a file in ``folder``: the only test that holds for root and read-only mounts."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".specmem-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise SpecmemInputError(f"{arg}: cannot write in {folder} ({exc.strerror or exc})") from None


def check_out_file(arg: str, path: str) -> None:
    """``path`` must name a file (not a directory) in an existing, writable directory."""
    if os.path.isdir(path) or path.endswith(os.sep):
        raise SpecmemInputError(f"{arg}: {path} is a directory; give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise SpecmemInputError(f"{arg}: directory does not exist: {folder}")
    _probe_writable(arg, folder)


def check_out_dir(arg: str, path: str) -> None:
    """``path`` must be a writable directory, or creatable: a missing folder is made (with its parents)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise SpecmemInputError(f"{arg}: {path} exists and is not a directory")
    top = os.path.abspath(path)
    while not os.path.exists(top):
        top = os.path.dirname(top)
    if not os.path.isdir(top):
        raise SpecmemInputError(f"{arg}: cannot create {path}: {top} is not a directory")
    _probe_writable(arg, top)
