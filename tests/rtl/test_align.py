"""StreamAlignBlock against ``golden/fixed/scaled/bfp.align_block``, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import align_block
from specmem.rtl.align import StreamAlignBlock
from specmem.rtl.testing import VectorBeats, run_simulation


def _case(rng, n_vec, d, terms, *, frac_lo=-6, frac_hi=30, p_zero=0.15, p_dead=0.1):
    """Random vectors per term: magnitudes spread over every width (so msbs vary), zero elements,
    terms that are all zero in some vectors, vectors all zero; exponents per vector or per element."""
    raws, fracs = [], []
    for wd, pe in terms:
        bits = rng.integers(1, wd + 1, (n_vec, d))  # up to the full width (the top group's patterns)
        x = rng.integers(-(1 << 62), 1 << 62, (n_vec, d)) >> (63 - bits)
        x = np.clip(x, -(1 << (wd - 1)), (1 << (wd - 1)) - 1)
        x[rng.random((n_vec, d)) < p_zero] = 0
        x[rng.random(n_vec) < p_dead] = 0
        raws.append(x.astype(np.int64))
        fracs.append(rng.integers(frac_lo, frac_hi, (n_vec, d) if pe else (n_vec, 1)))
    dead = rng.random(n_vec) < p_dead / 2
    for x in raws:
        x[dead] = 0
    return raws, fracs


def _reference(raws, fracs, M, guard):
    return align_block(list(zip(raws, fracs)), M, "rne", guard)


def _run(dut, raws, fracs, *, stall=0.0, gap=0.0, seed=0, bubble_at=None):
    """Feed each vector as consecutive beats (random gaps between vectors, random stalls of the
    whole unit, garbage on the bus in idle cycles); collect ``(elements, frac)`` per output vector,
    checking the beat flags; return them and ``o_err``."""
    rng = np.random.default_rng(seed)
    w, B, EW = dut.lanes, dut.beats, dut.exp_width
    n_vec = raws[0].shape[0]
    out, err = VectorBeats(w, B), []
    order = [(i, b) for i in range(n_vec) for b in range(B)]

    def drive(ctx, i, b, feed):
        for t, (wd, pe) in enumerate(dut.terms):
            x, f = getattr(dut, f"i_x{t}"), getattr(dut, f"i_f{t}")
            for lane in range(w):
                val = raws[t][i, b * w + lane] if feed else int(rng.integers(-(1 << (wd - 1)), 1 << (wd - 1)))
                ctx.set(x[lane], int(val))
                if pe:
                    ctx.set(f[lane], int(fracs[t][i, b * w + lane]) if feed else int(rng.integers(-50, 50)))
            if not pe:
                ctx.set(f, int(fracs[t][i, 0]) if feed and b == 0 else int(rng.integers(-50, 50)))

    async def tb(ctx):
        j, bubbled = 0, False
        while len(out.got) < n_vec:
            en = rng.random() >= stall
            i, b = order[j] if j < len(order) else (None, None)
            feed = i is not None and (b > 0 or rng.random() >= gap)
            if bubble_at == (i, b) and not bubbled:
                feed, bubbled = False, en
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            drive(ctx, i if feed else 0, b if feed else 0, feed)
            await ctx.tick()
            if en:
                j += int(feed)
                out.take(ctx, dut)
        err.append(ctx.get(dut.o_err))

    run_simulation(dut, tb, deadline_cycles=(20 + 4 * dut.latency) * n_vec + 400)
    return out.got, err[0]


def _check(dut, raws, fracs, **kw):
    got, err = _run(dut, raws, fracs, **kw)
    assert not err
    want, wf = _reference(raws, fracs, dut.M, dut.guard)
    assert [g for g, _ in got] == want.tolist()
    assert [f for _, f in got] == wf.tolist()
    return want


# the delta rules' e = v - sk (M-bit v per vector, 2M + log2 d-bit sk per row) and o = sq + be C
DELTA_E = ((8, False), (22, True))
DELTA_O = ((22, True), (24, False))


@pytest.mark.parametrize("lanes,beats,terms,M", [(4, 4, DELTA_E, 8), (4, 2, DELTA_O, 16), (3, 3, DELTA_E, 8),
                                                 (8, 1, ((9, True), (7, True), (12, False)), 6)])
def test_random_vectors_bit_exact_with_stalls_and_gaps(lanes, beats, terms, M):
    rng = np.random.default_rng(lanes * 100 + beats * 10 + M)
    raws, fracs = _case(rng, 40, lanes * beats, terms)
    dut = StreamAlignBlock(lanes, beats, terms, M)
    want = _check(dut, raws, fracs, stall=0.2, gap=0.3, seed=lanes)
    assert np.count_nonzero(want) > 0


def test_small_formats_many_vectors_every_shift_range():
    """Tiny widths and guard, exponents spread far past the shifters' range (the clamps on both
    sides), one lane per beat, many vectors back to back."""
    terms = ((4, True), (5, False))
    rng = np.random.default_rng(5)
    raws, fracs = _case(rng, 300, 2, terms, frac_lo=-40, frac_hi=40, p_zero=0.25)
    dut = StreamAlignBlock(1, 2, terms, 3, guard=2, exp_width=8)
    _check(dut, raws, fracs, stall=0.1, seed=2)


def test_one_term_is_block_of_a_per_element_vector():
    """A single per-element term (ELU's features, VLA's diagonal): align_block of one term."""
    terms = ((18, True),)
    rng = np.random.default_rng(9)
    raws, fracs = _case(rng, 30, 8, terms)
    _check(StreamAlignBlock(2, 4, terms, 8), raws, fracs, stall=0.3, gap=0.2, seed=1)


def test_block_ram_wait_matches_registers():
    terms = DELTA_E
    rng = np.random.default_rng(3)
    raws, fracs = _case(rng, 25, 16, terms)
    _check(StreamAlignBlock(4, 4, terms, 8, delay_style="behavioural"), raws, fracs, stall=0.25, gap=0.2, seed=4)


@pytest.mark.parametrize("lanes,beats", [(1, 1), (4, 4), (2, 8)])
def test_latency_is_declared_and_vectors_run_back_to_back(lanes, beats):
    """Vectors fed every cycle come out every cycle, ``latency`` cycles after they went in."""
    terms = DELTA_E
    dut = StreamAlignBlock(lanes, beats, terms, 8)
    rng = np.random.default_rng(lanes + beats)
    raws, fracs = _case(rng, 4, lanes * beats, terms, p_dead=0.0)
    n = 4 * beats
    outs = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for c in range(n + dut.latency + 4):
            i, b = divmod(c, beats)
            feed = i < 4
            ctx.set(dut.i_valid, int(feed))
            for t, (wd, pe) in enumerate(terms):
                for lane in range(lanes):
                    ctx.set(getattr(dut, f"i_x{t}")[lane], int(raws[t][i, b * lanes + lane]) if feed else 0)
                    if pe:
                        ctx.set(getattr(dut, f"i_f{t}")[lane], int(fracs[t][i, b * lanes + lane]) if feed else 0)
                if not pe:
                    ctx.set(getattr(dut, f"i_f{t}"), int(fracs[t][i, 0]) if feed else 0)
            await ctx.tick()
            if ctx.get(dut.o_valid):
                outs.append((c + 1, [ctx.get(dut.o_data[lane]) for lane in range(lanes)]))

    run_simulation(dut, tb, deadline_cycles=1000)
    assert [c for c, _ in outs] == [dut.latency + c for c in range(n)]
    want, _ = _reference(raws, fracs, 8, dut.guard)
    assert [x for _, o in outs for x in o] == want.reshape(-1).tolist()


def test_flags_a_bubble_inside_a_vector():
    terms = DELTA_E
    rng = np.random.default_rng(1)
    raws, fracs = _case(rng, 3, 8, terms)
    assert _run(StreamAlignBlock(2, 4, terms, 8), raws, fracs)[1] == 0
    assert _run(StreamAlignBlock(2, 4, terms, 8), raws, fracs, bubble_at=(1, 2))[1] == 1


def test_refuses_bad_parameters():
    with pytest.raises(ValueError, match="terms"):
        StreamAlignBlock(4, 2, (), 8)
    with pytest.raises(ValueError, match="terms"):
        StreamAlignBlock(4, 2, ((8, 1),), 8)
    with pytest.raises(ValueError, match="exp_width"):
        StreamAlignBlock(4, 2, DELTA_E, 8, exp_width=6)
    with pytest.raises(ValueError, match="delay_style"):
        StreamAlignBlock(4, 2, DELTA_E, 8, delay_style="flops")


@pytest.mark.parametrize("lanes,beats,terms", [(4, 4, DELTA_E), (3, 1, DELTA_O)])
def test_verilog_lints_clean(tmp_path, lanes, beats, terms):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "align.v"
    path.write_text(verilog.convert(StreamAlignBlock(lanes, beats, terms, 8), name="align"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text


@pytest.mark.parametrize("W", [1, 3, 4, 7, 9])
def test_leading_one_exhaustive(W):
    """The leading-one detector alone, every ``W``-bit value (a wrong position inside a group
    moves ``T`` by one, which align_block's guard bits hide from most random vectors)."""
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from specmem.rtl.align import MSB_STAGES, _msb
    from specmem.rtl.pipeline import stage_register

    class Lead(wiring.Component):
        def __init__(self):
            super().__init__({"x": In(W), "msb": Out(max(1, (W - 1).bit_length())), "nz": Out(1)})

        def elaborate(self, platform):
            m = Module()
            mb, nz = _msb(stage_register(m, Signal(init=1)), self.x, W, "l")
            m.d.comb += [self.msb.eq(mb), self.nz.eq(nz)]
            return m

    dut = Lead()
    got = []

    async def tb(ctx):
        for c in range((1 << W) + MSB_STAGES):
            ctx.set(dut.x, c % (1 << W))
            await ctx.tick()
            if c >= MSB_STAGES - 1:
                got.append((ctx.get(dut.msb), ctx.get(dut.nz)))

    run_simulation(dut, tb, deadline_cycles=5000)
    want = [(x.bit_length() - 1 if x else 0, int(x > 0)) for x in range(1 << W)]
    assert [(mb if nz else 0, nz) for mb, nz in got[:1 << W]] == want
