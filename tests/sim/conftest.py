"""Shared set-up of the Verilator/cocotb tests: skip cleanly where the toolchain (perl, make, a
C++ compiler) is missing; otherwise every build lands in ``build/sim/`` and is reused."""

import shutil

import pytest

_MISSING = [tool for tool in ("perl", "make", "c++") if shutil.which(tool) is None]


def pytest_collection_modifyitems(config, items):
    if not _MISSING:
        return
    skip = pytest.mark.skip(reason=f"Verilator toolchain incomplete: {', '.join(_MISSING)} not found")
    for item in items:
        if "tests/sim/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)

