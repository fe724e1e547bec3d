# amaranth: UnusedElaboratable=no
"""``rtl/beat_banks.BeatBanks`` against plain vectors (the write bank's and the read banks'):
beats written in order with random gaps, flips at random points (after whole vectors, as the
cores take them, and mid-vector, where the write starts again at beat 0), beats read at random
addresses every cycle."""

import random

import pytest

from specmem.rtl.beat_banks import BeatBanks
from specmem.rtl.testing import run_simulation


@pytest.mark.parametrize("width, d, k, N, wl, rl", [
    (8, 32, 4, 2, 4, 4), (5, 12, 3, 2, 3, 3), (9, 4, 4, 2, 4, 4), (6, 40, 8, 2, 8, 8), (7, 6, 1, 2, 1, 1),
    (8, 32, 4, 3, 4, 4), (5, 12, 3, 4, 3, 3), (7, 6, 1, 5, 1, 1),
    # narrower read or write beats: the VLA chain's c lanes beside the passes' k
    (8, 32, 4, 2, 4, 2), (8, 32, 4, 2, 2, 4), (6, 32, 8, 2, 8, 2), (6, 32, 8, 3, 1, 8), (5, 8, 4, 2, 4, 1),
    (5, 16, 8, 2, 2, 2), (7, 12, 6, 2, 3, 6)])
def test_beat_banks_read_the_vector_taken(width, d, k, N, wl, rl):
    """Two banks: the read bank is the one not being written. A ring of ``N``: the write bank
    steps round it at each flip (``w_bank``), and every bank but the one being written is read
    back by name (``r_bank``) as it was written; write beats of ``wl`` and read beats of ``rl``
    elements."""
    rng = random.Random(width * 1000 + d * 10 + k + N + 100 * wl + 1000 * rl)
    dut = BeatBanks(width, d, k, banks=N, w_lanes=wl, r_lanes=rl)
    B, WB, RB = d // k, d // wl, d // rl
    banks = [[None] * d for _ in range(N)]  # None: never written
    checked = flips = 0

    async def bench(ctx):
        nonlocal checked, flips
        wb, beat = 0, 0
        for _ in range(2000):
            if N > 2:
                assert ctx.get(dut.w_bank) == wb
                rbank = rng.choice([b for b in range(N) if b != wb])
                ctx.set(dut.r_bank, rbank)
            else:
                rbank = 1 - wb
            addr = rng.randrange(RB)
            en = rng.random() < 0.6
            flip = rng.random() < (0.5 if beat == 0 else 0.02)
            data = [rng.randrange(1 << width) for _ in range(wl)]
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.w_en, en)
            ctx.set(dut.flip, flip)
            for s, x in zip(dut.w_data, data):
                ctx.set(s, x)
            for j in range(rl):
                if banks[rbank][addr * rl + j] is not None:
                    assert ctx.get(dut.r_data[j]) == banks[rbank][addr * rl + j], (rbank, addr, j)
                    checked += 1
            if en:
                banks[wb][beat * wl:(beat + 1) * wl] = data
                beat = (beat + 1) % WB
            if flip:
                wb, beat, flips = (wb + 1) % N, 0, flips + 1
            await ctx.tick()

    run_simulation(dut, bench)
    assert checked > 1000 * rl // k and flips > 20


def test_beat_banks_refuse_a_shape_they_cannot_hold():
    with pytest.raises(ValueError, match="multiple of k"):
        BeatBanks(8, 10, 4)
    with pytest.raises(ValueError, match="banks"):
        BeatBanks(8, 8, 4, banks=1)
    for bad in (3, 0, 8, True):
        with pytest.raises(ValueError, match="^r_lanes: must divide k = 4"):
            BeatBanks(8, 8, 4, r_lanes=bad)
    with pytest.raises(ValueError, match="^w_lanes: must divide k = 6 by a power of two"):
        BeatBanks(8, 12, 6, w_lanes=2)


@pytest.mark.parametrize("wl, rl", [(4, 4), (4, 2), (1, 4)])
def test_beat_banks_verilog_lints_clean(tmp_path, wl, rl):
    from amaranth.back import verilog

    from specmem.rtl.generate import lint

    path = tmp_path / "bb.v"
    path.write_text(verilog.convert(BeatBanks(8, 32, 4, w_lanes=wl, r_lanes=rl), name="bb"))
    res = lint(path)
    assert res.returncode == 0 and not res.warnings, res.text
