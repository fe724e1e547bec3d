"""The commands behind ``specmem sim`` and the ``verilator`` backend of ``specmem run``."""

from __future__ import annotations

import numpy as np
import pytest

from specmem.backend_verilator import verilator_backend
from specmem.backends import run
from specmem.golden.common import SpecmemInputError
from specmem.sim.commands import bench_sim, simulate

from .conftest import assert_same_outputs


def test_simulate_passes_and_reports(capsys):
    res = simulate("annihilation", 16, 4, tokens=60, seed=5)
    assert res.passed and res.tokens == 60 and res.first_mismatch is None
    assert res.cycles > 60 * 16 and res.cycles_per_s > 0 and res.tokens_per_s > 0
    out = capsys.readouterr().out
    assert "PASS" in out and "cycles/s" in out


@pytest.mark.parametrize("kwargs,match", [
    ({"algo": "engine"}, "algo: specmem sim has testbenches for annihilation, vla, linear, deltanet, gated-deltanet only; engine has RTL"),
    ({"d": 18}, "d: must be a multiple of k"),
    ({"tokens": 0}, "tokens: must be an integer >= 1"),
    ({"preset": "int3"}, "preset: the RTL implements legacy-int8, legacy-int16, legacy-wide"),
    ({"preset": "wide"}, "preset: the RTL implements .*int18, int16, int8 \\(core v2\\); got 'wide'"),
    ({"preset": "int18", "algo": "vla"}, "preset: the RTL implements .*'int18' is the scaled golden-model format.*"
                                         "vla also int8 \\(the scaled core\\)"),
])
def test_simulate_rejects_bad_arguments(kwargs, match):
    args = {"algo": "annihilation", "d": 16, "k": 4, "tokens": 10, "seed": 0, **kwargs}
    with pytest.raises(SpecmemInputError, match=match):
        simulate(**args)


def test_bench_prints_speed(capsys):
    out = bench_sim(tokens=100)
    assert [r["passed"] for r in out["runs"]] == [True, True]
    assert all(r["cycles_per_s"] > 0 and r["tokens_per_s"] > 0 for r in out["runs"])
    assert "cycles/s" in capsys.readouterr().out


def test_verilator_backend_equals_fixed_bit_for_bit(verilator_registered):
    """A batch of two streams with a zero token, an orthogonal token and large (saturating)
    tokens: every array the fixed backend returns, identical."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 30, 16))
    x[:, :4, 8:] = 0
    x[0, 4, :8] = 0     # orthogonal to the four warm-up tokens of stream 0
    x[0, 9] = 0         # zero token
    x[1, 12:15] *= 4    # saturation
    fixed = run("annihilation", {"x": x}, backend="fixed", params={"k": 4}, format="legacy-int8")  # the RTL's format
    hw = run("annihilation", {"x": x}, backend="verilator", params={"k": 4})  # its default: legacy-int8
    assert fixed["orth"][0, 4] and fixed["sat_x"] > 0
    assert_same_outputs(fixed, hw)


def test_verilator_backend_unbatched_and_options(verilator_registered):
    x = np.random.default_rng(8).standard_normal((12, 16))
    assert_same_outputs(run("annihilation", {"x": x}, backend="fixed", params={"k": 4}, format="legacy-int8"),
          run("annihilation", {"x": x}, backend="verilator", params={"k": 4}, format="legacy-int8"))
    with pytest.raises(SpecmemInputError, match="unknown option"):
        run("annihilation", {"x": x}, backend="verilator", params={"k": 4}, color="red")
    for fmt in ("wide", "int3"):  # the legacy formats (core v1) and int18/int16/int8 (core v2) only
        with pytest.raises(SpecmemInputError, match="^format: the RTL implements legacy-int8, legacy-int16, legacy-wide"):
            run("annihilation", {"x": x}, backend="verilator", params={"k": 4}, format=fmt)
    with pytest.raises(SpecmemInputError, match="variant"):
        run("annihilation", {"x": x}, backend="verilator", params={"k": 4, "variant": "literal"})
    with pytest.raises(SpecmemInputError, match="algo"):
        verilator_backend("lattice", {}, {}, {})  # gated-deltanet has a core since the GDN testbench
