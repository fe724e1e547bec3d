# amaranth: UnusedElaboratable=no
"""LinearAttentionScaledCore against ``golden/fixed/scaled/linear_attention.linear_attention_scaled``
(int8), bit for bit: every output, its exponent, the final state after a flush, the saturation
count, the token counter."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.linear_attention import linear_attention_scaled
from specmem.rtl.linear_attention_scaled import LinearAttentionScaledCore, eps_floor_table
from specmem.rtl.testing import run_simulation, send_beats, take_output, token_beats


def _stream(rng, T, d, *, scale=1.0):
    return tuple(rng.standard_normal((T, d)) * scale for _ in range(3))


def _run(dut, k, v, q, *, idle=0.0, stall=0.0, seed=0, burst=0, flush_after=(), err=0):
    """Tokens in (random idle cycles before each), flushes after ``flush_after`` and the last
    token, outputs taken with random backpressure (``burst``: also holds of that many cycles);
    returns ``(o_raw [T, d], o_frac [T], s_raw, s_frac, sat, cycles between passes)``."""
    M, d = dut.M, dut.d
    K, fk = quantize_block(k, M)
    V, fv = quantize_block(v, M)
    Q, fq = quantize_block(q, M)
    T = len(k)
    rng = random.Random(seed)
    outs, fracs, state, sfr, starts, done = [], [], [], [], [], {}
    dut.read_z = []
    slots = [t for t in range(T) for _ in range(1 + (t in flush_after))] + [T]
    n_flush = len(flush_after) + 1

    async def source(ctx):
        for j, t in enumerate(slots):
            flush = t == T or (j > 0 and slots[j - 1] == t)
            await send_beats(ctx, dut, [None] if flush else token_beats(((K, fk), (V, fv), (Q, fq)), t, dut.k), rng,
                             idle)

    async def sink(ctx):
        cur, cycle, hold = [], 0, 0
        while len(outs) < T or len(state) < n_flush * d or len(state[-1]) < d:
            if burst and hold == 0 and rng.random() < 0.01:
                hold = burst
            hold = max(hold - 1, 0)
            ready = rng.random() >= stall and hold == 0
            ctx.set(dut.o_ready, int(ready))
            _, _, ov, of, ol, od, ofr, sv, sf, sd, sfrac, go, zv, zf, zd, zfr = await ctx.tick().sample(
                dut.o_valid, dut.o_first, dut.o_last, dut.o_data, dut.o_frac,
                dut.s_valid, dut.s_first, dut.s_data, dut.s_frac, dut.pass_.start,
                dut.z_valid, dut.z_first, dut.z_data, dut.z_frac)
            if zv:
                if zf:
                    dut.read_z.append(([], int(zfr)))
                dut.read_z[-1][0].extend(int(x) for x in zd)
            cycle += 1
            if go:
                starts.append(cycle)
            take_output(cur, outs, fracs, (ov, of, ol, od, ofr), ready, d)
            if sv:
                if sf:
                    state.append([])
                    sfr.append(int(sfrac))
                state[-1] += [int(x) for x in sd]
        done.update(sat=ctx.get(dut.sat), err=ctx.get(dut.err), tokens=ctx.get(dut.tokens))

    run_simulation(dut, source, sink, deadline_cycles=(T + n_flush + 2) * (dut.cycles_per_token() + 300 + 2 * burst)
                   * (2 if stall else 1) + 3000)
    assert done["err"] == err and done["tokens"] == T
    st, sf = np.array(state), np.array(sfr)
    if flush_after:
        st, sf = st.reshape(n_flush, d, d), sf.reshape(n_flush, d)
    return np.array(outs), np.array(fracs), st, sf, done["sat"], np.diff(starts)


def _check(got, want, dut=None):
    o, of, s, sf, sat, _ = got
    if dut is not None:  # z read out at the (last) flush
        assert dut.read_z[-1] == (want["z_raw"].tolist(), int(want["z_frac"]))
    assert o.tolist() == want["o_raw"].tolist()
    assert of.tolist() == want["o_frac"].tolist()
    assert s.tolist() == want["s_raw"].tolist() and sf.tolist() == want["s_frac"].tolist()
    assert sat == want["sat"]["s"]


@pytest.mark.parametrize("d,k", [(8, 4), (4, 2), (8, 8)])
def test_stream_bit_exact_with_the_model(d, k):
    rng = np.random.default_rng(d * 10 + k)
    T = 10
    kx, v, q = _stream(rng, T, d)
    dut = LinearAttentionScaledCore(d, k)
    got = _run(dut, kx, v, q, idle=0.3, stall=0.3, seed=k, burst=4 * dut.cycles_per_token())
    want = linear_attention_scaled(kx, v, q, preset="int8")
    _check(got, want, dut)
    assert np.count_nonzero(want["o_raw"]) > 0


@pytest.mark.parametrize("d,k,bound", [(24, 2, "pass"), (8, 4, "front end")])
def test_full_rate_cycles_per_token(d, k, bound):
    """With the input always valid and the output always ready, passes start ``cycles_per_token``
    apart: at d = 24, k = 2 the pass's (the front end and the output chain hidden behind it), at
    d = 8, k = 4 the front end's (the token's beats and its latency are longer than the pass)."""
    rng = np.random.default_rng(1)
    T = 6
    kx, v, q = _stream(rng, T, d)
    dut = LinearAttentionScaledCore(d, k)
    got = _run(dut, kx, v, q)
    _check(got, linear_attention_scaled(kx, v, q, preset="int8"))
    assert got[-1][1:-1].tolist() == [dut.cycles_per_token()] * (T - 2)  # the last: the flush, no front end
    limit = dut.pass_cycles() if bound == "pass" else dut.front_end_cycles()
    assert dut.cycles_per_token() == limit > min(dut.pass_cycles(), dut.front_end_cycles())


def test_scale_spread_and_tiny_inputs():
    """Tokens at scales from 2^-40 (the ELU's input window) to 2^8, zero vectors."""
    rng = np.random.default_rng(7)
    d, k, T = 8, 4, 14
    kx, v, q = _stream(rng, T, d)
    sc = np.ldexp(1.0, rng.integers(-40, 9, T))[:, None]
    kx, v, q = kx * sc, v * sc[::-1], q * sc
    kx[4] = 0
    q[6] = 0
    dut = LinearAttentionScaledCore(d, k)
    _check(_run(dut, kx, v, q, seed=3), linear_attention_scaled(kx, v, q, preset="int8"), dut)


def test_a_flush_mid_stream_reads_the_state_and_changes_nothing():
    rng = np.random.default_rng(5)
    d, k, T = 8, 4, 7
    kx, v, q = _stream(rng, T, d)
    dut = LinearAttentionScaledCore(d, k)
    o, of, s, sf, *_ = _run(dut, kx, v, q, flush_after=(3,), seed=2)
    want = linear_attention_scaled(kx, v, q, preset="int8")
    part = linear_attention_scaled(kx[:4], v[:4], q[:4], preset="int8")
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert s[0].tolist() == part["s_raw"].tolist() and sf[0].tolist() == part["s_frac"].tolist()
    assert s[1].tolist() == want["s_raw"].tolist() and sf[1].tolist() == want["s_frac"].tolist()
    assert dut.read_z == [(part["z_raw"].tolist(), int(part["z_frac"])), (want["z_raw"].tolist(), int(want["z_frac"]))]


def test_eps_floor_bit_exact_where_it_acts():
    """A large eps (1e3) so the floor replaces zᵀqf on every token: the table's rows, bit-exact."""
    rng = np.random.default_rng(8)
    d, k, T = 4, 2, 6
    kx, v, q = _stream(rng, T, d, scale=0.01)
    dut = LinearAttentionScaledCore(d, k, eps=1e3)
    want = linear_attention_scaled(kx, v, q, eps=1e3, preset="int8")
    _check(_run(dut, kx, v, q, seed=1), want)
    F0, rows = eps_floor_table(1e3, dut.floor_width)
    assert F0 < -9 and len(rows) > 60 and rows[0] == 2 and rows[-1] < 2 ** 62


def test_an_input_beyond_the_elu_window_raises_err():
    rng = np.random.default_rng(9)
    d, k, T = 4, 2, 3
    kx, v, q = _stream(rng, T, d)
    kx[1, 0] = -1000.0  # max |k| >= 2^9
    dut = LinearAttentionScaledCore(d, k)
    _run(dut, kx, v, q, err=1)


def test_bad_parameters_are_refused():
    for kw, msg in (({"d": 6, "k": 4}, "multiple"), ({"d": 8, "k": 4, "preset": "legacy-int8"}, "scaled preset"),
                    ({"d": 8, "k": 4, "eps": 0.0}, "eps"), ({"d": 0, "k": 1}, "d:")):
        with pytest.raises(ValueError, match=msg):
            LinearAttentionScaledCore(**kw)
