# amaranth: UnusedElaboratable=no
"""The pipelined block normaliser against ``golden/fixed/scaled/bfp.block``, bit for bit."""

import itertools

import numpy as np
import pytest

from specmem.golden.fixed.scaled.bfp import block
from specmem.rtl.block_norm import BlockNormaliser, SerialBlockNormaliser, StreamBlockNormaliser
from specmem.rtl.testing import VectorBeats, run_simulation


def _run(dut, vecs, fracs, stall=0.0, seed=0, gap=0.0, hold=None):
    """Feed the vectors in order (random stalls hold the whole pipeline; with ``gap`` some
    accepted cycles carry no vector, a bubble); collect the outputs. Garbage goes on the bus in
    cycles without a vector. A ``held_input`` unit (``hold``) reads the bus after the accept: it
    gets garbage in the accept cycle and its vector from the next cycle while it is busy
    (``hold=False`` breaks that contract: garbage while busy)."""
    hold = getattr(dut, "held_input", False) if hold is None else hold
    rng = np.random.default_rng(seed)
    got = []

    def garbage():
        return int(rng.integers(-(1 << (dut.in_width - 1)), 1 << (dut.in_width - 1)))

    async def tb(ctx):
        i = 0
        late = None  # a held unit's vector, put on the bus the cycle after its accept
        while len(got) < len(vecs):
            if late is not None:
                for lane, val in enumerate(late):
                    ctx.set(dut.i_data[lane], int(val))
                late = None
            en = rng.random() >= stall
            busy = hasattr(dut, "busy") and ctx.get(dut.busy)  # the serial arrangement takes one at a time
            feed = i < len(vecs) and rng.random() >= gap and not busy
            ctx.set(dut.en, int(en))
            if feed:
                ctx.set(dut.i_valid, 1)
                for lane, val in enumerate(vecs[i]):
                    ctx.set(dut.i_data[lane], garbage() if hold else int(val))
                ctx.set(dut.i_frac, int(fracs[i]))
            else:
                ctx.set(dut.i_valid, 0)
                for lane in range(dut.n if not (hold and busy) else 0):  # garbage on the bus of an invalid cycle
                    ctx.set(dut.i_data[lane], garbage())
            await ctx.tick()
            if en:
                if feed and hold:
                    late = vecs[i]
                i += int(feed)
                if ctx.get(dut.o_valid):
                    got.append(([ctx.get(dut.o_data[lane]) for lane in range(dut.n)], ctx.get(dut.o_frac)))

    run_simulation(dut, tb, deadline_cycles=(50 + 4 * getattr(dut, 'latency', 0)) * len(vecs) + 200)
    return got


def _check(got, vecs, fracs, M):
    """Bit-exact against the golden block(); returns how many vectors needed the carry shift."""
    v = np.array(vecs, dtype=np.int64)
    want, wf = block(v, np.array(fracs, dtype=np.int64), M)
    mx = np.max(np.abs(v), axis=-1)
    plain = np.where(mx > 0, np.floor(np.log2(np.maximum(mx, 1))).astype(np.int64) - (M - 2), 0)
    assert len(got) == len(vecs)
    np.testing.assert_array_equal(np.array([g[0] for g in got]), want)
    np.testing.assert_array_equal(np.array([g[1] for g in got]), wf)
    return int(np.sum(np.array(fracs) - wf != plain))


def _exhaustive(n, W, M, fw=8, lanes=None, held=False):
    vals = range(-(1 << (W - 1)), 1 << (W - 1))
    vecs = [list(p) for p in itertools.product(vals, repeat=n)]
    fracs = [(i % 7) - 3 for i in range(len(vecs))]
    dut = (BlockNormaliser(n, W, M, frac_width=fw) if lanes is None
           else SerialBlockNormaliser(n, W, M, frac_width=fw, lanes=lanes, held_input=held))
    return _check(_run(dut, vecs, fracs), vecs, fracs, M)


def test_exhaustive_two_lanes_five_bits():
    assert _exhaustive(2, 5, 3) > 0


def test_exhaustive_two_lanes_six_bits_coarse_and_fine_shifts():
    # W = 6, M = 4: shifts 0..6 cross a 4-bit coarse group, so both shifter stages and the
    # carry into the next coarse group (top mod 4 = 3, carry) are taken
    assert _exhaustive(2, 6, 4) > 0


def test_exhaustive_one_lane_ten_bits():
    assert _exhaustive(1, 10, 5) > 0


def test_exhaustive_narrow_inputs_only_shift_left():
    # in_width < M: every vector is shifted left exactly, no rounding, no carry
    assert _exhaustive(2, 4, 7) == 0


def _corner_vectors(n, W, M, rng):
    """For every msb position and sign: the largest element at the rounding boundaries (all
    ones, ties with odd and even kept bits, one below a tie, tie plus sticky), the other lanes
    smaller (some at the same boundaries, which must not change the carry), and the most
    negative input."""
    vecs = []
    for t in range(W - 1):
        sh = t - (M - 2)
        mags = {(1 << (t + 1)) - 1, 1 << t}
        if sh >= 1:
            half = 1 << (sh - 1)
            odd, even = ((1 << (M - 1)) - 1) << sh, ((1 << (M - 1)) - 2) << sh
            mags |= {odd + half, even + half, odd + half - 1, even + half + 1, odd + half + 1, odd}
            if sh >= 2:
                mags |= {even + half + (1 << (sh - 2))}
        for mag in sorted(mags):
            for sign in (1, -1):
                v = [int(x) for x in rng.integers(-mag, mag + 1, n)]
                v[int(rng.integers(n))] = sign * mag
                if n > 1:
                    v[int(rng.integers(n))] = -sign * mag  # the same magnitude, other sign
                vecs.append([min(max(x, -(1 << (W - 1))), (1 << (W - 1)) - 1) for x in v])  # in range
    v = [0] * n
    v[-1] = -(1 << (W - 1))
    vecs.append(v)
    vecs.append([-(1 << (W - 1))] * n)
    vecs.append([(1 << (W - 1)) - 1] * n)
    vecs.append([0] * n)
    return vecs


@pytest.mark.parametrize("n,W,M", [(8, 24, 18), (16, 28, 18), (3, 12, 4), (4, 9, 8)])
def test_rounding_and_carry_corners(n, W, M):
    rng = np.random.default_rng(W * 7 + M)
    vecs = _corner_vectors(n, W, M, rng)
    fracs = [int(x) for x in rng.integers(-100, 100, len(vecs))]
    dut = BlockNormaliser(n, W, M, frac_width=12)
    assert _check(_run(dut, vecs, fracs, stall=0.2, seed=M, gap=0.2), vecs, fracs, M) > 0


@pytest.mark.parametrize("n,W,M", [(8, 24, 8), (5, 16, 8), (16, 30, 18), (1, 12, 6), (8, 24, 18), (16, 28, 18),
                                   (17, 20, 9), (2, 8, 12)])
def test_random_vectors_with_stalls(n, W, M):
    rng = np.random.default_rng(n * 100 + W)
    vecs = []
    for i in range(150):
        scale = int(rng.integers(0, W))
        v = rng.integers(-(1 << scale), 1 << scale, n, endpoint=False)
        if i % 10 == 0:
            v[:] = 0  # all-zero vectors keep their exponent
        if i % 10 == 1:
            v[int(rng.integers(n))] = -(1 << (W - 1))  # the most negative input
        if i % 10 == 2:  # ties and carries: the largest element rounds up to 2^(M-1)
            top = max(scale, M)
            v[0] = ((1 << (M - 1)) - 1) * (1 << max(top - M + 1, 0)) + (1 << max(top - M, 0))
            v = np.clip(v, -(1 << (W - 1)), (1 << (W - 1)) - 1)
        vecs.append([int(x) for x in v])
    fracs = [int(x) for x in rng.integers(-50, 50, len(vecs))]
    dut = BlockNormaliser(n, W, M, frac_width=10)
    got = _run(dut, vecs, fracs, stall=0.3, seed=n, gap=0.15)
    carries = _check(got, vecs, fracs, M)
    assert carries > 0 or W < M  # carries were exercised (none exist when in_width < M)


@pytest.mark.parametrize("n,levels", [(1, 0), (4, 1), (5, 2), (16, 2), (17, 3)])
def test_latency_is_declared(n, levels):
    dut = BlockNormaliser(n, 20, 8)
    # inputs, magnitudes, the OR levels, leading one, coarse shift, fine shift, increment
    assert dut.or_levels == levels and dut.latency == 6 + levels
    cyc = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for t in range(dut.latency + 6):
            ctx.set(dut.i_valid, int(t == 0))
            for lane in range(n):
                ctx.set(dut.i_data[lane], 3)
            await ctx.tick()
            if ctx.get(dut.o_valid):
                cyc.append(t + 1)

    run_simulation(dut, tb, deadline_cycles=100)
    assert cyc == [dut.latency]


def test_stall_holds_every_stage():
    """With ``en`` low nothing moves: outputs stay put over a long stall mid-stream."""
    n, W, M = 4, 16, 8
    dut = BlockNormaliser(n, W, M)
    rng = np.random.default_rng(5)
    vecs = [[int(x) for x in rng.integers(-3000, 3000, n)] for _ in range(12)]
    want, wf = block(np.array(vecs), np.zeros(len(vecs), dtype=np.int64), M)
    seen = []

    async def tb(ctx):
        i = 0
        for t in range(40):
            en = not (5 <= t < 15)
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(i < len(vecs)))
            for lane in range(n):
                ctx.set(dut.i_data[lane], vecs[i][lane] if i < len(vecs) else 0)
            ctx.set(dut.i_frac, 0)
            await ctx.tick()
            if en:
                i += 1
            seen.append((ctx.get(dut.o_valid), [ctx.get(dut.o_data[lane]) for lane in range(n)], ctx.get(dut.o_frac)))

    run_simulation(dut, tb, deadline_cycles=100)
    for t in range(5, 15):  # stalled: every cycle shows what the cycle before showed
        assert seen[t] == seen[4]
    outs = []
    for t in range(40):
        if seen[t][0] and not (5 <= t < 15):
            outs.append(seen[t][1:])
    assert [o[0] for o in outs] == want.tolist()
    assert [o[1] for o in outs] == wf.tolist()


def test_bad_parameters():
    with pytest.raises(ValueError, match="^rounding:"):
        BlockNormaliser(4, 8, 4, rounding="floor")
    with pytest.raises(ValueError, match="^M:"):
        BlockNormaliser(4, 8, 2)


@pytest.mark.parametrize("n,W,M", [(8, 24, 8), (8, 24, 18), (16, 28, 18), (1, 12, 6), (2, 4, 7)])
def test_verilog_lints_clean(tmp_path, n, W, M):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    dut = BlockNormaliser(n, W, M)
    path = tmp_path / "block_norm.v"
    path.write_text(verilog.convert(dut, name="block_norm"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text


# -- the serial arrangement (the token chain's): the same block(), lanes at a time


@pytest.mark.parametrize("held", [False, True], ids=["buffered", "held"])
@pytest.mark.parametrize("n,W,M,lanes", [(2, 5, 3, 1), (2, 6, 4, 1), (3, 5, 3, 2), (2, 4, 7, 1)])
def test_serial_exhaustive(n, W, M, lanes, held):
    carries = _exhaustive(n, W, M, lanes=lanes, held=held)
    assert carries > 0 or W < M


@pytest.mark.parametrize("n,W,M,lanes", [(8, 24, 18, 1), (8, 44, 18, 2), (3, 12, 4, 2), (4, 9, 8, 4),
                                         (5, 39, 18, 3)])
@pytest.mark.parametrize("held", [False, True], ids=["buffered", "held"])
def test_serial_rounding_and_carry_corners(n, W, M, lanes, held):
    rng = np.random.default_rng(W * 7 + M + lanes)
    vecs = _corner_vectors(n, W, M, rng)
    fracs = [int(x) for x in rng.integers(-100, 100, len(vecs))]
    dut = SerialBlockNormaliser(n, W, M, frac_width=12, lanes=lanes, held_input=held)
    assert _check(_run(dut, vecs, fracs, stall=0.2, seed=M, gap=0.2), vecs, fracs, M) > 0


def test_held_input_reads_the_bus_until_its_second_sweep():
    """Without a buffer the unit reads the bus in both sweeps: garbage while it is busy (the
    contract broken) changes the results, so the held runs above test the reads, not a copy."""
    rng = np.random.default_rng(3)
    vecs = _corner_vectors(8, 44, 18, rng)
    fracs = [0] * len(vecs)
    dut = SerialBlockNormaliser(8, 44, 18, frac_width=12, lanes=2, held_input=True)
    with pytest.raises(AssertionError):
        _check(_run(dut, vecs, fracs, hold=False), vecs, fracs, 18)


@pytest.mark.parametrize("n,lanes", [(1, 1), (8, 1), (8, 2), (7, 2), (6, 4)])
def test_serial_latency_is_declared_and_back_to_back_vectors_pass(n, lanes):
    """``o_valid`` comes ``latency`` cycles after the accept; ``busy`` drops in the cycle it
    rises, so vectors can follow each other every ``latency`` cycles; both come out right."""
    dut = SerialBlockNormaliser(n, 20, 8, lanes=lanes)
    assert dut.beats == -(-n // lanes) and dut.latency == 2 * dut.beats + 7
    rng = np.random.default_rng(n + lanes)
    vecs = [[int(x) for x in rng.integers(-40000, 40000, n)] for _ in range(3)]
    acc, outs = [], []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        ctx.set(dut.i_frac, 0)
        i = 0
        for t in range(4 * dut.latency + 8):
            feed = i < len(vecs) and not ctx.get(dut.busy)
            ctx.set(dut.i_valid, int(feed))
            for lane in range(n):
                ctx.set(dut.i_data[lane], vecs[i][lane] if feed else -1)
            if feed:
                acc.append(t)
                i += 1
            await ctx.tick()
            if ctx.get(dut.o_valid):
                outs.append((t + 1, [ctx.get(dut.o_data[lane]) for lane in range(n)]))

    run_simulation(dut, tb, deadline_cycles=200)
    assert [t for t, _ in outs] == [a + dut.latency for a in acc]
    assert acc == [0, dut.latency, 2 * dut.latency]  # accepted again as soon as o_valid shows
    want, _ = block(np.array(vecs), np.zeros(len(vecs), dtype=np.int64), 8)
    assert [o for _, o in outs] == want.tolist()


def test_serial_refuses_bad_parameters():
    with pytest.raises(ValueError, match="lanes"):
        SerialBlockNormaliser(8, 20, 8, lanes=0)
    with pytest.raises(ValueError, match="lanes: at most 4"):
        SerialBlockNormaliser(8, 20, 8, lanes=8)


# -- the streaming arrangement: vectors as back-to-back beats (rows, per-row results)


def _run_stream(dut, vecs, fracs, stall=0.0, gap=0.0, seed=0, bubble_at=None):
    """Feed each vector as ``beats`` consecutive beats (gaps only between vectors, random whole-unit
    stalls); collect ``(elements, frac)`` per output vector and check the beat flags. With
    ``bubble_at = (vector, beat)`` an invalid cycle is put inside that vector (the contract broken)."""
    rng = np.random.default_rng(seed)
    w, B, W = dut.lanes, dut.beats, dut.in_width
    out, err = VectorBeats(w, B), []
    beats = [(i, b) for i in range(len(vecs)) for b in range(B)]

    async def tb(ctx):
        j, bubbled = 0, False
        while len(out.got) < len(vecs):
            en = rng.random() >= stall
            i, b = beats[j] if j < len(beats) else (None, None)
            feed = i is not None and (b > 0 or rng.random() >= gap)
            if bubble_at == (i, b) and not bubbled:
                feed, bubbled = False, en
            ctx.set(dut.en, int(en))
            ctx.set(dut.i_valid, int(feed))
            for lane in range(w):
                val = vecs[i][b * w + lane] if feed else int(rng.integers(-(1 << (W - 1)), 1 << (W - 1)))
                ctx.set(dut.i_data[lane], int(val))
            ctx.set(dut.i_frac, int(fracs[i]) if feed and b == 0 else int(rng.integers(-50, 50)))
            await ctx.tick()
            if en:
                j += int(feed)
                out.take(ctx, dut)
        err.append(ctx.get(dut.o_err))

    run_simulation(dut, tb, deadline_cycles=(20 + 4 * dut.latency) * len(vecs) + 200)
    return out.got, err[0]


@pytest.mark.parametrize("lanes,beats,W,M", [(1, 2, 5, 3), (2, 1, 5, 3), (1, 3, 4, 3)])
def test_stream_exhaustive(lanes, beats, W, M):
    vals = range(-(1 << (W - 1)), 1 << (W - 1))
    vecs = [list(p) for p in itertools.product(vals, repeat=lanes * beats)]
    fracs = [(i % 7) - 3 for i in range(len(vecs))]
    got, err = _run_stream(StreamBlockNormaliser(lanes, beats, W, M, frac_width=8), vecs, fracs)
    assert not err
    assert _check(got, vecs, fracs, M) > 0


@pytest.mark.parametrize("style", ["registers", "lutram", "behavioural"])
@pytest.mark.parametrize("lanes,beats,W,M", [(4, 8, 21, 8), (8, 4, 21, 8), (16, 2, 24, 8), (5, 3, 39, 18),
                                             (3, 5, 12, 4), (1, 1, 9, 8)])
def test_stream_rounding_and_carry_corners(lanes, beats, W, M, style):
    """Corner vectors (carries, ties, extremes, zeros, one lane set) back to back, with random
    gaps between vectors and random stalls of the whole unit; the beats' wait in each style."""
    rng = np.random.default_rng(W * 7 + M + lanes)
    vecs = _corner_vectors(lanes * beats, W, M, rng)
    fracs = [int(x) for x in rng.integers(-100, 100, len(vecs))]
    dut = StreamBlockNormaliser(lanes, beats, W, M, frac_width=12, delay_style=style)
    got, err = _run_stream(dut, vecs, fracs, stall=0.2, gap=0.3, seed=M)
    assert not err
    assert _check(got, vecs, fracs, M) > 0 or W < M


@pytest.mark.parametrize("style", ["registers", "lutram"])
@pytest.mark.parametrize("lanes,beats", [(1, 1), (4, 8), (8, 2), (3, 3)])
def test_stream_latency_is_declared_and_vectors_run_back_to_back(lanes, beats, style):
    """Vectors fed on every cycle come out on every cycle, ``latency`` cycles after they went in."""
    dut = StreamBlockNormaliser(lanes, beats, 20, 8, delay_style=style)
    assert dut.latency == beats + 7 + {1: 0, 3: 1, 4: 1, 8: 2}[lanes]  # ceil(log4 lanes) OR levels
    rng = np.random.default_rng(lanes * 10 + beats)
    vecs = [[int(x) for x in rng.integers(-40000, 40000, lanes * beats)] for _ in range(4)]
    outs = []

    async def tb(ctx):
        ctx.set(dut.en, 1)
        for t in range(len(vecs) * beats + dut.latency + 4):
            i, b = divmod(t, beats)
            feed = i < len(vecs)
            ctx.set(dut.i_valid, int(feed))
            ctx.set(dut.i_frac, 5 if feed else 0)
            for lane in range(lanes):
                ctx.set(dut.i_data[lane], vecs[i][b * lanes + lane] if feed else 0)
            await ctx.tick()
            if ctx.get(dut.o_valid):
                outs.append((t + 1, [ctx.get(dut.o_data[lane]) for lane in range(lanes)]))

    run_simulation(dut, tb, deadline_cycles=500)
    assert [t for t, _ in outs] == [dut.latency + t for t in range(len(vecs) * beats)]
    want, _ = block(np.array(vecs), np.full(len(vecs), 5), 8)
    assert [x for _, o in outs for x in o] == want.reshape(-1).tolist()


def test_stream_flags_a_bubble_inside_a_vector():
    """A beat missing from the middle of a vector sets ``o_err``; the same stream without it does not."""
    rng = np.random.default_rng(1)
    vecs = [[int(x) for x in rng.integers(-1000, 1000, 8)] for _ in range(3)]
    dut = StreamBlockNormaliser(2, 4, 12, 6)
    assert _run_stream(dut, vecs, [0, 0, 0])[1] == 0
    dut = StreamBlockNormaliser(2, 4, 12, 6)
    assert _run_stream(dut, vecs, [0, 0, 0], bubble_at=(1, 2))[1] == 1


def test_stream_refuses_bad_parameters():
    with pytest.raises(ValueError, match="beats"):
        StreamBlockNormaliser(4, 0, 20, 8)
    with pytest.raises(ValueError, match="rounding"):
        StreamBlockNormaliser(4, 2, 20, 8, rounding="floor")
    with pytest.raises(ValueError, match="^delay_style:"):
        StreamBlockNormaliser(4, 2, 20, 8, delay_style="srl")


@pytest.mark.parametrize("style", ["registers", "lutram"])
@pytest.mark.parametrize("lanes,beats,W,M", [(8, 8, 21, 8), (1, 1, 12, 6), (16, 2, 28, 18)])
def test_stream_verilog_lints_clean(tmp_path, lanes, beats, W, M, style):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "block_norm_stream.v"
    path.write_text(verilog.convert(StreamBlockNormaliser(lanes, beats, W, M, delay_style=style), name="block_norm_stream"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
