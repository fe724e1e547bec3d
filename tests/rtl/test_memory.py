# amaranth: UnusedElaboratable=no
# (components built only to see them rejected are never elaborated)
"""StateMemory against a NumPy array: random reads and lane-masked writes, read-before-write."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.rtl.memory import StateMemory
from specmem.rtl.testing import run_simulation


@pytest.mark.parametrize("out_reg", [False, True], ids=["read", "output-register"])
def test_memory_random_access_matches_array(out_reg):
    """Random accesses; with ``out_reg`` the same words one cycle later (``latency`` 2)."""
    d, k, w = 16, 4, 12
    rng = np.random.default_rng(5)
    init = rng.integers(-(1 << (w - 1)), 1 << (w - 1), size=(d, k))
    dut = StateMemory(d, k, w, init=init.tolist(), out_reg=out_reg)
    assert dut.latency == (2 if out_reg else 1)
    ref = init.copy()
    ops = []
    for _ in range(300):
        ops.append((
            int(rng.integers(d)), bool(rng.random() < 0.8),
            int(rng.integers(d)), int(rng.integers(1 << k)), rng.integers(-(1 << (w - 1)), 1 << (w - 1), size=k),
        ))

    async def tb(ctx):
        expect_next, pipe = None, []
        for ra, ren, wa, wen, wd in ops:
            ctx.set(dut.rd_addr, ra)
            ctx.set(dut.rd_en, ren)
            ctx.set(dut.wr_addr, wa)
            ctx.set(dut.wr_en, wen)
            ctx.set(dut.wr_data, wd.tolist())
            await ctx.tick()
            if ren:
                expect_next = ref[ra].tolist()  # read-before-write: the old row
            pipe.append(expect_next)
            want = pipe[-1] if not out_reg else (pipe[-2] if len(pipe) > 1 else None)
            if want is not None:  # rd_data holds while rd_en is low
                got = [int(x) for x in ctx.get(dut.rd_data)]
                assert got == want, (got, want)
            for l in range(k):
                if wen >> l & 1:
                    ref[wa, l] = wd[l]
        await ctx.tick()
        for i in range(d):
            for l in range(k):
                assert ctx.get(dut.banks[l].data[i]) == ref[i, l]

    run_simulation(dut, tb, deadline_cycles=1000)


@pytest.mark.parametrize("args,kw,match", [((0, 4, 8), {}, "d: must be"), ((8, 0, 8), {}, "k: must be"),
                                          ((8, 4, 1), {}, "width: must be"),
                                          ((8, 4, 8), {"style": "xilinx"}, "bram: must be one of behavioural, ecp5"),
                                          ((8, 4, 8), {"style": "ecp5", "init": [[0] * 4] * 8}, "init: only the"),
                                          ((2048, 4, 8), {"style": "ecp5"}, "depth: one DP16KD column")])
def test_memory_rejects_bad_generics(args, kw, match):
    with pytest.raises(ValueError, match=match):
        StateMemory(*args, **kw)
