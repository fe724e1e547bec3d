# amaranth: UnusedElaboratable=no
"""``rtl/dsp.wide_operand_product``: ``a * b`` exactly three cycles after its operands, random
operands every cycle (extremes included), in both styles. The ``ecp5`` style's ``MULT18X18D``
instances are replaced here by an Amaranth model of the configuration they are built with (input
registers, output register, no pipeline register), so the test checks the cutting of ``b`` into
pieces and their shifted sum; the instance against the vendor model runs in Verilator (the scaled
DeltaNet cores with ``dsp="ecp5"``, ``tests/sim/test_scaled_sim.py``)."""

import random

import pytest
from amaranth.hdl import Module, Signal, signed

from specmem.rtl import dsp
from specmem.rtl.testing import run_simulation


def _mult_model(a18, b18, p36, ce, *, pipeline):
    assert not pipeline
    m = Module()
    ra, rb = Signal(signed(18)), Signal(signed(18))
    with m.If(ce):
        m.d.sync += [ra.eq(a18), rb.eq(b18), p36.eq(ra * rb)]
    return m


@pytest.mark.parametrize("style", ["registered", "ecp5"])
@pytest.mark.parametrize("wa, wb", [(8, 21), (8, 19), (12, 35), (18, 36), (8, 18)])
def test_wide_operand_product_is_the_product_three_cycles_later(monkeypatch, style, wa, wb):
    monkeypatch.setattr(dsp, "_mult18x18d", _mult_model)
    rng = random.Random(wa * 100 + wb)
    m = Module()
    a, b = Signal(signed(wa), name="a"), Signal(signed(wb), name="b")
    p = dsp.wide_operand_product(m, a, b, "t", style)
    assert len(p) == wa + wb
    sent, checked = [], 0

    def value(w):
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        return rng.choice([lo, hi, 0, -1, rng.randint(lo, hi), rng.randint(lo, hi)])

    async def bench(ctx):
        nonlocal checked
        for _ in range(400):
            x, y = value(wa), value(wb)
            ctx.set(a, x)
            ctx.set(b, y)
            sent.append(x * y)
            await ctx.tick()
            if len(sent) >= 3:
                assert ctx.get(p) == sent[-3], (x, y)
                checked += 1

    run_simulation(m, bench)
    assert checked > 390


def test_wide_operand_product_refuses_what_it_cannot_build():
    m = Module()
    with pytest.raises(ValueError, match="dsp: must be one of"):
        dsp.wide_operand_product(m, Signal(signed(8)), Signal(signed(20)), "t", "fabric")
    with pytest.raises(TypeError, match="signed operands"):
        dsp.wide_operand_product(m, Signal(8), Signal(signed(20)), "t")
