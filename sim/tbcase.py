"""What a cocotb testbench of this package reads and writes: the case (``SPECMEM_SIM_CASE``, a JSON
file from ``run_cocotb``) and its record (``SPECMEM_SIM_RECORD``, rewritten after every test so a
crashed simulation still leaves the finished tests' results)."""

from __future__ import annotations

import json
import os

__all__ = ["load_case", "Record"]


def load_case() -> dict:
    """The case dict (``{}`` when the testbench is imported outside a run)."""
    path = os.environ.get("SPECMEM_SIM_CASE")
    return json.loads(open(path).read()) if path else {}


class Record(dict):
    """Per-test results; :meth:`save` stores one test's and rewrites the record file."""

    def save(self, name: str, rec) -> None:
        self[name] = rec
        path = os.environ.get("SPECMEM_SIM_RECORD")
        if path:
            with open(path, "w") as fh:
                json.dump(self, fh, default=int)
