"""Line/branch/toggle coverage of the top under the testbench (``sim/coverage.py``): the report
exists, is high, and lists what is not covered."""

from __future__ import annotations

import json

from specmem.sim.build import Design
from specmem.sim.coverage import _fields, format_report, merge, read_points
from specmem.sim.suite import coverage_suite


def test_coverage_report():
    rep, runs, out = coverage_suite(Design("top", 16, 4, "legacy-int8"), seeds=(0, 1), T=100)
    assert all(r.passed for r in runs), runs[0].describe()
    assert rep.totals["line"][1] > 1000 and rep.totals["toggle"][1] > 10_000
    assert rep.percent("line") > 90.0 and rep.percent("branch") > 80.0 and rep.percent("toggle_named") > 80.0
    assert rep.excluded  # the backend's never-true sensitivity 'if's are reported as excluded
    text = (out / "coverage.txt").read_text()
    assert "uncovered line/branch points" in text and "named signals with untoggled bits" in text
    data = json.loads((out / "coverage.json").read_text())
    assert data["percent"]["line"] == round(rep.percent("line"), 2)
    print(format_report(rep, max_items=10))


def test_coverage_file_parsing(tmp_path):
    key = "\x01f\x02top.v\x01l\x0212\x01page\x02v_line/top\x01o\x02block\x01h\x02top"
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    a.write_text(f"# SystemC::Coverage-3\nC '{key}' 3\n")
    b.write_text(f"# SystemC::Coverage-3\nC '{key}' 4\n")
    assert read_points(a) == {key: 3}
    assert merge([a, b]) == {key: 7}
    assert _fields(key)["l"] == "12" and _fields(key)["page"] == "v_line/top"
