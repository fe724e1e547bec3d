"""Shared set-up of the Verilator/cocotb tests: skip cleanly where the toolchain (perl, make, a
C++ compiler) is missing; otherwise every build lands in ``build/sim/`` and is reused."""

import shutil

import numpy as np
import pytest

_MISSING = [tool for tool in ("perl", "make", "c++") if shutil.which(tool) is None]


def pytest_collection_modifyitems(config, items):
    if not _MISSING:
        return
    skip = pytest.mark.skip(reason=f"Verilator toolchain incomplete: {', '.join(_MISSING)} not found")
    for item in items:
        if "tests/sim/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)



@pytest.fixture
def verilator_registered():
    """The ``verilator`` backend registered for the test (the CLI registers it on demand)."""
    from specmem.backend_verilator import verilator_backend
    from specmem.backends import BACKENDS, register_backend

    saved = dict(BACKENDS)
    register_backend("verilator", verilator_backend)
    yield
    BACKENDS.clear()
    BACKENDS.update(saved)


def assert_same_outputs(a, b):
    """Two run results with the same names, dtypes, shapes and values (bit for bit)."""
    assert list(a) == list(b)
    for name in a:
        va, vb = np.asarray(a[name]), np.asarray(b[name])
        assert va.dtype == vb.dtype and va.shape == vb.shape, name
        assert np.array_equal(va, vb), name
