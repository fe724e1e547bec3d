"""The training-free recall harness (spec §4): task construction, decoding, and known outcomes."""

import numpy as np
import pytest

from specmem.golden.common import SpecmemInputError
from specmem.golden.recall import decode, make_recall_task, recall_accuracy


def test_keys_orthonormal_within_capacity_and_unit_beyond():
    kw, vw, q, cb, tg = make_recall_task(16, 12, seed=1)
    np.testing.assert_allclose(kw @ kw.T, np.eye(12), atol=1e-12)
    np.testing.assert_array_equal(vw, cb[tg])
    kw, *_ = make_recall_task(16, 40, seed=1)
    np.testing.assert_allclose(np.linalg.norm(kw, axis=1), 1.0, atol=1e-12)
    kw, vw, q, *_ = make_recall_task(16, 5, gap=7, seed=2)
    assert kw.shape == (12, 16) and vw.shape == (12, 16) and q.shape == (5, 16)
    np.testing.assert_array_equal(q, kw[:5])


def test_decode_picks_nearest_cosine():
    cb = np.eye(4)
    r = np.array([[0.1, 3.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.2], [0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(decode(r, cb), [1, 3, 0])


def test_deltanet_stores_orthonormal_keys_exactly():
    # beta = 1 with orthonormal keys writes each pair exactly: recall must be perfect for n <= d.
    for n in (4, 16, 32):
        assert recall_accuracy("deltanet", 32, n, seed=0) == 1.0


def test_vla_eq8_recalls_within_capacity_and_rawu_does_not():
    # Regression on the ledger's finding: matched precision stream (u = elu1(k), unit u) recalls,
    # a raw-key precision stream leaves the nearly collinear ELU+1 features unseparated.
    assert recall_accuracy("vla-eq8", 32, 16, seed=0) >= 0.95
    assert recall_accuracy("vla-rawu", 32, 16, seed=0) <= 0.3


def test_bad_arguments():
    with pytest.raises(SpecmemInputError, match="rule:"):
        recall_accuracy("softmax", 8, 4)
    with pytest.raises(SpecmemInputError, match="n:"):
        make_recall_task(8, 0)
