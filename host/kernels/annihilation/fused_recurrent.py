"""Fused recurrent spectral-annihilation memory (Gram form, exact variant): one program per
(batch, head) keeps the factor ``U`` (``[D, K]``, ``Omega = U Uᵀ``) on chip in float32 and
steps through all T tokens in one launch with O(D·K) work per token.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specmem.golden.annihilation import check_orth_policy

from ..utils import SpecmemInputError, block_size, check_kernel_tensor, check_no_grad, check_scalar

__all__ = ["fused_recurrent_annihilation", "fused_recurrent_annihilation_fwd", "ORTH_TOL_FP32",
           "EVICT_TIE_RTOL_FP32"]

# ||Omega x||² <= orth_tol ||x||² ||U||_F⁴ flags an orthogonal input. In float32 an x orthogonal
# to the stored span still gives ||Omega x||²/(||x||² ||U||_F⁴) ~ D·(6e-8)² ~ 1e-13 from rounding,
# so the golden model's float64 default (1e-24) would never fire; 1e-10 leaves a 1000x margin.
ORTH_TOL_FP32 = 1e-10
# evict: column energies ||U[:, j]||² within this relative distance of the least are ties (taken
# round-robin). float32 rounds a squared norm to ~1e-7 relative; the float64 golden uses 1e-9.
EVICT_TIE_RTOL_FP32 = 1e-5


@triton.jit(do_not_specialize=["T"])
def fused_recurrent_annihilation_fwd_kernel(
    x, u, y, orth, count,
    T, orth_tol, tie_rtol,
    EVICT: tl.constexpr,
    H: tl.constexpr,
    D: tl.constexpr,
    K: tl.constexpr,
    BD: tl.constexpr,
    BK: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_h = i_bh // H, i_bh % H
    o_d = tl.arange(0, BD)
    o_k = tl.arange(0, BK)
    m_d = o_d < D
    m_k = o_k < K

    bos = i_b * T * H + i_h
    p_x = x + bos * D + o_d
    p_y = y + bos * D + o_d
    p_orth = orth + bos

    b_U = tl.zeros([BD, BK], dtype=tl.float32)
    b_count = tl.zeros([], dtype=tl.int32)
    b_ptr = tl.zeros([], dtype=tl.int32)  # evict: round-robin pointer
    for _ in range(0, T):
        b_x = tl.load(p_x, mask=m_d, other=0).to(tl.float32)
        b_nz = tl.max(tl.abs(b_x)) > 0
        b_warm = b_nz & (b_count < K)
        b_full = b_nz & (b_count >= K)

        # reductions over rows: a = Uᵀx, r = U a, g = Uᵀr, column energies and ||U||_F²
        b_a = tl.sum(b_U * b_x[:, None], axis=0)
        b_r = tl.sum(b_U * b_a[None, :], axis=1)
        b_g = tl.sum(b_U * b_r[:, None], axis=0)
        b_cn = tl.sum(b_U * b_U, axis=0)  # column energies ||U[:, j]||² (evict)
        b_fro2 = tl.sum(b_cn)
        b_n2 = tl.sum(b_a * b_g)
        b_orth = b_full & (b_n2 <= orth_tol * tl.sum(b_x * b_x) * b_fro2 * b_fro2)
        b_upd = b_full & ~b_orth

        # k-vector work: Householder v = â + s e_j (j = argmax |â_j|), row-update vectors p, q
        b_n2s = tl.where(b_upd, b_n2, 1.0)
        b_ahat = b_a / tl.sqrt(tl.where(b_upd, tl.sum(b_a * b_a), 1.0))
        i_j = tl.argmax(tl.where(m_k, tl.abs(b_ahat), -1.0), axis=0)
        m_j = o_k == i_j
        b_ahat_j = tl.sum(tl.where(m_j, b_ahat, 0.0))
        b_g_j = tl.sum(tl.where(m_j, b_g, 0.0))
        b_s = tl.where(b_ahat_j >= 0, 1.0, -1.0)
        b_beta = 1.0 / (1.0 + tl.abs(b_ahat_j))
        b_v = b_ahat + tl.where(m_j, b_s, 0.0)
        b_p = (b_beta * b_s * b_g_j * b_v - b_g) / b_n2s
        b_q = -b_beta * b_s * b_v

        # row pass: U'[i,:] = U[i,:] + r_i p + U[i,j] q, then column j <- x
        b_c = tl.sum(tl.where(m_j[None, :], b_U, 0.0), axis=1)
        b_Un = b_U + b_r[:, None] * b_p[None, :] + b_c[:, None] * b_q[None, :]
        b_Un = tl.where(m_j[None, :], b_x[:, None], b_Un)
        b_U = tl.where(b_upd, b_Un, b_U)
        # warm-up: column `count` <- x; evict (orthogonal x): the least-energy column <- x, ties
        # within tie_rtol taken round-robin (the first at or after the pointer)
        b_col = b_count
        b_wr = b_warm
        if EVICT:
            b_cmin = tl.min(tl.where(m_k, b_cn, float("inf")), axis=0)
            m_tie = m_k & (b_cn <= b_cmin + tie_rtol * b_cmin)
            i_e = tl.argmin(tl.where(m_tie, (o_k - b_ptr + K) % K, K), axis=0).to(tl.int32)
            b_col = tl.where(b_orth, i_e, b_count)
            b_ptr = tl.where(b_orth, (i_e + 1) % K, b_ptr)
            b_wr = b_warm | b_orth
        b_U = tl.where(b_wr, tl.where((o_k == b_col)[None, :], b_x[:, None], b_U), b_U)
        b_count += b_warm.to(tl.int32)

        b_y = tl.where(b_upd, b_r / tl.sqrt(b_n2s), 0.0)
        tl.store(p_y, b_y.to(p_y.dtype.element_ty), mask=m_d)
        tl.store(p_orth, b_orth.to(tl.int8))
        p_x += H * D
        p_y += H * D
        p_orth += H

    p_u = u + i_bh * D * K + o_d[:, None] * K + o_k[None, :]
    tl.store(p_u, b_U, mask=m_d[:, None] & m_k[None, :])
    tl.store(count + i_bh, b_count)


def annihilation_num_warps(bd: int, bk: int) -> int:
    """Fewest warps that compiled for sm_90 without spilling the ``[BD, BK]`` factor."""
    return 4 if bd * bk <= 4096 else 8 if bd * bk <= 8192 else 16


def fused_recurrent_annihilation_fwd(x, k, orth_tol, orth_policy="evict", tie_rtol=EVICT_TIE_RTOL_FP32):
    """Launch the kernel on a checked, contiguous ``x``; returns ``u, y, orth, count``."""
    B, T, H, D = x.shape
    BD, BK = block_size(D, 1), block_size(k, 1)
    u = torch.empty(B, H, D, k, dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    orth = torch.empty(B, T, H, dtype=torch.int8, device=x.device)
    count = torch.empty(B, H, dtype=torch.int32, device=x.device)
    fused_recurrent_annihilation_fwd_kernel[(B * H,)](
        x, u, y, orth, count, T, float(orth_tol), float(tie_rtol),
        EVICT=orth_policy == "evict", H=H, D=D, K=k, BD=BD, BK=BK, num_warps=annihilation_num_warps(BD, BK),
    )
    return u, y, orth, count


def fused_recurrent_annihilation(x, k, orth_tol=ORTH_TOL_FP32, orth_policy="evict") -> dict:
    """Spectral-annihilation memory (spec §1, exact variant, Gram form), one launch for all T.

    Args:
        x: ``[B, T, H, D]`` inputs, float32/float16/bfloat16, ``D <= 128``; computed in float32.
        k: rank, the number of stored directions (columns of ``U``), ``1 <= k <= D``.
        orth_tol: orthogonal-input threshold: a full-memory token with
            ``||Omega x||² <= orth_tol ||x||² ||U||_F⁴`` is flagged. Default :data:`ORTH_TOL_FP32`,
            above float32 rounding; the float64 golden model's default is 1e-24.
        orth_policy: ``"evict"`` (default, as the golden model): a flagged token is written over
            the column of least ``||U[:, j]||²``, ties (within :data:`EVICT_TIE_RTOL_FP32`)
            round-robin; ``"skip"``: it is dropped.

    Zero tokens are no-ops; the first ``k`` nonzero tokens fill the columns of ``U`` in order.
    Returns ``u`` ``[B, H, D, k]`` (float32), ``omega = u uᵀ`` ``[B, H, D, D]`` (formed after
    the kernel, for tests and reports), ``y`` ``[B, T, H, D]`` (the annihilated direction, zero
    where none; dtype of ``x``), ``orth`` ``[B, T, H]`` bool and ``count`` ``[B, H]`` int64.
    """
    check_no_grad("fused_recurrent_annihilation", (x,), hint="the annihilation step has no chunked or "
                  "differentiable kernel; torch.autograd through annihilation_recurrence is the reference")
    x = check_kernel_tensor("x", x)
    if isinstance(k, bool):
        raise SpecmemInputError(f"k: expected an integer, got {k!r}")
    D = x.shape[-1]
    k = check_scalar("k", k, lo=1, integer=True)
    if k > D:
        raise SpecmemInputError(f"k: must be <= D ({D}), got {k}")
    orth_tol = check_scalar("orth_tol", orth_tol, lo=0)
    orth_policy = check_orth_policy(orth_policy)
    u, y, orth, count = fused_recurrent_annihilation_fwd(x, k, orth_tol, orth_policy)
    return {"u": u, "omega": u @ u.transpose(-1, -2), "y": y, "orth": orth.bool(), "count": count.long()}
