"""Variational Linear Attention (spec §2, Algorithm 1) in a scaled format: bit-exact model.

The legacy int8 model lost VLA's memory for two reasons this design removes: unit vectors in a
fixed Q0.7 keep ~4 significant bits (here every vector is a block vector: its largest element
fills the word), and ``A``'s diagonal (≈ 1/lambda0 = 10) set the 8-bit read's LSB above
``A``'s smallest eigenvalue, so the RLS recursion diverged. Here ``A = diag(a_d) + A_off``:
the diagonal is a ``Wd``-bit block vector (default ``Ws + 8``) multiplied at full width (``d``
products per read vector, not ``d²``); the off-diagonal part is a row-BFP matrix read at ``M``
bits, so its row exponents follow the off-diagonal magnitudes, not the diagonal's
(``a_form="diag"``, the default). ``a_form="center"`` keeps ``A = c I + D`` instead: one wide
scalar ``c`` (stored as a constant block vector) and the whole of ``D`` as a row-BFP matrix; at
each refresh the mean of ``D``'s diagonal moves into ``c`` (``docs/accuracy/formats.md``
compares the two).

Per-token features as block vectors: ``kf = elu1(k)``, ``qf = elu1(q)``,
``kh = block(kf rsqrt(max(||kf||², eps²)))``, ``un = block(u (rsqrt(..) u_scale))``, ``zk``
the running sum of ``kf`` (32 bits), ``den = max(zkᵀ qf, eps)`` exact and its
reciprocal. Then per token, one read pass over the old ``A`` and ``S`` (``A un``, ``A kh``,
``S kh``, ``S qf``), and:

1. ``zsm = align(a_d ⊙ un + A_off un)``; ``delta = max(1 + unᵀ zsm, eps)`` exact;
   ``w = block(zsm rsqrt(delta))`` so that ``A - zsm zsmᵀ/delta = A - w wᵀ``;
2. ``alpha = align(a_d ⊙ kh + A_off kh - w (wᵀ kh) [+ eta kh])`` (the new ``A`` times ``kh``),
   ``ah = block(alpha rsqrt(max(||alpha||², eps²)))``;
3. ``e = align(v - S kh)``;
4. ``o = block(align(S qf + e (ahᵀ qf)) rden)`` into ``Wo`` bits (``o_raw``, ``o_frac``);
5. write: ``a_d <- align(a_d - w ⊙ w [+ eta])``; ``A_off <- A_off - offdiag(w wᵀ)``;
   ``S <- S + e ahᵀ`` (row exponents from the bound).
"""

from __future__ import annotations

import numpy as np

from specmem.golden.common import SpecmemInputError
from specmem.golden.vla import _prepare

from ..formats import Preset
from ..scalar_unit import Scalar
from .bfp import RowBFP, align_block, block, msb_bound_exp, product_bound_exp, quantize_block, stream_outputs, to_float
from .deltanet import unit_block
from .formats import scaled_format, scaled_preset
from .linear_attention import elu_features

__all__ = ["vla_scaled", "rls_scale"]


def _dense_a(ad, fad, Aoff: RowBFP, center: bool) -> np.ndarray:
    a = Aoff.value()
    idx = np.arange(a.shape[-1])
    if center:
        a[:, idx, idx] += to_float(ad, fad)
    else:
        a[:, idx, idx] = to_float(ad, fad)
    return a


def rls_scale(su, M, zsm, fz, un, f_un, eps, rounding="rne"):
    """VLA's rank-one downdate vector: ``w = block(zsm rsqrt(delta))`` with ``delta = max(1 +
    unᵀ zsm, eps)`` exact at the binary point ``F = f_un + fz`` (lifted to 0 when negative), so
    that ``A - zsm zsmᵀ / delta = A - w wᵀ``. ``zsm``, ``un``: ``[B, d]`` block vectors with
    exponents ``[B]``; returns ``(w, fw)`` (the RTL's ``rtl/rls_scale.py`` streams it)."""
    dacc = np.einsum("bi,bi->b", un, zsm)
    F = f_un + fz
    lift = np.maximum(-F, 0)
    F = F + lift
    delta = (dacc << lift) + (np.int64(1) << F)
    eps_d = np.maximum(1, np.rint(np.ldexp(eps, F))).astype(np.int64)
    delta = np.maximum(delta, eps_d)
    rd = su.rsqrt(delta, F)
    return block(zsm * rd.m[:, None], fz + rd.f, M, rounding)


A_FORMS = ("diag", "center")


#: lambda0 values the scaled model is checked for. Above: measured (d = 16, 40 tokens) output error
#: 1-2 % up to 1e8, silently wrong at 1e12, a negative scalar-unit input at 1e30. Below: with
#: lambda0 <= 3e-4 at d = 16, 32 (1e-4 at d = 64; 3e-3 at d = 2, 1e-3 at d = 8) ``A`` diverges once
#: the stream is longer than about d tokens (||A|| to 1e11 and inf; delta's ``lift`` past 2^50),
#: where the float model's ``A`` stays bounded (2026-12-07: 5 Gaussian streams of 200 or 4 d tokens
#: per point, d = 2 .. 64; none diverged at 1e-2; docs/fixed-point.md, section 6)
LAMBDA0_RANGE = (1e-2, 1e8)


def vla_scaled(k, v, q, u, preset: Preset | None = None, lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3,
               u_scale=None, *, a_form: str = "diag", diag_bits: int | None = None, trace: bool = True,
               snapshot_every: int = 0, monitor=None) -> dict:
    """VLA in the scaled ``preset``; inputs and parameters as :func:`specmem.golden.vla.vla`.

    Returns ``o`` (dequantised), ``o_raw`` ``[..., T, d]``, ``o_frac`` ``[..., T]``; final ``s``
    and ``a`` (dequantised, dense), ``s_raw``/``s_frac``, ``a_raw``/``a_frac`` (off-diagonal
    mantissas and row exponents), ``a_diag_raw``/``a_diag_frac``; ``s_norm``/``a_norm``
    ``[..., T]``; ``sat``, ``ranges``, ``fmt``; ``snapshot_every``/``monitor`` as the legacy model.
    """
    kk, vv, qq, uu, (lambda0, eps, refresh_period, eta, u_scale) = _prepare(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    if not LAMBDA0_RANGE[0] <= lambda0 <= LAMBDA0_RANGE[1]:
        # measured: LAMBDA0_RANGE's comment
        raise SpecmemInputError(
            f"lambda0: the scaled fixed-point VLA model is checked for {LAMBDA0_RANGE[0]:g} <= lambda0 <= "
            f"{LAMBDA0_RANGE[1]:g} (A's diagonal 1/lambda0 shares the aligned sums' exponent range with "
            f"unit vectors; below it A diverges on streams longer than d), got {lambda0:g}")
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    p = scaled_preset(preset)
    M, Ws, Wo, rnd = p.mul_bits, p.state_bits, p.out_bits, p.rounding
    if a_form not in A_FORMS:
        raise SpecmemInputError(f"a_form: must be one of {', '.join(A_FORMS)}, got {a_form!r}")
    center = a_form == "center"
    Wd = Ws + 8 if diag_bits is None else int(diag_bits)
    fmt = scaled_format("vla", p, d, diag_bits=Wd)
    su = p.scalar_unit()
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, fk = quantize_block(flat(kk), M, "k", rnd)
    V, fv = quantize_block(flat(vv), M, "v", rnd)
    Q, fq = quantize_block(flat(qq), M, "q", rnd)
    Uq, fu = quantize_block(flat(uu), M, "u", rnd)
    B = K.shape[0]
    KF, fkf, QF, fqf, ZK, FZK, rden = elu_features(K, fk, Q, fq, p, eps)
    KH, fkh = unit_block(su, M, KF, fkf, eps, rnd)
    UN, fun = unit_block(su, M, Uq, fu, eps, rnd, scale=u_scale)
    eta_s = su.const(eta) if eta > 0 else Scalar(np.int64(0), np.int64(0))

    ad, fad = quantize_block(np.full((B, d), 1.0 / lambda0), Wd, "lambda0", rnd)
    Aoff = RowBFP(B, d, d, Ws, rnd)
    S = RowBFP(B, d, d, Ws, rnd)
    eye = np.eye(d, dtype=np.int64)
    wmask = np.ones((d, d), dtype=np.int64) if center else 1 - eye  # what of w wᵀ the row-BFP part takes
    inv_d = su.const(1.0 / d)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    o_frac = np.zeros((B, T), dtype=np.int64)
    s_norm = np.zeros((B, T))
    a_norm = np.zeros((B, T))
    snaps, snap_t = [], []
    for t in range(T):
        un, f_un, kh, f_kh, qf, f_qf = UN[:, t], fun[:, t], KH[:, t], fkh[:, t], QF[:, t], fqf[:, t]
        col = lambda f: np.asarray(f)[:, None]  # noqa: E731
        # read pass (old A, old S)
        Ro, rof = Aoff.read(M)
        Rs, rsf = S.read(M)
        za = np.einsum("bij,bj->bi", Ro, un)
        aa = np.einsum("bij,bj->bi", Ro, kh)
        sk = np.einsum("bij,bj->bi", Rs, kh)
        sq = np.einsum("bij,bj->bi", Rs, qf)
        # A update vector
        zsm, fz = align_block([(ad * un, col(fad + f_un)), (za, rof + col(f_un))], M, rnd)
        w, fw = rls_scale(su, M, zsm, fz, un, f_un, eps, rnd)
        refresh = bool(refresh_period) and (t + 1) % refresh_period == 0
        # alpha = A_new kh
        cw = np.einsum("bi,bi->b", w, kh)
        terms = [(ad * kh, col(fad + f_kh)), (aa, rof + col(f_kh)), (-w * cw[:, None], col(2 * fw + f_kh))]
        if refresh and eta > 0:
            terms.append((kh * eta_s.m, col(f_kh + eta_s.f)))
        alpha, fal = align_block(terms, M, rnd)
        ah, fah = unit_block(su, M, alpha, fal, eps, rnd)
        # error and output
        e, fe = align_block([(V[:, t], col(fv[:, t])), (-sk, rsf + col(f_kh))], M, rnd)
        c2 = np.einsum("bi,bi->b", ah, qf)
        num, fnum = align_block([(sq, rsf + col(f_qf)), (e * c2[:, None], col(fe + fah + f_qf))], Wo, rnd)
        o_raw[:, t], o_frac[:, t] = block(num * rden.m[:, t, None], fnum + rden.f[:, t], Wo, rnd)
        # write pass
        dterms = [(ad, col(fad))] if center else [(ad, col(fad)), (-w * w, col(2 * fw))]
        if refresh and eta > 0:
            dterms.append((np.broadcast_to(eta_s.m, (B, d)), eta_s.f))
        if len(dterms) > 1:
            ad, fad = align_block(dterms, Wd, rnd)
        wmax = np.max(np.abs(w), axis=-1)
        Aoff.write([(Aoff.mant, Aoff.frac), (-(w[:, :, None] * w[:, None, :]) * wmask, col(2 * fw))],
                   [Aoff.row_exp(), product_bound_exp(w, col(fw), wmax[:, None], col(fw))])
        if center and refresh:
            # re-centre: mu = mean of D's diagonal moves from D into c (c I + D unchanged up to rounding)
            dg, fdg = align_block([(np.einsum("bii->bi", Aoff.mant), Aoff.frac)], Wd, rnd)
            mu, fmu = block(np.sum(dg, axis=-1, keepdims=True) * inv_d.m, fdg + inv_d.f, Wd, rnd)
            ad, fad = align_block([(ad, col(fad)), (np.broadcast_to(mu, (B, d)), col(fmu))], Wd, rnd)
            Aoff.write([(Aoff.mant, Aoff.frac), (-mu[:, :, None] * eye, col(fmu))],
                       [Aoff.row_exp(), np.broadcast_to(msb_bound_exp(mu, col(fmu)), (B, d))])
        ahmax = np.max(np.abs(ah), axis=-1)
        S.write([(S.mant, S.frac), (e[:, :, None] * ah[:, None, :], col(fe + fah))],
                [S.row_exp(), product_bound_exp(e, col(fe), ahmax[:, None], col(fah))])
        s_norm[:, t] = np.sqrt(S.frob2())
        adf = to_float(ad, fad)
        a_norm[:, t] = np.sqrt(Aoff.frob2() + np.einsum("bi,bi->b", adf, adf))
        if snapshot_every and (t + 1) % snapshot_every == 0:
            af = _dense_a(ad, fad, Aoff, center).reshape(batch + (d, d))
            if monitor is not None:
                monitor(t + 1, af)
            else:
                snaps.append(af)
                snap_t.append(t + 1)
    out = {
        **stream_outputs(batch, o_raw, o_frac, S),
        "a": _dense_a(ad, fad, Aoff, center).reshape(batch + (d, d)),
        "a_raw": Aoff.mant.reshape(batch + (d, d)),
        "a_frac": Aoff.frac.reshape(batch + (d,)),
        "a_diag_raw": ad.reshape(batch + (d,)),
        "a_diag_frac": fad.reshape(batch),
        "s_norm": s_norm.reshape(batch + (T,)),
        "a_norm": a_norm.reshape(batch + (T,)),
        "sat": {"s": S.sat, "a": Aoff.sat},
        "ranges": {},
        "fmt": fmt,
    }
    if snapshot_every and monitor is None:
        out["a_snap"] = np.array(snaps)
        out["snap_t"] = np.array(snap_t, dtype=np.int64)
    return out
