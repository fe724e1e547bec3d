"""DeltaNet (spec §3): bit-exact integer model.

``kn = k rsqrt(max(||k||², eps²))``, ``qn`` likewise (all tokens first; they do not depend on
the state). Per token, one read pass over the *old* ``S`` (read at ``s_mul``):
``sk = S kn``, ``sq = S qn`` (exact accumulators), then

1. ``e = narrow(v - sk)``; ``be = narrow(beta e)``;
2. ``o = narrow(sq + round(be (knᵀ qn)))``: the new ``S`` times ``qn`` (``S_new = S + be knᵀ``)
   with the scalar ``knᵀ qn`` normalised to a ``P``-bit mantissa;
3. write: ``S <- sat(S + round(be knᵀ))``.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError, check_scalar
from specmem.golden.deltanet import L2_EPS, _per_token, _prepare

from .datapath import Datapath
from .formats import formats_for
from .fxtype import round_shift

__all__ = ["deltanet_fixed", "unit_rows"]


def unit_rows(dp: Datapath, name: str, raw, frac: int, eps: float) -> np.ndarray:
    """``x / max(||x||, eps)`` over the last axis into ``name``'s format (scalar-unit rsqrt)."""
    n2 = np.maximum(np.einsum("...d,...d->...", raw, raw), dp.eps_raw(eps * eps, 2 * frac))
    return dp.scale(name, raw, frac, dp.rsqrt(n2, 2 * frac))


def deltanet_fixed(k, v, q, beta, preset="int8", *, eps: float = L2_EPS, in_range=None, trace: bool = True) -> dict:
    """DeltaNet in fixed point; inputs as :func:`specmem.golden.deltanet.deltanet`.

    Returns ``o``/``o_raw`` ``[..., T, d]``, ``s``/``s_raw`` (final), ``s_norm`` ``[..., T]``
    (Frobenius norm of the dequantised state, a diagnostic), ``sat``, ``ranges``, ``fmt``.
    """
    kk, vv, qq = _prepare(k, v, q)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    bt = _per_token("beta", beta, kk.shape[:-1], lo_open=True, hi=1.0)
    if vv.shape != kk.shape:
        raise SpecmemInputError(f"v: the fixed-point model needs d_v = d_k, got shape {vv.shape} for k {kk.shape}")
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    fmt = formats_for("deltanet", preset, d, {"in_range": in_range})
    dp = Datapath(fmt, trace=trace)
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, V, Q = (dp.quantize(n, flat(a)) for n, a in (("k", kk), ("v", vv), ("q", qq)))
    BT = dp.quantize("beta", bt.reshape(K.shape[:2]))
    B = K.shape[0]
    fin, fu, fs, fsm, fe, fb = (fmt[n].frac for n in ("k", "kn", "s", "s_mul", "e", "beta"))
    KN = unit_rows(dp, "kn", K, fin, eps)
    QN = unit_rows(dp, "qn", Q, fin, eps)
    S = np.zeros((B, d, d), dtype=np.int64)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    s_norm = np.zeros((B, T))
    F = fsm + fu  # accumulator binary point of S kn and S qn
    for t in range(T):
        kn, qn = KN[:, t], QN[:, t]
        Sm = dp.narrow("s_mul", S, fs)
        sk = np.einsum("bij,bj->bi", Sm, kn)
        sq = np.einsum("bij,bj->bi", Sm, qn)
        e = dp.narrow("e", (V[:, t] << (F - fin)) - sk, F)
        be = dp.narrow("e", e * BT[:, t, None], fe + fb)
        c = dp.su.normalize(np.einsum("bi,bi->b", kn, qn), 2 * fu)
        num = sq + round_shift(be * c.m[:, None], (fe + c.f)[:, None] - F, dp.rounding)
        o_raw[:, t] = dp.narrow("o", num, F)
        S = dp.write("s", S, (be[:, :, None] * kn[:, None, :], fe + fu))
        sf = fmt["s"].to_float(S)
        s_norm[:, t] = np.sqrt(np.einsum("bij,bij->b", sf, sf))
    return {
        "o": fmt["o"].to_float(o_raw).reshape(batch + (T, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "s": fmt["s"].to_float(S).reshape(batch + (d, d)),
        "s_raw": S.reshape(batch + (d, d)),
        "s_norm": s_norm.reshape(batch + (T,)),
        "sat": dict(dp.sat),
        "ranges": dict(dp.ranges),
        "fmt": fmt,
    }
