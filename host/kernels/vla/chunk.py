"""Chunked VLA: the ``A`` loop in a sequential pass, then the state chunk by chunk in WY/UT form.

Pass 1 (``vla_ah_fwd_kernel``, one program per (batch, head), sequential over T): the
``A`` loop of spec §2 with ``A`` on chip in float32; writes the write keys ``ah``
``[B, T, H, K]``, ``a_norm`` and the final ``A``. It is exact (refreshes wherever
``refresh_period`` puts them) and costs ``O(K²)`` per token, like the fused kernel's ``A``.

Pass 2 (``chunk_vla_fwd_kernel``, one program per (V block, batch, head), sequential over
chunks of C tokens, matrix products inside a chunk): with ``Hs = Sᵀ`` ``[K, V]``,
``S_t = S_{t-1}(I - kh ahᵀ) + v ahᵀ`` is a delta rule with read key ``kh`` and write key
``ah``; per chunk
``Tm = (I + tril(KH AHᵀ, -1))⁻¹``, ``U = Tm (V - KH Hs)``,
``O = (QF Hs + tril(QF AHᵀ) U) / den``, ``Hs += AHᵀ U``.
See README.md for the derivation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..utils import SpecmemInputError, block_size, check_scalar
from .chunk_a import vla_a_chunk_fwd
from ..utils import check_no_grad
from .fused_recurrent import (check_vla_inputs, check_vla_state, elu1, final_state, recurrent_num_warps,
                              refresh_phase, vla_a_step, vla_key_features)

__all__ = ["chunk_vla", "chunk_vla_fwd", "DOT_PRECISIONS", "CHUNK_BV", "A_PASSES", "STATE_PASSES"]

A_PASSES = ("chunked", "sequential")
STATE_PASSES = ("specmem", "fla-dplr")

DOT_PRECISIONS = ("ieee", "tf32", "tf32x3")
# V columns per program of the chunk pass: more programs in parallel and fewer registers each
# (compiled for sm_90, BV=64 spills more than 32 at every size tried; see docs/gpu.md).
CHUNK_BV = 32


@triton.jit(do_not_specialize=["T"])
def vla_ah_fwd_kernel(
    k, u, ah, a, a0, a_norm,
    T, lambda0, eps, u_scale, eta, R, PHASE,
    H: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    USE_REFRESH: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr,
    STORE_FINAL_STATE: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_h = i_bh // H, i_bh % H
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    m_eye = (o_k[:, None] == o_k[None, :]) & m_k[:, None]

    bos = i_b * T * H + i_h
    p_k = k + bos * K + o_k
    p_u = u + bos * K + o_k
    p_ah = ah + bos * K + o_k
    p_an = a_norm + bos

    if USE_INITIAL_STATE:
        b_A = tl.load(a0 + i_bh * K * K + o_k[:, None] * K + o_k[None, :], mask=m_k[:, None] & m_k[None, :], other=0)
    else:
        b_A = tl.where(m_eye, 1.0 / lambda0, 0.0)
    for i_t in range(0, T):
        b_k = tl.load(p_k, mask=m_k, other=0).to(tl.float32)
        b_u = tl.load(p_u, mask=m_k, other=0).to(tl.float32)
        b_kf, b_kh, b_un = vla_key_features(b_k, b_u, m_k, eps, u_scale)
        b_A, b_ah = vla_a_step(b_A, b_un, b_kh, m_eye, PHASE + i_t, eps, eta, R, USE_REFRESH)
        tl.store(p_ah, b_ah, mask=m_k)
        tl.store(p_an, tl.sqrt(tl.sum(b_A * b_A)))
        p_k += H * K
        p_u += H * K
        p_ah += H * K
        p_an += H

    if STORE_FINAL_STATE:
        p_a = a + i_bh * K * K + o_k[:, None] * K + o_k[None, :]
        tl.store(p_a, b_A, mask=m_k[:, None] & m_k[None, :])


@triton.jit(do_not_specialize=["T"])
def chunk_vla_fwd_kernel(
    k, v, q, ah, o, s, z, s0, z0,
    T, eps,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr,
    STORE_FINAL_STATE: tl.constexpr,
):
    i_v, i_bh = tl.program_id(0), tl.program_id(1).to(tl.int64)
    i_b, i_h = i_bh // H, i_bh % H
    o_i = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_strict = o_i[:, None] > o_i[None, :]
    m_causal = o_i[:, None] >= o_i[None, :]

    bos = i_b * T * H + i_h
    k += bos * K
    q += bos * K
    ah += bos * K
    v += bos * V
    o += bos * V
    if USE_INITIAL_STATE:   # Hs = S0ᵀ and the normaliser's running sum carried in
        b_h = tl.load(s0 + i_bh * V * K + o_v[None, :] * K + o_k[:, None], mask=m_k[:, None] & m_v[None, :], other=0)
        b_z = tl.load(z0 + i_bh * K + o_k, mask=m_k, other=0)
    else:
        b_h = tl.zeros([BK, BV], dtype=tl.float32)      # Hs = Sᵀ, this program's V columns
        b_z = tl.zeros([BK], dtype=tl.float32)          # running sum of elu1(k) before the chunk
    for i_c in range(0, tl.cdiv(T, BT)):
        o_t = i_c * BT + o_i
        m_t = o_t < T
        m_tk = m_t[:, None] & m_k[None, :]
        o_t64 = o_t.to(tl.int64)                              # T*H*K may pass 2^31
        o_tk = o_t64[:, None] * (H * K) + o_k[None, :]
        o_tv = o_t64[:, None] * (H * V) + o_v[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_k = tl.load(k + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_q = tl.load(q + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_ah = tl.load(ah + o_tk, mask=m_tk, other=0).to(tl.float32)
        b_v = tl.load(v + o_tv, mask=m_tv, other=0).to(tl.float32)
        b_kf = elu1(b_k, m_tk)
        b_qf = elu1(b_q, m_tk)
        b_kh = b_kf / tl.maximum(tl.sqrt(tl.sum(b_kf * b_kf, axis=1)), eps)[:, None]

        # Tm = (I + tril(KH AHᵀ, -1))⁻¹ by forward substitution, row by row (as fla's solve).
        b_T = -tl.where(m_strict, tl.dot(b_kh, tl.trans(b_ah), input_precision=DOT_PRECISION), 0.0)
        for i in range(1, BT):
            b_a = tl.sum(tl.where(o_i[:, None] == i, b_T, 0.0), axis=0)
            b_a = b_a + tl.where(o_i < i, tl.sum(b_a[:, None] * b_T, axis=0), 0.0)
            b_T = tl.where(o_i[:, None] == i, b_a[None, :], b_T)
        b_T = tl.where(o_i[:, None] == o_i[None, :], 1.0, b_T)

        # pseudo-values U = Tm (V - KH Hs): the errors e_t of the tokens in this chunk
        b_u = tl.dot(b_T, b_v - tl.dot(b_kh, b_h, input_precision=DOT_PRECISION), input_precision=DOT_PRECISION)

        b_qa = tl.where(m_causal, tl.dot(b_qf, tl.trans(b_ah), input_precision=DOT_PRECISION), 0.0)
        b_o = tl.dot(b_qf, b_h, input_precision=DOT_PRECISION) + tl.dot(b_qa, b_u, input_precision=DOT_PRECISION)
        b_qk = tl.where(m_causal, tl.dot(b_qf, tl.trans(b_kf), input_precision=DOT_PRECISION), 0.0)
        b_den = tl.maximum(tl.sum(b_qf * b_z[None, :], axis=1) + tl.sum(b_qk, axis=1), eps)
        tl.store(o + o_tv, (b_o / b_den[:, None]).to(o.dtype.element_ty), mask=m_tv)

        b_h = b_h + tl.dot(tl.trans(b_ah), b_u, input_precision=DOT_PRECISION)
        b_z = b_z + tl.sum(b_kf, axis=0)

    if STORE_FINAL_STATE:
        p_s = s + i_bh * V * K + o_v[None, :] * K + o_k[:, None]
        tl.store(p_s, b_h, mask=m_k[:, None] & m_v[None, :])
        if i_v == 0:
            tl.store(z + i_bh * K + o_k, b_z, mask=m_k)


def vla_ah_sequential_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                          initial_state=None):
    """The token-by-token ``A`` pass; returns ``ah``, final ``a`` (or None) and the ``a_norm`` trace."""
    B, T, H, K = k.shape
    BK = block_size(K)
    f32 = dict(dtype=torch.float32, device=k.device)
    ah = torch.empty(B, T, H, K, **f32)
    a = torch.empty(B, H, K, K, **f32) if output_final_state else None
    a_norm = torch.empty(B, T, H, **f32)
    st = initial_state or {}
    vla_ah_fwd_kernel[(B * H,)](
        k, u, ah, a, st.get("a"), a_norm,
        T, float(lambda0), float(eps), float(u_scale), float(eta), max(int(refresh_period), 1),
        refresh_phase(st, refresh_period),
        H=H, K=K, BK=BK, USE_REFRESH=refresh_period > 0, USE_INITIAL_STATE=bool(st),
        STORE_FINAL_STATE=output_final_state, num_warps=recurrent_num_warps(BK),
    )
    return ah, a, a_norm


def chunk_vla_fwd(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, chunk_size, output_final_state,
                  dot_precision="ieee", a_pass="chunked", initial_state=None):
    """Launch the ``A`` pass and the state pass on checked, contiguous inputs; returns ``o, s, a, z, a_norm``."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    BK = block_size(K)
    BV = min(CHUNK_BV, block_size(V))
    f32 = dict(dtype=torch.float32, device=k.device)
    st = initial_state or {}
    if a_pass == "sequential":
        ah, a, a_norm = vla_ah_sequential_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                                              initial_state)
    else:
        ah, a = vla_a_chunk_fwd(k, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state, dot_precision,
                                initial_state=initial_state)
        a_norm = None
    o = torch.empty_like(v)
    s = torch.empty(B, H, V, K, **f32) if output_final_state else None
    z = torch.empty(B, H, K, **f32) if output_final_state else None
    chunk_vla_fwd_kernel[(triton.cdiv(V, BV), B * H)](
        k, v, q, ah, o, s, z, st.get("s"), st.get("zk"),
        T, float(eps),
        H=H, K=K, V=V, BT=chunk_size, BK=BK, BV=BV, DOT_PRECISION=dot_precision,
        USE_INITIAL_STATE=bool(st), STORE_FINAL_STATE=output_final_state,
        num_warps=4,
    )
    return o, s, a, z, a_norm


def chunk_vla(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
              chunk_size=16, output_final_state=True, dot_precision="ieee", a_pass="chunked",
              state_pass="specmem", initial_state=None) -> dict:
    """VLA (spec §2): the ``A`` pass, then the state chunk by chunk as an asymmetric delta rule.

    Args:
        k, q, u: ``[B, T, H, K]`` raw key, query and ``u``; v: ``[B, T, H, V]``.
            float32/float16/bfloat16, ``K, V <= 128``, computed in float32; any ``T``.
        lambda0, eps, refresh_period, eta, u_scale: as :func:`fused_recurrent_vla`.
        chunk_size: tokens per chunk ``C`` of the state pass, a power of two in [16, 64].
        output_final_state: also return the final ``s`` and ``a``.
        dot_precision: ``tl.dot`` input precision: ``"ieee"`` (float32, what the tests check),
            ``"tf32"`` or ``"tf32x3"`` (tensor cores on a GPU; the CPU interpreter ignores it).
        a_pass: ``"chunked"`` (segment form, one sequential step per segment of <= 32 tokens,
            :mod:`.chunk_a`) or ``"sequential"`` (one step per token; the only one with the
            ``a_norm`` trace).
        state_pass: ``"specmem"`` (this module's UT-form kernel) or ``"fla-dplr"`` (fla's
            ``chunk_dplr_delta_rule`` with ``a = -kh, b = ah, k = ah``: CUDA only, and the only
            path with a backward: ``A`` then runs as the differentiable torch segment form).
        initial_state: an earlier call's ``final_state`` to continue its stream (as
            :func:`fused_recurrent_vla`); None starts a new one.

    Returns ``o`` ``[B, T, H, V]``, ``s`` ``[B, H, V, K]``, ``a`` ``[B, H, K, K]``,
    ``a_norm`` ``[B, T, H]`` (``a_pass="sequential"`` only, else None), and ``s_norm = None``:
    the state is only formed at chunk boundaries (use :func:`fused_recurrent_vla` for traces);
    ``final_state`` (the dict ``initial_state`` takes; None without ``output_final_state``).
    """
    if state_pass not in STATE_PASSES:
        raise SpecmemInputError(f"state_pass: must be one of {STATE_PASSES}, got {state_pass!r}")
    if state_pass != "fla-dplr":
        check_no_grad("chunk_vla", (k, v, q, u), hint="state_pass='fla-dplr' (CUDA) has a backward")
    k, v, q, u, lambda0, eps, refresh_period, eta, u_scale = check_vla_inputs(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    chunk_size = check_scalar("chunk_size", chunk_size, lo=16, hi=64, integer=True)
    if chunk_size & (chunk_size - 1):
        raise SpecmemInputError(f"chunk_size: must be a power of two in [16, 64], got {chunk_size}")
    if dot_precision not in DOT_PRECISIONS:
        raise SpecmemInputError(f"dot_precision: must be one of {DOT_PRECISIONS}, got {dot_precision!r}")
    if a_pass not in A_PASSES:
        raise SpecmemInputError(f"a_pass: must be one of {A_PASSES}, got {a_pass!r}")
    B, T, H, K = k.shape
    st = check_vla_state(initial_state, B, H, K, v.shape[-1], k.device)
    if state_pass == "fla-dplr":
        from .dplr import chunk_vla_dplr
        return chunk_vla_dplr(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                              dot_precision, a_pass, st)
    o, s, a, z, a_norm = chunk_vla_fwd(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, chunk_size, output_final_state, dot_precision,
        a_pass, st)
    return {"o": o, "s": s, "a": a, "s_norm": None, "a_norm": a_norm,
            "final_state": final_state(s, a, z, st["t"] if st else 0, T)}
