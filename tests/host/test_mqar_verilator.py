"""MQAR on the Verilated RTL: a trained model's memory steps through ``--backend verilator`` equal the
fixed-point model bit for bit (``specmem mqar int8 --verilator N``), and the comparison can fail.

The expected values are the fixed-point golden model's (``run_fixed`` in the same preset, through the
layers' ``memory = "legacy-int8"``); the Verilator side is the code under test. One DeltaNet build at
d = 32, k = 4 (the quick model's head size; cached in ``build/sim/`` across runs); linear attention and
Gated DeltaNet, a build each, are slow cases.
"""

import json
import shutil
from dataclasses import replace

import pytest

from specmem.cli import main
from specmem.mqar import QUICK, MQARConfig, eval_verilator, verilator_unsupported

torch = pytest.importorskip("torch")  # the gpu extra (CPU wheel in CI)

_MISSING = [tool for tool in ("perl", "make", "c++") if shutil.which(tool) is None]
pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.skipif(bool(_MISSING), reason=f"Verilator toolchain incomplete: {_MISSING}")]


def _train(tmp_path, rule):
    out = tmp_path / "mqar"
    assert main(["mqar", "--quick", "--rules", rule, "--out", str(out), "--threads", "1"]) == 0
    return out, replace(QUICK, rule=rule).name()


def _check_equal(v, cfg, n):
    H, L = cfg.num_heads, cfg.n_layers
    assert "unsupported" not in v and "error" not in v, v
    assert v["equal"] is True and v["mismatches"] == 0 and v["mismatched_values"] == 0, v
    assert (v["d"], v["lanes"], v["sequences"], v["layers"], v["heads"]) == (cfg.d_model // H, 4, n, L, H)
    assert v["streams"] == n * H * L and v["tokens"] == n * H * L * cfg.T
    assert {"o", "o_raw", "s_raw"} <= set(v["compared"])
    assert all(p["mismatches"] == 0 and p["inputs_equal"] for p in v["per_layer"])
    # the same memory outputs give the same model: predictions and accuracy agree
    assert v["predictions_equal"] is True and v["acc_fixed"] == v["acc_verilator"]
    assert v["n_queries"] == n * cfg.n_pairs and v["seconds"] > 0 and v["setup_seconds"] > 0


def test_deltanet_quick_model_bit_exact_and_a_wrong_reference_is_caught(tmp_path, capsys):
    out, name = _train(tmp_path, "deltanet")
    cfg = replace(QUICK, rule="deltanet")
    # the CLI: fixed-point formats on 2 sequences plus the RTL on the same 2
    assert main(["mqar", "int8", "--out", str(out), "--sample", "2", "--verilator", "2"]) == 0
    ev = json.loads((out / f"{name}.int8-2.json").read_text())
    assert "legacy-int8" in ev["formats"]
    v = ev["verilator"]
    assert v["preset"] == v["reference"] == "legacy-int8"
    _check_equal(v, cfg, 2)
    # the fixed-point model's accuracy on those sequences is the int8 evaluation's legacy-int8 column
    assert v["acc_fixed"] == ev["formats"]["legacy-int8"]["acc"]
    assert "bit-exact" in "".join(capsys.readouterr())
    # done already: a second call with the same request does not simulate again
    assert main(["mqar", "int8", "--out", str(out), "--sample", "2", "--verilator", "2"]) == 0
    assert "done already" in "".join(capsys.readouterr())

    # negative: the legacy-int8 RTL against the legacy-int16 fixed-point model must be reported unequal
    bad = eval_verilator(str(out / f"{name}.pt"), 2, "legacy-int8", reference="legacy-int16")
    assert bad["equal"] is False and bad["reference"] == "legacy-int16"
    assert bad["mismatches"] > 0 and bad["mismatched_values"] > 0
    assert bad["per_layer"][0]["mismatches"] == 2 * cfg.num_heads  # every stream of the first layer differs

    # the record carries the comparison and the report shows it
    doc = tmp_path / "doc" / "mqar.md"
    doc.parent.mkdir()
    assert main(["mqar", "report", "--out", str(out), "--doc", str(doc)]) == 0
    rec = json.loads((doc.parent / "mqar" / "runs.json").read_text())
    assert rec["evals"][0]["verilator"]["equal"] is True
    text = doc.read_text()
    assert "### The Verilator backend on trained weights" in text
    assert f"| {name} | DeltaNet | lr 0.003 |" in text and "| legacy-int8 | 32, 4 | 2 (8) | 8 (104) | yes |" in text
    assert "In all: 1 model, 8 streams and 104 tokens simulated in " in text and "bit-exact in every one." in text


def test_models_without_a_fitting_core_say_why():
    assert verilator_unsupported(MQARConfig(rule="deltanet")) is None
    assert verilator_unsupported(MQARConfig(rule="vla_eq8")) is None
    assert "no recurrent memory" in verilator_unsupported(MQARConfig(rule="softmax"))
    assert verilator_unsupported(MQARConfig(rule="gated_deltanet")) is None
    why = verilator_unsupported(MQARConfig(rule="vla", d_model=120, num_heads=4), lanes=4)
    assert why == ("vla: head dimension d_h = 30 (d_model 120 / 4 heads) does not fit an RTL core with k = 4 lanes "
                   "(k >= 2 must divide d)")


def test_unsupported_models_are_recorded_not_skipped(tmp_path):
    """A softmax checkpoint: the record says why it was not simulated (no build, no simulation)."""
    from specmem.mqar import _save_checkpoint, build_model

    cfg = replace(QUICK, rule="softmax", steps=1)
    path = tmp_path / "m.pt"
    _save_checkpoint({"config": cfg.__dict__, "state_dict": build_model(cfg).state_dict()}, str(path))
    v = eval_verilator(str(path), 2)
    assert v == {"preset": "legacy-int8", "reference": "legacy-int8", "lanes": 4, "sequences": 2,
                 "unsupported": "softmax: no recurrent memory step (attention over the whole prefix), no RTL core"}


def test_a_stored_unsupported_record_is_checked_again(tmp_path):
    """``mqar int8 --verilator N`` re-evaluates a model recorded as unsupported (its rule may have gained an
    RTL path since, as Gated DeltaNet did); a softmax model: the stale reason is replaced, nothing simulated."""
    from specmem.mqar import _save_checkpoint, build_model

    cfg = replace(QUICK, rule="softmax", steps=1)
    _save_checkpoint({"config": cfg.__dict__, "state_dict": build_model(cfg).state_dict()}, str(tmp_path / "m.pt"))
    (tmp_path / "m.json").write_text("{}")  # the run record: the checkpoint counts as finished
    stale = {"preset": "legacy-int8", "lanes": 4, "sequences": 2, "unsupported": "softmax: a stale reason"}
    (tmp_path / "m.int8-2.json").write_text(json.dumps({"formats": {"float64": {"acc": 0.5}}, "verilator": stale}))
    assert main(["mqar", "int8", "--out", str(tmp_path), "--sample", "2", "--verilator", "2"]) == 0
    ev = json.loads((tmp_path / "m.int8-2.json").read_text())
    assert ev["formats"] == {"float64": {"acc": 0.5}}  # the fixed-point evaluation is kept, not redone
    assert ev["verilator"]["unsupported"] == ("softmax: no recurrent memory step (attention over the whole "
                                              "prefix), no RTL core")


@pytest.mark.slow
def test_gated_deltanet_quick_model_bit_exact(tmp_path):
    out, name = _train(tmp_path, "gated_deltanet")
    v = eval_verilator(str(out / f"{name}.pt"), 2)
    _check_equal(v, replace(QUICK, rule="gated_deltanet"), 2)


@pytest.mark.slow
def test_linear_quick_model_bit_exact(tmp_path):
    out, name = _train(tmp_path, "linear")
    v = eval_verilator(str(out / f"{name}.pt"), 2)
    _check_equal(v, replace(QUICK, rule="linear"), 2)
    assert "z_raw" in v["compared"]


def test_layer_memory_names_the_rtl_it_needs():
    from specmem.golden.common import SpecmemInputError
    from specmem.nn import make_layer

    layer = make_layer("deltanet", 16, 2)
    layer.memory = "verilator:legacy-int16"
    with pytest.raises(SpecmemInputError, match="^memory: the RTL implements legacy-int8, legacy-int16, legacy-wide"):
        layer.memory = "verilator:int8"
    make_layer("gated_deltanet", 16, 2).memory = "verilator:legacy-int8"  # the gated core takes the decay
