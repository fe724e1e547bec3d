"""Linear attention with ELU+1 (spec §3) in a scaled format: bit-exact integer model.

``kf = elu1(k)``, ``qf = elu1(q)`` as block vectors (:func:`~.elu.elu1_block`); the normaliser
``z`` is a 32-bit block vector (one exponent), ``z <- align(z + kf)`` every token;
``den = max(zᵀ qf, eps)`` exact, then its reciprocal (scalar unit). Per token, one read pass
over the old row-BFP ``S`` (read at ``M`` bits): ``sq = S qf`` per row, then

1. ``num = align(sq + v (kfᵀ qf))`` into ``Wo`` bits (the new ``S`` times ``qf``);
2. ``o = block(num rden)`` (``o_raw``, ``o_frac``);
3. write: ``S <- S + v kfᵀ`` (row exponents from the bound: ``S`` grows like ``sqrt(t)`` and
   its exponents follow; nothing saturates).
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import as_float_array, check_same_shape, check_scalar

from ..formats import Preset
from .bfp import RowBFP, align_block, block, product_bound_exp, quantize_block, stream_outputs, to_float
from .elu import elu1_block
from .formats import scaled_format, scaled_preset

__all__ = ["linear_attention_scaled", "running_sum", "elu_features", "Z_BITS"]

#: the running sum of the features: a 32-bit block vector (its dot product with an M <= 24-bit
#: qf stays below 2^62 for d <= 2^6 ... 2^12)
Z_BITS = 32


def running_sum(x, fx, W: int, rounding: str = "rne"):
    """``z_t = align(z_{t-1} + x_t)`` as ``W``-bit block vectors: ``(raw [B, T, d], frac [B, T])``."""
    B, T, d = x.shape
    z = np.zeros((B, d), dtype=np.int64)
    fz = np.zeros(B, dtype=np.int64)
    Z = np.zeros((B, T, d), dtype=np.int64)
    FZ = np.zeros((B, T), dtype=np.int64)
    for t in range(T):
        z, fz = align_block([(z, fz[:, None]), (x[:, t], fx[:, t, None])], W, rounding)
        Z[:, t], FZ[:, t] = z, fz
    return Z, FZ


def elu_features(K, fk, Q, fq, p: Preset, eps: float):
    """The ELU+1 features of block keys and queries and the normaliser's reciprocal:
    ``(KF, fkf, QF, fqf, Z, FZ, rden)`` with ``Z`` the running sum of ``KF`` (:data:`Z_BITS`
    bits) and ``rden = 1 / max(Zᵀ QF, eps)`` from the scalar unit."""
    rnd = p.rounding
    KF, fkf = elu1_block(K, fk, p.mul_bits, p.exp_lut_bits, rnd)
    QF, fqf = elu1_block(Q, fq, p.mul_bits, p.exp_lut_bits, rnd)
    Z, FZ = running_sum(KF, fkf, Z_BITS, rnd)
    den = np.einsum("btd,btd->bt", Z, QF)  # exact: < 2^(Z_BITS + M + log2 d)
    fden = FZ + fqf
    eps_r = np.maximum(1, np.rint(np.ldexp(eps, fden))).astype(np.int64)
    den = np.where(den < eps_r, eps_r, den)
    return KF, fkf, QF, fqf, Z, FZ, p.scalar_unit().recip(den, fden)


def linear_attention_scaled(k, v, q, eps: float = 1e-4, preset: Preset | None = None, *, trace: bool = True) -> dict:
    """Linear attention in the scaled ``preset``; inputs as the float model's.

    Returns ``o`` (dequantised), ``o_raw`` ``[..., T, d]``, ``o_frac`` ``[..., T]``, ``s``,
    ``s_raw``, ``s_frac`` (final state: mantissas and row exponents), ``z``/``z_raw``/``z_frac``,
    ``s_norm`` ``[..., T]``, ``sat``, ``ranges``, ``fmt``.
    """
    kk = as_float_array("k", k)
    vv = as_float_array("v", v)
    qq = as_float_array("q", q)
    check_same_shape("k", kk, q=qq, v=vv)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    p = scaled_preset(preset)
    M, Ws, Wo, rnd = p.mul_bits, p.state_bits, p.out_bits, p.rounding
    fmt = scaled_format("linear", p, d)
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, fk = quantize_block(flat(kk), M, "k", rnd)
    V, fv = quantize_block(flat(vv), M, "v", rnd)
    Q, fq = quantize_block(flat(qq), M, "q", rnd)
    B = K.shape[0]
    KF, fkf, QF, fqf, Z, FZ, rden = elu_features(K, fk, Q, fq, p, eps)
    C = np.einsum("btd,btd->bt", KF, QF)  # kfᵀ qf, exact
    kfmax = np.max(np.abs(KF), axis=-1)
    S = RowBFP(B, d, d, Ws, rnd)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    o_frac = np.zeros((B, T), dtype=np.int64)
    s_norm = np.zeros((B, T))
    for t in range(T):
        vt, fvt, kf, f_kf, qf, f_qf = V[:, t], fv[:, t], KF[:, t], fkf[:, t], QF[:, t], fqf[:, t]
        Rm, rf = S.read(M)
        sq = np.einsum("bij,bj->bi", Rm, qf)
        num, fnum = align_block([(sq, rf + f_qf[:, None]), (vt * C[:, t, None], (fvt + f_kf + f_qf)[:, None])], Wo, rnd)
        o_raw[:, t], o_frac[:, t] = block(num * rden.m[:, t, None], fnum + rden.f[:, t], Wo, rnd)
        bound_new = product_bound_exp(vt, fvt[:, None], kfmax[:, t, None], f_kf[:, None])
        S.write([(S.mant, S.frac), (vt[:, :, None] * kf[:, None, :], (fvt + f_kf)[:, None])], [S.row_exp(), bound_new])
        s_norm[:, t] = np.sqrt(S.frob2())
    zf = to_float(Z[:, -1], FZ[:, -1])
    return {
        **stream_outputs(batch, o_raw, o_frac, S),
        "z": zf.reshape(batch + (d,)),
        "z_raw": Z[:, -1].reshape(batch + (d,)),
        "z_frac": FZ[:, -1].reshape(batch),
        "s_norm": s_norm.reshape(batch + (T,)),
        "sat": {"s": S.sat},
        "ranges": {},
        "fmt": fmt,
    }
