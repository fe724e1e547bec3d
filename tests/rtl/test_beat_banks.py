# amaranth: UnusedElaboratable=no
"""``rtl/beat_banks.BeatBanks`` against plain vectors (the write bank's and the read banks'):
beats written in order with random gaps, flips at random points (after whole vectors, as the
cores take them, and mid-vector, where the write starts again at beat 0), beats read at random
addresses every cycle."""

import random

import pytest

from specmem.rtl.beat_banks import BeatBanks
from specmem.rtl.testing import run_simulation


@pytest.mark.parametrize("width, d, k, N", [(8, 32, 4, 2), (5, 12, 3, 2), (9, 4, 4, 2), (6, 40, 8, 2), (7, 6, 1, 2),
                                            (8, 32, 4, 3), (5, 12, 3, 4), (7, 6, 1, 5)])
def test_beat_banks_read_the_vector_taken(width, d, k, N):
    """Two banks: the read bank is the one not being written. A ring of ``N``: the write bank
    steps round it at each flip (``w_bank``), and every bank but the one being written is read
    back by name (``r_bank``) as it was written."""
    rng = random.Random(width * 1000 + d * 10 + k + N)
    dut = BeatBanks(width, d, k, banks=N)
    B = d // k
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
            addr = rng.randrange(B)
            en = rng.random() < 0.6
            flip = rng.random() < (0.5 if beat == 0 else 0.02)
            data = [rng.randrange(1 << width) for _ in range(k)]
            ctx.set(dut.r_addr, addr)
            ctx.set(dut.w_en, en)
            ctx.set(dut.flip, flip)
            for s, x in zip(dut.w_data, data):
                ctx.set(s, x)
            for j in range(k):
                if banks[rbank][addr * k + j] is not None:
                    assert ctx.get(dut.r_data[j]) == banks[rbank][addr * k + j], (rbank, addr, j)
                    checked += 1
            if en:
                banks[wb][beat * k:(beat + 1) * k] = data
                beat = (beat + 1) % B
            if flip:
                wb, beat, flips = (wb + 1) % N, 0, flips + 1
            await ctx.tick()

    run_simulation(dut, bench)
    assert checked > 1000 and flips > 20


def test_beat_banks_refuse_a_shape_they_cannot_hold():
    with pytest.raises(ValueError, match="multiple of k"):
        BeatBanks(8, 10, 4)
    with pytest.raises(ValueError, match="banks"):
        BeatBanks(8, 8, 4, banks=1)
