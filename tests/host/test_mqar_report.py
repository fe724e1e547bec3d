"""MQAR report: several seeds per cell become mean (min–max) and a seed count, devices stay apart, and the
page regenerates from its compact record when the results folders are gone. Synthetic run records with
known accuracies; the expected numbers are worked out by hand below."""

import json
import shutil
from dataclasses import asdict

import pytest

from specmem.mqar import MQARConfig
from specmem.mqar_report import load_record, seed_stats, trained_cell, write_report

H100 = "NVIDIA H100 80GB HBM3"


def _run(rule, n, seed, acc, device="cuda", short_conv=0, lr=3e-4):
    cfg = MQARConfig(rule=rule, n_pairs=n, seed=seed, steps=1000, short_conv=short_conv, lr=lr)
    return {"config": asdict(cfg), "name": cfg.name(), "device": device,
            "device_name": H100 if device == "cuda" else "x86_64", "torch": "t", "threads": 1, "train_s": 10.0,
            "steps_per_s": 100.0, "eval": {"acc": acc, "loss": 1.0, "n_queries": 960 * n}, "chance": 1 / 128,
            "curve": [{"step": 1, "loss": 5.0, "train_acc": 0.0, "elapsed_s": 0.1},
                      {"step": 1000, "loss": 1.0, "train_acc": acc, "elapsed_s": 10.0}],
            "initial_loss": 5.0, "final_loss": 1.0}


def _write(folder, runs):
    folder.mkdir()
    for r in runs:
        (folder / f"{r['name']}.json").write_text(json.dumps(r))


@pytest.fixture
def folders(tmp_path):
    gpu, cpu = tmp_path / "gpu", tmp_path / "cpu"
    # VLA, paper setup, on the GPU: n = 8 over seeds 1, 2, 3 (0.2, 0.5, 0.8), n = 16 over seeds 1, 2 only
    _write(gpu, [_run("vla", 8, 1, 0.2), _run("vla", 8, 2, 0.5), _run("vla", 8, 3, 0.8),
                 _run("vla", 16, 1, 0.1), _run("vla", 16, 2, 0.3),
                 _run("deltanet", 8, 1, 0.9, short_conv=4, lr=1e-3), _run("deltanet", 8, 2, 0.7, short_conv=4, lr=1e-3)])
    # seed 1 again on the CPU: the same seed measured twice, never pooled with the GPU's
    _write(cpu, [_run("vla", 8, 1, 0.96, device="cpu")])
    return tmp_path, gpu, cpu


def test_seed_stats_by_hand():
    s = seed_stats([0.2, 0.5, 0.8])
    assert s["n"] == 3 and s["mean"] == pytest.approx(0.5) and (s["min"], s["max"]) == (0.2, 0.8)


def test_report_aggregates_seeds_and_keeps_devices_apart(folders):
    tmp, gpu, cpu = folders
    doc = tmp / "doc" / "mqar.md"
    doc.parent.mkdir()
    write_report([str(gpu), str(cpu)], str(doc))
    text = doc.read_text()
    # mean (0.2 + 0.5 + 0.8) / 3 = 0.500, min 0.200, max 0.800; n = 16: (0.1 + 0.3) / 2 = 0.200 over 2 seeds
    assert ("| VLA (Alg. 1) | paper setup | 1000 | H100 80GB HBM3 | 3 (1, 2, 3) | 0.997 / **0.500 (0.200–0.800)** | "
            "0.990 / **0.200 (0.100–0.300)** [2 seeds] | – | – | – |") in text
    assert "| VLA (Alg. 1) | paper setup | 1000 | CPU (x86_64) | 1 (1) | 0.997 / **0.960** | – |" in text
    # the conv variant: (0.9 + 0.7) / 2 = 0.800
    assert "| DeltaNet | conv4, lr 0.001 | 1000 | H100 80GB HBM3 | 2 (1, 2) | 0.965 / **0.800 (0.700–0.900)** |" in text
    # per-seed rows, and verdicts on the mean: 0.500 - 0.997 = -0.497; 0.960 - 0.997 = -0.037 is within 0.05
    assert "| VLA (Alg. 1) | paper setup | 1000 | H100 80GB HBM3 | 3 | 0.800 | – | – | – | – |" in text
    assert "| VLA (Alg. 1) | H100 80GB HBM3 | 3 | no (-0.497) | no (-0.790) | – | – | – |" in text
    assert "| VLA (Alg. 1) | CPU (x86_64) | 1 | reproduced | – | – | – | – |" in text
    # the cell the claims ledger reads: the GPU's seeds, not the CPU's
    runs = load_record(str(doc.parent / "mqar" / "runs.json"))["runs"]
    c = trained_cell(runs, "vla", 8)
    assert (c["n"], c["seeds"], c["device"]) == (3, [1, 2, 3], "H100 80GB HBM3") and c["mean"] == pytest.approx(0.5)
    assert trained_cell(runs, "vla", 8, device="CPU (x86_64)")["mean"] == pytest.approx(0.96)
    assert trained_cell(runs, "vla", 24) is None


def test_report_regenerates_from_the_record(folders):
    tmp, gpu, cpu = folders
    doc = tmp / "doc" / "mqar.md"
    doc.parent.mkdir()
    write_report([str(gpu), str(cpu)], str(doc))
    first = doc.read_text()
    shutil.rmtree(gpu)
    shutil.rmtree(cpu)
    write_report([str(gpu), str(cpu)], str(doc))  # both folders absent: read from docs' record
    assert doc.read_text() == first
    write_report(None, str(doc))  # no folders named: the record's own
    assert doc.read_text() == first
