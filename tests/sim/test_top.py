"""The annihilation top in Verilator under cocotb, bit exact and cycle by cycle against the
fixed-point golden model (``sim/tb_top.py``): warm-up, steady state, orthogonal and zero tokens,
saturation, resets in the middle of a stream, framing errors, ten random seeds, and a stream of
10^4 tokens. One simulator process runs the directed cases and the seeds; every pytest test below
reads its part of that run."""

from __future__ import annotations

import pytest

from specmem.sim.build import Design, build
from specmem.sim.suite import DIRECTED, run_top

SMALL = Design("top", 16, 4, "legacy-int8")
SEEDS = tuple(range(10))


@pytest.fixture(scope="module")
def suite():
    """The directed cases and ten random streams of 64 mixed tokens (30 % idle gaps, 30 %
    backpressure) on the d=16, k=4, legacy-int8 top, in one simulator process."""
    return run_top(SMALL, DIRECTED, seeds=SEEDS, stream={"T": 64, "kind": "mixed", "idle": 0.3, "stall": 0.3})


def _passed(run, prefix):
    got = {n: ok for n, ok in run.tests.items() if n == prefix or n.startswith(prefix + "/")}
    assert got, f"no cocotb test named {prefix} ran ({sorted(run.tests)})"
    assert all(got.values()), run.describe()
    return got


def test_build_is_reused():
    """A second build of the same configuration reuses the folder (hash of Verilog + options)."""
    a = build(SMALL)
    b = build(SMALL)
    assert b.reused and a.directory == b.directory and b.executable.is_file()
    assert a.directory.parent.name == "top-d16-k4-legacy-int8"


def test_random_streams_ten_seeds(suite):
    got = _passed(suite, "random_stream")
    assert len(got) == len(SEEDS)
    for seed in SEEDS:
        rec = suite.record[f"random_stream/seed={seed}"]
        assert rec["tokens_compared"] == 64 and rec["mismatched_tokens"] == 0
        assert rec["status"]["tokens"] == 64 and rec["status"]["framing_errors"] == 0
    # the mixed streams reach the orthogonal path and saturate somewhere across the seeds
    assert sum(suite.record[f"random_stream/seed={s}"]["status"]["orth_count"] for s in SEEDS) >= len(SEEDS)


def test_steady_state_cycles_per_token_equal_manifest(suite):
    _passed(suite, "steady_state")
    rec = suite.record["steady_state"]
    man = build(SMALL).manifest["cycles_per_token"]
    assert rec["by_kind"]["full"] == [man["full_steady_state"]]
    assert rec["by_kind"]["zero"] == [man["warm_up_or_zero"]]
    assert rec["by_kind"]["warm"] == [man["warm_up_or_zero"]]
    print(f"cycles per token: full {rec['by_kind']['full']}, warm-up/zero {rec['by_kind']['zero']}; floor d = 16")


def test_warm_up_and_latency(suite):
    _passed(suite, "warm_up_and_latency")
    rec = suite.record["warm_up_and_latency"]
    lat = rec["latency_by_kind"]
    assert set(lat) == {"warm_up", "zero", "full"} and all(len(v) == 1 for v in lat.values()), lat
    man = build(SMALL).manifest.get("latency")
    if isinstance(man, dict):  # compared inside the testbench too; here for the report
        assert lat["warm_up"] == [man["warm_up_or_zero"]] and lat["full"] == [man["full"]]
    print(f"latency of an isolated token (last input beat -> first output beat): {lat}")


def test_orthogonal_and_zero_tokens(suite):
    _passed(suite, "orthogonal_and_zero")
    rec = suite.record["orthogonal_and_zero"]
    assert sum(rec["orth"]) >= 2 and rec["status"]["orth_flag"] == 1


def test_saturating_inputs(suite):
    _passed(suite, "saturating")
    st = suite.record["saturating"]["status"]
    assert st["saturations"] == st["model"]["saturations"] > 0


@pytest.mark.parametrize("cut", ["in_token", "between", "in_output"])
def test_reset_in_the_middle_of_a_stream(suite, cut):
    name = f"reset_mid_stream/cut={cut}"
    _passed(suite, name)
    rec = suite.record[name]
    beats = rec["beats_per_token"]
    if cut == "in_token":
        assert rec["beats_before_reset"] % beats not in (0,), rec
    if cut == "between":
        assert rec["beats_before_reset"] % beats == 0, rec
    assert rec["status"]["tokens"] == rec["status"]["model"]["tokens"]


def test_framing_errors_are_counted(suite):
    _passed(suite, "framing_errors")
    st = suite.record["framing_errors"]["status"]
    assert st["framing_errors"] == st["tokens"] // 2 > 0


def test_long_stream_ten_thousand_tokens():
    """10^4 mixed tokens at d=16, k=4 (about half a million cycles) with idle gaps and
    backpressure: every output, the counters and the final state."""
    T = 10_000
    run = run_top(SMALL, ["stream"], stream={"T": T, "kind": "mixed", "seed": 2024, "idle": 0.2, "stall": 0.2},
                  name="long")
    assert run.passed, run.describe()
    rec = run.record["stream"]
    assert rec["tokens_compared"] == T and rec["status"]["tokens"] == T
    print(f"{T} tokens: {rec['test_cycles']} cycles in {rec['wall_s']:.1f} s "
          f"({rec['test_cycles'] / max(rec['wall_s'] - rec['model_s'], 1e-9):,.0f} cycles/s)")


@pytest.mark.slow
@pytest.mark.parametrize("d,k,preset", [
    pytest.param(8, 2, "legacy-int8", id="d8-k2-int8"),
    pytest.param(32, 8, "legacy-int8", id="d32-k8-int8"),
    pytest.param(12, 3, "legacy-int8", id="d12-k3-int8-odd-lanes"),
    pytest.param(16, 4, "legacy-int16", id="d16-k4-int16"),
    pytest.param(16, 2, "legacy-wide", id="d16-k2-wide"),
])
def test_other_configurations(d, k, preset):
    run = run_top(Design("top", d, k, preset), DIRECTED, seeds=(0, 1, 2), stream={"T": 48})
    assert run.passed, run.describe()


@pytest.mark.slow
def test_many_seeds_longer_streams():
    run = run_top(SMALL, ["random_stream"], seeds=tuple(range(100, 130)), stream={"T": 400})
    assert run.passed, run.describe()
