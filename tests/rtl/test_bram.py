"""The registered block RAM (``rtl/bram.py``), behavioural style, in Amaranth's simulator against
the two-register read reference of ``sim/tb_bram.py``; generics checked. The agreement of the
two styles (the ECP5 one through ``rtl/vendor/DP16KD.v``) runs in Verilator: tests/sim/test_units.py.
"""

import random

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from specmem.rtl.bram import BRAM_READ_LATENCY, RegisteredRAM, RegisteredRAMPair
from specmem.sim.tb_bram import Reference


@pytest.mark.parametrize("p_rd, p_oce", [(1.0, 1.0), (0.6, 0.7)])
def test_behavioural_matches_reference(p_rd, p_oce):
    depth, width = 24, 11
    rng = random.Random(3)
    init = [rng.getrandbits(width) for _ in range(depth)]
    dut = RegisteredRAM(depth, width, init=init)
    ref = Reference(depth)
    ref.mem = list(init)
    errors, checked = [], 0

    async def bench(ctx):
        nonlocal checked
        for cyc in range(600):
            if ref.out is not None:
                checked += 1
                if ctx.get(dut.rd_data) != ref.out:
                    errors.append((cyc, ctx.get(dut.rd_data), ref.out))
            wr_en, rd_en, oce = rng.random() < 0.5, rng.random() < p_rd, rng.random() < p_oce
            wa, ra, wd = rng.randrange(depth), rng.randrange(depth), rng.getrandbits(width)
            if wr_en and rd_en and wa == ra:
                ra = (ra + 1) % depth
            for sig, v in ((dut.wr_en, wr_en), (dut.wr_addr, wa), (dut.wr_data, wd), (dut.rd_en, rd_en),
                           (dut.rd_addr, ra), (dut.rd_oce, oce)):
                ctx.set(sig, int(v))
            await ctx.tick()
            ref.edge(wr_en, wa, wd, rd_en, ra, oce)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert checked > 400 and not errors, errors[:5]


def test_read_latency_is_two_cycles():
    dut = RegisteredRAM(8, 8, init=list(range(10, 18)))
    seen = []

    async def bench(ctx):
        ctx.set(dut.rd_en, 1)
        ctx.set(dut.rd_oce, 1)
        for a in (5, 2, 7, 7, 0):
            ctx.set(dut.rd_addr, a)
            await ctx.tick()
            seen.append(ctx.get(dut.rd_data))
        for _ in range(2):
            await ctx.tick()
            seen.append(ctx.get(dut.rd_data))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert BRAM_READ_LATENCY == 2 and seen[1:] == [15, 12, 17, 17, 10, 10]


@pytest.mark.parametrize("kw, match", [
    (dict(depth=1, width=8), "^depth:"),
    (dict(depth=8, width=0), "^width:"),
    (dict(depth=8, width=8, style="xilinx"), "^style:"),
    (dict(depth=2048, width=8, style="ecp5"), "^depth: one DP16KD"),
    (dict(depth=4, width=8, style="ecp5", init=[0] * 4), "^init: only the behavioural"),
    (dict(depth=4, width=8, init=[0, 1, 2]), "^init: must be 4"),
    (dict(depth=4, width=8, init=[0, 1, 2, 256]), "^init: must be 4"),
])
def test_bad_generics(kw, match):
    with pytest.raises(ValueError, match=match):
        RegisteredRAM(**kw)


@pytest.mark.parametrize("width, n", [(18, 1), (20, 2), (36, 2), (40, 3)])
def test_ecp5_style_instantiates_one_dp16kd_per_18_bits(width, n):
    ram = RegisteredRAM(64, width, "ecp5")
    assert ram.primitives == n
    text = verilog.convert(ram, name="ram")
    assert text.count("DP16KD ") == n and text.count('.REGMODE_B("OUTREG")') == n


def test_pair_manifest_names_the_model():
    assert RegisteredRAMPair(40, 20).manifest()["sim_models"] == ["DP16KD"]
