"""Spectral-annihilation memory (spec §1), Gram-factor form, as a plain torch loop in the
kernel's ``[B, T, H, D]`` layout: the oracle of ``fused_recurrent.py``.

Same operation order as the golden ``annihilation_gram`` (second reduction pass for
``g = Uᵀ r``, Householder ``v = â + s e_j`` on the largest ``|â_j|``, rank-two row update),
computed in the input dtype (float32 or float64).
"""

from __future__ import annotations

import torch

from specmem.golden.annihilation import EVICT_TIE_RTOL, check_orth_policy

__all__ = ["annihilation_recurrence"]


def annihilation_recurrence(x, k, orth_tol=1e-24, orth_policy="evict", tie_rtol=EVICT_TIE_RTOL) -> dict:
    """Run the memory token by token, vectorised over (batch, head).

    ``x``: ``[B, T, H, D]``; ``k``: rank (columns of ``U``). A zero token is a no-op; while
    ``count < k`` a token fills column ``count`` (warm-up, in order); afterwards a token
    with ``||Omega x||² <= orth_tol ||x||² ||U||_F⁴`` is flagged and, by ``orth_policy``,
    written over the column of least ``||U[:, j]||²`` (``"evict"``; columns within ``tie_rtol``
    of the least are ties, taken round-robin from a per-(batch, head) pointer) or dropped
    (``"skip"``), as the golden model.
    Returns ``u`` ``[B, H, D, k]``, ``omega`` ``[B, H, D, D]``, ``y`` ``[B, T, H, D]``
    (annihilated direction, zero where none), ``orth`` ``[B, T, H]`` bool, ``count`` ``[B, H]``.
    """
    evict = check_orth_policy(orth_policy) == "evict"
    B, T, H, D = x.shape
    U = x.new_zeros(B, H, D, k)
    count = torch.zeros(B, H, dtype=torch.long, device=x.device)
    ptr = torch.zeros(B, H, dtype=torch.long, device=x.device)
    y_out = torch.zeros_like(x)
    orth = torch.zeros(B, T, H, dtype=torch.bool, device=x.device)
    cols = torch.arange(k, device=x.device)
    for t in range(T):
        xt = x[:, t]                                              # [B, H, D]
        nz = (xt != 0).any(-1)
        warm = nz & (count < k)
        full = nz & (count >= k)

        a = torch.einsum("bhdk,bhd->bhk", U, xt)
        fro2 = U.square().sum((-2, -1))
        energy = U.square().sum(-2)                               # ||U[:, j]||², [B, H, k]
        g = torch.einsum("bhdk,bhd->bhk", U, torch.einsum("bhdk,bhk->bhd", U, a))
        n2 = (a * g).sum(-1)
        is_orth = full & (n2 <= orth_tol * xt.square().sum(-1) * fro2 * fro2)
        upd = full & ~is_orth

        n2s = torch.where(upd, n2, torch.ones_like(n2))
        an = torch.where(upd, a.square().sum(-1), torch.ones_like(n2)).sqrt()
        ahat = a / an[..., None]
        j = ahat.abs().argmax(-1, keepdim=True)
        ej = cols == j                                            # [B, H, k] one-hot
        ahat_j = ahat.gather(-1, j)[..., 0]
        g_j = g.gather(-1, j)[..., 0]
        s = torch.where(ahat_j >= 0, 1.0, -1.0).to(x.dtype)
        beta = 1 / (1 + ahat_j.abs())
        v = ahat + s[..., None] * ej
        p = (-g + (beta * s * g_j)[..., None] * v) / n2s[..., None]
        q = -(beta * s)[..., None] * v

        r = torch.einsum("bhdk,bhk->bhd", U, a)
        c = U.gather(-1, j[..., None, :].expand(B, H, D, 1))[..., 0]
        U_new = U + r[..., :, None] * p[..., None, :] + c[..., :, None] * q[..., None, :]
        U_new = torch.where(ej[..., None, :], xt[..., :, None], U_new)
        U = torch.where(upd[..., None, None], U_new, U)
        y_out[:, t] = torch.where(upd[..., None], r / n2s.sqrt()[..., None], torch.zeros_like(r))
        orth[:, t] = is_orth

        # warm-up: column `count` <- x; evict: the least-energy column (ties round-robin) <- x
        ev = is_orth & evict
        m = energy.min(-1, keepdim=True).values
        dist = (cols - ptr[..., None]) % k
        j_ev = torch.where(energy <= m + tie_rtol * m.abs(), dist, k).argmin(-1)
        col = torch.where(ev, j_ev, count)
        ptr = torch.where(ev, (j_ev + 1) % k, ptr)
        wcol = (warm | ev)[..., None] & (cols == col[..., None])
        U = torch.where(wcol[..., None, :], xt[..., :, None], U)
        count = count + warm.long()
    return {"u": U, "omega": U @ U.transpose(-1, -2), "y": y_out, "orth": orth, "count": count}
