"""Directed cocotb tests of the dot-product engine and the scalar unit in Verilator
(``sim/tb_engine.py``, ``sim/tb_scalar_unit.py``), each against its oracle bit for bit, with the
manifest's latency."""

from __future__ import annotations

import pytest

from specmem.sim.build import Design, build
from specmem.sim.suite import run_engine, run_scalar_unit


def test_engine():
    run = run_engine(Design("engine", 16, 4, "legacy-int8"), seeds=(0, 1, 2))
    assert run.passed, run.describe()
    assert {"random_runs/seed=0", "extremes_never_wrap", "throughput_and_latency", "long_backpressure"} <= set(run.tests)
    rec = run.record["throughput_and_latency"]
    assert rec["input_gaps"] == [1] and len(rec["latency"]) == 1


@pytest.mark.parametrize("dsp", ["registered", "ecp5"])
def test_engine_with_dsp_registers(dsp):
    """The engine with input and output registers on its multipliers, portable and as ECP5
    MULT18X18D instances (simulated through rtl/vendor/MULT18X18D.v): bit exact, one beat per
    cycle, two cycles more latency than the fabric variant (input, pipeline, output registers)."""
    design = Design("engine", 16, 4, "legacy-int8", params=(("dsp", dsp),))
    run = run_engine(design, seeds=(0, 1))
    assert run.passed, run.describe()
    assert run.record["throughput_and_latency"]["latency"] == [build(design).manifest["latency_cycles"]] == [6]
    if dsp == "ecp5":
        assert build(design).verilog.read_text().count("MULT18X18D ") == 4


def test_scalar_unit():
    design = Design("scalar_unit", 16, 4, "legacy-int8")
    run = run_scalar_unit(design, seeds=(0, 1, 2))
    assert run.passed, run.describe()
    assert run.record["latency"]["latency"] == build(design).manifest["latency"]


@pytest.mark.slow
@pytest.mark.parametrize("d,k,preset", [(32, 8, "legacy-int8"), (16, 4, "legacy-int16"), (16, 2, "legacy-wide")])
def test_units_other_configurations(d, k, preset):
    for fn, kind in ((run_engine, "engine"), (run_scalar_unit, "scalar_unit")):
        run = fn(Design(kind, d, k, preset), seeds=(0, 1))
        assert run.passed, run.describe()


def test_bram_styles_agree():
    """The block RAM's two styles (``rtl/bram.py``) in Verilator, the ECP5 one through the DP16KD
    model: both equal the two-register read reference every cycle, under random enables and
    under one read per cycle, with a word of 20 bits (two primitives side by side)."""
    from specmem.sim.suite import run_bram

    run = run_bram(40, 20, seed=5)
    assert run.passed, run.describe()
    assert all(run.record[t]["checked"] > 3900 for t in ("random_enables", "streaming_reads"))


def test_bram_agreement_catches_a_wrong_output_enable():
    """Mutant: the primitive's output register always enabled (OCEB tied high): caught."""
    from specmem.sim.build import Design, build, run_cocotb
    from specmem.sim.suite import BRAM_TB

    b = build(Design("bram", 40, 1, params=(("width", 20),)), "plain",
              mutate=lambda v: v.replace(".OCEB(rd_oce)", ".OCEB(1'h1)"), mutant="oceb-high")
    assert b.verilog.read_text().count(".OCEB(1'h1)") == 2
    run = run_cocotb(b, BRAM_TB, {"name": "bram-mutant", "seed": 5, "cycles": 500})
    assert not run.tests["random_enables"] and run.tests["streaming_reads"]
