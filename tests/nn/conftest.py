"""Tiny tensors: torch's intra-op thread pool only adds synchronisation, so these tests run on one thread."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
