"""The number-format report (``specmem accuracy --formats``) on a tiny configuration."""

import json

from specmem.golden.fixed.targets import write_formats_report


def test_formats_report_tiny(tmp_path):
    lines = []
    s = write_formats_report(str(tmp_path), "tiny", progress=lines.append)
    text = (tmp_path / "formats.md").read_text()
    for needle in ("## Recall", "## Per-token output error", "## Width sweep", "## Annihilation memory",
                   "smallest eigenvalue of A", "| gated-deltanet | int8 |", "| int18 | 18 | 28 |"):
        assert needle in text, needle
    for png in ("formats_recall.png", "formats_annihilation.png", "formats_widths.png"):
        assert (tmp_path / png).stat().st_size > 1000
    js = json.loads((tmp_path / "formats.json").read_text())
    assert js["size"] == "tiny" and set(js["vla_min_eig"]) == {"float64", "int8", "legacy-int8"}
    # int18 tracks float64 far closer than int8 on every rule: the report can tell formats apart
    for algo in ("vla", "deltanet", "gated-deltanet", "linear"):
        assert s["output_error"][f"{algo}|int18"]["median"] < 0.1 * s["output_error"][f"{algo}|int8"]["median"]
    assert s["annihilation"]["int18"]["median_deg"] < s["annihilation"]["int8"]["median_deg"]
    assert any("formats: report in" in ln for ln in lines)


def test_sweep_report_names_the_narrowest_width(tmp_path):
    from specmem.golden.fixed.targets import SWEEP_M, write_sweep_report

    s = write_sweep_report(str(tmp_path), "tiny", progress=lambda m: None)
    text = (tmp_path / "sweep.md").read_text()
    assert "narrowest M ≤ 3 %" in text and "### float64 sensitivity" in text
    ws = s["width_sweep"]
    for algo in ("vla", "deltanet", "gated-deltanet", "linear"):
        errs = [ws[f"{algo}|scaled|M{M}|Ws{2 * M}"] for M in SWEEP_M]
        assert errs[-1] < errs[0] / 8  # six more operand bits: far smaller error
        nm = s["narrowest_scaled_M"][algo]
        assert nm is not None and ws[f"{algo}|scaled|M{nm}|Ws{2 * nm}"] <= 0.03
        if nm > SWEEP_M[0]:
            assert ws[f"{algo}|scaled|M{SWEEP_M[SWEEP_M.index(nm) - 1]}|Ws{2 * SWEEP_M[SWEEP_M.index(nm) - 1]}"] > 0.03
