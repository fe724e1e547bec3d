"""The linear-attention, DeltaNet and Gated DeltaNet tops in Verilator under cocotb
(``sim/tb_rules.py``, the testbench they share with VLA), bit exact against the fixed-point golden
models ``linear_attention_fixed``, ``deltanet_fixed`` and ``gated_deltanet_fixed`` in the RTL's
preset (Gated DeltaNet's streams carry decays 0, tiny, near 1 and exactly 1): every ``o_raw`` token by
token, the counters (tokens, saturations, framing errors) and the final ``S`` (and linear
attention's ``z``); random idle gaps and backpressure, saturating streams, a reset in the middle of
a token, cycles per token = the manifest's; ``simulate``/``specmem sim --algo`` and the
``verilator`` back-end on the same builds; one mutant schema per core whose mutants the testbench
catches. d=16, k=4, legacy-int8: one build per core (and one of its mutant schema)."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.backends import run
from specmem.sim.build import Design, build
from specmem.sim.commands import simulate
from specmem.sim.mutants import RULE_MUTANTS
from specmem.sim.suite import BASELINE_DIRECTED, run_mutants, run_rule

from .conftest import assert_same_outputs  # verilator_registered: the shared fixture there

ALGOS = ("linear", "deltanet", "gated-deltanet")
SEEDS = (0, 1, 2)
T = 200


def small(algo: str) -> Design:
    return Design(algo, 16, 4, "legacy-int8")


@pytest.fixture(scope="module", params=ALGOS)
def suite(request):
    algo = request.param
    return algo, run_rule(small(algo), BASELINE_DIRECTED, seeds=SEEDS,
                          stream={"T": T, "kind": "mixed", "idle": 0.3, "stall": 0.3})


def _passed(run, prefix):
    got = {n: ok for n, ok in run.tests.items() if n == prefix or n.startswith(prefix + "/")}
    assert got, f"no cocotb test named {prefix} ran ({sorted(run.tests)})"
    assert all(got.values()), run.describe()
    return got


def test_random_streams_bit_exact_with_backpressure(suite):
    algo, run_ = suite
    got = _passed(run_, "random_stream")
    assert len(got) == len(SEEDS)
    for seed in SEEDS:
        rec = run_.record[f"random_stream/seed={seed}"]
        assert rec["tokens_compared"] == T and rec["mismatched_tokens"] == 0, rec["errors"]
        st = rec["status"]
        assert st["tokens"] == T and st["saturations"] == st["model"]["saturations"] and st["framing_errors"] == 0
    print(f"{algo} d=16 k=4: {len(SEEDS)} x {T} tokens bit exact, "
          f"{sum(run_.record[f'random_stream/seed={s}']['wall_s'] for s in SEEDS):.1f} s")


def test_steady_state_cycles_per_token_equal_manifest(suite):
    algo, run_ = suite
    _passed(run_, "steady_state")
    rec = run_.record["steady_state"]
    cpt = build(small(algo)).manifest["cycles_per_token"]
    assert rec["steps"] and set(rec["steps"]) == {cpt["full_steady_state"]}, (rec["steps"], cpt)
    assert cpt["full_steady_state"] <= 1.25 * cpt["floor_d2_over_k"] + 16  # d²/k + 9 at d=16, k=4


def test_saturating_inputs_are_counted_as_the_model_counts(suite):
    algo, run_ = suite
    _passed(run_, "saturating")
    st = run_.record["saturating"]["status"]
    assert st["saturations"] == st["model"]["saturations"] > 0
    sat = st["model"]["sat"]
    assert (sat["s"] > 0) if algo == "linear" else (sat["kn"] > 0)


def test_reset_in_the_middle_of_a_token(suite):
    _, run_ = suite
    _passed(run_, "reset_mid_stream")
    rec = run_.record["reset_mid_stream"]
    assert rec["beats_before_reset"] % rec["beats_per_token"] != 0
    assert rec["status"]["tokens"] == rec["status"]["model"]["tokens"] == 5


def test_framing_errors_are_counted(suite):
    _, run_ = suite
    _passed(run_, "framing_errors")
    st = run_.record["framing_errors"]["status"]
    assert st["framing_errors"] == st["tokens"] // 2 > 0


@pytest.mark.parametrize("algo", ALGOS)
def test_simulate_and_cli(algo, capsys):
    from specmem.cli import main

    res = simulate(algo, 16, 4, tokens=40, seed=4)
    assert res.passed and res.tokens == 40 and res.first_mismatch is None, res.errors
    assert res.build_dir == str(build(small(algo)).directory)
    assert "PASS" in capsys.readouterr().out
    assert main(["sim", "--algo", algo, "--d", "16", "--k", "4", "--tokens", "20", "--seed", "5"]) == 0
    assert "PASS: 20 tokens bit exact" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::specmem.golden.fixed.SaturationWarning")  # saturation is the point
@pytest.mark.parametrize("algo", ALGOS)
def test_verilator_backend_equals_fixed_bit_for_bit(algo, verilator_registered):
    """A batch of two streams (one built to saturate, one with a zero key and a zero query): every
    array ``--backend fixed`` returns in the RTL's format, identical."""
    rng = np.random.default_rng(11)
    x = {n: rng.standard_normal((2, 40, 16)) for n in ("k", "v", "q")}
    if algo == "linear":
        x["k"][0] = np.abs(x["k"][0]) * 2 + 3
        x["v"][0] = np.abs(x["v"][0]) * 3 + 3
    else:
        x["k"][0, ::2] = 0.0
        x["k"][0, ::2, 1] = 3.0
        x["v"][0] *= 3.0
        x["beta"] = rng.uniform(0.1, 1.0, (2, 40))
        if algo == "gated-deltanet":  # decays: exactly 1, near 1, tiny (one step at legacy-int8), uniform
            x["g"] = rng.uniform(0.5, 1.0, (2, 40))
            x["g"][:, ::5] = 1.0
            x["g"][:, 1::7] = 1.0 - 2.0 ** -7
            x["g"][:, 2::11] = 0.999
            x["g"][:, 3::13] = 2.0 ** -7
    x["k"][1, 5] = 0.0
    x["q"][1, 7] = 0.0
    fixed = run(algo, x, backend="fixed", format="legacy-int8")  # the RTL's format
    hw = run(algo, x, backend="verilator", lanes=4)  # its default format: legacy-int8
    assert sum(int(v) for n, v in fixed.items() if n.startswith("sat_") and n[4:] not in ("k", "v", "q")) > 0
    assert_same_outputs(fixed, hw)


@pytest.mark.parametrize("algo", ALGOS)
def test_mutants_are_caught(algo):
    """Each core's mutant schema (a rounding step changed, the saturation counter stuck): the
    unmodified design passes, every mutant fails a check of the testbench."""
    base, results = run_mutants(small(algo), seeds=(0,), T=40)
    assert base.passed, "the unmodified design must pass:\n" + base.describe()
    assert [r.name for r in results] == [m.name for m in RULE_MUTANTS[algo]]
    survived = [r.name for r in results if not r.caught]
    assert not survived, f"mutants not caught: {survived}"
    for r in results:
        print(f"{algo} {r.name:24s} caught by {', '.join(r.failing_tests[:3])}: {r.first_error[:100]}")
    stuck = next(r for r in results if r.name == "saturations_not_counted")
    assert stuck.failing_tests == ["saturating"] and "status_saturations" in stuck.first_error


def test_ecp5_multipliers_bit_exact():
    """Gated DeltaNet (every multiplier kind of the three cores) built with ``dsp="ecp5"``:
    ``MULT18X18D`` instances simulated through ``rtl/vendor/MULT18X18D.v``, bit-exact against the
    model under gaps and backpressure, the steady state as the manifest says. (``bram="ecp5"``
    is the ``DP16KD`` of ``rtl/bram.py``, checked against its behavioural twin in
    ``tests/sim/test_units.py``; the final-state backdoor reads the behavioural banks.)"""
    design = Design("gated-deltanet", 16, 4, "legacy-int8", params=(("dsp", "ecp5"),))
    assert build(design).manifest["sim_models"] == ["MULT18X18D"]
    run_ = run_rule(design, ["random_stream", "steady_state"], seeds=(0,),
                    stream={"T": 60, "kind": "mixed", "idle": 0.3, "stall": 0.3})
    assert run_.passed, run_.describe()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("d,k,preset", [
    pytest.param(8, 2, "legacy-int8", id="d8-k2-int8"),
    pytest.param(8, 2, "legacy-int16", id="d8-k2-int16"),
    pytest.param(8, 2, "legacy-wide", id="d8-k2-wide"),
    pytest.param(12, 3, "legacy-int8", id="d12-k3-odd-lanes"),
    pytest.param(8, 1, "legacy-int8", id="d8-k1"),
])
def test_other_configurations(algo, d, k, preset):
    """Bit exactness, counters, state, reset and framing in other sizes and presets (the steady
    state: :func:`test_deltanet_d8_steady_state` and the d=16 suite above)."""
    tests = [t for t in BASELINE_DIRECTED if t != "steady_state"]
    run_ = run_rule(Design(algo, d, k, preset), tests, seeds=(0, 1, 2), stream={"T": 64})
    assert run_.passed, run_.describe()


FRONT_END_BOUND = ("a finding, not fixed here: at d=8, k=2 DeltaNet's front end is slower than the 41-cycle pass: "
                   "the receiver hands a token to the scaler only when both norms are through their pipelined "
                   "rsqrt (13 beats, the norm engine, ~30 cycles of scalar unit: ~50 cycles), so now and then the "
                   "next token is late, the core writes alone and then reads alone, and a step takes 82 cycles "
                   "instead of the manifest's 41 (the pass keeps up from d = 16, k = 4)")


@pytest.mark.slow
@pytest.mark.parametrize("preset", [
    pytest.param("legacy-int8", marks=pytest.mark.xfail(strict=True, reason=FRONT_END_BOUND)),
    pytest.param("legacy-int16", marks=pytest.mark.xfail(strict=True, reason=FRONT_END_BOUND)),
    pytest.param("legacy-wide", marks=pytest.mark.xfail(strict=True, reason=FRONT_END_BOUND)),
])
def test_deltanet_d8_steady_state(preset):
    run_ = run_rule(Design("deltanet", 8, 2, preset), ["steady_state"])
    assert run_.passed, run_.describe()


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_ten_thousand_tokens(algo):
    """A 10⁴-token ``mixed`` stream with 30 % gaps and backpressure, every output bit, the counters
    and the final state."""
    res = simulate(algo, 16, 4, tokens=10_000, seed=7, quiet=True)
    assert res.passed and res.record["tokens_compared"] == 10_000, res.errors
    print(f"{algo}: 10^4 tokens in {res.wall_s:.0f} s, {res.cycles_per_s:,.0f} cycles/s")


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_coverage_reported(algo):
    """``simulate(..., coverage=True)``: the directed cases and the stream on the coverage build,
    merged; every module of the core reached, most lines covered (measured: 97-98 % line, ~90 %
    branch at d=16, k=4)."""
    res = simulate(algo, 16, 4, tokens=100, seed=0, coverage=True, quiet=True)
    assert res.passed, res.errors
    cov = res.coverage
    assert cov["percent"]["line"] > 90 and cov["percent"]["branch"] > 80, cov["percent"]
    top = f"specmem_{algo.replace('-', '_')}"
    assert {f"{top}.core", f"{top}.core.smem", f"{top}.core.su_fe"} <= set(cov["modules"])
    assert all(v["line"][0] > 0 for v in cov["modules"].values()), cov["modules"]
