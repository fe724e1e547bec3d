"""The accuracy report runs end to end on a tiny configuration and states its findings."""

import json

from specmem.golden.fixed.accuracy import bench_fixed, write_accuracy_report


def test_report_smoke(tmp_path):
    lines = []
    path = write_accuracy_report(str(tmp_path), T=48, long_T=60, small=True, progress=lines.append, d=8, k=2)
    text = open(path).read()
    for needle in ("## Findings", "Narrowest preset", "## Annihilation memory", "## VLA", "## Training-free recall",
                   "## Ranges and saturation", "![recall](recall.png)"):
        assert needle in text
    for png in ("annihilation.png", "vla.png", "vla_a_spectrum.png", "recall.png", "ranges_vla.png"):
        assert (tmp_path / png).stat().st_size > 1000
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["config"] == {"d": 8, "k": 2, "T": 48, "long_T": 60, "seeds": [0], "small": True}
    assert summary["annihilation"]["legacy-wide"]["max_omega_err"] < 1e-4
    assert any(line.startswith("accuracy: report in") for line in lines)


def test_bench_fixed_reports_every_rule(tmp_path):
    out = tmp_path / "bench.json"
    rec = bench_fixed(out_json=str(out), d=8, k=2, T=16, progress=lambda m: None)
    assert set(rec["tokens_per_s"]) == {f"{a}/{p}" for a in ("annihilation", "vla", "linear", "deltanet")
                                        for p in ("legacy-int8", "legacy-int16", "legacy-wide")}
    assert all(v > 0 for v in rec["tokens_per_s"].values())
    assert json.loads(out.read_text())["d"] == 8
