"""Training-free associative recall (spec §4): write n key/value pairs, query every key.

Keys are random unit vectors in R^d (orthonormal when n <= d), values come from a
codebook of V random unit vectors, optional distractor pairs follow the writes,
and each read-out is decoded to the nearest codebook entry by cosine. The rule's
final state is read with its own read-out map, so queries do not write.
VLA's precision stream is the key's feature vector (``u_t = elu1(k_t)``), so
``A`` whitens the same features that are written; ``vla`` keeps Algorithm 1's
``u_scale = 1/sqrt(d)``, ``vla-eq8`` uses eq. (8)'s unit ``u``, and ``vla-rawu``
feeds the raw key (``u_t = k_t``) to show what a mismatched precision stream
does. DeltaNet uses ``beta = 1``; Gated DeltaNet ``beta = 1, g = gate``. These
choices are stated in every report that uses this module.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError, check_scalar, elu1

__all__ = ["RECALL_RULES", "RECALL_VARIANTS", "make_recall_task", "recall_accuracy", "decode"]

# variant -> (algorithm, parameters); see the module docstring for the u stream of each VLA variant.
RECALL_VARIANTS = {
    "vla": ("vla", {}),
    "vla-eq8": ("vla", {"u_scale": 1.0}),
    "vla-rawu": ("vla", {}),
    "deltanet": ("deltanet", {}),
    "gated-deltanet": ("gated-deltanet", {}),
    "linear": ("linear", {}),
}
RECALL_RULES = tuple(RECALL_VARIANTS)


def make_recall_task(d: int, n: int, *, V: int = 128, gap: int = 0, seed: int = 0, key_scale: float = 1.0):
    """Return ``(k_write, v_write, queries, codebook, targets)`` for one recall episode."""
    d = check_scalar("d", d, lo=1, integer=True)
    n = check_scalar("n", n, lo=1, integer=True)
    V = check_scalar("V", V, lo=2, integer=True)
    gap = check_scalar("gap", gap, lo=0, integer=True)
    rng = np.random.default_rng(seed)
    if n <= d:
        q, _ = np.linalg.qr(rng.standard_normal((d, d)))
        keys = q[:, :n].T.copy()
    else:
        keys = rng.standard_normal((n, d))
        keys /= np.linalg.norm(keys, axis=1, keepdims=True)
    codebook = rng.standard_normal((V, d))
    codebook /= np.linalg.norm(codebook, axis=1, keepdims=True)
    targets = rng.integers(0, V, size=n)
    values = codebook[targets]
    if gap:
        dk = rng.standard_normal((gap, d))
        dk /= np.linalg.norm(dk, axis=1, keepdims=True)
        dv = codebook[rng.integers(0, V, size=gap)]
        k_write = np.concatenate([keys, dk])
        v_write = np.concatenate([values, dv])
    else:
        k_write, v_write = keys, values
    return key_scale * k_write, v_write, key_scale * keys, codebook, targets


def decode(readout: np.ndarray, codebook: np.ndarray) -> np.ndarray:
    """Index of the codebook entry with the largest cosine to each read-out row."""
    norms = np.linalg.norm(readout, axis=-1, keepdims=True)
    cos = (readout / np.where(norms > 0, norms, 1.0)) @ codebook.T
    return np.argmax(cos, axis=-1)


def _readout(algo: str, state: np.ndarray, queries: np.ndarray) -> np.ndarray:
    if algo in ("vla", "linear"):
        feats = elu1(queries)
    else:
        feats = queries / np.maximum(np.linalg.norm(queries, axis=-1, keepdims=True), 1e-12)
    return feats @ np.swapaxes(state, -1, -2)


def recall_accuracy(rule: str, d: int, n: int, *, V: int = 128, gap: int = 0, seed: int = 0,
                    gate: float = 0.99, run=None) -> float:
    """Exact-match rate of one episode; ``run(algo, inputs, params) -> outputs`` picks the backend."""
    if rule not in RECALL_RULES:
        raise SpecmemInputError(f"rule: recall is defined for {', '.join(RECALL_RULES)}, got {rule!r}")
    if run is None:
        from specmem.backends import run as backend_run

        def run(algo, inputs, params):
            return backend_run(algo, inputs, params=params)

    algo, params = RECALL_VARIANTS[rule]
    kw, vw, queries, codebook, targets = make_recall_task(d, n, V=V, gap=gap, seed=seed)
    T = kw.shape[0]
    inputs = {"k": kw, "v": vw, "q": kw}
    if algo == "vla":
        inputs["u"] = kw if rule == "vla-rawu" else elu1(kw)
    if algo in ("deltanet", "gated-deltanet"):
        inputs["beta"] = np.ones(T)
    if algo == "gated-deltanet":
        inputs["g"] = np.full(T, gate)
    state = run(algo, inputs, dict(params))["s"]
    pred = decode(_readout(algo, state, queries), codebook)
    return float(np.mean(pred == targets))
