"""The VLA top in Verilator under cocotb (``sim/tb_vla.py``), bit exact against the fixed-point
golden model ``vla_fixed``: every ``o_raw`` and ``o_frac`` (``m_axis_tuser``), the counters
(tokens, saturations, refreshes, framing errors) and the final states ``A`` and ``S``; random idle
gaps and backpressure, several refresh periods (``refresh_period = 3``), saturating inputs, a
reset in the middle of a token, cycles per token and the latency of an isolated token = the
manifest's. d=8, k=2, legacy-int8: one build, one simulator process for the directed cases and three
seeds; the ``verilator`` back-end and ``simulate("vla", ...)`` on the same build."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.backends import run
from specmem.golden.common import SpecmemInputError
from specmem.sim.build import Design, build
from specmem.sim.commands import simulate
from specmem.sim.suite import VLA_DIRECTED, run_vla

from .conftest import assert_same_outputs

PARAMS = {"refresh_period": 3, "eta": 0.05}
SMALL = Design("vla", 8, 2, "legacy-int8", params=PARAMS)
SEEDS = (0, 1, 2)
T = 24  # eight refresh periods


@pytest.fixture(scope="module")
def suite():
    return run_vla(SMALL, VLA_DIRECTED, seeds=SEEDS, stream={"T": T, "kind": "mixed", "idle": 0.3, "stall": 0.3})


def _passed(run, prefix):
    got = {n: ok for n, ok in run.tests.items() if n == prefix or n.startswith(prefix + "/")}
    assert got, f"no cocotb test named {prefix} ran ({sorted(run.tests)})"
    assert all(got.values()), run.describe()
    return got


def test_random_streams_cross_refresh_periods(suite):
    got = _passed(suite, "random_stream")
    assert len(got) == len(SEEDS)
    for seed in SEEDS:
        rec = suite.record[f"random_stream/seed={seed}"]
        assert rec["tokens_compared"] == T and rec["mismatched_tokens"] == 0
        st = rec["status"]
        assert st["tokens"] == T and st["refreshes"] == T // PARAMS["refresh_period"] == st["model"]["refreshes"]
        assert st["saturations"] == st["model"]["saturations"] and st["framing_errors"] == 0


def test_steady_state_cycles_per_token_equal_manifest(suite):
    _passed(suite, "steady_state")
    rec = suite.record["steady_state"]
    full = build(SMALL).manifest["cycles_per_token"]["full_steady_state"]
    assert rec["steps"] and set(rec["steps"]) == {full}, (rec["steps"], full)
    print(f"VLA d=8 k=2 cycles per token: {sorted(set(rec['steps']))} (manifest {full})")


def test_latency_equals_manifest(suite):
    """Isolated tokens, refresh tokens among them: last input beat to first output beat."""
    _passed(suite, "latency")
    rec = suite.record["latency"]
    full = build(SMALL).manifest["latency"]["full"]
    assert rec["latency"] == [full] * 4 and rec["refreshes_after_token"][-1] >= 1, rec
    print(f"VLA d=8 k=2 latency of an isolated token: {rec['latency']} (manifest {full})")


def test_saturating_inputs(suite):
    _passed(suite, "saturating")
    st = suite.record["saturating"]["status"]
    assert st["saturations"] == st["model"]["saturations"] > 0
    assert st["model"]["sat"]["kh"] > 0 and st["model"]["sat"]["e"] > 0


def test_reset_in_the_middle_of_a_token(suite):
    _passed(suite, "reset_mid_stream")
    rec = suite.record["reset_mid_stream"]
    assert rec["beats_before_reset"] % rec["beats_per_token"] != 0
    assert rec["status"]["tokens"] == rec["status"]["model"]["tokens"] == 5


def test_framing_errors_are_counted(suite):
    _passed(suite, "framing_errors")
    st = suite.record["framing_errors"]["status"]
    assert st["framing_errors"] == st["tokens"] // 2 > 0


def test_simulate_vla(capsys):
    res = simulate("vla", 8, 2, tokens=12, seed=4, params=PARAMS)
    assert res.passed and res.tokens == 12 and res.first_mismatch is None, res.errors
    assert res.build_dir == str(build(SMALL).directory)
    assert "PASS" in capsys.readouterr().out


def test_verilator_backend_vla_equals_fixed_bit_for_bit(verilator_registered):
    """A batch of two streams (one with saturating tokens, one with an all-zero ``u``) across
    refresh periods: every array ``--backend fixed`` returns, identical."""
    rng = np.random.default_rng(9)
    x = {n: rng.standard_normal((2, 9, 8)) for n in ("k", "v", "q", "u")}
    x["k"][0, ::2] = -4.0
    x["k"][0, 2::2, 0] = 4.0
    x["v"][0] *= 3.0
    x["u"][1, 4] = 0.0
    fixed = run("vla", x, backend="fixed", params=PARAMS, format="legacy-int8")  # the RTL's format
    hw = run("vla", x, backend="verilator", params=PARAMS)  # its default: legacy-int8
    assert sum(int(v) for n, v in fixed.items() if n.startswith("sat_")) > 0
    assert_same_outputs(fixed, hw)


def test_verilator_backend_vla_options(verilator_registered):
    x = {n: np.zeros((3, 8)) for n in ("k", "v", "q", "u")}
    with pytest.raises(SpecmemInputError, match="lanes"):
        run("vla", x, backend="verilator", params=PARAMS, lanes=3)
    with pytest.raises(SpecmemInputError, match="k"):
        run("vla", x, backend="verilator", params={"k": 2})


@pytest.mark.slow
@pytest.mark.parametrize("d,k,preset,params", [
    pytest.param(16, 4, "legacy-int8", {"refresh_period": 3, "eta": 0.02}, id="d16-k4-int8"),
    pytest.param(8, 2, "legacy-int16", {"refresh_period": 3, "eta": 0.05}, id="d8-k2-int16"),
    pytest.param(8, 2, "legacy-wide", {"refresh_period": 3}, id="d8-k2-wide"),
    pytest.param(12, 3, "legacy-int8", {"refresh_period": 4, "lambda0": 0.5, "u_scale": 1.0}, id="d12-k3-odd-lanes"),
    pytest.param(8, 1, "legacy-int8", {"refresh_period": 2}, id="d8-k1"),
    pytest.param(8, 2, "legacy-int8", {"refresh_period": 0}, id="d8-k2-no-refresh"),
])
def test_other_configurations(d, k, preset, params):
    run_ = run_vla(Design("vla", d, k, preset, params=params), seeds=(0, 1, 2), stream={"T": 24})
    assert run_.passed, run_.describe()


@pytest.mark.slow
def test_many_seeds_longer_streams():
    run_ = run_vla(SMALL, ["random_stream"], seeds=tuple(range(100, 120)), stream={"T": 200})
    assert run_.passed, run_.describe()


def test_mutants_are_caught():
    """The VLA core's mutant schema (``sim/mutants.py: RULE_MUTANTS["vla"]``: a rounding step of
    the A write changed, the refresh counter stuck): the unmodified design passes, every mutant
    fails a check of the testbench."""
    from specmem.sim.mutants import RULE_MUTANTS
    from specmem.sim.suite import run_mutants

    base, results = run_mutants(SMALL, seeds=(0,), T=T)
    assert base.passed, "the unmodified design must pass:\n" + base.describe()
    assert [r.name for r in results] == [m.name for m in RULE_MUTANTS["vla"]]
    survived = [r.name for r in results if not r.caught]
    assert not survived, f"mutants not caught: {survived}"
    for r in results:
        print(f"vla {r.name:24s} caught by {', '.join(r.failing_tests[:3])}: {r.first_error[:100]}")
