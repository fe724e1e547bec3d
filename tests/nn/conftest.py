"""Tiny tensors: torch's intra-op thread pool only adds synchronisation, so these tests run on one thread."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
