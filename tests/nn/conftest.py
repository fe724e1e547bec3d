"""Tiny tensors: torch's intra-op thread pool only adds synchronisation, so these tests run on one thread."""

import pytest

from tests.torch_threads import one_torch_thread  # noqa: F401  (the fixture, by name)


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
