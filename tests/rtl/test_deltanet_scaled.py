# amaranth: UnusedElaboratable=no
"""DeltaNetScaledCore against ``golden/fixed/scaled/deltanet.deltanet_scaled`` (int8), bit for bit:
every output, its exponent, the final state after a flush, the saturation count; DeltaNet and
Gated DeltaNet (whose state comes out in ``S``'s frame: ``Ŝ``'s exponents plus ``gamma``'s, and
``gamma``'s mantissa)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import quantize_block
from specmem.golden.fixed.formats import PRESETS
from specmem.golden.fixed.scaled.deltanet import deltanet_scaled, scalar_in
from specmem.rtl.deltanet_scaled import DeltaNetScaledCore
from specmem.rtl.testing import run_simulation, send_beats, take_output, token_beats


def _stream(rng, T, d, *, scale=1.0):
    k = rng.standard_normal((T, d)) * scale
    v = rng.standard_normal((T, d)) * scale
    q = rng.standard_normal((T, d)) * scale
    beta = rng.uniform(0.05, 1.0, T)
    return k, v, q, beta


def _gates(rng, T, *, spread=False):
    """Decays: mostly U(0.5, 1), with ``spread`` also tiny ones (2^-20), exact 1s and powers of two."""
    g = rng.uniform(0.5, 1.0, T)
    if spread:
        pick = rng.integers(0, 4, T)
        g = np.where(pick == 1, np.ldexp(g, -rng.integers(1, 21, T)), g)
        g = np.where(pick == 2, 1.0, g)
        g = np.where(pick == 3, np.ldexp(1.0, -rng.integers(0, 4, T)), g)
    return g


def _want(k, v, q, beta, g=None):
    """The model's outputs and final state as the core gives them (gated: ``S``'s row exponents and
    ``gamma``'s mantissa)."""
    w = deltanet_scaled(k, v, q, beta, g, preset="int8")
    if g is None:
        return w, w["s_frac"], None
    return w, w["s_frac"] + w["gamma_f"], (int(w["gamma_m"]), int(w["gamma_f"]))


def _run(dut, k, v, q, beta, g=None, *, idle=0.0, stall=0.0, seed=0, burst=0, flush_after=(), err=0, final_flushes=1):
    """Tokens in (random idle cycles before each), a flush, outputs taken with random
    backpressure (``burst``: also stretches of that many cycles without ``o_ready``, longer than a
    token, so later tokens' chains must wait; ``flush_after``: tokens followed by a flush besides the
    last, whose read-outs are returned first in ``s_raw``, ``s_frac``; ``g``: the decays of a gated core);
    returns ``(o_raw [T, d], o_frac [T], s_raw, s_frac, sat, cycles between passes)``; a gated
    core's ``(s_gamma, s_gamma_f)`` at each read-out lands in ``dut.read_gamma``."""
    M, d, kk = dut.M, dut.d, dut.k
    K, fk = quantize_block(k, M)
    V, fv = quantize_block(v, M)
    Q, fq = quantize_block(q, M)
    Bt, fb = quantize_block(beta[:, None], M)
    if g is not None:
        Gm, Gf = scalar_in(PRESETS[dut.preset].scalar_unit(), np.asarray(g))
    dut.read_gamma = []
    T = len(k)
    rng = random.Random(seed)
    outs, fracs, state, sfr = [], [], [], []
    starts = []
    done = {}

    slots = [t for t in range(T) for _ in range(1 + (t in flush_after))] + [T] * final_flushes
    n_flush = len(flush_after) + final_flushes

    async def source(ctx):
        for j, t in enumerate(slots):
            flush = t == T or (j > 0 and slots[j - 1] == t)
            if not flush:
                ctx.set(dut.i_beta, int(Bt[t, 0]))
                ctx.set(dut.i_fbeta, int(fb[t]))
                if g is not None:
                    ctx.set(dut.i_g, int(Gm[t]))
                    ctx.set(dut.i_fg, int(Gf[t]))
            await send_beats(ctx, dut, [None] if flush else token_beats(((K, fk), (V, fv), (Q, fq)), t, kk), rng, idle)
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
            take_output(cur, outs, fracs, (ov, of, ol, od, ofr), ready, d)
            if sv:
                if sf:
                    state.append([])
                    sfr.append(int(sfrac))
                    if dut.gated and len(state) % d == 1 % d:  # a read-out's first row
                        dut.read_gamma.append((ctx.get(dut.s_gamma), ctx.get(dut.s_gamma_f)))
                state[-1] += [int(x) for x in sd]
        done["sat"] = ctx.get(dut.sat)
        done["err"] = ctx.get(dut.err)
        done["tokens"] = ctx.get(dut.tokens)

    run_simulation(dut, source, sink, deadline_cycles=(T + 2) * (dut.cycles_per_token() + 200 + 2 * burst) * (2 if stall else 1) + 2000)
    assert done["err"] == err and done["tokens"] == T
    st, sf = np.array(state), np.array(sfr)
    if n_flush > 1:
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


@pytest.mark.parametrize("d,k", [(2, 2), (4, 4)])
def test_full_rate_front_end_bound(d, k):
    """At the smallest shapes the front end (the token's beats, the unit normaliser's k and q, C)
    is longer than the pass and chain: tokens ``front_end_cycles`` apart, which
    ``cycles_per_token`` then is."""
    rng = np.random.default_rng(2)
    T = 6
    kx, v, q, beta = _stream(rng, T, d)
    dut = DeltaNetScaledCore(d, k)
    o, of, *_, gaps = _run(dut, kx, v, q, beta)
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert dut.cycles_per_token() == dut.front_end_cycles() > dut.loop_cycles()
    assert gaps[1:-1].tolist() == [dut.cycles_per_token()] * (T - 2)  # the last: the flush, no front end


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


def _interleave(streams):
    """Token slot ``t H + h`` is head ``h``'s token ``t``."""
    H, T = len(streams), len(streams[0][0])
    return [np.stack([streams[h][i][t] for t in range(T) for h in range(H)]) for i in range(len(streams[0]))]


@pytest.mark.parametrize("d,k,H", [(8, 4, 2), (4, 2, 3)])
def test_heads_bit_exact_with_one_model_per_head(d, k, H):
    """``heads`` memories on one datapath, the token slots theirs in turn, with idle input, output
    backpressure and stretches of it; then one flush per head: every head's outputs, state and
    saturations are its own model's."""
    rng = np.random.default_rng(d * 10 + k + H)
    T = 5
    streams = [_stream(rng, T, d) for _ in range(H)]
    dut = DeltaNetScaledCore(d, k, heads=H)
    o, of, s, sf, sat, _ = _run(dut, *_interleave(streams), idle=0.3, stall=0.3, seed=H,
                                burst=4 * dut.cycles_per_token(), final_flushes=H)
    sats = 0
    for h in range(H):
        want = deltanet_scaled(*streams[h], preset="int8")
        assert o[h::H].tolist() == want["o_raw"].tolist() and of[h::H].tolist() == want["o_frac"].tolist(), h
        assert s[h].tolist() == want["s_raw"].tolist() and sf[h].tolist() == want["s_frac"].tolist(), h
        sats += want["sat"]["s"]
        assert np.count_nonzero(want["o_raw"]) > 0
    assert sat == sats


@pytest.mark.parametrize("d,k,gated", [(32, 4, False), (32, 4, True), (8, 4, False)])
def test_two_heads_hide_the_chain_at_full_rate(d, k, gated):
    """Two heads, input always valid, output always ready: passes start ``cycles_per_token`` apart.
    At d = 32, k = 4 that is d²/k + 1 (one head's chain runs under the other's pass), within the
    issue's 1.05 d²/k + 32, for DeltaNet and for Gated DeltaNet (whose chain is longer); at d = 8
    the front end is the limit, as with one head at d = 4. The outputs are each head's model's."""
    rng = np.random.default_rng(3)
    H, T = 2, 3
    streams = [_stream(rng, T, d) + ((_gates(rng, T),) if gated else ()) for _ in range(H)]
    dut = DeltaNetScaledCore(d, k, heads=H, gated=gated)
    o, of, *_, gaps = _run(dut, *_interleave(streams), final_flushes=H)
    for h in range(H):
        want = _want(*streams[h])[0]
        assert o[h::H].tolist() == want["o_raw"].tolist() and of[h::H].tolist() == want["o_frac"].tolist(), h
    if d == 32:
        assert dut.cycles_per_token() == d * d // k + 1 <= 1.05 * d * d / k + 32 < dut.loop_cycles()
    else:
        assert dut.cycles_per_token() == dut.front_end_cycles() < DeltaNetScaledCore(d, k).cycles_per_token()
    assert gaps[1:H * T - 1].tolist() == [dut.cycles_per_token()] * (H * T - 2)


def test_heads_refused_where_not_built():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="heads"):
            DeltaNetScaledCore(8, 4, heads=bad)


@pytest.mark.parametrize("d,k,H", [(8, 4, 2), (4, 2, 3)])
def test_gated_heads_bit_exact_with_one_model_per_head(d, k, H):
    """Gated DeltaNet with ``heads`` memories, each with its own decays (tiny ones among them:
    every head's gamma and frame its own), idle input, backpressure and stretches of it; one flush
    per head reads out each head's state in its own frame with its own gamma."""
    rng = np.random.default_rng(d * 10 + k + H + 1)
    T = 6
    streams = [_stream(rng, T, d) + (_gates(rng, T, spread=True),) for _ in range(H)]
    dut = DeltaNetScaledCore(d, k, gated=True, heads=H)
    o, of, s, sf, sat, _ = _run(dut, *_interleave(streams), idle=0.3, stall=0.3, seed=H,
                                burst=4 * dut.cycles_per_token(), final_flushes=H)
    sats, gams = 0, []
    for h in range(H):
        want, s_frac, gam = _want(*streams[h])
        assert o[h::H].tolist() == want["o_raw"].tolist() and of[h::H].tolist() == want["o_frac"].tolist(), h
        assert s[h].tolist() == want["s_raw"].tolist() and sf[h].tolist() == s_frac.tolist(), h
        sats += want["sat"]["s"]
        gams.append(gam)
        assert np.count_nonzero(want["o_raw"]) > 0
    assert dut.read_gamma == gams and len(set(gams)) == H
    assert sat == sats


@pytest.mark.parametrize("d,k", [(8, 4), (4, 2)])
def test_gated_stream_bit_exact_with_the_model(d, k):
    """Gated DeltaNet: decays from 1 down to 2^-20 and three of 2^-700 .. 2^-800 (gamma's exponent
    passes 2^11, which no 12-bit exponent of the core could hold: the core keeps S's frame), random
    idle, stalls and long output holds."""
    rng = np.random.default_rng(d * 10 + k + 1)
    T = 12
    kx, v, q, beta = _stream(rng, T, d)
    g = _gates(rng, T, spread=True)
    g[[3, 7, 10]] = np.ldexp(1.0, [-700, -800, -700]) * 0.9
    dut = DeltaNetScaledCore(d, k, gated=True)
    o, of, s, sf, sat, _ = _run(dut, kx, v, q, beta, g, idle=0.3, stall=0.3, seed=k,
                                burst=4 * dut.cycles_per_token())
    want, s_frac, gam = _want(kx, v, q, beta, g)
    assert o.tolist() == want["o_raw"].tolist()
    assert of.tolist() == want["o_frac"].tolist()
    assert s.tolist() == want["s_raw"].tolist() and sf.tolist() == s_frac.tolist()
    assert dut.read_gamma == [gam] and sat == want["sat"]["s"]
    assert want["gamma_f"] > 2 ** (dut.exp_width - 1)
    assert np.count_nonzero(want["o_raw"]) > 0


def test_gated_with_no_decay_is_deltanet():
    """g = 1 throughout: the gated core's outputs and state are DeltaNet's, bit for bit."""
    rng = np.random.default_rng(11)
    d, k, T = 8, 4, 6
    kx, v, q, beta = _stream(rng, T, d)
    dut = DeltaNetScaledCore(d, k, gated=True)
    o, of, s, sf, *_ = _run(dut, kx, v, q, beta, np.ones(T), seed=4)
    want = deltanet_scaled(kx, v, q, beta, preset="int8")
    one = PRESETS["int8"].scalar_unit().const(1.0)
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert s.tolist() == want["s_raw"].tolist() and (sf - int(one.f)).tolist() == want["s_frac"].tolist()
    assert dut.read_gamma == [(int(one.m), int(one.f))]


def test_gated_flush_mid_stream_and_full_rate():
    """A gated flush after token 2 reads out that state in its own frame; the stream goes on with
    the next token's frame change; at full rate passes start ``cycles_per_token`` apart."""
    rng = np.random.default_rng(9)
    d, k, T = 8, 4, 6
    kx, v, q, beta = _stream(rng, T, d)
    g = _gates(rng, T)
    dut = DeltaNetScaledCore(d, k, gated=True)
    o, of, s, sf, _, gaps = _run(dut, kx, v, q, beta, g, flush_after=(2,))
    want, s_frac, gam = _want(kx, v, q, beta, g)
    part, p_frac, p_gam = _want(kx[:3], v[:3], q[:3], beta[:3], g[:3])
    assert o.tolist() == want["o_raw"].tolist() and of.tolist() == want["o_frac"].tolist()
    assert s[0].tolist() == part["s_raw"].tolist() and sf[0].tolist() == p_frac.tolist()
    assert s[1].tolist() == want["s_raw"].tolist() and sf[1].tolist() == s_frac.tolist()
    assert dut.read_gamma == [p_gam, gam]
    dut = DeltaNetScaledCore(d, k, gated=True)
    o, of, *_, gaps = _run(dut, kx, v, q, beta, g)
    assert o.tolist() == want["o_raw"].tolist()
    assert gaps[1:].tolist() == [dut.cycles_per_token()] * (T - 1)
    # be rg on a DSP's registers (2), bh's normaliser, the pass's last row through -gamma's multiply
    assert dut.cycles_per_token() == (DeltaNetScaledCore(d, k).cycles_per_token() + 2 + dut.norm_bh.latency
                                      + dut.sk_gamma.latency)


def test_gated_frame_overflow_is_flagged():
    """Rows that stop being written (``v`` one-hot, ``g = 2^-150``: their ``be`` rounds to zero) keep
    decaying in S's frame; at ``exp_width = 10`` their exponents pass 511 within four tokens and
    ``err`` rises. At 12 bits the same stream is bit-exact and raises nothing; at 10 bits its first six
    tokens (exponents up to 475) too."""
    rng = np.random.default_rng(4)
    d, k, T = 8, 4, 8
    kx, v, q, beta = _stream(rng, T, d)
    g = _gates(rng, T)
    v[3:] = 0
    v[3:, 0] = 1.0
    g[3:] = 2.0 ** -150
    want, s_frac, gam = _want(kx, v, q, beta, g)
    assert s_frac.max() > 511  # the model's rows did pass the narrow exponent
    o, of, s, sf, *_ = _run(DeltaNetScaledCore(d, k, gated=True), kx, v, q, beta, g)
    assert o.tolist() == want["o_raw"].tolist() and sf.tolist() == s_frac.tolist()
    _run(DeltaNetScaledCore(d, k, gated=True, exp_width=10), kx, v, q, beta, g, err=1)
    # six tokens reach 475 (bit 8 set, below 2^9): no flag, and bit-exact at 10 bits
    want, s_frac, _ = _want(kx[:6], v[:6], q[:6], beta[:6], g[:6])
    assert 256 < s_frac.max() < 512
    o, of, s, sf, *_ = _run(DeltaNetScaledCore(d, k, gated=True, exp_width=10), kx[:6], v[:6], q[:6], beta[:6], g[:6])
    assert o.tolist() == want["o_raw"].tolist() and sf.tolist() == s_frac.tolist()


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="multiple of k"):
        DeltaNetScaledCore(6, 4)
    with pytest.raises(ValueError, match="preset"):
        DeltaNetScaledCore(8, 4, "legacy-int8")


def test_generate_takes_dsp_and_refuses_a_bad_one():
    """``specmem rtl --param dsp=ecp5`` on the scaled cores: the scalar units' multipliers as
    ``MULT18X18D``, named in the manifest's simulation models; any other value refused by name."""
    from specmem.rtl.generate import build
    from specmem.sim.build import Design

    for algo in ("linear", "deltanet", "gated-deltanet", "vla"):
        b = build(algo, 8, 4, "int8", dsp="ecp5")
        assert b.manifest["parameters"]["dsp"] == "ecp5" and b.manifest["sim_models"] == ["MULT18X18D"]
        assert build(algo, 8, 4, "int8").manifest["parameters"]["dsp"] == "registered"
        with pytest.raises(ValueError, match="dsp: .*registered .*ecp5"):
            build(algo, 8, 4, "int8", dsp="fabric")
    from specmem.sim.build import build as sim_build

    with pytest.raises(ValueError, match="params: the deltanet-scaled design takes dsp, eps, gated, heads, ram, got lanes"):
        sim_build(Design("deltanet-scaled", 8, 4, "int8", params=(("lanes", 2),)))
    with pytest.raises(ValueError, match="params: the vla-scaled design takes .*lambda0.*, got heads"):
        sim_build(Design("vla-scaled", 8, 4, "int8", params=(("heads", 2),)))


def test_verilog_lints_clean(tmp_path):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "deltanet_scaled.v"
    for gated in (False, True):
        path.write_text(verilog.convert(DeltaNetScaledCore(8, 4, gated=gated), name="deltanet_scaled"))
        res = lint(path)
        assert res.returncode == 0 and not res.warnings, (gated, res.text)
