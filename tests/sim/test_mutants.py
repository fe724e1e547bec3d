"""Mutation check: broken variants of the generated Verilog (one rounding step changed, a
pipeline register removed, ready ignored, a counter or tlast broken, one extra cycle per token)
are each caught by the testbench, while the unmodified design passes (``sim/mutants.py``)."""

from __future__ import annotations

import pytest

from specmem.sim.mutants import MUTANTS, MutationError, apply_schema, bypass, tie, Mutant
from specmem.sim.suite import run_mutants


def test_ci_mutants_are_caught():
    base, results = run_mutants(ci=True, seeds=(0, 1), T=24)
    assert base.passed, "the unmodified design must pass:\n" + base.describe()
    assert len(results) == sum(m.ci for m in MUTANTS) >= 5
    survived = [r.name for r in results if not r.caught]
    assert not survived, f"mutants not caught: {survived}"
    for r in results:
        print(f"{r.name:28s} caught by {', '.join(r.failing_tests[:3])}: {r.first_error[:100]}")


def test_timing_mutant_is_caught_only_by_the_cycle_check():
    """The extra-cycle mutant leaves every output bit right; only the cycles-per-token check sees it."""
    base, results = run_mutants(mutants=[m for m in MUTANTS if m.name == "row_pass_one_cycle_longer"], ci=False)
    (r,) = results
    assert r.caught and r.failing_tests == ["steady_state"], (r.failing_tests, r.first_error)
    assert "cycles per" in r.first_error


def test_missing_mutation_site_fails_loudly():
    text = "module top(a, y);\n  input a;\n  output y;\n  assign y = a;\nendmodule\n"
    apply_schema(text, [Mutant("ok", "", "top", tie("y", "1'h0"))])
    with pytest.raises(MutationError, match="found 0 times"):
        apply_schema(text, [Mutant("bad", "", "top", tie("z", "1'h0"))])
    with pytest.raises(MutationError, match="clocked update"):
        apply_schema(text, [Mutant("bad", "", "top", bypass("y"))])
    numbered = text.replace("module top(", "module \\top.sh$12 (")  # Amaranth's numbered duplicate
    out, ids = apply_schema(numbered, [Mutant("ok", "", "top.sh$*", tie("y", "1'h0"))])
    assert ids == {"ok": 1} and "(specmem_mutant == 8'd1) ? (1'h0 )" in out
    with pytest.raises(MutationError, match="found 0 times"):
        apply_schema(numbered, [Mutant("bad", "", "top.sh", tie("y", "1'h0"))])


@pytest.mark.slow
def test_all_mutants_longer_streams():
    base, results = run_mutants(ci=False, seeds=(0, 1, 2, 3), T=200)
    assert base.passed, base.describe()
    assert all(r.caught for r in results), [r.name for r in results if not r.caught]
