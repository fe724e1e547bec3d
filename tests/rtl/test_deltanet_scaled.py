"""DeltaNetScaledCore against ``golden/fixed/scaled/deltanet.deltanet_scaled`` (int8), bit for bit:
every output, its exponent, the final state after a flush, the saturation count."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.deltanet import deltanet_scaled
from specmem.rtl.deltanet_scaled import DeltaNetScaledCore
from specmem.rtl.testing import run_simulation


def _stream(rng, T, d, *, scale=1.0):
    k = rng.standard_normal((T, d)) * scale
    v = rng.standard_normal((T, d)) * scale
    q = rng.standard_normal((T, d)) * scale
    beta = rng.uniform(0.05, 1.0, T)
    return k, v, q, beta


def _run(dut, k, v, q, beta, *, idle=0.0, stall=0.0, seed=0, burst=0, flush_after=()):
    """Tokens in (random idle cycles before each), a flush, outputs taken with random
    backpressure (``burst``: also stretches of that many cycles without ``o_ready``, longer than a
    token, so later tokens' chains must wait; ``flush_after``: tokens followed by a flush besides the
    last, whose read-outs are returned first in ``s_raw``, ``s_frac``); returns ``(o_raw [T, d], o_frac [T], s_raw, s_frac, sat, cycles between passes)``."""
    M, d, kk, B = dut.M, dut.d, dut.k, dut.B
    K, fk = quantize_block(k, M)
    V, fv = quantize_block(v, M)
    Q, fq = quantize_block(q, M)
    Bt, fb = quantize_block(beta[:, None], M)
    T = len(k)
    rng = random.Random(seed)
    outs, fracs, state, sfr = [], [], [], []
    starts = []
    done = {}

    slots = [t for t in range(T) for _ in range(1 + (t in flush_after))] + [T]
    n_flush = len(flush_after) + 1

    async def source(ctx):
        for j, t in enumerate(slots):
            while rng.random() < idle:
                await ctx.tick()
            flush = t == T or (j > 0 and slots[j - 1] == t)
            ctx.set(dut.i_valid, 1)
            ctx.set(dut.i_flush, int(flush))
            if not flush:
                for port, X in ((dut.i_k, K), (dut.i_v, V), (dut.i_q, Q)):
                    for i in range(d):
                        ctx.set(port[i], int(X[t, i]))
                for port, f in ((dut.i_fk, fk), (dut.i_fv, fv), (dut.i_fq, fq), (dut.i_fbeta, fb)):
                    ctx.set(port, int(f[t]))
                ctx.set(dut.i_beta, int(Bt[t, 0]))
            await ctx.tick().until(dut.i_ready)
            ctx.set(dut.i_valid, 0)
        done["src"] = True

    async def sink(ctx):
        cur, cycle, hold = [], 0, 0
        while len(outs) < T or len(state) < n_flush * d or len(state[-1]) < d:
            if burst and hold == 0 and rng.random() < 0.01:
                hold = burst
            hold = max(hold - 1, 0)
            ready = rng.random() >= stall and hold == 0
            ctx.set(dut.o_ready, int(ready))
            _, _, ov, of, ol, od, ofr, sv, sf, sd, sfrac, go = await ctx.tick().sample(
                dut.o_valid, dut.o_first, dut.o_last, dut.o_data, dut.o_frac,
                dut.s_valid, dut.s_first, dut.s_data, dut.s_frac, dut.pass_.start)
            cycle += 1
            if go:
                starts.append(cycle)
            if ov and ready:
                assert of == (len(cur) == 0)
                cur += [int(x) for x in od]
                assert ol == (len(cur) == d)
                if ol:
                    outs.append(cur)
                    fracs.append(int(ofr))
                    cur = []
            if sv:
                if sf:
                    state.append([])
                    sfr.append(int(sfrac))
                state[-1] += [int(x) for x in sd]
        done["sat"] = ctx.get(dut.sat)
        done["err"] = ctx.get(dut.err)
        done["tokens"] = ctx.get(dut.tokens)

    run_simulation(dut, source, sink, deadline_cycles=(T + 2) * (dut.cycles_per_token() + 200 + 2 * burst) * (2 if stall else 1) + 2000)
    assert done["err"] == 0 and done["tokens"] == T
    st, sf = np.array(state), np.array(sfr)
    if flush_after:
        st, sf = st.reshape(n_flush, d, d), sf.reshape(n_flush, d)
    return np.array(outs), np.array(fracs), st, sf, done["sat"], np.diff(starts)


@pytest.mark.parametrize("d,k", [(8, 4), (4, 2), (8, 8)])
def test_stream_bit_exact_with_the_model(d, k):
    rng = np.random.default_rng(d * 10 + k)
    T = 10
    kx, v, q, beta = _stream(rng, T, d)
    dut = DeltaNetScaledCore(d, k)
    o, of, s, sf, sat, gaps = _run(dut, kx, v, q, beta, idle=0.3, stall=0.3, seed=k, burst=4 * dut.cycles_per_token())
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    assert o.tolist() == want["o_raw"].tolist()
    assert of.tolist() == want["o_frac"].tolist()
    assert s.tolist() == want["s_raw"].tolist() and sf.tolist() == want["s_frac"].tolist()
    assert sat == want["sat"]["s"]
    assert np.count_nonzero(want["o_raw"]) > 0


def test_full_rate_cycles_per_token():
    """With the input always valid and the output always ready, passes start ``cycles_per_token``
    apart (the front end and the output hidden behind the pass and chain)."""
    rng = np.random.default_rng(1)
    d, k, T = 16, 4, 6
    kx, v, q, beta = _stream(rng, T, d)
    dut = DeltaNetScaledCore(d, k)
    o, of, *_, gaps = _run(dut, kx, v, q, beta)
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert gaps[1:].tolist() == [dut.cycles_per_token()] * (T - 1)


def test_scale_spread_and_tiny_inputs():
    """Tokens at scales from 2^-20 to 2^6: every exponent path (the unit vectors' eps floor too)."""
    rng = np.random.default_rng(7)
    d, k, T = 8, 4, 12
    kx, v, q, beta = _stream(rng, T, d)
    sc = np.ldexp(1.0, rng.integers(-20, 7, T))[:, None]
    kx, v, q = kx * sc, v * sc[::-1], q * sc
    dut = DeltaNetScaledCore(d, k)
    o, of, s, sf, sat, _ = _run(dut, kx, v, q, beta, seed=3)
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert s.tolist() == want["s_raw"].tolist() and sf.tolist() == want["s_frac"].tolist()


def test_a_flush_mid_stream_reads_the_state_and_changes_nothing():
    """A flush after token 3 reads out the state after four tokens; the stream goes on as if it had
    not happened (the pending write was done, the next pass writes nothing twice)."""
    rng = np.random.default_rng(5)
    d, k, T = 8, 4, 7
    kx, v, q, beta = _stream(rng, T, d)
    dut = DeltaNetScaledCore(d, k)
    o, of, s, sf, *_ = _run(dut, kx, v, q, beta, flush_after=(3,), seed=2)
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    part = deltanet_scaled(kx[:4], v[:4], q[:4], beta[:4], preset="int8")
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert s[0].tolist() == part["s_raw"].tolist() and sf[0].tolist() == part["s_frac"].tolist()
    assert s[1].tolist() == want["s_raw"].tolist() and sf[1].tolist() == want["s_frac"].tolist()


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="multiple of k"):
        DeltaNetScaledCore(6, 4)
    with pytest.raises(ValueError, match="preset"):
        DeltaNetScaledCore(8, 4, "legacy-int8")


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "deltanet_scaled.v"
    path.write_text(verilog.convert(DeltaNetScaledCore(8, 4), name="deltanet_scaled"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
