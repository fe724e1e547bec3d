# amaranth: UnusedElaboratable=no
"""VlaScaledCore against ``golden/fixed/scaled/vla.vla_scaled`` (int8), bit for bit: every output
and its exponent, both states and A's diagonal after a flush, the saturation counts, the token
counter."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.scaled.vla import vla_scaled
from specmem.rtl.testing import run_simulation, send_beats, take_output, token_beats
from specmem.rtl.vla_scaled import VlaScaledCore


def _stream(rng, T, d, *, scale=1.0):
    return tuple(rng.standard_normal((T, d)) * scale for _ in range(4))


def _run(dut, k, v, q, u, *, idle=0.0, stall=0.0, seed=0, flush_after=(), err=0):
    """Tokens in (random idle cycles before each beat), flushes after ``flush_after`` and the
    last token, outputs taken with random backpressure; returns a dict of what came out and the
    cycles between pass starts."""
    M, d = dut.M, dut.d
    vecs = [quantize_block(x, M) for x in (k, v, q, u)]
    T = len(k)
    rng = random.Random(seed)
    outs, fracs, starts, done = [], [], [], {}
    reads = {"s": [], "a": [], "ad": []}
    slots = [t for t in range(T) for _ in range(1 + (t in flush_after))] + [T]
    n_flush = len(flush_after) + 1

    async def source(ctx):
        for j, t in enumerate(slots):
            flush = t == T or (j > 0 and slots[j - 1] == t)
            await send_beats(ctx, dut, [None] if flush else token_beats(vecs, t, dut.k), rng, idle)

    def complete(name, n):  # s, a: a row per first flag; ad: a vector per first flag
        r = reads[name]
        return len(r) == n_flush * n and len(r[-1][0]) == d

    async def sink(ctx):
        cur, cycle = [], 0
        while len(outs) < T or not (complete("s", d) and complete("a", d) and complete("ad", 1)):
            ready = rng.random() >= stall
            ctx.set(dut.o_ready, int(ready))
            ports = [dut.o_valid, dut.o_first, dut.o_last, dut.o_data, dut.o_frac, dut.pass_s.start]
            for p in ("s", "a", "ad"):
                ports += [getattr(dut, f"{p}_{n}") for n in ("valid", "first", "data", "frac")]
            _, _, *vals = await ctx.tick().sample(*ports)
            ov, of, ol, od, ofr, go = vals[:6]
            cycle += 1
            if go:
                starts.append(cycle)
            take_output(cur, outs, fracs, (ov, of, ol, od, ofr), ready, d)
            for i, p in enumerate(("s", "a", "ad")):
                pv, pf, pd, pfr = vals[6 + 4 * i:10 + 4 * i]
                if pv:
                    if pf:
                        reads[p].append(([], []))
                        reads[p][-1][1].append(int(pfr))
                    reads[p][-1][0].extend(int(x) for x in pd)
        done.update(sat=ctx.get(dut.sat), sat_a=ctx.get(dut.sat_a), err=ctx.get(dut.err), tokens=ctx.get(dut.tokens))

    run_simulation(dut, source, sink, deadline_cycles=(T + n_flush + 2) * (4 * dut.d * dut.d // dut.k + 2000)
                   * (2 if stall else 1) + 5000)
    assert done["err"] == err and done["tokens"] == T
    per_flush = {p: [r[i * n:(i + 1) * n] for i in range(n_flush)] for p, r, n in
                 (("s", reads["s"], d), ("a", reads["a"], d), ("ad", reads["ad"], 1))}
    return {"o": np.array(outs), "of": np.array(fracs), "reads": per_flush, "starts": np.diff(starts), **done}


def _rows(rows):
    """A flush's rows (or ``ad``): mantissas and exponents, as lists."""
    return [r[0] for r in rows], [r[1][0] for r in rows]


def _check(got, want, which=-1, *, outputs=True, sat=True):
    """Outputs, the states and ``ad`` read at flush ``which``, the saturation counts."""
    if outputs:
        assert got["o"].tolist() == want["o_raw"].tolist()
        assert got["of"].tolist() == want["o_frac"].tolist()
    s, sf = _rows(got["reads"]["s"][which])
    a, af = _rows(got["reads"]["a"][which])
    assert s == want["s_raw"].tolist() and sf == want["s_frac"].tolist()
    assert a == want["a_raw"].tolist() and af == want["a_frac"].tolist()
    ad, adf = _rows(got["reads"]["ad"][which])
    assert ad == [want["a_diag_raw"].tolist()] and adf == [int(want["a_diag_frac"])]
    if sat:
        assert got["sat"] == want["sat"]["s"] and got["sat_a"] == want["sat"]["a"]


@pytest.mark.parametrize("d,k,c", [(8, 4, 4), (4, 2, 2), (8, 4, 2), (8, 4, 1)])
def test_stream_bit_exact_with_the_model(d, k, c):
    """Random streams with refreshes, idle input and a stalling reader; the chain on ``c`` lanes
    (``chain_lanes``) gives the same bits."""
    rng = np.random.default_rng(d * 10 + k)
    T = 8
    kx, v, q, u = _stream(rng, T, d)
    dut = VlaScaledCore(d, k, refresh_period=3, chain_lanes=c)
    got = _run(dut, kx, v, q, u, idle=0.3, stall=0.3, seed=k)
    want = vla_scaled(kx, v, q, u, preset="int8", refresh_period=3)
    _check(got, want)
    assert np.count_nonzero(want["o_raw"]) > 0 and np.count_nonzero(want["a_raw"]) > 0


@pytest.mark.parametrize("d,k,c", [(8, 4, 4), (8, 2, 2), (8, 4, 2), (8, 4, 1)])
def test_full_rate_cycles_per_token(d, k, c):
    """With the input always valid and the output always ready, passes start ``cycles_per_token``
    apart (the passes and the chain's two feeds; the front end runs beside them)."""
    rng = np.random.default_rng(2)
    T = 4
    kx, v, q, u = _stream(rng, T, d)
    dut = VlaScaledCore(d, k, chain_lanes=c)
    got = _run(dut, kx, v, q, u)
    _check(got, vla_scaled(kx, v, q, u, preset="int8"))
    assert got["starts"].tolist() == [dut.cycles_per_token()] * T  # the last: the flush's pass


@pytest.mark.parametrize("c", [2, 1])
def test_a_flush_mid_stream_reads_the_states_and_changes_nothing(c):
    rng = np.random.default_rng(5)
    d, k, T = 4, 2, 6
    kx, v, q, u = _stream(rng, T, d)
    dut = VlaScaledCore(d, k, refresh_period=2, chain_lanes=c)
    got = _run(dut, kx, v, q, u, flush_after=(2, 3), seed=2)
    kw = {"preset": "int8", "refresh_period": 2}
    _check(got, vla_scaled(kx, v, q, u, **kw))
    _check(got, vla_scaled(kx[:3], v[:3], q[:3], u[:3], **kw), which=0, outputs=False, sat=False)
    _check(got, vla_scaled(kx[:4], v[:4], q[:4], u[:4], **kw), which=1, outputs=False, sat=False)


@pytest.mark.parametrize("params", [{"lambda0": 0.01, "eta": 0.0}, {"lambda0": 1e3, "u_scale": 0.7, "eps": 1e-3},
                                    {"lambda0": 1.0, "refresh_period": 1, "eta": 0.5}])
def test_parameters_and_scale_spread(params):
    """``lambda0`` across its range, no refresh, a refresh every token with a large ``eta``, a
    given ``u_scale`` and ``eps``; ``k``, ``v``, ``q`` at scales 2^-30 .. 2^8, ``u`` at 2^-6 ..
    2^8 (far below ``eps`` see the next test), a zero ``u`` and ``q``."""
    rng = np.random.default_rng(7)
    d, k, T = 4, 2, 6
    kx, v, q, u = _stream(rng, T, d)
    sc = np.ldexp(1.0, rng.integers(-30, 9, T))[:, None]
    kx, v, q, u = kx * sc, v * sc[::-1], q * sc, u * np.maximum(sc, 2.0 ** -6)
    u[2] = 0
    q[4] = 0
    dut = VlaScaledCore(d, k, **params)
    _check(_run(dut, kx, v, q, u, seed=3, idle=0.2), vla_scaled(kx, v, q, u, preset="int8", **params))


def test_a_slow_reader_stalls_the_core_and_loses_no_output():
    """``o_ready`` low for long stretches (a beat taken about every 200 cycles: a token's output
    drains slower than the next token is computed): the core holds the next output (its
    ``o_pending`` gate) and its input instead of overwriting the output buffer."""
    rng = np.random.default_rng(11)
    d, k, T = 4, 2, 4
    kx, v, q, u = _stream(rng, T, d)
    dut = VlaScaledCore(d, k, refresh_period=2)
    got = _run(dut, kx, v, q, u, stall=0.995, seed=1)
    _check(got, vla_scaled(kx, v, q, u, preset="int8", refresh_period=2))


def test_a_u_far_below_eps_raises_err():
    """``un = u / eps`` for ``||u|| < eps``: ``u`` at 1e-9 with ``eps`` = 1e-3 takes ``delta``'s
    binary point ``F = f_un + fz`` to 62, past :class:`~specmem.rtl.rls_scale.RlsScale`'s 61
    (the model's int64 still holds it): the sticky ``err``, not a silently different output."""
    rng = np.random.default_rng(7)
    d, k, T = 4, 2, 3
    kx, v, q, u = _stream(rng, T, d)
    u[1] *= 1e-9
    _run(VlaScaledCore(d, k, lambda0=1e3, eps=1e-3), kx, v, q, u, err=1)


def test_bad_parameters_are_refused():
    for kw, msg in (({"d": 6, "k": 4}, "multiple"), ({"d": 8, "k": 4, "preset": "legacy-int8"}, "scaled preset"),
                    ({"d": 8, "k": 4, "lambda0": 1e-4}, "lambda0"), ({"d": 8, "k": 4, "eps": 0.0}, "eps"),
                    ({"d": 8, "k": 4, "diag_bits": 40}, "diag_bits"), ({"d": 8, "k": 4, "chain_lanes": 3}, "chain_lanes"),
                    ({"d": 12, "k": 6, "chain_lanes": 2}, "chain_lanes: must divide k = 6 by a power of two")):
        with pytest.raises(ValueError, match=msg):
            VlaScaledCore(**kw)
