"""``bench_gpu`` runs end to end on the CPU (interpreter, tiny shapes) and writes its JSON.

Timings are not checked (nothing is timed in tests); the rows' statuses and the JSON layout are.
"""

import json

import pytest
import torch

from specmem.bench_gpu import OPS, bench_gpu


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of the benchmark; on a GPU run bench_gpu('full')")
def test_bench_gpu_small_on_cpu(tmp_path):
    out = tmp_path / "bench.json"
    ops = ["vla_fused", "vla_chunk", "vla_torch_loop", "fla_chunk_delta_rule", "sdpa_causal"]
    res = bench_gpu("small", out_json=str(out), repeats=1, ops=ops)
    assert json.loads(out.read_text())["mode"] == res["mode"] == "cpu-interpreter"
    status = {(r["op"], r["shape"]): r["status"] for r in res["results"]}
    assert len(status) == len(ops) * 2
    for (op, shape), st in status.items():
        if OPS[op].needs_cuda:
            assert st.startswith("skipped: needs CUDA"), (op, shape, st)
        else:
            assert st == "ok", (op, shape, st)
    assert {r["op"] for r in res["crossover"]["rows"]} == {"vla_fused", "vla_chunk", "sdpa_causal"}
    assert {r["op"] for r in res["seed_14x"]["rows"]} == {"vla_torch_loop", "vla_fused", "vla_chunk"}
    assert all(r["mode"] == "cpu-interpreter" for r in res["results"] + res["crossover"]["rows"] + res["seed_14x"]["rows"])
    # Interpreter timings are not performance figures: no ratios, no crossover.
    assert res["comparisons"] == [] and res["crossover"]["first_T_faster_than_sdpa"] == {}


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU path")
def test_bench_gpu_prints_no_ratios_in_interpreter(capsys):
    bench_gpu("small", out_json=None, repeats=1, ops=["vla_fused", "vla_torch_loop", "sdpa_causal"])
    out = capsys.readouterr().out
    assert "speed-up over" not in out and "faster than causal SDPA" not in out and "no speed-up ratios" in out


@pytest.mark.parametrize("kw, match", [
    pytest.param(dict(shapes="medium"), "^shapes:", id="shapes"),
    pytest.param(dict(repeats=0), "^repeats:", id="repeats"),
    pytest.param(dict(ops=["nope"]), "^ops:", id="ops"),
    pytest.param(dict(shapes="full"), "^shapes: 'full'", id="full-without-gpu",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="only refused without a GPU")),
])
def test_bench_gpu_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        bench_gpu(out_json=None, **kw)
