"""``rtl/dsp.py``'s ``PipelinedMultiplier`` (18 x 18 pieces and a registered adder tree) against
Python's product, operand widths from one piece to 3 x 3 pieces, at its stated latency."""
import random, pytest
from specmem.rtl.dsp import PipelinedMultiplier
from specmem.rtl.testing import run_simulation
@pytest.mark.parametrize("wa,wb,inreg", [(8, 8, False), (18, 18, True), (19, 36, False), (37, 38, True), (20, 18, False),
                                         (35, 2, False)])
def test_products_equal_python_at_the_stated_latency(wa, wb, inreg):
    """Every product, extremes included, appears exactly ``latency`` cycles after its operands."""
    dut = PipelinedMultiplier(wa, wb, "registered", input_register=inreg)
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
