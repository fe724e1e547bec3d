#!/usr/bin/env python3
"""FuseSoC generator ``specmem_rtl``: FuseSoC runs ``python3 specmem_gen.py INPUT.yml`` in the
generator's working folder. This launcher only finds a Python that has ``specmem`` installed
and hands over to ``python -m specmem.fusesoc_gen INPUT.yml`` (host/fusesoc_gen.py), which runs
``specmem rtl`` and writes the core file.

Which Python: this one if it imports ``specmem``; else the interpreter of the ``specmem``
command named by ``$SPECMEM`` or found on ``PATH`` (a virtual environment's ``bin/specmem``
names its Python on its first line). Standard library only: ``python3`` may be any Python.
"""

import importlib.util
import os
import shutil
import sys


def _python() -> str:
    if importlib.util.find_spec("specmem") is not None:
        return sys.executable
    exe = os.environ.get("SPECMEM") or shutil.which("specmem")
    if exe:
        with open(exe, "rb") as fh:
            first = fh.readline().decode(errors="replace").strip()
        if first.startswith("#!"):
            py = first[2:].strip().split()[0]
            if os.path.isfile(py) and os.access(py, os.X_OK):
                return py
        sibling = os.path.join(os.path.dirname(os.path.realpath(exe)), "python")
        if os.path.isfile(sibling):
            return sibling
    sys.exit("specmem_rtl: error: no Python with specmem found: run FuseSoC from the environment where specmem "
             "is installed (source .venv/bin/activate), or set SPECMEM to the path of its specmem command")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: specmem_gen.py INPUT.yml (FuseSoC's generator input)")
    py = _python()
    os.execv(py, [py, "-m", "specmem.fusesoc_gen", sys.argv[1]])
