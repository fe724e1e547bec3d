"""The scaled DeltaNet core in Verilator (``sim/tb_deltanet_scaled.py``), its state in ``DP16KD``
through the vendor model, against the int8 model bit for bit."""

from __future__ import annotations

from specmem.sim.build import Design, build, run_cocotb

TB = "specmem.sim.tb_deltanet_scaled"


def test_deltanet_scaled_in_verilator():
    b = build(Design("deltanet-scaled", 8, 4, "int8"))
    assert "DP16KD" in b.verilog.read_text()
    run = run_cocotb(b, TB, {"name": "deltanet-scaled", "seed": 3, "tokens": 24})
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5


def test_gated_deltanet_scaled_in_verilator():
    """Gated DeltaNet: decays down to 2^-700 (``gamma``'s exponent past the core's 12 bits, the
    state kept in ``S``'s frame), the state and ``gamma``'s mantissa read out bit for bit."""
    b = build(Design("deltanet-scaled", 8, 4, "int8", params=(("gated", 1),)))
    assert b.manifest["parameters"]["gated"] is True
    run = run_cocotb(b, TB, {"name": "gated-deltanet-scaled", "seed": 5, "tokens": 24})
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    assert run.record["random_stream"]["gamma_f"] > 2 ** (b.manifest["parameters"]["exp_width"] - 1)
