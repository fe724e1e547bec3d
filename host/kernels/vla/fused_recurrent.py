"""Fused recurrent VLA: one program per (batch, head) steps through all T tokens in one launch.

``A`` (``[K, K]``) and ``S`` (``[V, K]``) stay on chip in float32 for the whole sequence;
each token reads ``k, v, q, u`` once and writes ``o`` and the two norm traces once.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..utils import SpecmemInputError, block_size, check_kernel_tensor, check_no_grad, check_scalar

__all__ = ["fused_recurrent_vla", "fused_recurrent_vla_fwd"]


@triton.jit
def elu1(x, mask):
    """ELU+1 (``x + 1`` if ``x > 0`` else ``exp(x)``), zero where ``mask`` is false: ``elu1(0) = 1``
    would otherwise leak into the padded lanes."""
    return tl.where(mask, tl.where(x > 0, x + 1.0, tl.exp(tl.minimum(x, 0.0))), 0.0)


@triton.jit
def vla_key_features(b_k, b_u, m_k, eps, u_scale):
    """``kf = elu1(k)`` (zero on padding), ``kh = kf / max(||kf||, eps)``, ``un`` = scaled unit ``u``."""
    b_kf = elu1(b_k, m_k)
    b_kh = b_kf / tl.maximum(tl.sqrt(tl.sum(b_kf * b_kf)), eps)
    b_un = b_u / tl.maximum(tl.sqrt(tl.sum(b_u * b_u)), eps) * u_scale
    return b_kf, b_kh, b_un


@triton.jit
def vla_a_step(b_A, b_un, b_kh, m_eye, i_t, eps, eta, R, USE_REFRESH: tl.constexpr):
    """One step of the ``A`` loop (Sherman–Morrison on ``un``, ``+eta I`` every R tokens); returns ``A, ah``."""
    b_z = tl.sum(b_A * b_un[None, :], axis=1)
    b_delta = tl.maximum(1.0 + tl.sum(b_un * b_z), eps)
    b_A = b_A - b_z[:, None] * b_z[None, :] / b_delta
    if USE_REFRESH:
        if (i_t + 1) % R == 0:
            b_A = b_A + tl.where(m_eye, eta, 0.0)
    b_alpha = tl.sum(b_A * b_kh[None, :], axis=1)
    b_ah = b_alpha / tl.maximum(tl.sqrt(tl.sum(b_alpha * b_alpha)), eps)
    return b_A, b_ah


@triton.jit(do_not_specialize=["T"])
def fused_recurrent_vla_fwd_kernel(
    k, v, q, u, o, s, a, z, s0, a0, z0, s_norm, a_norm,
    T, lambda0, eps, u_scale, eta, R, PHASE,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    USE_REFRESH: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr,
    STORE_FINAL_STATE: tl.constexpr,
):
    i_bh = tl.program_id(0).to(tl.int64)
    i_b, i_h = i_bh // H, i_bh % H
    o_k = tl.arange(0, BK)
    o_v = tl.arange(0, BV)
    m_k = o_k < K
    m_v = o_v < V
    m_eye = (o_k[:, None] == o_k[None, :]) & m_k[:, None]

    bos = i_b * T * H + i_h          # row of token 0 of this (batch, head) in [B*T*H, D]
    p_k = k + bos * K + o_k
    p_q = q + bos * K + o_k
    p_u = u + bos * K + o_k
    p_v = v + bos * V + o_v
    p_o = o + bos * V + o_v
    p_sn = s_norm + bos
    p_an = a_norm + bos

    if USE_INITIAL_STATE:
        b_A = tl.load(a0 + i_bh * K * K + o_k[:, None] * K + o_k[None, :], mask=m_k[:, None] & m_k[None, :], other=0)
        b_S = tl.load(s0 + i_bh * V * K + o_v[:, None] * K + o_k[None, :], mask=m_v[:, None] & m_k[None, :], other=0)
        b_zk = tl.load(z0 + i_bh * K + o_k, mask=m_k, other=0)
    else:
        b_A = tl.where(m_eye, 1.0 / lambda0, 0.0)
        b_S = tl.zeros([BV, BK], dtype=tl.float32)
        b_zk = tl.zeros([BK], dtype=tl.float32)
    for i_t in range(0, T):
        b_k = tl.load(p_k, mask=m_k, other=0).to(tl.float32)
        b_u = tl.load(p_u, mask=m_k, other=0).to(tl.float32)
        b_v = tl.load(p_v, mask=m_v, other=0).to(tl.float32)
        b_q = tl.load(p_q, mask=m_k, other=0).to(tl.float32)

        b_kf, b_kh, b_un = vla_key_features(b_k, b_u, m_k, eps, u_scale)
        b_A, b_ah = vla_a_step(b_A, b_un, b_kh, m_eye, PHASE + i_t, eps, eta, R, USE_REFRESH)

        b_e = b_v - tl.sum(b_S * b_kh[None, :], axis=1)
        b_S = b_S + b_e[:, None] * b_ah[None, :]

        b_qf = elu1(b_q, m_k)
        b_zk = b_zk + b_kf
        b_den = tl.maximum(tl.sum(b_zk * b_qf), eps)
        b_o = tl.sum(b_S * b_qf[None, :], axis=1) / b_den
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_v)
        tl.store(p_sn, tl.sqrt(tl.sum(b_S * b_S)))
        tl.store(p_an, tl.sqrt(tl.sum(b_A * b_A)))

        p_k += H * K
        p_q += H * K
        p_u += H * K
        p_v += H * V
        p_o += H * V
        p_sn += H
        p_an += H

    if STORE_FINAL_STATE:
        p_s = s + i_bh * V * K + o_v[:, None] * K + o_k[None, :]
        tl.store(p_s, b_S, mask=m_v[:, None] & m_k[None, :])
        p_a = a + i_bh * K * K + o_k[:, None] * K + o_k[None, :]
        tl.store(p_a, b_A, mask=m_k[:, None] & m_k[None, :])
        tl.store(z + i_bh * K + o_k, b_zk, mask=m_k)


def recurrent_num_warps(bk: int) -> int:
    """Warps for a program holding ``[BK, BK]`` float32 blocks: the smallest count that compiled
    for sm_90 without spilling (BK=128: 128 registers, 496 bytes of stack with A and S)."""
    return 4 if bk <= 32 else 8 if bk <= 64 else 16


def fused_recurrent_vla_fwd(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state,
                            initial_state=None):
    """Launch the kernel on checked, contiguous inputs; ``u_scale`` already resolved;
    ``initial_state`` checked by :func:`check_vla_state`."""
    B, T, H, K = k.shape
    V = v.shape[-1]
    BK, BV = block_size(K), block_size(V)
    f32 = dict(dtype=torch.float32, device=k.device)
    o = torch.empty_like(v)
    s = torch.empty(B, H, V, K, **f32) if output_final_state else None
    a = torch.empty(B, H, K, K, **f32) if output_final_state else None
    z = torch.empty(B, H, K, **f32) if output_final_state else None
    st = initial_state or {}
    s_norm = torch.empty(B, T, H, **f32)
    a_norm = torch.empty(B, T, H, **f32)
    fused_recurrent_vla_fwd_kernel[(B * H,)](
        k, v, q, u, o, s, a, z, st.get("s"), st.get("a"), st.get("zk"), s_norm, a_norm,
        T, float(lambda0), float(eps), float(u_scale), float(eta), max(int(refresh_period), 1),
        refresh_phase(st, refresh_period),
        H=H, K=K, V=V, BK=BK, BV=BV,
        USE_REFRESH=refresh_period > 0, USE_INITIAL_STATE=bool(st), STORE_FINAL_STATE=output_final_state,
        num_warps=recurrent_num_warps(BK),
    )
    return o, s, a, z, s_norm, a_norm


def refresh_phase(state: dict, refresh_period: int) -> int:
    """Tokens since the last refresh at the start of this call (``t mod refresh_period``)."""
    return int(state.get("t", 0)) % refresh_period if state and refresh_period else 0


def check_vla_state(initial_state, B, H, K, V, device):
    """Validate a resumable VLA state (``final_state`` of an earlier call); returns it or None.

    Keys: ``s`` ``[B, H, V, K]``, ``a`` ``[B, H, K, K]``, ``zk`` ``[B, H, K]`` (float32, on the
    inputs' device; made contiguous) and ``t`` (tokens consumed so far, sets the refresh phase).
    """
    if initial_state is None:
        return None
    if not isinstance(initial_state, dict) or set(initial_state) != {"s", "a", "zk", "t"}:
        got = sorted(initial_state) if isinstance(initial_state, dict) else type(initial_state).__name__
        raise SpecmemInputError(f"initial_state: expected a dict with keys a, s, t, zk (an earlier call's "
                                f"final_state), got {got}")
    out = {}
    for name, shape in (("s", (B, H, V, K)), ("a", (B, H, K, K)), ("zk", (B, H, K))):
        x = initial_state[name]
        if not isinstance(x, torch.Tensor) or tuple(x.shape) != shape or x.dtype != torch.float32:
            raise SpecmemInputError(f"initial_state: {name} must be a float32 tensor of shape {shape}, got "
                                    f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")
        if x.device != device:
            raise SpecmemInputError(f"initial_state: {name} on {x.device}, expected {device} like the inputs")
        out[name] = x.contiguous()
    t = initial_state["t"]
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise SpecmemInputError(f"initial_state: t must be an integer >= 0 (tokens consumed), got {t!r}")
    out["t"] = t
    return out


def final_state(s, a, z, t0: int, T: int):
    """The resumable state after this call (None without ``output_final_state``)."""
    return None if s is None else {"s": s, "a": a, "zk": z, "t": t0 + T}


def check_vla_inputs(k, v, q, u, lambda0, eps, refresh_period, eta, u_scale):
    """Shared checks of the VLA kernels' public functions; returns tensors and resolved scalars."""
    k = check_kernel_tensor("k", k)
    v = check_kernel_tensor("v", v, device=k.device)
    q = check_kernel_tensor("q", q, device=k.device)
    u = check_kernel_tensor("u", u, device=k.device)
    for name, x in (("q", q), ("u", u)):
        if x.shape != k.shape:
            raise SpecmemInputError(f"{name}: shape {tuple(x.shape)} does not match k shape {tuple(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise SpecmemInputError(f"v: leading shape [B, T, H] {tuple(v.shape[:3])} does not match k {tuple(k.shape[:3])}")
    if isinstance(refresh_period, bool):
        raise SpecmemInputError(f"refresh_period: expected an integer, got {refresh_period!r}")
    lambda0 = check_scalar("lambda0", lambda0, lo=0, lo_open=True)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    refresh_period = check_scalar("refresh_period", refresh_period, lo=0, integer=True)
    eta = check_scalar("eta", eta, lo=0)
    K = k.shape[-1]
    u_scale = 1.0 / math.sqrt(K) if u_scale is None else check_scalar("u_scale", u_scale, lo=0, lo_open=True)
    return k, v, q, u, lambda0, eps, refresh_period, eta, u_scale


def fused_recurrent_vla(k, v, q, u, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None,
                        output_final_state=True, initial_state=None) -> dict:
    """VLA (spec §2, Algorithm 1), all T tokens in one launch, one program per (batch, head).

    Args:
        k, q, u: ``[B, T, H, K]`` raw key, query and ``u`` (before feature maps).
        v: ``[B, T, H, V]`` values. float32/float16/bfloat16; ``K, V <= 128``; computed in float32.
        lambda0, eps, refresh_period, eta: as spec §2 (``refresh_period=0``: no refresh).
        u_scale: ``None`` means ``1/sqrt(K)`` (Algorithm 1); ``1`` is the paper's eq. (8).
        output_final_state: also return the final ``s`` and ``a``, and ``final_state``.
        initial_state: an earlier call's ``final_state`` (``s``, ``a``, ``zk``: the normaliser's
            running sum of ``elu1(k)``, ``t``: tokens consumed, for the refresh phase) to continue
            that stream; None starts a new one. ``lambda0`` is then unused.

    Returns a dict like the golden model's: ``o`` ``[B, T, H, V]`` (dtype of ``v``),
    ``s`` ``[B, H, V, K]`` (read as ``S @ key``; fla stores ``[K, V]``) and ``a`` ``[B, H, K, K]``
    in float32 (None without ``output_final_state``), ``s_norm`` and ``a_norm`` ``[B, T, H]``
    (Frobenius norms after each token), and ``final_state`` (the dict ``initial_state`` takes; None
    without ``output_final_state``).
    """
    check_no_grad("fused_recurrent_vla", (k, v, q, u), hint="chunk_vla(..., state_pass='fla-dplr') has a backward")
    k, v, q, u, lambda0, eps, refresh_period, eta, u_scale = check_vla_inputs(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    B, T, H, K = k.shape
    st = check_vla_state(initial_state, B, H, K, v.shape[-1], k.device)
    o, s, a, z, s_norm, a_norm = fused_recurrent_vla_fwd(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale, output_final_state, st)
    return {"o": o, "s": s, "a": a, "s_norm": s_norm, "a_norm": a_norm,
            "final_state": final_state(s, a, z, st["t"] if st else 0, T)}
