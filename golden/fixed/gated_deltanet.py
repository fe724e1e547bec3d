"""Gated DeltaNet (spec §3) in the RTL's fixed-binary-point presets: bit-exact integer model.

``S <- g S (I - beta kn knᵀ) + beta v knᵀ`` with a per-token decay ``g`` in (0, 1] applied
first. Expanded, with ``sk = S kn`` read from the *old* state, ``e = v - g sk``,
``be = beta e``: ``S_new = g S + be knᵀ`` and ``o = S_new qn = g (S qn) + be (knᵀ qn)``.

Formats: those of :func:`~.deltanet.deltanet_fixed` (``formats_for("deltanet", ...)``) plus
``g``, an unsigned ``M``-bit ``UQ1.(M-1)`` (``g = 1`` is ``2^(M-1)``, exact; step
``2^-(M-1)``, 1/128 at legacy-int8; quantised on the host like ``beta``, round to nearest
even; a decay below half a step becomes 0 and erases the state).

Per token (``F`` = the read accumulators' binary point ``s_mul + kn``, ``fg`` = g's fraction
bits), same order and roundings as DeltaNet's model with ``g`` multiplied in exactly:

1. read the old state at ``s_mul``: ``sk = Sm kn``, ``sq = Sm qn`` (exact);
2. ``e = narrow(v - g sk)`` (exact product at ``F + fg``, one rounding);
   ``be = narrow(beta e)``;
3. ``o = narrow(g sq + (round(be c) << fg))`` with ``c = normalize(knᵀ qn)``; the ``be c``
   term is rounded at ``F`` as in DeltaNet, then aligned (exact) to ``g sq``'s binary point;
4. write: ``S <- sat(round(g S) + round(be knᵀ))``: two products, each rounded on its own
   into ``S``'s format, one saturation (:meth:`Datapath.write`).

With ``g = 1`` every ``g`` product is a left shift by ``fg`` and the rounding of step 2 and 3
drops exactly those bits, so the model equals :func:`~.deltanet.deltanet_fixed` bit for bit.

Fixed-point decay has a dead band: with round-to-nearest, ``round(g s) = s`` for
``|s| <= 1 / (2 (1 - g))`` LSBs, so small state elements stop decaying (at ``g = 0.99``: 50
LSBs of ``S``, 0.012 at legacy-int8's ``S`` LSB of 2^-12).
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError, check_scalar
from specmem.golden.deltanet import L2_EPS, _per_token, _prepare

from .datapath import Datapath
from .deltanet import unit_rows
from .formats import FixedFormat, formats_for
from .fxtype import FxType, round_shift

__all__ = ["gated_deltanet_fixed", "gated_deltanet_formats"]


def gated_deltanet_formats(preset, d: int, in_range=None) -> FixedFormat:
    """DeltaNet's formats for ``preset`` and ``d`` plus the decay ``g`` (``UQ1.(M-1)``)."""
    fmt = formats_for("deltanet", preset, d, {"in_range": in_range})
    if fmt.preset.scheme != "fixed":
        raise SpecmemInputError(
            f"preset: gated_deltanet_fixed models the fixed-binary-point presets; {fmt.preset.name!r} is scaled "
            "(golden/fixed/scaled/deltanet.py)")
    M = fmt["k"].width
    fmt.algo = "gated-deltanet"
    fmt.tensors["g"] = FxType(M, M - 1, signed=False, rounding=fmt.preset.rounding)
    fmt.kinds["g"] = "fixed"
    fmt.why["g"] = "decay g in (0, 1]: unsigned UQ1.(M-1) so that g = 1 is exact with one more bit than beta"
    return fmt


def gated_deltanet_fixed(k, v, q, beta, g, preset="legacy-int8", *, eps: float = L2_EPS, in_range=None,
                         trace: bool = True) -> dict:
    """Gated DeltaNet in fixed point; inputs as :func:`specmem.golden.deltanet.gated_deltanet`.

    Returns ``o``/``o_raw`` ``[..., T, d]``, ``s``/``s_raw`` (final), ``s_norm`` ``[..., T]``
    (Frobenius norm of the dequantised state, a diagnostic), ``sat``, ``ranges``, ``fmt``.
    """
    kk, vv, qq = _prepare(k, v, q)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    bt = _per_token("beta", beta, kk.shape[:-1], lo_open=True, hi=1.0)
    gt = _per_token("g", g, kk.shape[:-1], lo_open=True, hi=1.0)
    if vv.shape != kk.shape:
        raise SpecmemInputError(f"v: the fixed-point model needs d_v = d_k, got shape {vv.shape} for k {kk.shape}")
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    fmt = gated_deltanet_formats(preset, d, in_range)
    dp = Datapath(fmt, trace=trace)
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, V, Q = (dp.quantize(n, flat(a)) for n, a in (("k", kk), ("v", vv), ("q", qq)))
    BT = dp.quantize("beta", bt.reshape(K.shape[:2]))
    G = dp.quantize("g", gt.reshape(K.shape[:2]))
    B = K.shape[0]
    fin, fu, fs, fsm, fe, fb, fg = (fmt[n].frac for n in ("k", "kn", "s", "s_mul", "e", "beta", "g"))
    KN = unit_rows(dp, "kn", K, fin, eps)
    QN = unit_rows(dp, "qn", Q, fin, eps)
    S = np.zeros((B, d, d), dtype=np.int64)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    s_norm = np.zeros((B, T))
    F = fsm + fu  # accumulator binary point of S kn and S qn
    # the products by g are exact; where they pass 62 bits (legacy-wide) they run on Python integers
    big = max(fmt.acc_bits["s_read"] + fg, F + fg - fin + fmt["v"].width, fmt["s"].width + fmt["g"].width) + 2 > 62
    X = (lambda a: np.asarray(a).astype(object)) if big else (lambda a: a)  # noqa: E731
    for t in range(T):
        kn, qn, gg = KN[:, t], QN[:, t], X(G[:, t, None])
        Sm = dp.narrow("s_mul", S, fs)
        sk = np.einsum("bij,bj->bi", Sm, kn)
        sq = np.einsum("bij,bj->bi", Sm, qn)
        e = dp.narrow("e", (X(V[:, t]) << (F + fg - fin)) - gg * sk, F + fg)
        be = dp.narrow("e", e * BT[:, t, None], fe + fb)
        c = dp.su.normalize(np.einsum("bi,bi->b", kn, qn), 2 * fu)
        tb = round_shift(be * c.m[:, None], (fe + c.f)[:, None] - F, dp.rounding)
        o_raw[:, t] = dp.narrow("o", gg * sq + (X(tb) << fg), F + fg)
        S = dp.write("s", np.zeros_like(S), (gg[:, :, None] * S, fs + fg), (be[:, :, None] * kn[:, None, :], fe + fu))
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
