import random, pytest
from specmem.rtl.dsp import PipelinedMultiplier
from specmem.rtl.testing import run_simulation
@pytest.mark.parametrize("wa,wb", [(8, 8), (18, 18), (19, 36), (37, 38), (20, 18), (35, 2)])
def test_pm(wa, wb):
    dut = PipelinedMultiplier(wa, wb, "registered")
    rng = random.Random(wa * 100 + wb)
    vals = [(rng.randrange(-(1 << (wa - 1)), 1 << (wa - 1)), rng.randrange(-(1 << (wb - 1)), 1 << (wb - 1))) for _ in range(200)]
    vals += [(-(1 << (wa - 1)), -(1 << (wb - 1))), ((1 << (wa - 1)) - 1, -(1 << (wb - 1))), (0, 5), (-1, -1)]
    got = []
    async def tb(ctx):
        ctx.set(dut.en, 1)
        for n in range(len(vals) + dut.latency):
            if n < len(vals):
                ctx.set(dut.a, vals[n][0]); ctx.set(dut.b, vals[n][1])
            await ctx.tick()
            if n + 1 >= dut.latency:
                got.append(ctx.get(dut.p))
    run_simulation(dut, tb, deadline_cycles=1000)
    assert got[:len(vals)] == [a * b for a, b in vals]
