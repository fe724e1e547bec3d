"""VLA's ``A`` loop chunk-parallel (spec §2, segment form): one sequential step per segment.

One program per (batch, head) keeps ``A`` (``[K, K]``, float32) on chip and walks segments of at
most ``BT`` tokens, each ended early by a refresh. Per segment, with ``A_0`` at its start and
rows ``U`` (scaled unit ``u``), ``KH`` (unit ``elu1(k)``):

``P = U A_0``, ``G = P Uᵀ``; the unit-lower ``Linv`` and ``D`` with ``W = Linv P`` and
``w_i = A_{i-1} u_i``, ``D_i = 1 + u_iᵀ w_i`` (an ``LDLᵀ`` of ``I + G`` by forward
substitution on ``BT x BT`` tiles); ``Alpha = KH A_0 − (triu(W KHᵀ) / D)ᵀ W``;
``A_end = A_0 − (W / D)ᵀ W`` (``+ eta I``, and ``alpha_last += eta kh_last``, at a refresh).

Every product is a ``tl.dot``; the token-by-token chain of the sequential pass
(``vla_ah_fwd_kernel``) becomes ``BT`` steps on ``BT``-vectors per segment. The plain reference
is :func:`specmem.kernels.vla.naive.vla_a_segments` (Cholesky form of the same algebra).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..utils import block_size
from .fused_recurrent import elu1

__all__ = ["vla_a_chunk_fwd", "A_SEGMENT"]

# Segment length (tokens per sequential step); refreshes end segments earlier.
A_SEGMENT = 32


@triton.jit(do_not_specialize=["T"])
def vla_a_chunk_fwd_kernel(
    k, u, ah, a, a0,
    T, lambda0, eps, u_scale, eta, R, PHASE,
    H: tl.constexpr,
    K: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    USE_REFRESH: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr,
    STORE_FINAL_STATE: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_h = i_bh // H, i_bh % H
    o_i = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    m_eye = (o_k[:, None] == o_k[None, :]) & m_k[:, None]
    m_upper = o_i[:, None] <= o_i[None, :]

    bos = i_b * T * H + i_h
    k += bos * K
    u += bos * K
    ah += bos * K
    if USE_INITIAL_STATE:
        b_A = tl.load(a0 + i_bh * K * K + o_k[:, None] * K + o_k[None, :], mask=m_k[:, None] & m_k[None, :], other=0)
    else:
        b_A = tl.where(m_eye, 1.0 / lambda0, 0.0)
    i_s = 0
    while i_s < T:
        i_e = tl.minimum(i_s + BT, T)
        if USE_REFRESH:
            i_e = tl.minimum(i_e, ((PHASE + i_s) // R + 1) * R - PHASE)   # PHASE tokens since a refresh
        m_t = o_i < i_e - i_s
        m_tk = m_t[:, None] & m_k[None, :]
        o_tk = (i_s + o_i).to(tl.int64)[:, None] * (H * K) + o_k[None, :]   # T*H*K may pass 2^31
        b_k = tl.load(k + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_u = tl.load(u + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_kf = elu1(b_k, m_tk)
        b_kh = b_kf / tl.maximum(tl.sqrt(tl.sum(b_kf * b_kf, axis=1)), eps)[:, None]
        b_un = b_u / tl.maximum(tl.sqrt(tl.sum(b_u * b_u, axis=1)), eps)[:, None] * u_scale

        b_P = tl.dot(b_un, b_A, input_precision=DOT_PRECISION)                  # rows (A_0 u_i)ᵀ
        b_G = tl.dot(b_P, tl.trans(b_un), input_precision=DOT_PRECISION)        # u_iᵀ A_0 u_j
        # Forward substitution: row i of Linv and of LG = Linv G from the rows before it;
        # LG[j, i] = w_jᵀ u_i, so c_j = LG[j, i] / D_j are the Sherman-Morrison coefficients.
        b_L = tl.zeros([BT, BT], dtype=tl.float32)
        b_LG = tl.zeros([BT, BT], dtype=tl.float32)
        b_D = tl.full([BT], 1.0, dtype=tl.float32)
        for i in range(0, BT):
            b_c = tl.where(o_i < i, tl.sum(tl.where(o_i[None, :] == i, b_LG, 0.0), axis=1) / b_D, 0.0)
            b_l = tl.where(o_i == i, 1.0, 0.0) - tl.sum(b_c[:, None] * b_L, axis=0)
            b_g = tl.sum(tl.where(o_i[:, None] == i, b_G, 0.0), axis=0) - tl.sum(b_c[:, None] * b_LG, axis=0)
            b_L = tl.where(o_i[:, None] == i, b_l[None, :], b_L)
            b_LG = tl.where(o_i[:, None] == i, b_g[None, :], b_LG)
            b_D = tl.where(o_i == i, 1.0 + tl.sum(tl.where(o_i == i, b_g, 0.0)), b_D)

        b_W = tl.dot(b_L, b_P, input_precision=DOT_PRECISION)                  # rows (A_{i-1} u_i)ᵀ
        b_Z = tl.dot(b_W, tl.trans(b_kh), input_precision=DOT_PRECISION)       # w_iᵀ kh_t
        b_Z = tl.where(m_upper, b_Z / b_D[:, None], 0.0)
        b_alpha = tl.dot(b_kh, b_A, input_precision=DOT_PRECISION) - tl.dot(
            tl.trans(b_Z), b_W, input_precision=DOT_PRECISION)
        b_A = b_A - tl.dot(tl.trans(b_W / b_D[:, None]), b_W, input_precision=DOT_PRECISION)
        if USE_REFRESH:
            if (PHASE + i_e) % R == 0:
                b_A = b_A + tl.where(m_eye, eta, 0.0)
                b_alpha = b_alpha + tl.where((o_i == i_e - i_s - 1)[:, None], eta * b_kh, 0.0)
        b_ah = b_alpha / tl.maximum(tl.sqrt(tl.sum(b_alpha * b_alpha, axis=1)), eps)[:, None]
        tl.store(ah + o_tk, b_ah, mask=m_tk)
        i_s = i_e

    if STORE_FINAL_STATE:
        p_a = a + i_bh * K * K + o_k[:, None] * K + o_k[None, :]
        tl.store(p_a, b_A, mask=m_k[:, None] & m_k[None, :])


def a_chunk_num_warps(BK: int) -> int:
    """Warps per program: ``A`` is ``BK x BK`` float32 in registers (measured, see docs/gpu.md)."""
    return 8 if BK >= 128 else 4


def vla_a_chunk_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                    dot_precision="ieee", segment=A_SEGMENT, num_warps=None, initial_state=None):
    """Launch the segment-parallel ``A`` pass on checked, contiguous ``[B, T, H, K]`` inputs.

    ``initial_state``: a checked resumable state (its ``a`` and the refresh phase of its ``t``).
    Returns ``ah`` ``[B, T, H, K]`` (float32) and the final ``a`` ``[B, H, K, K]`` (or None).
    """
    B, T, H, K = k.shape
    BK = block_size(K)
    f32 = dict(dtype=torch.float32, device=k.device)
    ah = torch.empty(B, T, H, K, **f32)
    a = torch.empty(B, H, K, K, **f32) if output_final_state else None
    st = initial_state or {}
    phase = int(st.get("t", 0)) % refresh_period if st and refresh_period else 0
    vla_a_chunk_fwd_kernel[(B * H,)](
        k, u, ah, a, st.get("a"),
        T, float(lambda0), float(eps), float(u_scale), float(eta), max(int(refresh_period), 1), phase,
        H=H, K=K, BT=segment, BK=BK, USE_REFRESH=refresh_period > 0, USE_INITIAL_STATE=bool(st),
        STORE_FINAL_STATE=output_final_state,
        DOT_PRECISION=dot_precision, num_warps=num_warps or a_chunk_num_warps(BK),
    )
    return ah, a
