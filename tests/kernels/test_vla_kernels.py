"""VLA kernels against the naive torch reference (float64) and the float64 golden model.

Tolerances: the kernels compute in float32, the oracle in float64. A float32 run of the naive
loop itself differs from float64 by a relative RMS of 1e-7..3e-7 at these sizes, and the
kernels land at the same level (measured 3e-8..7e-7); the limit 1e-5 leaves a margin for
the accumulation order over T without hiding a wrong formula (which shows as >1e-2).
On the CPU the kernels run in Triton's interpreter, so the sizes stay small.
"""

import pytest
import torch

from specmem.golden.common import SpecmemInputError
from specmem.golden.vla import vla as golden_vla
from specmem.kernels.utils import assert_close, interpreting
from specmem.kernels.vla import chunk_vla, fused_recurrent_vla, vla_chunkwise, vla_recurrence

DEVICE = "cpu" if interpreting() else "cuda"
FP32 = 1e-5        # float32 kernel vs float64 reference (see module docstring)
FP64 = 1e-12       # float64 vs float64: same operations, only the summation order differs


def make_inputs(B, T, H, K, V=None, seed=0, scale=1.0):
    """Seeded float64 ``k, v, q, u`` in the kernel layout ``[B, T, H, D]``."""
    g = torch.Generator().manual_seed(seed)
    k, q, u = (scale * torch.randn(B, T, H, K, generator=g, dtype=torch.float64) for _ in range(3))
    v = torch.randn(B, T, H, V or K, generator=g, dtype=torch.float64)
    return k, v, q, u


def to_kernel(*xs, dtype=torch.float32):
    return [x.to(DEVICE, dtype) for x in xs]


def golden(k, v, q, u, **kw):
    """The golden model on ``[B, H, T, D]`` numpy inputs, outputs moved back to the kernel layout."""
    r = golden_vla(*(x.transpose(1, 2).numpy() for x in (k, v, q, u)), **kw)
    return {
        "o": torch.from_numpy(r["o"]).transpose(1, 2),
        "s": torch.from_numpy(r["s"]),
        "a": torch.from_numpy(r["a"]),
        "s_norm": torch.from_numpy(r["s_norm"]).transpose(1, 2),
        "a_norm": torch.from_numpy(r["a_norm"]).transpose(1, 2),
    }


# (B, T, H, K, V, params); ids name the awkward part
CASES = [
    pytest.param(2, 63, 2, 24, 24, {}, id="B2-T63-H2-D24"),
    pytest.param(1, 63, 1, 60, 60, {}, id="B1-T63-H1-D60"),
    pytest.param(1, 40, 2, 16, 33, {}, id="K16-V33"),
    pytest.param(1, 50, 1, 24, 24, dict(refresh_period=3, eta=0.05), id="refresh3-eta0.05"),
    pytest.param(1, 50, 1, 24, 24, dict(refresh_period=0, u_scale=1.0, lambda0=1.0), id="norefresh-uscale1-lambda1"),
]


# the golden model takes one d for k, v, q, u
GOLDEN_CASES = [c for c in CASES if c.values[3] == c.values[4]]


@pytest.mark.parametrize("B, T, H, K, V, params", GOLDEN_CASES)
def test_naive_matches_golden(B, T, H, K, V, params):
    k, v, q, u = make_inputs(B, T, H, K, V)
    ref = golden(k, v, q, u, **params)
    out = vla_recurrence(k, v, q, u, **params)
    for name in ("o", "s", "a", "s_norm", "a_norm"):
        assert_close(name, ref[name], out[name], FP64)


@pytest.mark.parametrize("chunk_size", [pytest.param(c, id=f"C{c}") for c in (16, 32, 64)])
def test_naive_chunkwise_matches_recurrence(chunk_size):
    k, v, q, u = make_inputs(2, 63, 2, 24, 20, seed=1)
    ref = vla_recurrence(k, v, q, u)
    out = vla_chunkwise(k, v, q, u, chunk_size=chunk_size)
    for name in ("o", "s", "a", "a_norm"):
        assert_close(name, ref[name], out[name], FP64)


@pytest.mark.parametrize("B, T, H, K, V, params", CASES)
def test_fused_recurrent_vs_naive(B, T, H, K, V, params):
    k, v, q, u = make_inputs(B, T, H, K, V, seed=2)
    ref = vla_recurrence(k, v, q, u, **params)
    out = fused_recurrent_vla(*to_kernel(k, v, q, u), **params)
    for name in ("o", "s", "a", "s_norm", "a_norm"):
        assert_close(name, ref[name], out[name], FP32)


@pytest.mark.parametrize("B, T, H, K, V, params, chunk_size", [
    pytest.param(2, 63, 2, 24, 24, {}, 16, id="B2-T63-H2-D24-C16"),
    pytest.param(1, 63, 1, 60, 60, {}, 32, id="B1-T63-H1-D60-C32"),
    pytest.param(1, 40, 2, 16, 33, {}, 16, id="K16-V33-C16"),
    pytest.param(1, 70, 1, 24, 100, {}, 64, id="V100-four-V-blocks-C64"),
    pytest.param(1, 50, 1, 24, 24, dict(refresh_period=3, eta=0.05), 16, id="refresh3-inside-chunks"),
    pytest.param(1, 10, 1, 24, 24, {}, 16, id="T10-shorter-than-chunk"),
])
@pytest.mark.parametrize("a_pass", ["chunked", "sequential"])
def test_chunk_vs_naive(B, T, H, K, V, params, chunk_size, a_pass):
    k, v, q, u = make_inputs(B, T, H, K, V, seed=3)
    ref = vla_recurrence(k, v, q, u, **params)
    out = chunk_vla(*to_kernel(k, v, q, u), chunk_size=chunk_size, a_pass=a_pass, **params)
    assert out["s_norm"] is None
    assert (out["a_norm"] is None) == (a_pass == "chunked")
    for name in ("o", "s", "a") + (("a_norm",) if a_pass == "sequential" else ()):
        assert_close(name, ref[name], out[name], FP32)


def test_kernels_vs_golden():
    """Both kernels straight against the float64 golden model (B=2, H=2, T=63, D=24)."""
    k, v, q, u = make_inputs(2, 63, 2, 24, seed=4)
    ref = golden(k, v, q, u)
    fused = fused_recurrent_vla(*to_kernel(k, v, q, u))
    chunk = chunk_vla(*to_kernel(k, v, q, u), chunk_size=16)
    for name in ("o", "s", "a", "s_norm", "a_norm"):
        assert_close(f"fused {name}", ref[name], fused[name], FP32)
    for name in ("o", "s", "a"):
        assert_close(f"chunk {name}", ref[name], chunk[name], FP32)


def test_no_final_state_and_half_inputs():
    """``output_final_state=False`` returns no states; float16 inputs give a float16 ``o``.

    The reference runs on the float16-rounded inputs; the limit 2e-3 covers rounding ``o``
    to float16 (unit roundoff 4.9e-4).
    """
    k, v, q, u = make_inputs(1, 33, 1, 24, seed=5)
    k, v, q, u = (x.half().double() for x in (k, v, q, u))
    ref = vla_recurrence(k, v, q, u)
    for fn in (fused_recurrent_vla, chunk_vla):
        out = fn(*to_kernel(k, v, q, u, dtype=torch.float16), output_final_state=False)
        assert out["s"] is None and out["a"] is None
        assert out["o"].dtype == torch.float16
        assert_close(f"{fn.__name__} o", ref["o"], out["o"], 2e-3)


def _bad(name, **changes):
    return pytest.param(name, changes, id=name + ":" + ",".join(changes))


@pytest.mark.parametrize("arg, changes", [
    _bad("k", k=torch.zeros(2, 3, 4)),
    _bad("q", q=torch.zeros(1, 5, 1, 9)),
    _bad("v", v=torch.zeros(1, 6, 1, 8)),
    _bad("k", k=torch.zeros(1, 5, 1, 8, dtype=torch.float64)),
    _bad("k", k=torch.zeros(1, 5, 1, 130), q=torch.zeros(1, 5, 1, 130), u=torch.zeros(1, 5, 1, 130)),
    _bad("u", u=torch.full((1, 5, 1, 8), float("nan"))),
    _bad("lambda0", lambda0=0.0),
    _bad("refresh_period", refresh_period=-1),
    _bad("refresh_period", refresh_period=2.5),
    _bad("u_scale", u_scale=-1.0),
    _bad("chunk_size", chunk_size=24),
    _bad("dot_precision", dot_precision="bf16"),
    _bad("a_pass", a_pass="parallel"),
    _bad("state_pass", state_pass="fla"),
])
def test_input_checks(arg, changes):
    args = dict(k=torch.zeros(1, 5, 1, 8), v=torch.zeros(1, 5, 1, 8), q=torch.zeros(1, 5, 1, 8),
                u=torch.zeros(1, 5, 1, 8))
    args = {n: x.to(DEVICE) for n, x in args.items()}
    args.update({n: (x.to(DEVICE) if isinstance(x, torch.Tensor) else x) for n, x in changes.items()})
    fns = [chunk_vla] if arg in ("chunk_size", "dot_precision", "a_pass", "state_pass") else [fused_recurrent_vla, chunk_vla]
    for fn in fns:
        with pytest.raises(SpecmemInputError, match=f"^{arg}:"):
            fn(**args)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(),
                    reason="needs a CUDA GPU with compiled kernels; on the CPU the interpreter tests above run")
@pytest.mark.parametrize("K", [pytest.param(64, id="D64"), pytest.param(128, id="D128")])
def test_gpu_compiled_kernels(K):
    """Compiled kernels at a head size the interpreter tests skip (D=128) and a longer T."""
    k, v, q, u = make_inputs(2, 1000, 2, K, seed=6)
    ref = vla_recurrence(*(x.cuda() for x in (k, v, q, u)))
    fused = fused_recurrent_vla(*to_kernel(k, v, q, u))
    chunk = chunk_vla(*to_kernel(k, v, q, u), chunk_size=32)
    seq = chunk_vla(*to_kernel(k, v, q, u), chunk_size=32, a_pass="sequential")
    for name in ("o", "s", "a"):
        assert_close(f"fused {name}", ref[name], fused[name], 1e-4)
        assert_close(f"chunk {name}", ref[name], chunk[name], 1e-4)
        assert_close(f"chunk, sequential A {name}", ref[name], seq[name], 1e-4)
