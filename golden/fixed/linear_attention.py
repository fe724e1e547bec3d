"""Linear attention with ELU+1 (spec §3): bit-exact integer model.

``kf = elu1(k)``, ``qf = elu1(q)`` (hardware ELU+1), ``z`` the exact running sum of ``kf``,
``den = max(zᵀ qf, eps)`` exact and its reciprocal (scalar unit), all before the loop (they do
not depend on ``S``). Per token, one read pass over the *old* ``S`` (read at ``s_mul``):
``sq = S qf``, then

1. ``o = narrow((sq + round(v (kfᵀ qf))) / den)``: the new ``S`` times ``qf``
   (``S_new = S + v kfᵀ``; the scalar ``kfᵀ qf`` normalised to a ``P``-bit mantissa), times
   the reciprocal's mantissa (exact), one rounding into ``o``'s format;
2. write: ``S <- sat(S + round(v kfᵀ))``.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import as_float_array, check_same_shape, check_scalar

from .datapath import Datapath, exact_dot
from .formats import formats_for
from .fxtype import mul_round_shift, round_shift

__all__ = ["linear_attention_fixed"]


def linear_attention_fixed(k, v, q, eps: float = 1e-4, preset="int8", *, in_range=None, trace: bool = True) -> dict:
    """Linear attention in fixed point; inputs as :func:`specmem.golden.linear_attention.linear_attention`.

    Returns ``o``/``o_raw`` ``[..., T, d]``, ``s``/``s_raw`` (final), ``z``/``z_raw``,
    ``s_norm`` ``[..., T]`` (a diagnostic), ``sat``, ``ranges``, ``fmt``.
    """
    kk = as_float_array("k", k)
    vv = as_float_array("v", v)
    qq = as_float_array("q", q)
    check_same_shape("k", kk, q=qq, v=vv)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    fmt = formats_for("linear", preset, d, {"in_range": in_range})
    dp = Datapath(fmt, trace=trace)
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, V, Q = (dp.quantize(n, flat(a)) for n, a in (("k", kk), ("v", vv), ("q", qq)))
    B = K.shape[0]
    fin, ff, fs, fsm = (fmt[n].frac for n in ("k", "kf", "s", "s_mul"))
    KF = dp.elu1("kf", K, fmt["k"])
    QF = dp.elu1("qf", Q, fmt["q"])
    Z = dp.clip("z", np.cumsum(KF, axis=1), ff)
    den = exact_dot(Z, QF)
    eps_r = dp.eps_raw(eps, 2 * ff)
    den = np.where(den < eps_r, eps_r, den)
    rden = dp.recip(den, 2 * ff)
    kq = dp.su.normalize(np.einsum("btd,btd->bt", KF, QF), 2 * ff)
    S = np.zeros((B, d, d), dtype=np.int64)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    s_norm = np.zeros((B, T))
    F = fsm + ff  # accumulator binary point of S qf
    for t in range(T):
        v, kf, qf = V[:, t], KF[:, t], QF[:, t]
        Sm = dp.narrow("s_mul", S, fs)
        sq = np.einsum("bij,bj->bi", Sm, qf)
        num = sq + round_shift(v * kq.m[:, t, None], (fin + kq.f[:, t])[:, None] - F, dp.rounding)
        prod = mul_round_shift(num, rden.m[:, t, None], 0)
        o_raw[:, t] = dp.narrow("o", prod, F + rden.f[:, t])
        S = dp.write("s", S, (v[:, :, None] * kf[:, None, :], fin + ff))
        sf = fmt["s"].to_float(S)
        s_norm[:, t] = np.sqrt(np.einsum("bij,bij->b", sf, sf))
    Zf = Z[:, -1]
    return {
        "o": fmt["o"].to_float(o_raw).reshape(batch + (T, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "s": fmt["s"].to_float(S).reshape(batch + (d, d)),
        "s_raw": S.reshape(batch + (d, d)),
        "z": fmt["z"].to_float(Zf).reshape(batch + (d,)),
        "z_raw": Zf.reshape(batch + (d,)),
        "s_norm": s_norm.reshape(batch + (T,)),
        "sat": dict(dp.sat),
        "ranges": dict(dp.ranges),
        "fmt": fmt,
    }
