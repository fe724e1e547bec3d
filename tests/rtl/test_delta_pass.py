"""DeltaPass against the scaled model's row-BFP write and read (``golden/fixed/scaled/bfp``), bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import RowBFP, product_bound_exp, quantize_block
from specmem.rtl.delta_pass import DeltaPass
from specmem.rtl.testing import run_simulation


def _passes(rng, n, d, M, *, scale_spread=8):
    """Per pass: ``bh`` (block vector, exponents spread, zero elements; the first pass all zero as
    at token 0; one pass with ``knw`` zero) and unit-like ``knw``, ``kn``, ``qn``."""
    out = []
    for p in range(n):
        bh = rng.standard_normal(d) * np.ldexp(1.0, int(rng.integers(-scale_spread, scale_spread)))
        bh[rng.random(d) < 0.15] = 0
        if p == 0:
            bh[:] = 0
        vecs = [quantize_block(bh[None], M)]
        for _ in range(3):
            vecs.append(quantize_block(rng.standard_normal((1, d)) / np.sqrt(d), M))
        if p == 2:
            vecs[1] = (np.zeros((1, d), dtype=np.int64), np.zeros(1, dtype=np.int64))
        out.append([(r[0], int(f[0])) for r, f in vecs])
    return out


def _reference(d, Ws, M, passes, shifts=None, *, subtract=False, offdiag=False):
    """Per pass: the written state (mantissas, row exponents), then sk, sq and the read exponents;
    ``shifts``: per pass, added to every row's exponent before its write (``rescale``);
    ``subtract``, ``offdiag``: the write adds ``-bh knwᵀ`` without its diagonal (VLA's ``A_off``
    update in ``golden/fixed/scaled/vla.py``: the bound from the factors, the mask on the product)."""
    S = RowBFP(1, d, d, Ws)
    sign = -1 if subtract else 1
    mask = 1 - np.eye(d, dtype=np.int64) if offdiag else np.ones((d, d), dtype=np.int64)
    res = []
    for p, ((bh, fbh), (knw, fknw), (kn, _), (qn, _)) in enumerate(passes):
        if shifts is not None:
            S.frac[...] += shifts[p]
        kmax = np.max(np.abs(knw))
        bound = product_bound_exp(bh[None], np.array([[fbh]]), np.array([[kmax]]), np.array([[fknw]]))
        S.write([(S.mant, S.frac), (sign * bh[None, :, None] * knw[None, None, :] * mask, np.array([[fbh + fknw]]))],
                [S.row_exp(), bound])
        written = (S.mant[0].copy(), S.frac[0].copy())
        Rm, rf = S.read(M)
        res.append((written, (Rm[0] @ kn).tolist(), (Rm[0] @ qn).tolist(), rf[0].tolist()))
    return res, S.sat


def _run(dut, passes, wzero=()):
    """``wzero``: the passes run with ``i_wzero`` set (their ``bh`` and ``knw`` as given)."""
    d, k, B = dut.d, dut.k, dut.B
    got = []

    async def tb(ctx):
        for p, ((bh, fbh), (knw, fknw), (kn, fkn), (qn, fqn)) in enumerate(passes):
            ctx.set(dut.i_wzero, p in wzero)
            for port, vec in ((dut.i_bh, bh), (dut.i_knw, knw), (dut.i_kn, kn), (dut.i_qn, qn)):
                for j in range(d):
                    ctx.set(port[j], int(vec[j]))
            for port, f in ((dut.i_fbh, fbh), (dut.i_fknw, fknw), (dut.i_fkn, fkn), (dut.i_fqn, fqn)):
                ctx.set(port, f)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            rows, sk, sq, rf, wf = [], [], [], [], []
            cycles = 0
            while True:
                await ctx.tick()
                cycles += 1
                if ctx.get(dut.o_wvalid):
                    if ctx.get(dut.o_wfirst):
                        rows.append([])
                        wf.append(ctx.get(dut.o_wfrac))
                    rows[-1] += [ctx.get(dut.o_wdata[j]) for j in range(k)]
                if ctx.get(dut.o_valid):
                    sk.append(ctx.get(dut.o_sk))
                    sq.append(ctx.get(dut.o_sq))
                    rf.append(ctx.get(dut.o_rf))
                if ctx.get(dut.done):
                    break
            got.append(((rows, wf), sk, sq, rf, cycles))
        got.append(ctx.get(dut.count))

    run_simulation(dut, tb, deadline_cycles=len(passes) * (d * B + dut.latency + dut.prep_cycles + 10) + 100)
    return got


@pytest.mark.parametrize("d,k,Ws,M", [(8, 4, 16, 8), (4, 4, 16, 8), (12, 4, 16, 8), (6, 2, 12, 6),
                                     (32, 4, 16, 8), (20, 2, 12, 6)])
def test_passes_bit_exact_with_the_model(d, k, Ws, M):
    """Seven passes from reset; the block RAM starts with garbage (it is never cleared: the
    side registers' zero flags mask it until a row is first written)."""
    rng = np.random.default_rng(d * 10 + k)
    passes = _passes(rng, 7, d, M)
    dut = DeltaPass(d, k, Ws, M, ram_init=[int(x) for x in rng.integers(0, 1 << (k * Ws), d * d // k, dtype=np.uint64)])
    got = _run(dut, passes)
    want, sat = _reference(d, Ws, M, passes)
    for p, (g, w) in enumerate(zip(got[:-1], want)):
        (rows, wf), sk, sq, rf, cycles = g
        (wm, wfr), wsk, wsq, wrf = w
        assert rows == wm.tolist(), f"pass {p}: written rows"
        assert wf == wfr.tolist(), f"pass {p}: row exponents"
        assert (sk, sq, rf) == (wsk, wsq, wrf), f"pass {p}: reads"
        assert cycles == dut.prep_cycles + (d - 1) * dut.B + dut.latency + 1
    assert got[-1] == sat
    assert any(np.any(w[0][0]) for w in want)


@pytest.mark.parametrize("d,k,subtract,offdiag", [(8, 4, True, True), (12, 4, True, True), (6, 2, True, False),
                                                  (6, 3, False, True), (4, 4, True, True)])
def test_vla_a_write_subtract_and_offdiag(d, k, subtract, offdiag):
    """VLA's ``A_off <- A_off - offdiag(w wᵀ)``: passes with ``bh = knw = w`` (``w`` with a ``-2^(M-1)``
    element, whose negation needs the operand's extra bit), the products negated and the diagonal's
    zero; bit for bit against the row-BFP model with the same mask (the diagonal is written as 0
    plus the old element, never as a product)."""
    Ws, M = 16, 8
    rng = np.random.default_rng(d * 3 + k)
    passes = _passes(rng, 7, d, M)
    for p in range(1, 7):
        w, fw = passes[p][0]
        if p == 3:
            w = w.copy()
            w[1] = -(1 << (M - 1))
        passes[p][0] = passes[p][1] = (w, fw)
    dut = DeltaPass(d, k, Ws, M, subtract=subtract, offdiag=offdiag,
                    ram_init=[int(x) for x in rng.integers(0, 1 << (k * Ws), d * d // k, dtype=np.uint64)])
    got = _run(dut, passes)
    want, sat = _reference(d, Ws, M, passes, subtract=subtract, offdiag=offdiag)
    plain, _ = _reference(d, Ws, M, passes)
    for p, (g, w) in enumerate(zip(got[:-1], want)):
        (rows, wf), sk, sq, rf, _ = g
        (wm, wfr), wsk, wsq, wrf = w
        assert rows == wm.tolist() and wf == wfr.tolist(), f"pass {p}: written rows"
        assert (sk, sq, rf) == (wsk, wsq, wrf), f"pass {p}: reads"
    assert got[-1] == sat
    assert want[-1][0][0].tolist() != plain[-1][0][0].tolist()  # the options change the state
    if offdiag:  # the first write's diagonal stays zero
        assert not np.any(np.diag(want[1][0][0])) and np.any(want[1][0][0])


def test_wzero_writes_nothing_whatever_bh_and_knw_hold():
    """``i_wzero`` (the first pass after a reset: the caller's vectors have no reset): the pass
    writes as if ``knw`` were zero, with garbage in ``bh``, ``knw`` and their exponents."""
    d, k, Ws, M = 8, 4, 16, 8
    rng = np.random.default_rng(7)
    passes = _passes(rng, 5, d, M)
    fed = [list(p) for p in passes]
    for p in (0, 3):
        fed[p][0] = (rng.integers(-128, 128, d), int(rng.integers(-20, 20)))
        fed[p][1] = (rng.integers(-128, 128, d), int(rng.integers(-20, 20)))
        passes[p][1] = (np.zeros(d, dtype=np.int64), passes[p][1][1])
    got = _run(DeltaPass(d, k, Ws, M), fed, wzero=(0, 3))
    want, _ = _reference(d, Ws, M, passes)
    assert any(np.any(w[0][0]) for w in want[:3])  # pass 3 has a live state to leave alone
    for g, w in zip(got[:-1], want):
        assert g[0][0] == w[0][0].tolist() and g[0][1] == w[0][1].tolist() and g[1:4] == w[1:]


def test_state_exponents_move_both_ways():
    """bh's scale swept up and down over the passes: rows grow and shrink, so the write's two
    shifts go left and right and rows change exponent both ways."""
    d, k, Ws, M = 8, 2, 16, 8
    rng = np.random.default_rng(4)
    passes = _passes(rng, 10, d, M, scale_spread=12)
    got = _run(DeltaPass(d, k, Ws, M), passes)
    want, _ = _reference(d, Ws, M, passes)
    fr = np.array([w[0][1] for w in want])
    assert np.any(np.diff(fr, axis=0) > 0) and np.any(np.diff(fr, axis=0) < 0)
    for g, w in zip(got[:-1], want):
        assert g[0][0] == w[0][0].tolist() and g[0][1] == w[0][1].tolist() and g[1:4] == w[1:]


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="multiple of k"):
        DeltaPass(6, 4, 16, 8)
    with pytest.raises(ValueError, match="ram"):
        DeltaPass(8, 4, 16, 8, ram="lutram")


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "delta_pass.v"
    path.write_text(verilog.convert(DeltaPass(8, 4, 16, 8), name="delta_pass"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text


def _run_heads(dut, passes, order, shifts=None):
    """``passes[h]``: head ``h``'s passes; ``order``: the heads in start order. Each pass starts as
    soon as the pass can take it (``ready``) and its head's previous pass is done, its head's
    operands set in that cycle; the written rows and reads come out in start order."""
    d, k, H = dut.d, dut.k, dut.heads
    got, starts = [], []
    heads_out = dut.heads_out = {"w": [], "r": []}  # o_whead per written row, o_head per read row

    async def tb(ctx):
        nxt = [0] * H
        started, dones = [], 0
        writes, reads = [], []
        cycle = 0
        while len(reads) < len(order) * d or len(writes) < len(order) * d:
            ctx.set(dut.start, 0)
            if len(started) < len(order):
                h = order[len(started)]
                prev_done = all(dones > i for i, g in enumerate(started) if g == h)
                if prev_done and ctx.get(dut.ready):
                    (bh, fbh), (knw, fknw), (kn, fkn), (qn, fqn) = passes[h][nxt[h]]
                    for port, vec in ((dut.i_bh, bh), (dut.i_knw, knw), (dut.i_kn, kn), (dut.i_qn, qn)):
                        for j in range(d):
                            ctx.set(port[h * d + j], int(vec[j]))
                    for port, f in ((dut.i_fbh, fbh), (dut.i_fknw, fknw), (dut.i_fkn, fkn), (dut.i_fqn, fqn)):
                        ctx.set(port[h], f)
                    if shifts is not None:
                        ctx.set(dut.i_fshift[h], shifts[h][nxt[h]])
                    ctx.set(dut.i_head, h)
                    ctx.set(dut.start, 1)
                    nxt[h] += 1
                    started.append(h)
                    starts.append(cycle)
            await ctx.tick()
            cycle += 1
            if ctx.get(dut.o_wvalid):
                if ctx.get(dut.o_wfirst):
                    writes.append(([], ctx.get(dut.o_wfrac)))
                    heads_out["w"].append(ctx.get(dut.o_whead))
                writes[-1][0].extend(ctx.get(dut.o_wdata[j]) for j in range(k))
            if ctx.get(dut.o_valid):
                reads.append((ctx.get(dut.o_sk), ctx.get(dut.o_sq), ctx.get(dut.o_rf)))
                heads_out["r"].append(ctx.get(dut.o_head))
            dones += ctx.get(dut.done)
        got.extend([writes, reads])

    run_simulation(dut, tb, deadline_cycles=len(order) * (d * dut.B + dut.latency + dut.prep_cycles + 10) + 200)
    return got, starts


@pytest.mark.parametrize("d,k,H,rescale", [(8, 4, 2, False), (12, 4, 3, True), (4, 2, 2, False), (2, 2, 2, True),
                                           (16, 2, 2, True)])
def test_heads_back_to_back_bit_exact_with_one_model_per_head(d, k, H, rescale):
    """``heads`` memories on one pass: passes of alternating heads started as soon as the pass is
    ``ready`` (the next one's prep under this one's last rows), each head's operands set as its pass
    starts; every head's written state and reads equal its own model's (with ``rescale``, each
    head's rows moved by its own exponent shift as they are written), and while the heads
    alternate a pass starts every ``pass_interval`` cycles."""
    Ws, M = 16, 8
    rng = np.random.default_rng(d * 7 + H)
    n = 4
    passes = [_passes(rng, n, d, M) for _ in range(H)]
    order = [h for _ in range(n) for h in range(H)]
    shifts = [[int(x) for x in rng.integers(-3, 4, n)] for _ in range(H)] if rescale else None
    dut = DeltaPass(d, k, Ws, M, heads=H, rescale=rescale,
                    ram_init=[int(x) for x in rng.integers(0, 1 << (k * Ws), H * d * d // k, dtype=np.uint64)])
    (writes, reads), starts = _run_heads(dut, passes, order, shifts)
    want = [_reference(d, Ws, M, passes[h], shifts and shifts[h])[0] for h in range(H)]
    seen = [0] * H
    for p, h in enumerate(order):
        (wm, wfr), wsk, wsq, wrf = want[h][seen[h]]
        seen[h] += 1
        rows = writes[p * d:(p + 1) * d]
        assert [r for r, _ in rows] == wm.tolist() and [f for _, f in rows] == wfr.tolist(), f"pass {p} (head {h})"
        assert [list(x) for x in zip(*reads[p * d:(p + 1) * d])] == [wsk, wsq, wrf], f"pass {p} (head {h}): reads"
    assert dut.heads_out["w"] == dut.heads_out["r"] == [h for h in order for _ in range(d)]
    # where a head's previous pass is done before its next could start, the passes run back to back
    if H * dut.pass_interval > dut.prep_cycles + (d - 1) * dut.B + dut.latency + 2:
        assert set(np.diff(starts)) == {dut.pass_interval} and dut.pass_interval == d * dut.B
