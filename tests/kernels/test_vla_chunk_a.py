"""VLA's ``A`` in the segment form (spec §2): torch reference, Triton kernel, gradients.

The segment form is exact algebra, so float64 runs agree with the token loop to 1e-12; the
float32 kernel is held to the same 1e-5 relative RMS as the other kernels. Gradients of the
differentiable path are checked with ``gradcheck`` (float64) and against autograd through the
token-by-token reference.
"""

import math

import pytest
import torch

from specmem.golden.common import SpecmemInputError
from specmem.kernels.annihilation import fused_recurrent_annihilation
from specmem.kernels.utils import assert_close, interpreting
from specmem.kernels.vla import chunk_vla, fused_recurrent_vla, vla_recurrence
from specmem.kernels.vla.chunk_a import vla_a_chunk_fwd
from specmem.kernels.vla.naive import _denominator, vla_a_loop, vla_a_segments
from specmem.nn.ops import _segments

from .test_vla_kernels import DEVICE, FP32, FP64, make_inputs, to_kernel


def test_segment_bounds():
    """The segments the reference (and, with t0 = 0, the Triton kernel) uses: refreshes end them."""
    def bounds(T, R, n):
        return [(s, e) for s, e, _ in _segments(T, 0, R, n)]
    assert bounds(70, 20, 32) == [(0, 20), (20, 40), (40, 60), (60, 70)]
    assert bounds(70, 40, 32) == [(0, 32), (32, 40), (40, 70)]
    assert bounds(50, 0, 16) == [(0, 16), (16, 32), (32, 48), (48, 50)]
    assert bounds(5, 3, 2) == [(0, 2), (2, 3), (3, 5)]


# (T, refresh_period, K, segment): refreshes that divide the segment, do not, and none
A_CASES = [
    pytest.param(63, 20, 24, 32, id="T63-R20-S32"),
    pytest.param(70, 3, 16, 16, id="T70-R3-S16"),
    pytest.param(50, 0, 60, 16, id="T50-norefresh-D60"),
    pytest.param(65, 40, 7, 32, id="T65-R40-D7"),
    pytest.param(10, 0, 16, 16, id="T10-shorter-than-segment"),
    pytest.param(64, 16, 24, 16, id="T64-R16-divides"),
]


@pytest.mark.parametrize("T, R, K, seg", A_CASES)
def test_segments_reference_matches_token_loop(T, R, K, seg):
    k, _, _, u = make_inputs(2, T, 3, K, seed=11)
    kh, ah, A, _ = vla_a_loop(k, u, refresh_period=R, eta=0.01)
    kh2, ah2, A2 = vla_a_segments(k, u, refresh_period=R, eta=0.01, max_len=seg)
    assert_close("ah", ah, ah2, FP64)
    assert_close("A", A, A2, FP64)


@pytest.mark.parametrize("T, R, K, seg", A_CASES)
def test_a_chunk_kernel_matches_token_loop(T, R, K, seg):
    k, _, _, u = make_inputs(2, T, 3, K, seed=12)
    _, ah, A, _ = vla_a_loop(k, u, refresh_period=R, eta=0.01)
    kk, uu = to_kernel(k, u)
    ah2, A2 = vla_a_chunk_fwd(kk, uu, 0.1, 1e-4, R, 0.01, 1 / math.sqrt(K), True, segment=seg)
    assert_close("ah", ah, ah2, FP32)
    assert_close("A", A, A2, FP32)


def _torch_vla(k, v, q, u, **kw):
    """VLA through the differentiable torch pieces: segment-form ``A``, then the chunkwise state."""
    kh, ah, _ = vla_a_segments(k, u, **kw)
    qf, den = _denominator(k, q, 1e-4)
    B, T, H, K = k.shape
    S = k.new_zeros(B, H, v.shape[-1], K)
    outs = []
    for t in range(T):
        S = S + (v[:, t] - torch.einsum("bhvk,bhk->bhv", S, kh[:, t]))[..., None] * ah[:, t, :, None, :]
        outs.append(torch.einsum("bhvk,bhk->bhv", S, qf[:, t]) / den[:, t, :, None])
    return torch.stack(outs, dim=1)


def test_segment_form_gradcheck():
    k, v, q, u = (x.requires_grad_() for x in make_inputs(1, 9, 1, 5, seed=13))
    assert torch.autograd.gradcheck(lambda k, u: vla_a_segments(k, u, refresh_period=4, eta=0.05, max_len=3)[1],
                                    (k, u), eps=1e-6, atol=1e-7)


def test_segment_form_gradients_match_token_loop():
    """Autograd through the segment form equals autograd through Algorithm 1 token by token."""
    k, v, q, u = make_inputs(2, 23, 2, 8, seed=14)
    do = torch.randn(2, 23, 2, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(15))
    grads = []
    for fn in (lambda *a: vla_recurrence(*a, refresh_period=5, eta=0.05)["o"],
               lambda *a: _torch_vla(*a, refresh_period=5, eta=0.05, max_len=4)):
        xs = [x.clone().requires_grad_() for x in (k, v, q, u)]
        (fn(*xs) * do).sum().backward()
        grads.append([x.grad for x in xs])
    for name, g_ref, g in zip("kvqu", *grads):
        assert g_ref.abs().max() > 0
        assert_close(f"d{name}", g_ref, g, FP64)


def test_kernels_without_backward_refuse_grad():
    k, v, q, u = (x.requires_grad_() for x in to_kernel(*make_inputs(1, 5, 1, 8)))
    for fn in (fused_recurrent_vla, chunk_vla):
        with pytest.raises(SpecmemInputError, match="^requires_grad: .* no backward"):
            fn(k, v, q, u)
    with pytest.raises(SpecmemInputError, match="^requires_grad:"):
        fused_recurrent_annihilation(k, 2)
    with torch.no_grad():
        assert fused_recurrent_vla(k, v, q, u)["o"].shape == v.shape


@pytest.mark.skipif(DEVICE == "cuda", reason="CPU path: refuses fla's CUDA-only state pass")
def test_dplr_needs_cuda():
    k, v, q, u = to_kernel(*make_inputs(1, 5, 1, 8))
    with pytest.raises(SpecmemInputError, match="^state_pass: 'fla-dplr' needs CUDA"):
        chunk_vla(k, v, q, u, state_pass="fla-dplr")


# ---- GPU only: fla's kernels do not run in Triton's CPU interpreter --------------------------------
gpu = pytest.mark.skipif(not torch.cuda.is_available() or interpreting(), reason="fla's DPLR kernels need a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("R", [20, 3, 0])
@pytest.mark.parametrize("dtype, limit", [(torch.float32, 2e-3), (torch.bfloat16, 2e-2)])
def test_gpu_dplr_forward(R, dtype, limit):
    """``state_pass='fla-dplr'`` vs the float64 token loop (T not a multiple of the chunk, D=100)."""
    k, v, q, u = make_inputs(2, 301, 3, 100, seed=16)
    k, v, q, u = (x.to(dtype).double() for x in (k, v, q, u))
    ref = vla_recurrence(*(x.cuda() for x in (k, v, q, u)), refresh_period=R)
    for a_pass in ("chunked", "sequential"):
        out = chunk_vla(*(x.cuda().to(dtype) for x in (k, v, q, u)), refresh_period=R, state_pass="fla-dplr",
                        a_pass=a_pass, dot_precision="tf32x3")
        for name in ("o", "s", "a"):
            assert_close(f"{a_pass} {dtype} {name}", ref[name], out[name], limit)


@pytest.mark.gpu
@gpu
def test_gpu_dplr_backward():
    """Gradients through fla's DPLR backward + the torch segment ``A`` vs autograd through the loop."""
    k, v, q, u = make_inputs(1, 130, 2, 32, seed=17)
    do = torch.randn(v.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(18)).cuda()
    grads = []
    for path in ("ref", "dplr"):
        xs = [x.cuda().clone().requires_grad_() for x in (k, v, q, u)] if path == "ref" else \
             [x.cuda().float().requires_grad_() for x in (k, v, q, u)]
        o = vla_recurrence(*xs)["o"] if path == "ref" else chunk_vla(*xs, state_pass="fla-dplr")["o"]
        (o.double() * do).sum().backward()
        grads.append([x.grad.double() for x in xs])
    for name, g_ref, g in zip("kvqu", *grads):
        assert_close(f"d{name}", g_ref, g, 5e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or interpreting(),
                    reason="tensor-core precisions need a compiled kernel on a CUDA GPU (the interpreter ignores them)")
@pytest.mark.parametrize("precision, limit", [("ieee", 1e-5), ("tf32x3", 1e-5), ("tf32", 3e-2)])
def test_gpu_a_chunk_precision_long(precision, limit):
    """The segment-form ``A`` kernel over 4096 tokens at D=128 vs the float64 token loop.

    The limits are the measured errors rounded up (docs/gpu.md): TF32 products (10-bit mantissa)
    accumulate into ``A`` over 128 segments; 3xTF32 recovers float32.
    """
    k, _, _, u = make_inputs(1, 4096, 2, 128, seed=19)
    _, ah, A, _ = vla_a_loop(k.cuda(), u.cuda())
    ah2, A2 = vla_a_chunk_fwd(*to_kernel(k, u), 0.1, 1e-4, 20, 1e-3, 1 / math.sqrt(128), True, precision)
    assert_close(f"{precision} ah", ah, ah2, limit)
    assert_close(f"{precision} A", A, A2, limit)


def test_finite_scan_is_optional():
    """The NaN/Inf scan (a device sync on CUDA) runs on CPU tensors by default and can be turned off."""
    from specmem.kernels.utils import check_kernel_tensor

    x = torch.full((1, 3, 1, 4), float("nan"), device=DEVICE)
    assert check_kernel_tensor("x", x, check_finite=False).shape == x.shape
    with pytest.raises(SpecmemInputError, match="^x: contains NaN or Inf"):
        check_kernel_tensor("x", x, check_finite=True)
