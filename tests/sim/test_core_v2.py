"""The annihilation core v2's top (``specmem_annihilation`` generated for ``int18``) in Verilator
under cocotb (``sim/tb_top.py``), bit exact against the golden co-accumulated model
``annihilation_fixed(x, k, "int18", gram="coaccumulate", orth_policy="evict")``: every ``y`` bit,
the counters (tokens, orthogonal count and flag, stored directions, saturations of ``u``,
``ahat``, ``q``, ``t``, ``y``, framing errors) and the final state ``U``; streams with many
evictions (unit vectors on coordinates the stored span does not touch) and round-robin ties,
random idle gaps and backpressure, resets mid-stream; the ``verilator`` back-end and
``specmem sim --format int18`` on the same build; mutants of the core caught.

d=16, k=4: two Verilator builds (the design, about 2.5 min on a loaded 2-core machine, and the
mutant schema, as long); both are cached in ``build/sim/`` and reused by later sessions, after
which each test takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from specmem.backends import run
from specmem.golden.common import SpecmemInputError
from specmem.sim import stimulus
from specmem.sim.build import Design
from specmem.sim.commands import simulate
from specmem.sim.mutants import V2_MUTANTS
from specmem.sim.suite import V2_DIRECTED, run_mutants, run_top

from .conftest import assert_same_outputs

SMALL = Design("top", 16, 4, "int18")
SEEDS = (0, 1)
T = 200


@pytest.fixture(scope="module")
def suite():
    return run_top(SMALL, V2_DIRECTED, seeds=SEEDS, stream={"T": T, "idle": 0.3, "stall": 0.3})


def _passed(run, prefix):
    got = {n: ok for n, ok in run.tests.items() if n == prefix or n.startswith(prefix + "/")}
    assert got, f"no cocotb test named {prefix} ran ({sorted(run.tests)})"
    assert all(got.values()), run.describe()
    return got


def test_the_design_is_core_v2(suite):
    rec = suite.record["steady_state"]
    assert rec["passed"]
    from specmem.sim.build import verilog_for

    import json

    manifest = json.loads(verilog_for(SMALL)[2])
    assert manifest["core"] == "v2" and manifest["parameters"]["gram"] == "coaccumulate"


def test_random_streams_with_evictions(suite):
    """Two seeds of the ``evictions`` stream (the default for core v2): every bit, the counters and
    ``U``; the golden model says the stream evicted many times."""
    assert len(_passed(suite, "random_stream")) == len(SEEDS)
    for seed in SEEDS:
        rec = suite.record[f"random_stream/seed={seed}"]
        assert rec["kind"] == "evictions" and rec["tokens_compared"] == T and rec["mismatched_tokens"] == 0
        model = rec["status"]["model"]
        assert model["orth_count"] >= 15 and rec["status"]["orth_count"] == model["orth_count"]
        assert rec["status"]["saturations"] == model["saturations"]
        assert rec["status"]["count"] == 4


def test_round_robin_ties_and_orthogonal_tokens(suite):
    _passed(suite, "round_robin_ties")
    assert suite.record["round_robin_ties"]["orth"] >= 8  # 16 unit vectors, 4 stored: 12 evictions
    _passed(suite, "orthogonal_and_zero")
    assert sum(suite.record["orthogonal_and_zero"]["orth"]) >= 2


def test_reset_mid_stream_backpressure_framing(suite):
    assert len(_passed(suite, "reset_mid_stream")) == 3
    _passed(suite, "framing_errors")
    _passed(suite, "saturating")
    _passed(suite, "warm_up_and_latency")


def test_steady_state_equals_the_manifests_measured_cycles(suite):
    """Full tokens back to back take the cycles the manifest states as measured
    (``rtl/top.py``: ``V2_MEASURED_CYCLES``); a change of the core's timing shows here, and the
    table is updated with the new measurement."""
    _passed(suite, "steady_state")
    rec = suite.record["steady_state"]
    full = rec["by_kind"]["full"]
    assert len(full) == 1, f"full tokens back to back do not take a constant number of cycles: {full}"
    assert full == [rec["manifest_cycles_per_token"]["full_steady_state"]], (
        f"measured {full[0]} cycles per full token; update V2_MEASURED_CYCLES in rtl/top.py")
    assert full[0] > rec["manifest_cycles_per_token"]["pass_cycles"] >= 16


def test_simulate_int18(capsys):
    """``specmem sim --algo annihilation --format int18``: the evictions stream by default."""
    res = simulate("annihilation", 16, 4, tokens=300, seed=3, preset="int18")
    assert res.passed and res.tokens == 300 and res.first_mismatch is None, res.errors
    assert res.record["kind"] == "evictions" and res.record["status"]["orth_count"] >= 20
    assert "PASS" in capsys.readouterr().out


def test_verilator_backend_int18_equals_fixed_bit_for_bit(verilator_registered):
    """``specmem run --backend verilator --format int18`` equals ``--backend fixed --format int18``
    (a batch of two streams, evictions and round-robin ties among them)."""
    x = np.stack([stimulus.evictions(4, 60, 16, 4), stimulus.units(5, 60, 16)])
    fixed = run("annihilation", {"x": x}, backend="fixed", params={"k": 4}, format="int18")
    hw = run("annihilation", {"x": x}, backend="verilator", params={"k": 4}, format="int18")
    assert fixed["orth"].sum() >= 10
    assert_same_outputs(fixed, hw)
    with pytest.raises(SpecmemInputError, match="orth_policy: the annihilation RTL at int18 .* 'evict'"):
        run("annihilation", {"x": x}, backend="verilator", params={"k": 4, "orth_policy": "skip"}, format="int18")


#: the mutants this file requires caught, and the directed tests that run on each
MUTANT_TESTS = ("round_robin_ties", "random_stream", "orthogonal_and_zero", "steady_state", "warm_up_and_latency")


def test_mutants_are_caught():
    """The mutant schema of the core v2 top (``sim/mutants.py``: ``V2_MUTANTS``): the unmodified
    design passes, every mutant fails at least one directed test."""
    base, res = run_mutants(SMALL, V2_MUTANTS, ci=False, seeds=(0,), T=32, testcases=MUTANT_TESTS)
    assert base.passed, base.describe()
    assert [r.name for r in res] == [m.name for m in V2_MUTANTS]
    survived = [r.name for r in res if not r.caught]
    assert not survived, f"mutants not caught: {survived}"
