"""Fixtures shared across the test folders.

``one_torch_thread`` (opt-in): for tests of small torch models one intra-op thread is faster than
two contending ones (and leaves a core to other jobs)."""

import pytest


@pytest.fixture
def one_torch_thread():
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
