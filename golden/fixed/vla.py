"""Variational Linear Attention (spec §2, Algorithm 1): bit-exact integer model.

Per-token features do not depend on the state, so they are computed for all tokens first
(the hardware computes them as each token arrives; same operations, same bits):
``kf = elu1(k)``, ``qf = elu1(q)`` (hardware ELU+1, see ``datapath.Datapath.elu1``);
``kh = kf rsqrt(max(||kf||², eps²))``; ``un = u (rsqrt(max(||u||², eps²)) * u_scale)`` (the
two scalars multiplied in the scalar unit, one rounding of ``u``); ``zk`` the exact running
sum of ``kf``; ``den = max(zkᵀ qf, eps)`` exact, then its reciprocal.

Then per token, the spec's single read pass over the *old* ``A`` and ``S`` (hardware.md:
``A u``, ``A kh``, ``S kh``, ``S q`` in one pass, the two rank-one writes in one write pass):

1. read: ``za = A un``, ``aa = A kh``, ``sk = S kh``, ``sq = S qf`` (``A``, ``S`` read at
   ``a_mul`` / ``s_mul``, exact accumulators);
2. ``zsm = block(za)``; ``delta = max(1 + round(unᵀ zsm), eps)``; ``w = block(zsm rsqrt(delta))``,
   so that ``A - zsm zsmᵀ/delta = A - w wᵀ`` stays bit-exactly symmetric;
3. ``alpha = aa - round(w (wᵀ kh)) [+ round(eta kh)]`` (= the new ``A`` times ``kh``; the
   scalar ``wᵀ kh`` is normalised to a ``P``-bit mantissa), ``ah = block(alpha)`` scaled by
   ``rsqrt(||.||²)`` (all-zero ``alpha`` gives ``ah = 0``; the float model's ``eps`` clamp on
   ``||alpha||`` only acts below 1e-4 and is not modelled);
4. ``e = narrow(v - sk)``;
5. ``o = (sq + round(e (ahᵀ qf))) / den``: the new ``S`` times ``qf`` by the same
   correction, times the reciprocal, as a block-floating vector (``o_raw``, ``o_frac``: ``o``
   decays like ``1/t``);
6. write: ``A <- sat(A - round(w wᵀ) [+ eta I])``, ``S <- sat(S + round(e ahᵀ))``.

``eta`` is stored in ``A``'s format; when it is below half an LSB the refresh is lost
(reported in ``eta_raw``).

``chain="two-pass"`` (the default, and what the RTL implements): the same update with the
per-token vector work reordered so that two vector passes between read passes suffice
(``chain="five-pass"`` is the order above, the RTL's before; ``docs/accuracy/vla_chain.md``
compares the two). ``wᵀkh`` becomes ``rd (zsmᵀkh)`` (``zsmᵀkh`` exact,
beside ``unᵀzsm``); ``alpha``'s block exponent comes from a bound known before its pass,
``max|A kh| + round(max|w| |wᵀkh|) [+ round(max|kh| eta)]``, so ``||alpha_n||²`` accumulates in
the same pass; ``ah = alpha_n rsqrt(||alpha_n||²)`` is never rounded on its own: the ``S`` write
rounds ``e_i (rsqrt . alpha_n_j)`` once, and ``ahᵀqf`` is ``rsqrt (alpha_nᵀqf)``.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.vla import _prepare

from .datapath import Datapath, exact_dot
from .formats import formats_for
from .fxtype import msb, mul_round_shift, round_shift

__all__ = ["vla_fixed", "CHAINS"]

#: orderings of the per-token vector work (see the module docstring)
CHAINS = ("five-pass", "two-pass")


def _block_by(raw, bound, width, rounding):
    """``Datapath.block`` with the shift taken from ``bound`` (per leading index, >= every
    ``|raw|``) instead of the exact maximum: known before the vector itself is."""
    bound = np.asarray(bound)
    sh = np.where(bound > 0, msb(np.maximum(bound, 1)) - (width - 2), 0)
    sh = sh + (round_shift(bound, sh, rounding) >= (1 << (width - 1)))
    out = round_shift(raw, sh[..., None], rounding)
    assert np.all(np.abs(out) < (1 << (width - 1))), "the bound is below a magnitude"
    return out.astype(np.int64) if out.dtype == object else out


def _mul(a, b):
    """Exact product of integer arrays: ``int64`` when it fits, Python integers otherwise (the
    two-pass chain multiplies exact sums by scalar mantissas: past 62 bits at legacy-wide)."""
    a, b = np.asarray(a), np.asarray(b)
    bits = sum(int(np.max(np.abs(x))).bit_length() if x.size else 0 for x in (a, b))
    if bits <= 62:
        return a.astype(np.int64) * b.astype(np.int64)
    return a.astype(object) * b.astype(object)


def _align(raw, from_frac, to_frac):
    """Exact move to more fraction bits (a left shift)."""
    assert to_frac >= from_frac
    return np.asarray(raw, dtype=np.int64) << (to_frac - from_frac)


def vla_fixed(k, v, q, u, preset="int8", lambda0=0.1, eps=1e-4, refresh_period=20, eta=1e-3, u_scale=None, *,
              in_range=None, trace: bool = True, snapshot_every: int = 0, monitor=None,
              chain: str = "two-pass") -> dict:
    """VLA in fixed point. Inputs ``[..., T, d]`` floats; parameters as :func:`specmem.golden.vla.vla`.

    Returns ``o`` (dequantised), ``o_raw`` ``[..., T, d]`` and ``o_frac`` ``[..., T]``
    (``o = o_raw 2^-o_frac``), ``s``/``s_raw``, ``a``/``a_raw`` (final states),
    ``s_norm``/``a_norm`` ``[..., T]`` (Frobenius norms of the dequantised states, diagnostics),
    ``eta_raw``, ``sat``, ``ranges``, ``fmt``; with ``snapshot_every = n`` also ``a_snap``
    ``[n_snap, ..., d, d]`` (dequantised ``A`` after every n-th token) and ``snap_t``, or, when
    ``monitor`` is given, ``monitor(t, A)`` is called instead (nothing stored).
    """
    if chain not in CHAINS:
        raise ValueError(f"chain: one of {CHAINS}, got {chain!r}")
    short = chain == "two-pass"
    kk, vv, qq, uu, (lambda0, eps, refresh_period, eta, u_scale) = _prepare(
        k, v, q, u, lambda0, eps, refresh_period, eta, u_scale)
    batch, T, d = kk.shape[:-2], kk.shape[-2], kk.shape[-1]
    fmt = formats_for("vla", preset, d, {"lambda0": lambda0, "u_scale": u_scale, "in_range": in_range})
    dp = Datapath(fmt, trace=trace)
    su = dp.su
    flat = lambda a: a.reshape((-1,) + a.shape[-2:])  # noqa: E731
    K, V, Q, Uq = (dp.quantize(n, flat(a)) for n, a in (("k", kk), ("v", vv), ("q", qq), ("u", uu)))
    B = K.shape[0]
    fin, ff, fh = fmt["k"].frac, fmt["kf"].frac, fmt["kh"].frac
    fun, fa, fam, fs, fsm, fe, fd = (fmt[n].frac for n in ("un", "a", "a_mul", "s", "s_mul", "e", "delta"))
    fan = fmt["alpha"].frac

    # per-token features
    KF = dp.elu1("kf", K, fmt["k"])
    QF = dp.elu1("qf", Q, fmt["q"])
    nk2 = np.maximum(np.einsum("btd,btd->bt", KF, KF), dp.eps_raw(eps * eps, 2 * ff))
    KH = dp.scale("kh", KF, ff, dp.rsqrt(nk2, 2 * ff))
    nu2 = np.maximum(np.einsum("btd,btd->bt", Uq, Uq), dp.eps_raw(eps * eps, 2 * fin))
    UN = dp.scale("un", Uq, fin, su.mul(dp.rsqrt(nu2, 2 * fin), su.const(u_scale)))
    ZK = dp.clip("zk", np.cumsum(KF, axis=1), ff)
    den = exact_dot(ZK, QF)
    den = np.where(den < dp.eps_raw(eps, 2 * ff), dp.eps_raw(eps, 2 * ff), den)
    rden = dp.recip(den, 2 * ff)

    a0, n0 = fmt["a"].quantize(1.0 / lambda0)
    eta_raw, n1 = fmt["a"].quantize(eta)
    dp._count("a", n0 + n1)
    eye = np.eye(d, dtype=np.int64)
    A = np.broadcast_to(eye * a0, (B, d, d)).copy()
    S = np.zeros((B, d, d), dtype=np.int64)
    o_raw = np.zeros((B, T, d), dtype=np.int64)
    o_frac = np.zeros((B, T), dtype=np.int64)
    s_norm = np.zeros((B, T))
    a_norm = np.zeros((B, T))
    snaps, snap_t = [], []
    one_d = 1 << fd
    eps_d = dp.eps_raw(eps, fd)
    Fa = fam + fh  # alpha's accumulator binary point
    Fs = fsm + ff  # S qf accumulator binary point

    for t in range(T):
        un, kh, qf = UN[:, t], KH[:, t], QF[:, t]
        # read pass (old A, old S)
        Am = dp.narrow("a_mul", A, fa)
        Sm = dp.narrow("s_mul", S, fs)
        za = np.einsum("bij,bj->bi", Am, un)
        aa = np.einsum("bij,bj->bi", Am, kh)
        sk = np.einsum("bij,bj->bi", Sm, kh)
        sq = np.einsum("bij,bj->bi", Sm, qf)
        # A update vector
        zsm, fz = dp.block("zsm", za, fam + fun)
        dacc = np.einsum("bi,bi->b", un, zsm)
        delta = dp.clip("delta", round_shift(dacc, fun + fz - fd, dp.rounding) + one_d, fd)
        delta = np.maximum(delta, eps_d)
        rd = dp.rsqrt(delta, fd)
        w, fw = dp.block("w", zsm * rd.m[:, None], fz + rd.f)
        refresh = bool(refresh_period) and (t + 1) % refresh_period == 0
        # alpha = A_new kh
        if short:  # wᵀkh as rd (zsmᵀkh): known before w's pass
            cw = su.normalize(_mul(np.einsum("bi,bi->b", zsm, kh), rd.m), fz + rd.f + fh)
        else:
            cw = su.normalize(np.einsum("bi,bi->b", w, kh), fw + fh)
        s3 = fw + cw.f - Fa
        alpha = aa - round_shift(w * cw.m[:, None], s3[:, None], dp.rounding)
        if refresh:
            alpha = alpha + mul_round_shift(kh, eta_raw, fa + fh - Fa, dp.rounding)  # exact: may pass 2**63
        if short:  # the block exponent from a bound on |alpha| (rounding is monotone), not its max
            bound = np.max(np.abs(aa), axis=-1) + round_shift(np.max(np.abs(w), axis=-1) * np.abs(cw.m), s3,
                                                              dp.rounding)
            if refresh:
                bound = bound + mul_round_shift(np.max(np.abs(kh), axis=-1), eta_raw, fa + fh - Fa, dp.rounding)
            alpha_n = _block_by(alpha, bound, fmt["alpha"].width, dp.rounding)
        else:
            alpha_n, _ = dp.block("alpha", alpha, Fa)  # the exponent is dropped: only the direction is used
        ra = dp.rsqrt(np.einsum("bi,bi->b", alpha_n, alpha_n), 2 * fan)
        # error and output
        e = dp.narrow("e", _align(V[:, t], fin, fsm + fh) - sk, fsm + fh)
        if short:  # ah is never rounded on its own
            fah = fan + ra.f                                   # ah = alpha_n ra.m 2^-fah, per token
            c2 = su.normalize(_mul(np.einsum("bi,bi->b", alpha_n, qf), ra.m), fah + ff)
        else:
            ah = dp.scale("ah", alpha_n, fan, ra)
            c2 = su.normalize(np.einsum("bi,bi->b", ah, qf), fh + ff)
        num = sq + round_shift(e * c2.m[:, None], (fe + c2.f)[:, None] - Fs, dp.rounding)
        o_raw[:, t], o_frac[:, t] = dp.block("o", mul_round_shift(num, rden.m[:, t, None], 0), Fs + rden.f[:, t])
        # write pass
        A = dp.write("a", A, (-(w[:, :, None] * w[:, None, :]), 2 * fw[:, None, None]),
                     add=eta_raw * eye if refresh else None)
        if short:
            S = dp.write("s", S, (_mul(e[:, :, None], (alpha_n * ra.m[:, None])[:, None, :]), fe + fah))
        else:
            S = dp.write("s", S, (e[:, :, None] * ah[:, None, :], fe + fh))
        s_norm[:, t] = np.sqrt(np.einsum("bij,bij->b", *(2 * (fmt["s"].to_float(S),))))
        a_norm[:, t] = np.sqrt(np.einsum("bij,bij->b", *(2 * (fmt["a"].to_float(A),))))
        if snapshot_every and (t + 1) % snapshot_every == 0:
            af = fmt["a"].to_float(A).reshape(batch + (d, d))
            if monitor is not None:
                monitor(t + 1, af)
            else:
                snaps.append(af)
                snap_t.append(t + 1)

    o = np.ldexp(o_raw.astype(np.float64), -o_frac[..., None])
    out = {
        "o": o.reshape(batch + (T, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "o_frac": o_frac.reshape(batch + (T,)),
        "s": fmt["s"].to_float(S).reshape(batch + (d, d)),
        "s_raw": S.reshape(batch + (d, d)),
        "a": fmt["a"].to_float(A).reshape(batch + (d, d)),
        "a_raw": A.reshape(batch + (d, d)),
        "s_norm": s_norm.reshape(batch + (T,)),
        "a_norm": a_norm.reshape(batch + (T,)),
        "eta_raw": int(eta_raw),
        "sat": dict(dp.sat),
        "ranges": dict(dp.ranges),
        "fmt": fmt,
    }
    if snapshot_every and monitor is None:
        out["a_snap"] = np.array(snaps)
        out["snap_t"] = np.array(snap_t, dtype=np.int64)
    return out
