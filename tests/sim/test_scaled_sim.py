"""The scaled cores (linear attention, DeltaNet, Gated DeltaNet, VLA) in Verilator
(``sim/tb_scaled.py``), their state in ``DP16KD`` through the vendor model, against the int8
models bit for bit; the ``verilator`` back-end's ``--format int8`` runs on them; each core's mutant schema
(``sim/mutants.py: SCALED_MUTANTS``) caught."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.backends import run
from specmem.sim.build import Design, build, run_cocotb

from .conftest import assert_same_outputs  # verilator_registered: the shared fixture there

TB = "specmem.sim.tb_scaled"
CASES = ("random_stream", "reset_mid_stream", "full_rate")  # streams: the back-end's (tests/host)


def test_deltanet_scaled_in_verilator():
    b = build(Design("deltanet-scaled", 8, 4, "int8"))
    assert "DP16KD" in b.verilog.read_text()
    run = run_cocotb(b, TB, {"name": "deltanet-scaled", "seed": 3, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5


def test_deltanet_scaled_heads_in_verilator():
    """Two heads on one datapath: each head's outputs and state (one flush per head) are its own
    model's, with backpressure, a reset mid-stream and at full rate (the manifest's count)."""
    b = build(Design("deltanet-scaled", 8, 4, "int8", params=(("heads", 2),)))
    assert b.manifest["parameters"]["heads"] == 2
    run = run_cocotb(b, TB, {"name": "deltanet-scaled-h2", "seed": 5, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert run.record["random_stream"]["token_counter"] == 24
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5


def test_linear_attention_scaled_in_verilator():
    """Linear attention: outputs, the state and ``z`` read out at the flush, bit for bit."""
    b = build(Design("linear-scaled", 8, 4, "int8"))
    assert "DP16KD" in b.verilog.read_text() and b.manifest["parameters"]["algo"] == "linear"
    run = run_cocotb(b, TB, {"name": "linear-scaled", "seed": 4, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    assert run.record["full_rate_gaps"]["cycles_per_token"] == b.manifest["cycles_per_token"]


def test_gated_deltanet_scaled_in_verilator():
    """Gated DeltaNet: decays down to 2^-700 (``gamma``'s exponent past the core's 12 bits, the
    state kept in ``S``'s frame), the state and ``gamma``'s mantissa read out bit for bit; its
    scalar units' Newton multipliers as ``MULT18X18D`` (``dsp="ecp5"``, the vendor model)."""
    b = build(Design("deltanet-scaled", 8, 4, "int8", params=(("gated", 1), ("dsp", "ecp5"))))
    assert b.manifest["parameters"]["gated"] is True and b.manifest["parameters"]["dsp"] == "ecp5"
    assert "MULT18X18D" in b.verilog.read_text() and "MULT18X18D" in b.manifest["sim_models"]
    run = run_cocotb(b, TB, {"name": "gated-deltanet-scaled", "seed": 5, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    assert run.record["random_stream"]["gamma_f"] > 2 ** (b.manifest["parameters"]["exp_width"] - 1)


def test_gated_deltanet_scaled_heads_in_verilator():
    """Gated DeltaNet with two heads: each head's outputs, state and gamma (one flush per head, in
    its own frame) are its own model's, decays down to 2^-700, with backpressure, a reset
    mid-stream and at full rate."""
    b = build(Design("deltanet-scaled", 8, 4, "int8", params=(("gated", 1), ("heads", 2))))
    assert b.manifest["parameters"]["heads"] == 2 and b.manifest["parameters"]["gated"] is True
    run = run_cocotb(b, TB, {"name": "gated-deltanet-scaled-h2", "seed": 13, "tokens": 32}, testcase=CASES)
    assert run.passed, run.describe()
    assert run.record["random_stream"]["token_counter"] == 32
    assert run.record["random_stream"]["gamma_f"] > 2 ** (b.manifest["parameters"]["exp_width"] - 1)
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5


@pytest.mark.parametrize("algo", ["linear", "deltanet", "gated-deltanet", "vla"])
def test_verilator_backend_int8_equals_fixed_bit_for_bit(algo, verilator_registered):
    """``specmem run --backend verilator --format int8``: a batch of two streams (one with zero
    keys and queries, one scaled by 2^-20) through the scaled core; every array ``--backend fixed``
    returns, identical (gated: decays near 1, exact 1s and tiny ones; VLA: ``A`` and its diagonal
    too, a refresh every third token)."""
    rng = np.random.default_rng(12)
    names = ("k", "v", "q", "u") if algo == "vla" else ("k", "v", "q")
    x = {n: rng.standard_normal((2, 10, 8)) for n in names}
    x["k"][0, 3] = 0.0
    x["q"][0, 5] = 0.0
    for n in names:
        x[n][1] *= 2.0 ** -20
    if algo not in ("linear", "vla"):
        x["beta"] = rng.uniform(0.05, 1.0, (2, 10))
    if algo == "gated-deltanet":
        x["g"] = rng.uniform(0.5, 1.0, (2, 10))
        x["g"][:, ::4] = 1.0
        x["g"][:, 2::5] = 2.0 ** -40
    params = {"refresh_period": 3} if algo == "vla" else {}
    fixed = run(algo, x, backend="fixed", format="int8", params=params)
    hw = run(algo, x, backend="verilator", format="int8", lanes=4, params=params)
    assert_same_outputs(fixed, hw)
    assert np.count_nonzero(hw["o_raw"]) > 0


def test_verilator_backend_int8_refuses_what_it_does_not_build(verilator_registered):
    from specmem.golden.common import SpecmemInputError

    x = {n: np.ones((3, 8)) for n in ("k", "v", "q")}
    with pytest.raises(SpecmemInputError, match="lanes"):
        run("deltanet", {**x, "beta": np.full(3, 0.5)}, backend="verilator", format="int8", lanes=3)
    with pytest.raises(SpecmemInputError, match="lambda0"):  # below the scaled model's checked range
        run("vla", {**x, "u": np.ones((3, 8))}, backend="verilator", format="int8", params={"lambda0": 1e-4})
    with pytest.raises(SpecmemInputError, match="format"):
        run("linear", x, backend="verilator", format="int18")


def test_specmem_sim_runs_the_scaled_core(capsys):
    """``specmem sim --algo gated-deltanet --format int8``: the scaled core's random stream through
    the CLI, PASS and the cycles per token printed; coverage with waves refused (the coverage build
    records none)."""
    from specmem.cli import main
    from specmem.golden.common import SpecmemInputError
    from specmem.sim.commands import simulate

    assert main(["sim", "--algo", "gated-deltanet", "--format", "int8", "--d", "8", "--k", "4", "--tokens", "12",
                 "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "PASS: 12 tokens bit exact" in out and "per token" in out
    res = simulate("deltanet", 8, 4, 8, 1, preset="int8", quiet=True, idle=0.0, stall=0.0)
    assert res.passed and res.cycles > 8 * res.record["tokens"] and res.record["tokens_compared"] == 8
    with pytest.raises(SpecmemInputError, match="waves"):
        simulate("deltanet", 8, 4, 8, 1, preset="int8", coverage=True, waves=True, quiet=True)
    for bad in (-1.0, float("nan"), float("inf"), "abc"):  # refused before any build, one line each
        with pytest.raises(SpecmemInputError, match="eps: must be a positive finite number"):
            simulate("linear", 8, 4, 8, 1, preset="int8", params={"eps": bad}, quiet=True)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["linear", "gated-deltanet"])
def test_coverage_reported(algo):
    """``specmem sim --format int8 --coverage``: the testbench's cases on the coverage build, merged
    with the stream; line, branch and toggle coverage reported, every test passing."""
    from specmem.sim.commands import simulate

    res = simulate(algo, 8, 4, 24, 3, preset="int8", coverage=True, quiet=True)
    assert res.passed and res.coverage is not None
    pct = res.coverage["percent"]
    print(f"{algo}: coverage {pct}")
    assert res.coverage_report and set(pct) >= {"line", "toggle"} and pct["line"] > 80


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["linear", "deltanet", "gated-deltanet", "vla"])
def test_ten_thousand_tokens_with_backpressure(algo):
    """A 10⁴-token stream per scaled core (d = 8, k = 4; 10 % idle input cycles, 10 % output
    stalls): every output, its exponent, the final state (and z, gamma), the counters, bit for bit."""
    from specmem.sim.commands import simulate

    res = simulate(algo, 8, 4, 10_000, 7, preset="int8", quiet=True, idle=0.1, stall=0.1)
    assert res.passed, res.errors[:3]
    assert res.record["tokens_compared"] == 10_000 and res.record["token_counter"] == 10_000
    print(f"{algo}: 10^4 tokens in {res.wall_s:.0f} s, {res.cycles} cycles, {res.cycles_per_s:,.0f} cycles/s")


def test_vla_scaled_in_verilator():
    """VLA: outputs, S, A's off-diagonal rows and its diagonal read out at the flush, bit for bit,
    refreshes every third token, with backpressure, a reset mid-stream and at full rate; the
    states in ``DP16KD`` through the vendor model (the build the back-end's and ``specmem sim``'s
    tests share)."""
    b = build(Design("vla-scaled", 8, 4, "int8", params=(("refresh_period", 3),)))
    assert b.manifest["parameters"]["algo"] == "vla" and b.manifest["parameters"]["refresh_period"] == 3
    assert "DP16KD" in b.verilog.read_text()
    run = run_cocotb(b, TB, {"name": "vla-scaled", "seed": 6, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    assert run.record["random_stream"]["token_counter"] == 24
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5


def test_specmem_sim_runs_the_scaled_vla_core(capsys):
    """``specmem sim --algo vla --format int8 --param refresh_period=3``: PASS through the CLI; a
    ``lambda0`` below the scaled model's range and a parameter VLA does not take refused before any
    build."""
    from specmem.cli import main
    from specmem.golden.common import SpecmemInputError
    from specmem.sim.commands import simulate

    assert main(["sim", "--algo", "vla", "--format", "int8", "--d", "8", "--k", "4", "--tokens", "10", "--seed", "4",
                 "--param", "refresh_period=3"]) == 0
    assert "PASS: 10 tokens bit exact" in capsys.readouterr().out
    with pytest.raises(SpecmemInputError, match="lambda0"):
        simulate("vla", 8, 4, 8, 1, preset="int8", params={"lambda0": 1e-5}, quiet=True)
    with pytest.raises(SpecmemInputError, match="beta: not a parameter"):
        simulate("vla", 8, 4, 8, 1, preset="int8", params={"beta": 0.5}, quiet=True)


def test_vla_scaled_chain_on_fewer_lanes_in_verilator(capsys):
    """VLA with its front end and chain on ``chain_lanes = k/2`` lanes: the same bits as the model
    (outputs, both states, the diagonal), a reset mid-stream, and at full rate the manifest's
    cycles per token (longer than at ``c = k``: the feeds take ``d/c`` beats); then the same build
    through ``specmem sim --chain-lanes``, and the option refused where it does not apply."""
    from specmem.cli import main

    b = build(Design("vla-scaled", 8, 4, "int8", params=(("chain_lanes", 2), ("refresh_period", 3))))
    assert b.manifest["parameters"]["chain_lanes"] == 2
    run = run_cocotb(b, TB, {"name": "vla-scaled-c2", "seed": 8, "tokens": 24}, testcase=CASES)
    assert run.passed, run.describe()
    assert set(run.tests) == {"random_stream", "reset_mid_stream", "full_rate"}
    gaps = run.record["full_rate_gaps"]
    assert gaps["cycles_per_token"] == b.manifest["cycles_per_token"] and len(gaps["gaps"]) == 5
    wide = build(Design("vla-scaled", 8, 4, "int8", params=(("refresh_period", 3),))).manifest["cycles_per_token"]
    assert b.manifest["cycles_per_token"] > wide
    assert main(["sim", "--algo", "vla", "--format", "int8", "--d", "8", "--k", "4", "--tokens", "10", "--seed", "5",
                 "--param", "refresh_period=3", "--chain-lanes", "2"]) == 0
    out = capsys.readouterr().out
    assert "PASS: 10 tokens bit exact" in out and "reused build" in out
    for argv in (["--algo", "deltanet", "--format", "int8"], ["--algo", "vla"],
                 ["--algo", "vla", "--format", "int8", "--engine", "native"]):
        assert main(["sim", *argv, "--chain-lanes", "2"]) == 2
        assert "chain_lanes: only the scaled VLA core" in capsys.readouterr().err


def _scaled_mutants_caught(algo, capsys):
    """The rule's mutant schema (``specmem sim --mutants --algo ALGO --format int8``'s check): the
    unmodified design passes, every mutant fails, the timing mutant only on the full-rate cycle
    check, the stuck token counter on the counter check."""
    from specmem.sim.commands import mutation_command
    from specmem.sim.mutants import SCALED_MUTANTS

    base, res = mutation_command(algo=algo)
    out = capsys.readouterr().out
    assert "unmodified design PASS" in out and "SURVIVED" not in out
    assert base.passed and [r.name for r in res] == [m.name for m in SCALED_MUTANTS[algo]]
    assert all(r.caught for r in res), [(r.name, r.failing_tests) for r in res if not r.caught]
    timing = next(r for r in res if r.name == "pass_one_cycle_longer")
    assert timing.failing_tests == ["full_rate"], (timing.failing_tests, timing.first_error)
    counter = next(r for r in res if r.name == "tokens_not_counted")
    assert "token counter 0" in counter.first_error


@pytest.mark.parametrize("algo", ["deltanet", "linear", "vla"])
def test_scaled_mutants_are_caught(algo, capsys):
    _scaled_mutants_caught(algo, capsys)


@pytest.mark.slow
def test_gated_deltanet_scaled_mutants_are_caught(capsys):
    """Gated DeltaNet's schema: DeltaNet's shared one (run in CI) and a stale decay."""
    _scaled_mutants_caught("gated-deltanet", capsys)


def test_specmem_sim_mutants_runs_a_scaled_schema(capsys):
    """``specmem sim --mutants --algo deltanet --format int8`` through the CLI (exit 0, each mutant
    listed as caught; the schema build the test above made is reused)."""
    from specmem.cli import main
    from specmem.sim.mutants import SCALED_MUTANTS

    assert main(["sim", "--mutants", "--algo", "deltanet", "--format", "int8"]) == 0
    out = capsys.readouterr().out
    assert "unmodified design PASS" in out
    for m in SCALED_MUTANTS["deltanet"]:
        assert any(line.split()[:2] == [m.name, "caught"] for line in out.splitlines()), m.name


def test_scaled_mutants_refuse_other_options(capsys):
    from specmem.cli import main
    from specmem.golden.common import SpecmemInputError
    from specmem.sim.commands import mutation_command

    with pytest.raises(SpecmemInputError, match="algo: the scaled cores' mutation checks are"):
        mutation_command(algo="softmax", quiet=True)

    for extra in (["--d", "16"], ["--tokens", "10"], ["--param", "refresh_period=3"]):
        assert main(["sim", "--mutants", "--algo", "vla", "--format", "int8", *extra]) == 2
        err = capsys.readouterr().err
        assert "mutants: the mutation check runs its own fixed configuration" in err and extra[0] in err
