"""Input checks and small helpers shared by the Triton kernels' public functions."""

from __future__ import annotations

import os

import torch
import triton

from specmem.golden.common import SpecmemInputError, check_scalar

__all__ = [
    "check_no_grad",
    "KERNEL_DTYPES",
    "MAX_D",
    "SpecmemInputError",
    "check_scalar",
    "check_kernel_tensor",
    "interpreting",
    "block_size",
    "relative_rms_error",
    "assert_close",
]

# The kernels load these and compute in float32; float64 belongs to the naive references.
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# One program keeps a [D, D] float32 state (VLA keeps two) on chip; 128 is the largest
# head size the fla-style layouts use and the largest these kernels are written for.
MAX_D = 128


def interpreting() -> bool:
    """True when Triton runs kernels with its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return bool(triton.knobs.runtime.interpret)


def block_size(d: int, minimum: int = 16) -> int:
    """Next power of two >= ``d`` (and >= ``minimum``, the smallest ``tl.dot`` operand side)."""
    return max(minimum, triton.next_power_of_2(d))


def check_kernel_tensor(name: str, x, *, ndim: int = 4, max_last: int = MAX_D, device=None,
                        check_finite: bool | None = None) -> torch.Tensor:
    """Validate one kernel input ``[B, T, H, D]``; return it contiguous.

    Rejects non-tensors, wrong rank, empty axes, dtypes outside :data:`KERNEL_DTYPES`,
    ``D > max_last``, a device other than ``device`` (or a CPU tensor outside the
    interpreter), and NaN/Inf. Messages start with the argument name. The NaN/Inf scan needs the
    values on the host, so on a GPU it would stall the launch queue: ``check_finite=None`` scans
    CPU tensors only (and CUDA ones when ``SPECMEM_CHECK_FINITE=1``); the shape, dtype and device
    checks never touch the data.
    """
    if not isinstance(x, torch.Tensor):
        raise SpecmemInputError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.ndim != ndim:
        raise SpecmemInputError(f"{name}: expected {ndim} dimensions [B, T, H, D], got shape {tuple(x.shape)}")
    if x.numel() == 0:
        raise SpecmemInputError(f"{name}: empty tensor of shape {tuple(x.shape)}")
    if x.dtype not in KERNEL_DTYPES:
        raise SpecmemInputError(
            f"{name}: dtype {x.dtype} not supported (float32, float16 or bfloat16; the kernels compute in "
            f"float32, use the naive reference for float64)")
    if x.shape[-1] > max_last:
        raise SpecmemInputError(f"{name}: last dimension must be <= {max_last} (state kept on chip), got {x.shape[-1]}")
    if device is not None and x.device != device:
        raise SpecmemInputError(f"{name}: on {x.device}, expected {device} like the first input")
    if x.device.type != "cuda" and not interpreting():
        raise SpecmemInputError(
            f"{name}: on {x.device}; the Triton kernels need a CUDA tensor, or TRITON_INTERPRET=1 set before "
            f"triton is imported to run them on the CPU")
    if check_finite is None:
        check_finite = x.device.type != "cuda" or os.environ.get("SPECMEM_CHECK_FINITE") == "1"
    if check_finite and not torch.isfinite(x).all():   # .all() on a CUDA tensor waits for the device
        raise SpecmemInputError(f"{name}: contains NaN or Inf")
    return x.contiguous()


def relative_rms_error(ref: torch.Tensor, out: torch.Tensor) -> float:
    """``rms(out - ref) / rms(ref)`` in float64 (``rms(out - ref)`` when ``ref`` is all zero)."""
    ref64, out64 = ref.detach().double().cpu(), out.detach().double().cpu()
    err = (out64 - ref64).square().mean().sqrt().item()
    base = ref64.square().mean().sqrt().item()
    return err / base if base > 0 else err


def assert_close(name: str, ref: torch.Tensor, out: torch.Tensor, ratio: float) -> None:
    """Assert ``rms(out - ref) / rms(ref) <= ratio`` (fla's check); print the max abs difference."""
    if ref.shape != out.shape:
        raise AssertionError(f"{name}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}")
    if not torch.isfinite(out).all():
        raise AssertionError(f"{name}: output contains NaN or Inf")
    diff = (out.detach().double().cpu() - ref.detach().double().cpu()).abs().max().item()
    err = relative_rms_error(ref, out)
    print(f"{name:>10}: max abs diff {diff:.3e}, relative rms error {err:.3e} (limit {ratio:.1e})")
    assert err <= ratio, f"{name}: relative rms error {err:.3e} > {ratio:.1e} (max abs diff {diff:.3e})"


def check_no_grad(fn: str, tensors, hint: str = "") -> None:
    """Refuse inputs that require grad where a kernel has no backward (they would be silently detached)."""
    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in tensors):
        raise SpecmemInputError(
            f"requires_grad: {fn} has no backward and would detach its inputs; call it under torch.no_grad() "
            f"or detach them{'; ' + hint if hint else ''}")
