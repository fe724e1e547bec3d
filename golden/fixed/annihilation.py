"""Spectral-annihilation memory (spec §1, exact variant, Gram form): bit-exact integer model.

Per token ``x`` (quantised to ``x``'s format), the k-lane engine runs three passes over the
rows of ``U`` (``d x k``, stored at ``u``'s format and read into the multipliers at
``u_mul``'s), then k-vector work in the scalar unit, in this order:

1. *reduction pass*: ``a = Uᵀx`` (exact accumulators), block-normalised to ``M`` bits: ``a``
   only enters through scale-free quantities (``P U`` and the Householder vector);
2. *g pass*: per row ``r_i = U_i·a`` rounded to ``r``'s format, ``g += U_iᵀ r_i`` and
   ``n² += r_i²`` (exact); ``g`` block-normalised.
   Orthogonal input: ``a`` is all zero or ``n² = 0``; ``y = 0``, ``orth = True`` and, by
   ``orth_policy``, *evict*: ``x`` is written over the column ``j`` of least energy
   ``c_j = sum_i Um_ij²`` (exact integer sums of the multiplier view ``u_mul`` of ``U``, which
   the lanes square in pass 1), ties broken round-robin (a per-memory pointer: the first
   minimal column at or after it, then the pointer moves past it), ``U_ij = x_i``; or *skip*:
   ``U`` is left unchanged;
3. *k-vector work*: ``ahat = a rsqrt(||a||²)``, ``j = argmax |a_j|`` (first on ties),
   ``s = sign(a_j)`` (+1 at zero), ``beta = 1 / (1 + |ahat_j|)`` (scalar unit),
   ``q_l = -s round(beta ahat_l)``, ``t_l = -g_l + s round(beta ahat_l g_j)``,
   ``p = block(t / n²)`` (scalar unit reciprocal), ``p_j = q_j = 0``;
4. *fused row pass*: ``r_i`` recomputed (same rows, same ``a``: bit-identical to pass 2),
   ``U_i += round(r_i p) + round(U_ij q)``, one saturation, then ``U_ij = x_i``;
   the output ``y_i = r_i rsqrt(n²)``.

``gram="coaccumulate"`` (the pipelined core's schedule, spec §1 "a third way"): passes 1 and 2
are gone. While token ``t``'s fused row pass writes row ``i``, the lanes also accumulate
``a' = Uᵀx_{t+1}`` and the exact Gram ``G' = Σ_i Um_iᵀ Um_i`` of the rows as stored (the
multiplier view ``u_mul``), so the next token starts with both: ``a`` as in pass 1 (the same
integers: exact sums do not depend on order), ``G`` block-normalised to ``M`` bits (``gram``),
``g = G a`` (exact, then block-normalised to ``g``'s width) and ``n² = aᵀ g`` (exact, at ``g``'s
and ``a``'s scales) instead of ``g = Uᵀr``, ``n² = Σ r_i²`` from the rounded ``r``. The row pass
itself (``r_i``, the rank-two update, ``y``) is unchanged; ``y`` is normalised by that ``n²``.
Column energies for eviction are ``G``'s diagonal before normalisation (the same exact sums).
Nothing drifts: ``G`` is re-made from the stored rows every token. ``gram="recompute"`` is the
three-pass order above (the ``legacy-*`` RTL's).

Warm-up (fewer than ``k`` columns stored) writes ``x`` into column ``count``; ``x = 0`` after
quantisation is a no-op. ``orth_policy=None`` is the preset's default: ``skip`` for the
``legacy-*`` presets (what the RTL implements, bit for bit), ``evict`` for the others (spec §1:
the default policy is the one that holds recent inputs). The derivation of ``p`` and ``q`` (rank-two row update) is in
``golden/annihilation.py:_gram_step``; ``q_j = -1`` and ``p_j`` never matter because column
``j`` is overwritten.
"""

from __future__ import annotations

import numpy as np

from specmem.golden.annihilation import check_orth_policy, evict_column
from specmem.golden.common import SpecmemInputError, as_float_array, check_scalar

from .datapath import Datapath
from .formats import formats_for
from .fxtype import mul_round_shift, round_shift

__all__ = ["annihilation_fixed", "row_update", "token_chain", "gram_front", "kvector_work", "default_orth_policy",
           "default_gram", "GRAM_SCHEDULES", "p_shift_window", "clamp_p_exponent", "P_WINDOW_BITS", "default_p_window"]

#: the row unit's run-time shift of ``r_i p`` in a clamped-``p`` model takes ``2**P_WINDOW_BITS`` values
P_WINDOW_BITS = 4

#: where ``g = Uᵀ r`` and ``n²`` come from (module docstring)
GRAM_SCHEDULES = ("recompute", "coaccumulate")


def default_orth_policy(preset) -> str:
    """``skip`` for the RTL's ``legacy-*`` presets (the RTL skips and flags), else ``evict``."""
    name = getattr(preset, "name", preset)
    return "skip" if isinstance(name, str) and name.startswith("legacy-") else "evict"


def default_p_window(preset) -> bool:
    """True (``p``'s exponent clamped, what core v2 implements) except for the ``legacy-*`` presets."""
    name = getattr(preset, "name", preset)
    return not (isinstance(name, str) and name.startswith("legacy-"))


def default_gram(preset) -> str:
    """``recompute`` for the ``legacy-*`` presets (today's RTL), else ``coaccumulate`` (the pipelined core's)."""
    name = getattr(preset, "name", preset)
    return "recompute" if isinstance(name, str) and name.startswith("legacy-") else "coaccumulate"


def row_update(dp: Datapath, U, Um, r, p, fp, q, j, x) -> np.ndarray:
    """The fused row pass's write (step 4), batched over the leading axis: ``U_i + round(r_i p) +
    round(Um_ij q)`` (``r_i p`` at ``r.frac + fp``), one saturation, then column ``j`` <- ``x``.

    ``U`` ``[B, d, k]`` at ``u``'s format, ``Um`` its ``u_mul`` view, ``r`` ``[B, d]``, ``p``/``q``
    ``[B, k]`` (``p_j = q_j = 0``), ``fp`` ``[B]``, ``j`` ``[B]``, ``x`` ``[B, d]`` raw inputs.
    The pipelined row unit (``rtl/row_unit.py``) is tested against this function."""
    F = dp.fmt
    fr, fm, fq = F["r"].frac, F["u_mul"].frac, F["q"].frac
    b = np.arange(U.shape[0])
    cj = Um[b, :, j]
    Un = dp.write("u", U,
                  (r[:, :, None] * p[:, None, :], (fr + np.asarray(fp))[:, None, None]),
                  (cj[:, :, None] * q[:, None, :], fm + fq))
    Un[b, :, j] = x << (F["u"].frac - F["x"].frac)
    return Un


def p_shift_window(fmt, k: int) -> tuple[int, int]:
    """The ``p_shift = fr + fp - fu`` values ``[lo, hi]`` a clamped-``p`` model lets through: ``hi``
    bounds it from above (``|p_l| >= |t|/n²`` with ``a_n`` block-normalised and ``|t| >= |g|/2``
    give ``fp <= (w_p - 1) + (w_a - 1 - f_a) + log2 k + 1``; measured maxima are 1–3 below,
    ``python -m specmem.shift_range``), ``lo = hi - 15``: 16 values, a 4-bit right shift after a
    constant one. Below ``lo`` the memory is ill-conditioned by ``2^(hi - lo)`` past that bound."""
    fr, fu, fa = fmt["r"].frac, fmt["u"].frac, fmt["a"].frac
    hi = fr - fu + fmt["p"].width + fmt["a"].width - fa + max(0, (k - 1).bit_length())
    return hi - (1 << P_WINDOW_BITS) + 1, hi


def clamp_p_exponent(dp: Datapath, p, fp, window):
    """``p``'s block exponent clamped so that ``fr + fp - fu`` lies in ``window`` ``(lo, hi)``,
    batched (``p`` ``[B, k]``, ``fp`` ``[B]``): above ``hi`` the mantissas are rounded right by
    ``min(excess, w_p + 1)`` (tiny ``p``: fewer significant bits); below ``lo`` they are shifted left
    by ``min(deficit, w_p)`` and saturated to ``p``'s width, counted as ``p`` saturations (an
    ill-conditioned memory). Returns ``(p, fp)``."""
    F = dp.fmt
    lo, hi = window
    base = F["u"].frac - F["r"].frac
    fp = np.asarray(fp, dtype=np.int64)
    fpc = np.clip(fp, base + lo, base + hi)
    wp = F["p"].width
    right = np.minimum(np.maximum(fp - fpc, 0), wp + 1)
    left = np.minimum(np.maximum(fpc - fp, 0), wp)
    out = round_shift(np.asarray(p, dtype=np.int64), (right - left)[:, None], dp.rounding)
    return dp.clip("p", np.asarray(out, dtype=np.int64), fpc), fpc


def gram_front(dp: Datapath, a_acc, G_acc):
    """The co-accumulated schedule's start of a token (``gram="coaccumulate"``), batched:
    ``a_n = block(a')`` (exponent dropped), ``G_n = block(G')``, ``g = block(G_n a_n)``,
    ``n² = a_nᵀ g``. Returns ``(a_n, g_n, fg, n2, fn2)``."""
    F = dp.fmt
    fm, fx, fan = F["u_mul"].frac, F["x"].frac, F["a"].frac
    B, k = a_acc.shape
    a_n, _ = dp.block("a", a_acc, fm + fx)  # its exponent is dropped: a's scale never matters
    G_n, fG = dp.block("gram", G_acc.reshape(B, k * k), 2 * fm)
    g_acc = np.einsum("bkl,bl->bk", G_n.reshape(B, k, k), a_n)
    g_n, fg = dp.block("g", g_acc, fG + fan)
    n2 = np.einsum("bk,bk->b", a_n, g_n)
    return a_n, g_n, fg, n2, fg + fan


def kvector_work(dp: Datapath, a_n, g_n, fg, n2, fn2, p_window=None) -> dict:
    """Step 3 of the module docstring (both schedules), batched over rows with ``n² > 0``:
    ``ahat``, ``j``, ``s``, ``beta``, ``q``, ``t``, ``p = block(t / n²)`` (its exponent clamped to
    ``p_window`` by :func:`clamp_p_exponent` when given) with ``p_j = q_j = 0``, and ``rsqrt(n²)``
    for ``y``. Returns ``j, s, q, p, fp, ysc`` (``ysc`` a golden ``Scalar``)."""
    F = dp.fmt
    fh, fan = F["ahat"].frac, F["a"].frac
    b = np.arange(a_n.shape[0])
    ahat = dp.scale("ahat", a_n, fan, dp.rsqrt(np.einsum("bk,bk->b", a_n, a_n), 2 * fan))
    j = np.argmax(np.abs(a_n), axis=-1)
    s = np.where(a_n[b, j] >= 0, 1, -1).astype(np.int64)
    beta = dp.recip((1 << fh) + np.abs(ahat[b, j]), fh)
    q = -s[:, None] * dp.scale("q", ahat, fh, beta)
    gj = g_n[b, j]
    # beta * ahat_l * g_j rounded into g's block scale
    term = mul_round_shift(ahat * gj[:, None], beta.m[:, None], (fh + beta.f)[:, None], dp.rounding)
    tvec = dp.clip("t", -g_n + s[:, None] * np.asarray(term, dtype=np.int64), fg)
    rn = dp.recip(n2, fn2)
    p, fp = dp.block("p", tvec * rn.m[:, None], fg + rn.f)
    p[b, j] = 0  # before the clamp: p_j is never used, so its saturation is not counted
    if p_window is not None:
        p, fp = clamp_p_exponent(dp, p, fp, p_window)
    q[b, j] = 0
    return {"j": j, "s": s, "q": q, "p": p, "fp": fp, "ysc": dp.rsqrt(n2, fn2)}


def token_chain(dp: Datapath, a_acc, G_acc, ptr, p_window=None) -> dict:
    """Everything the co-accumulated schedule does between two row passes of a full memory,
    batched: from the accumulators ``a' = Uᵀx`` ``[B, k]`` and ``G' = UmᵀUm`` ``[B, k, k]`` (exact)
    and the eviction pointer ``ptr`` ``[B]`` to the next row pass's controls. The RTL's per-token
    chain is tested against this function.

    Returns ``orth`` ``[B]`` (``a' = 0`` or ``n² <= 0``), ``evict_j`` (the column of least energy
    ``G'_jj`` from ``ptr``; meaningful where ``orth``), ``a_n`` and, for the rows that are not
    orthogonal (zeros elsewhere), ``j``, ``s``, ``q``, ``p``, ``fp`` and ``ysc_m``/``ysc_f``
    (``rsqrt(n²)``). ``p_window``: as :func:`kvector_work`'s."""
    a_acc, G_acc = np.asarray(a_acc, dtype=np.int64), np.asarray(G_acc, dtype=np.int64)
    B, k = a_acc.shape
    a_n, g_n, fg, n2, fn2 = gram_front(dp, a_acc, G_acc)
    orth = ~np.any(a_acc != 0, axis=-1) | (n2 <= 0)
    out = {"orth": orth, "evict_j": evict_column(np.einsum("bll->bl", G_acc), np.asarray(ptr), tie_rtol=0),
           "a_n": a_n, "j": np.zeros(B, np.int64), "s": np.ones(B, np.int64), "q": np.zeros((B, k), np.int64),
           "p": np.zeros((B, k), np.int64), "fp": np.zeros(B, np.int64), "ysc_m": np.zeros(B, np.int64),
           "ysc_f": np.zeros(B, np.int64)}
    go = ~orth
    if np.any(go):
        kw = kvector_work(dp, a_n[go], g_n[go], fg[go], n2[go], fn2[go], p_window)
        for name in ("j", "s", "q", "p", "fp"):
            out[name][go] = kw[name]
        out["ysc_m"][go], out["ysc_f"][go] = kw["ysc"].m, kw["ysc"].f
    return out


def annihilation_fixed(x, k, preset="int8", *, in_range: float | None = None, orth_policy: str | None = None,
                       gram: str | None = None, trace: bool = True, history: bool = False,
                       p_window: bool | None = None) -> dict:
    """Run the memory in fixed point. ``x``: ``[..., T, d]`` floats. ``orth_policy``: ``"evict"``,
    ``"skip"`` or None (the preset's default, :func:`default_orth_policy`). ``gram``:
    ``"recompute"``, ``"coaccumulate"`` or None (the preset's default, :func:`default_gram`).
    ``p_window``: clamp ``p``'s exponent to :func:`p_shift_window` (the narrow row-unit shift;
    saturations counted as ``p``); None is the preset's default, :func:`default_p_window`.

    Returns ``u_raw`` ``[..., d, k]`` (int64, ``u``'s format), ``y_raw`` ``[..., T, d]``,
    their dequantised ``u``, ``y``, the float ``omega = U Uᵀ`` of the dequantised ``U`` (a
    derived diagnostic, not a hardware output), ``orth`` ``[..., T]``, ``updated`` ``[..., T]`` (the
    full tokens that updated ``U``) and ``p_fp`` (their ``p``'s block exponent, 0 elsewhere), ``count`` ``[...]``,
    ``sat`` (per-tensor saturation counts), ``ranges`` (observed per-tensor ranges) and
    ``fmt`` (the :class:`FixedFormat`); with ``history`` also ``u_hist`` ``[..., T, d, k]`` (raw).
    """
    xx = as_float_array("x", x)
    d = xx.shape[-1]
    k = check_scalar("k", k, lo=1, integer=True)
    if k > d:
        raise SpecmemInputError(f"k: must be <= d ({d}), got {k}")
    if in_range is not None:
        in_range = check_scalar("in_range", in_range, lo=0, lo_open=True)
    fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})
    if orth_policy is None:
        orth_policy = default_orth_policy(fmt.preset)
    evict = check_orth_policy(orth_policy) == "evict"
    if gram is None:
        gram = default_gram(fmt.preset)
    if gram not in GRAM_SCHEDULES:
        raise SpecmemInputError(f"gram: must be one of {GRAM_SCHEDULES}, got {gram!r}")
    coacc = gram == "coaccumulate"
    dp = Datapath(fmt, trace=trace)
    if p_window is None:
        p_window = default_p_window(fmt.preset)
    if not isinstance(p_window, (bool, np.bool_)):
        raise SpecmemInputError(f"p_window: must be True, False or None, got {p_window!r}")
    window = p_shift_window(fmt, k) if p_window else None
    batch = xx.shape[:-2]
    X = dp.quantize("x", xx.reshape((-1,) + xx.shape[-2:]))
    B, T, _ = X.shape

    fx, fu, fm, fr = fmt["x"].frac, fmt["u"].frac, fmt["u_mul"].frac, fmt["r"].frac
    fh, fan = fmt["ahat"].frac, fmt["a"].frac
    U = np.zeros((B, d, k), dtype=np.int64)
    count = np.zeros(B, dtype=np.int64)
    ptr = np.zeros(B, dtype=np.int64)  # evict: round-robin pointer
    y_raw = np.zeros((B, T, d), dtype=np.int64)
    orth = np.zeros((B, T), dtype=bool)
    upd = np.zeros((B, T), dtype=bool)      # full tokens that updated U (not warm-up, not orthogonal)
    p_fp = np.zeros((B, T), dtype=np.int64)  # their p's block exponent (the row unit's shift is fr + fp - fu)
    hist = np.zeros((B, T, d, k), dtype=np.int64) if history else None
    x_to_u = fu - fx  # x written into U: an exact left shift (u has more fraction bits)
    if x_to_u < 0:
        raise SpecmemInputError("preset: U must hold x exactly (u.frac >= x.frac)")
    one_h = 1 << fh

    for t in range(T):
        xt = X[:, t]
        nz = np.any(xt != 0, axis=-1)
        warm = nz & (count < k)
        full = np.flatnonzero(nz & (count >= k))
        if full.size:
            Us, xs = U[full], xt[full]
            Um = dp.narrow("u_mul", Us, fu)
            if coacc:
                # the co-accumulated Gram of the stored rows: a and G from the accumulators of the row pass
                a_acc = np.einsum("bik,bi->bk", Um, xs)
                a_n, g_n, fg, n2, fn2 = gram_front(dp, a_acc, np.einsum("bik,bil->bkl", Um, Um))
                r = dp.narrow("r", np.einsum("bik,bk->bi", Um, a_n), fm + fan)
            else:
                # pass 1: a = Uᵀ x; pass 2: r_i = U_i·a, g = Uᵀ r, n² = ||r||² (relative to the normalised a)
                a_acc = np.einsum("bik,bi->bk", Um, xs)
                a_n, _ = dp.block("a", a_acc, fm + fx)  # its exponent is dropped: a's scale never matters
                r = dp.narrow("r", np.einsum("bik,bk->bi", Um, a_n), fm + fan)
                g_n, fg = dp.block("g", np.einsum("bik,bi->bk", Um, r), fm + fr)
                n2 = np.einsum("bi,bi->b", r, r)
                fn2 = np.full(len(full), 2 * fr)
            is_orth = ~np.any(a_acc != 0, axis=-1) | (n2 <= 0)
            orth[full, t] = is_orth
            if evict and np.any(is_orth):
                idx = full[is_orth]
                c = np.einsum("bik,bik->bk", Um[is_orth], Um[is_orth])  # exact column energies
                j = evict_column(c, ptr[idx], tie_rtol=0)
                U[idx, :, j] = xs[is_orth] << x_to_u
                ptr[idx] = (j + 1) % k
            go = ~is_orth
            if np.any(go):
                idx = full[go]
                Us, Um, xs, r = Us[go], Um[go], xs[go], r[go]
                kw = kvector_work(dp, a_n[go], g_n[go], fg[go], n2[go], fn2[go], window)
                upd[idx, t], p_fp[idx, t] = True, kw["fp"]
                # fused row pass (r_i recomputed: the same integers): U_i += round(r_i p) + round(U_ij q); U_ij = x_i
                U[idx] = row_update(dp, Us, Um, r, kw["p"], kw["fp"], kw["q"], kw["j"], xs)
                y_raw[idx, t] = dp.scale("y", r, fr, kw["ysc"])
        if np.any(warm):
            w = np.flatnonzero(warm)
            U[w, :, count[w]] = xt[w] << x_to_u
            count = count + warm
        if history:
            hist[:, t] = U

    u_f = fmt["u"].to_float(U)
    out = {
        "u_raw": U.reshape(batch + (d, k)),
        "u": u_f.reshape(batch + (d, k)),
        "omega": (u_f @ np.swapaxes(u_f, -1, -2)).reshape(batch + (d, d)),
        "y_raw": y_raw.reshape(batch + (T, d)),
        "y": fmt["y"].to_float(y_raw).reshape(batch + (T, d)),
        "orth": orth.reshape(batch + (T,)),
        "updated": upd.reshape(batch + (T,)),
        "p_fp": p_fp.reshape(batch + (T,)),
        "count": count.reshape(batch),
        "sat": dict(dp.sat),
        "ranges": dict(dp.ranges),
        "fmt": fmt,
    }
    if history:
        out["u_hist"] = hist.reshape(batch + (T, d, k))
    return out
