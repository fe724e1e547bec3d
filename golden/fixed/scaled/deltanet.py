"""DeltaNet and Gated DeltaNet (spec §3) in a scaled format: bit-exact integer model.

Per token: ``k``, ``v``, ``q`` arrive as block vectors (per-token scale); ``kn``, ``qn`` =
``block(x rsqrt(max(||x||², eps²)))``; ``beta`` an ``M``-bit floating scalar. The state is a
:class:`~.bfp.RowBFP` (``Ws``-bit mantissas, one exponent per row), read at ``M`` bits.

Gated DeltaNet keeps ``S = gamma Ŝ`` with ``gamma = prod g`` a floating scalar of the scalar
unit (``P`` bits, one rounding per token): the decay is two scalar products per token instead
of ``d²`` multiplies, and ``Ŝ``'s row exponents absorb its growth. With
``S_t = g S (I - beta k kᵀ) + beta v kᵀ``:

1. ``gamma <- gamma g``; ``rg = 1/gamma`` (scalar unit);
2. read: ``sk = Ŝ kn``, ``sq = Ŝ qn`` per row (exact, one exponent per row);
3. ``e = align(v - gamma sk)``; ``be = block(beta e)``;
4. ``o = align(gamma sq + be (knᵀ qn))`` into ``Wo`` bits (``o_raw``, ``o_frac``);
5. write: ``Ŝ <- Ŝ + block(be rg) knᵀ`` (row exponents from the bound, one rounding per term).

DeltaNet is the same with ``g = 1`` (``gamma`` is never formed).
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError, check_scalar
from specmem.golden.deltanet import L2_EPS, _per_token, _prepare

from ..formats import Preset
from ..scalar_unit import Scalar
from .bfp import RowBFP, align_block, block, product_bound_exp, quantize_block, stream_outputs, to_float
from .formats import scaled_format, scaled_preset

__all__ = ["deltanet_scaled", "unit_block", "scalar_in"]


def unit_block(su, M, raw, frac, eps, rounding="rne", scale=None):
    """``x / max(||x||, eps)`` of block vectors ``(raw, frac)`` as a block vector (scalar-unit
    rsqrt); with ``scale`` (a positive constant: VLA's ``u_scale``) the rsqrt times
    ``su.const(scale)`` first (``su.mul``: one more rounding to ``P`` bits)."""
    n2 = np.einsum("...d,...d->...", raw, raw)
    eps2 = np.maximum(1, np.rint(np.ldexp(eps * eps, 2 * frac))).astype(np.int64)
    n2 = np.maximum(n2, eps2)
    r = su.rsqrt(n2, 2 * frac)
    if scale is not None:
        r = su.mul(r, su.const(scale))
    return block(raw * r.m[..., None], frac + r.f, M, rounding)


def scalar_in(su, x):
    """Positive per-token floats (``g``) as floating scalars of the scalar unit: ``(m, f)``, the
    ``P``-bit mantissas and exponents a host sends the hardware."""
    P = su.out_bits
    m, e = np.frexp(x)  # x = m 2^e, m in [0.5, 1)
    f = (P - 1) - e
    mm = np.rint(np.ldexp(x, f)).astype(np.int64)
    over = mm >= (1 << (P - 1))
    return np.where(over, mm >> 1, mm), (f - over).astype(np.int64)


def _span(spans: dict, name: str, values) -> None:
    """Widen ``spans[name] = [min, max]`` by the integers ``values`` (none: unchanged)."""
    v = np.asarray(values)
    if v.size:
        cur = spans.setdefault(name, [int(v.min()), int(v.max())])
        cur[0], cur[1] = min(cur[0], int(v.min())), max(cur[1], int(v.max()))


def deltanet_scaled(k, v, q, beta, g=None, preset: Preset | None = None, *, eps: float = L2_EPS,
                    trace: bool = True) -> dict:
    """DeltaNet (``g=None``) or Gated DeltaNet in the scaled ``preset``; inputs as
    :func:`specmem.golden.deltanet.gated_deltanet`.

    Returns ``o`` (dequantised), ``o_raw`` ``[..., T, d]``, ``o_frac`` ``[..., T]``, ``s`` (final,
    dequantised, gamma applied), ``s_raw`` ``[..., d, d]`` and ``s_frac`` ``[..., d]`` (Ŝ's
    mantissas and row exponents), Gated DeltaNet's ``gamma_m``, ``gamma_f`` ``[...]`` (the final
    ``gamma = gamma_m 2^-gamma_f``, so ``S = gamma_m s_raw 2^-(s_frac + gamma_f)``), ``s_norm``
    ``[..., T]``, ``sat``, ``ranges``, ``fmt``; with
    ``trace`` also ``exponents``: ``[min, max]`` of every exponent and shift the hardware holds
    (``s_row`` is ``S``'s row exponent, ``Ŝ``'s plus ``gamma``'s; the three shifts are the row
    read's rounding shift and the write's two alignment shifts, right-positive, over nonzero
    rows and products).
    """
    kk, vv, qq = _prepare(k, v, q)
    eps = check_scalar("eps", eps, lo=0, lo_open=True)
    bt = _per_token("beta", beta, kk.shape[:-1], lo_open=True, hi=1.0)
    gated = g is not None
    if gated:
        gt = _per_token("g", g, kk.shape[:-1], lo_open=True, hi=1.0)
    if vv.shape != kk.shape:
        raise SpecmemInputError(f"v: the fixed-point model needs d_v = d_k, got shape {vv.shape} for k {kk.shape}")
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    p = scaled_preset(preset)
    M, Ws, Wo, rnd = p.mul_bits, p.state_bits, p.out_bits, p.rounding
    fmt = scaled_format("gated-deltanet" if gated else "deltanet", p, d)
    su = p.scalar_unit()
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, fk = quantize_block(flat(kk), M, "k", rnd)
    V, fv = quantize_block(flat(vv), M, "v", rnd)
    Q, fq = quantize_block(flat(qq), M, "q", rnd)
    Bt, fb = quantize_block(bt.reshape(K.shape[:2])[..., None], M, "beta", rnd)
    Bt = Bt[..., 0]
    B = K.shape[0]
    KN, fkn = unit_block(su, M, K, fk, eps, rnd)
    QN, fqn = unit_block(su, M, Q, fq, eps, rnd)
    C = np.einsum("btd,btd->bt", KN, QN)  # knᵀ qn, exact, frac fkn + fqn
    kmax = np.max(np.abs(KN), axis=-1)
    if gated:
        Gm, Gf = scalar_in(su, gt.reshape(K.shape[:2]))
        gam_m, gam_f = np.full(B, su.const(1.0).m), np.full(B, su.const(1.0).f)
    S = RowBFP(B, d, d, Ws, rnd)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    o_frac = np.zeros((B, T), dtype=np.int64)
    s_norm = np.zeros((B, T))
    ranges: dict[str, list[float]] = {}
    exps: dict[str, list[int]] = {}
    for t in range(T):
        kn, f_kn, qn, f_qn = KN[:, t], fkn[:, t], QN[:, t], fqn[:, t]
        if trace:
            old_frac = S.frac.copy()
        Rm, rf = S.read(M)
        sk = np.einsum("bij,bj->bi", Rm, kn)
        sq = np.einsum("bij,bj->bi", Rm, qn)
        fsk = rf + f_kn[:, None]
        fsq = rf + f_qn[:, None]
        if gated:
            gam = su.mul(Scalar(gam_m, gam_f), Scalar(Gm[:, t], Gf[:, t]))
            gam_m, gam_f = gam.m, gam.f
            rg = su.recip(gam_m, gam_f)
            sk, fsk = sk * gam_m[:, None], fsk + gam_f[:, None]
            sq, fsq = sq * gam_m[:, None], fsq + gam_f[:, None]
        e, fe = align_block([(V[:, t], fv[:, t, None]), (-sk, fsk)], M, rnd)
        be, fbe = block(e * Bt[:, t, None], fe + fb[:, t], M, rnd)
        o_raw[:, t], o_frac[:, t] = align_block(
            [(sq, fsq), (be * C[:, t, None], (fbe + f_kn + f_qn)[:, None])], Wo, rnd)
        if gated:
            bh, fbh = block(be * rg.m[:, None], fbe + rg.f, M, rnd)
        else:
            bh, fbh = be, fbe
        bound_new = product_bound_exp(bh, fbh[:, None], kmax[:, t, None], f_kn[:, None])
        if trace:
            live = np.any(S.mant != 0, axis=-1)  # an all-zero row's exponent is never used
        S.write([(S.mant, S.frac), (bh[:, :, None] * kn[:, None, :], (fbh + f_kn)[:, None])],
                [S.row_exp(), bound_new])
        if trace:
            g_f = gam_f if gated else np.zeros(B, dtype=np.int64)  # S = gamma Ŝ: the rows' own exponents
            _span(exps, "s_row", S.frac + g_f[:, None])
            _span(exps, "read_shift", (old_frac - rf)[live])
            _span(exps, "write_shift_old", (old_frac - S.frac)[live])
            _span(exps, "write_shift_prod", ((fbh + f_kn)[:, None] - S.frac)[bh != 0])
            for name, f in (("k", fk[:, t]), ("v", fv[:, t]), ("q", fq[:, t]), ("kn", f_kn), ("qn", f_qn),
                            ("e", fe), ("be", fbe), ("bh", fbh + g_f), ("o", o_frac[:, t])):
                _span(exps, name, f)
            if gated:
                _span(exps, "gamma", gam_f)
        if gated:  # gamma's exponent joins the rows' first: Ŝ alone may pass float64's range
            s_norm[:, t] = np.sqrt(S.frob2(gam_f)) * gam_m.astype(np.float64)
        else:
            s_norm[:, t] = np.sqrt(S.frob2())
        if trace:
            for name, val in (("e", to_float(e, fe)),):
                lo, hi = float(np.min(val)), float(np.max(val))
                cur = ranges.setdefault(name, [lo, hi])
                cur[0], cur[1] = min(cur[0], lo), max(cur[1], hi)
    scale = (gam_m, gam_f) if gated else None
    extra = {"gamma_m": gam_m.reshape(batch), "gamma_f": gam_f.reshape(batch)} if gated else {}
    return {
        **stream_outputs(batch, o_raw, o_frac, S, scale),
        **extra,
        "s_norm": s_norm.reshape(batch + (T,)),
        "sat": {"s": S.sat},
        "ranges": ranges,
        "exponents": exps,
        "fmt": fmt,
    }
