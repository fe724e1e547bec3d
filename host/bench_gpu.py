"""Benchmarks of the Triton kernels: VLA fused vs chunked vs a PyTorch loop, beside fla's delta
rule and SDPA, plus the annihilation kernel; a registry of ops and shapes, JSON output.

On a GPU: ``triton.testing.do_bench`` median and 20th/80th percentiles at fla's README shapes,
and the sequence length where VLA overtakes causal ``scaled_dot_product_attention``. Without
one: ``TRITON_INTERPRET=1`` and ``time.perf_counter`` over a few repeats at tiny shapes, which
checks that everything runs but measures the interpreter, not the algorithms.

    python -m specmem.bench_gpu --shapes small --out bench_gpu.json
    python -c 'from specmem.bench_gpu import bench_gpu; bench_gpu("small")'
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

from specmem.golden.common import SpecmemInputError

__all__ = ["bench_gpu", "OPS", "SHAPES", "CROSSOVER", "main"]


@dataclass(frozen=True)
class Shape:
    B: int
    T: int
    H: int
    D: int

    @property
    def name(self) -> str:
        return f"B{self.B}-T{self.T}-H{self.H}-D{self.D}"


@dataclass(frozen=True)
class Op:
    """``make(shape, device, dtype)`` allocates inputs and returns the thunk to time."""
    make: Callable
    needs_cuda: bool = False
    max_T: int | None = None      # longer sequences are skipped (Python loops)
    note: str = ""


# fla's README delta-rule shapes on a GPU; tiny ones for the CPU interpreter.
SHAPES = {
    "full": [Shape(1, 8192, 96, 128), Shape(4, 4096, 64, 128), Shape(8, 1024, 8, 64)],
    "small": [Shape(1, 64, 1, 16), Shape(2, 48, 2, 24)],
}
# The seed's "14x over sequential Python at T = 4096" (its GPU was a T4, shape not stated): one head
# group at the crossover's (B, H, D), T = 4096.
SEED_14X = {"full": Shape(1, 4096, 8, 64), "small": Shape(1, 32, 1, 16)}
# Crossover vs SDPA: fixed (B, H, D), T swept; the first T where a VLA kernel is faster.
CROSSOVER = {
    "full": dict(B=1, H=8, D=64, Ts=[256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]),
    "small": dict(B=1, H=1, D=16, Ts=[16, 32, 64]),
}


def _randn(shape: Shape, device, dtype, n, seed=0, grad=False):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [torch.randn(shape.B, shape.T, shape.H, shape.D, generator=g).to(device, dtype).requires_grad_(grad)
            for _ in range(n)]


def _vla_fused(shape, device, dtype):
    from specmem.kernels.vla import fused_recurrent_vla
    k, v, q, u = _randn(shape, device, dtype, 4)
    return lambda: fused_recurrent_vla(k, v, q, u)


def _vla_chunk(precision, a_pass="chunked", state_pass="specmem", chunk_size=16):
    def make(shape, device, dtype, grad=False):
        from specmem.kernels.vla import chunk_vla
        k, v, q, u = _randn(shape, device, dtype, 4, grad=grad)
        return lambda: chunk_vla(k, v, q, u, dot_precision=precision, a_pass=a_pass, state_pass=state_pass,
                                 chunk_size=chunk_size, output_final_state=False)
    return make


def _vla_a_pass(a_pass, precision="tf32x3", segment=32, num_warps=None):
    def make(shape, device, dtype):
        import math
        from specmem.kernels.vla.chunk import vla_ah_sequential_fwd
        from specmem.kernels.vla.chunk_a import vla_a_chunk_fwd
        k, u = _randn(shape, device, dtype, 2)
        args = (k, u, 0.1, 1e-4, 20, 1e-3, 1 / math.sqrt(shape.D), False)
        if a_pass == "sequential":
            return lambda: vla_ah_sequential_fwd(*args)
        return lambda: vla_a_chunk_fwd(*args, precision, segment, num_warps)
    return make


def _vla_torch_loop(shape, device, dtype):
    from specmem.kernels.vla import vla_recurrence
    k, v, q, u = (x.float() for x in _randn(shape, device, dtype, 4))
    return lambda: vla_recurrence(k, v, q, u)


def _fla_delta(name):
    def make(shape, device, dtype, grad=False):
        from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
        fn = chunk_delta_rule if name == "chunk" else fused_recurrent_delta_rule
        q, k, v = _randn(shape, device, dtype, 3, grad=grad)
        beta = torch.rand(shape.B, shape.T, shape.H, device=device, dtype=dtype).sigmoid()
        return lambda: fn(q, k, v, beta, use_qk_l2norm_in_kernel=True)
    return make


def _fla_gdn(shape, device, dtype, grad=False):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    q, k, v = _randn(shape, device, dtype, 3, grad=grad)
    beta = torch.rand(shape.B, shape.T, shape.H, device=device, dtype=dtype).sigmoid()
    g = torch.nn.functional.logsigmoid(torch.rand(shape.B, shape.T, shape.H, device=device, dtype=torch.float32))
    return lambda: chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)


def _fla_dplr(shape, device, dtype, grad=False):
    from fla.ops.generalized_delta_rule import chunk_dplr_delta_rule
    q, k, v, a = _randn(shape, device, dtype, 4, grad=grad)
    k = torch.nn.functional.normalize(k.float(), dim=-1).to(dtype)
    a = torch.nn.functional.normalize(a.float(), dim=-1).to(dtype)
    b = -a
    gk = torch.zeros_like(q, dtype=torch.float32)
    return lambda: chunk_dplr_delta_rule(q, k, v, a, b, gk, scale=1.0)


def _with_backward(make):
    """Forward + backward: inputs that require grad, a fixed upstream gradient into the first output."""
    def wrapped(shape, device, dtype):
        fn = make(shape, device, dtype, grad=True)
        box = {}

        def step():
            out = fn()
            o = out["o"] if isinstance(out, dict) else out[0] if isinstance(out, tuple) else out
            if "do" not in box:
                box["do"] = torch.randn_like(o)
            o.backward(box["do"])
        return step
    return wrapped


def _sdpa(shape, device, dtype, grad=False):
    q, k, v = (x.transpose(1, 2) for x in _randn(shape, device, dtype, 3, grad=grad))
    return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def _annihilation(shape, device, dtype):
    from specmem.kernels.annihilation import fused_recurrent_annihilation
    (x,) = _randn(shape, device, dtype, 1)
    return lambda: fused_recurrent_annihilation(x, max(1, shape.D // 4))


OPS = {
    "vla_fused": Op(_vla_fused, note="fused_recurrent_vla"),
    "vla_chunk": Op(_vla_chunk("ieee"), note="chunk_vla, chunked A, C=16, float32 dots"),
    "vla_chunk_tf32": Op(_vla_chunk("tf32"), needs_cuda=True, note="chunk_vla, chunked A, C=16, TF32 dots"),
    "vla_chunk_tf32x3": Op(_vla_chunk("tf32x3"), needs_cuda=True, note="chunk_vla, chunked A, C=16, 3xTF32 dots"),
    "vla_chunk_seqA_tf32": Op(_vla_chunk("tf32", a_pass="sequential"), needs_cuda=True,
                              note="chunk_vla, sequential A pass (v1), C=16, TF32 dots"),
    "vla_chunk_dplr": Op(_vla_chunk("tf32x3", state_pass="fla-dplr"), needs_cuda=True,
                         note="chunked A (3xTF32) + fla chunk_dplr_delta_rule state pass"),
    "vla_chunk_dplr_fwdbwd": Op(_with_backward(_vla_chunk("tf32x3", state_pass="fla-dplr")), needs_cuda=True,
                                note="torch segment-form A + fla DPLR, forward + backward"),
    "vla_a_pass_chunked": Op(_vla_a_pass("chunked"), needs_cuda=True, note="A pass alone, segment form, 3xTF32"),
    "vla_a_pass_chunked_tf32": Op(_vla_a_pass("chunked", "tf32"), needs_cuda=True, note="A pass, segment form, TF32"),
    "vla_a_pass_chunked_ieee": Op(_vla_a_pass("chunked", "ieee"), needs_cuda=True, note="A pass, segment form, fp32 FMA"),
    "vla_a_pass_chunked_s16": Op(_vla_a_pass("chunked", segment=16), needs_cuda=True,
                                 note="A pass, segment form, 3xTF32, segments of 16"),
    "vla_a_pass_chunked_w16": Op(_vla_a_pass("chunked", num_warps=16), needs_cuda=True,
                                 note="A pass, segment form, 3xTF32, 16 warps"),
    "vla_a_pass_chunked_w4": Op(_vla_a_pass("chunked", num_warps=4), needs_cuda=True,
                                note="A pass, segment form, 3xTF32, 4 warps"),
    "vla_a_pass_chunked_tf32_w4": Op(_vla_a_pass("chunked", "tf32", num_warps=4), needs_cuda=True,
                                     note="A pass, segment form, TF32, 4 warps"),
    "vla_a_pass_sequential": Op(_vla_a_pass("sequential"), needs_cuda=True, note="A pass alone, token by token"),
    "vla_torch_loop": Op(_vla_torch_loop, max_T=4096, note="naive vla_recurrence, float32, one step per Python iteration"),
    "fla_chunk_delta_rule": Op(_fla_delta("chunk"), needs_cuda=True, note="fla chunk_delta_rule"),
    "fla_fused_recurrent_delta_rule": Op(_fla_delta("fused"), needs_cuda=True, note="fla fused_recurrent_delta_rule"),
    "fla_chunk_gdn": Op(_fla_gdn, needs_cuda=True, note="fla chunk_gated_delta_rule"),
    "fla_chunk_dplr_delta_rule": Op(_fla_dplr, needs_cuda=True, note="fla chunk_dplr_delta_rule, no decay (VLA's state half)"),
    "sdpa_causal": Op(_sdpa, note="torch scaled_dot_product_attention, causal"),
    "fla_chunk_delta_rule_fwdbwd": Op(_with_backward(_fla_delta("chunk")), needs_cuda=True,
                                      note="fla chunk_delta_rule, forward + backward"),
    "fla_chunk_gdn_fwdbwd": Op(_with_backward(_fla_gdn), needs_cuda=True, note="fla chunk_gated_delta_rule, forward + backward"),
    "fla_chunk_dplr_delta_rule_fwdbwd": Op(_with_backward(_fla_dplr), needs_cuda=True,
                                           note="fla chunk_dplr_delta_rule, forward + backward"),
    "sdpa_causal_fwdbwd": Op(_with_backward(_sdpa), note="causal SDPA, forward + backward"),
    "annihilation_fused": Op(_annihilation, note="fused_recurrent_annihilation, k = D/4"),
}


def _time(fn, gpu: bool, repeats: int) -> dict:
    """Median and 20th/80th percentiles in ms."""
    if gpu:
        import triton
        p50, p20, p80 = triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8])
        return {"median_ms": p50, "p20_ms": p20, "p80_ms": p80}
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    q = statistics.quantiles(ts, n=5, method="inclusive") if len(ts) > 1 else ts * 4
    return {"median_ms": statistics.median(ts), "p20_ms": q[0], "p80_ms": q[3]}


def _run(op_name: str, shape: Shape, gpu: bool, device, dtype, repeats: int) -> dict:
    op = OPS[op_name]
    row = {"op": op_name, "shape": shape.name, **vars(shape)}
    if op.needs_cuda and not gpu:
        return {**row, "status": "skipped: needs CUDA (not meaningful in the interpreter)"}
    if op.max_T is not None and shape.T > op.max_T:
        return {**row, "status": f"skipped: T > {op.max_T} (Python loop)"}
    try:
        fn = op.make(shape, device, dtype)
        res = _time(fn, gpu, repeats)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return {**row, "status": "skipped: out of GPU memory"}
    except Exception as exc:  # one failing op must not lose the other rows
        return {**row, "status": f"error: {type(exc).__name__}: {exc}"[:300]}
    tokens = shape.B * shape.T * shape.H
    print(f"[bench] {op_name} {shape.name}: {res['median_ms']:.3f} ms", file=sys.stderr, flush=True)
    return {**row, "status": "ok", **res, "mtokens_per_s": tokens / res["median_ms"] / 1e3}


def _ratio(rows, shape, num, den):
    a = next((r for r in rows if r["shape"] == shape and r["op"] == num and r["status"] == "ok"), None)
    b = next((r for r in rows if r["shape"] == shape and r["op"] == den and r["status"] == "ok"), None)
    return None if a is None or b is None else b["median_ms"] / a["median_ms"]


def _print_table(rows):
    print(f"{'op':<32}{'shape':<22}{'median ms':>12}{'p20':>10}{'p80':>10}  status")
    for r in rows:
        if r["status"] == "ok":
            print(f"{r['op']:<32}{r['shape']:<22}{r['median_ms']:>12.3f}{r['p20_ms']:>10.3f}{r['p80_ms']:>10.3f}  ok")
        else:
            print(f"{r['op']:<32}{r['shape']:<22}{'':>12}{'':>10}{'':>10}  {r['status']}")


def bench_gpu(shapes: str = "small", out_json: str | None = "bench_gpu.json", repeats: int = 3,
              ops=None, shape_names=None, crossover: bool = True) -> dict:
    """Time the ops of :data:`OPS` at ``SHAPES[shapes]`` and the SDPA crossover; print a table.

    ``shapes``: ``"small"`` (tiny, runs in the CPU interpreter) or ``"full"`` (fla's README shapes,
    for a GPU). ``out_json``: where to write the results (None: don't write). ``repeats``: timed
    runs per op on the CPU (the GPU uses ``do_bench``). ``ops``: names from :data:`OPS` (default
    all); the crossover needs ``sdpa_causal`` and a VLA op. Returns the JSON-ready dict.
    """
    if shapes not in SHAPES:
        raise SpecmemInputError(f"shapes: must be one of {sorted(SHAPES)}, got {shapes!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise SpecmemInputError(f"repeats: must be an integer >= 1, got {repeats!r}")
    ops = list(OPS) if ops is None else list(ops)
    unknown = [o for o in ops if o not in OPS]
    if unknown or not ops:
        raise SpecmemInputError(f"ops: must be a nonempty list of {sorted(OPS)}, got {unknown or ops}")
    names = [sh.name for sh in SHAPES[shapes]]
    if shape_names is not None and (not shape_names or set(shape_names) - set(names)):
        raise SpecmemInputError(f"shape_names: must be a nonempty subset of {names}, got {shape_names}")
    bench_shapes = [sh for sh in SHAPES[shapes] if shape_names is None or sh.name in shape_names]
    from specmem.kernels import use_interpreter_if_no_gpu

    interpret = use_interpreter_if_no_gpu()
    gpu = torch.cuda.is_available() and not interpret
    if shapes == "full" and not gpu:
        raise SpecmemInputError("shapes: 'full' (fla's README shapes) needs a CUDA GPU; the CPU interpreter "
                                "would take hours, use 'small'")
    device = "cuda" if gpu else "cpu"
    dtype = torch.bfloat16 if gpu else torch.float32
    if not gpu:
        print("no CUDA GPU: Triton kernels run in the CPU interpreter (TRITON_INTERPRET=1); timings "
              "check that the benchmark runs and are not performance figures")

    mode = "gpu" if gpu else "cpu-interpreter"
    rows = [_run(op, s, gpu, device, dtype, repeats) for s in bench_shapes for op in ops]
    seed_ops = [o for o in ("vla_torch_loop", "vla_fused", "vla_chunk", "vla_chunk_tf32", "vla_chunk_dplr")
                if o in ops and crossover]
    seed_rows = [_run(op, SEED_14X[shapes], gpu, device, dtype, repeats) for op in seed_ops]
    for r in rows + seed_rows:
        r["mode"] = mode
    comparisons = [{"shape": SEED_14X[shapes].name, "what": "fused VLA speed-up over the PyTorch loop (seed: 14x at T=4096)",
                    "speedup": _ratio(seed_rows, SEED_14X[shapes].name, "vla_fused", "vla_torch_loop")}]
    for s in bench_shapes:
        for label, num, den in [
            ("fused VLA speed-up over the PyTorch loop", "vla_fused", "vla_torch_loop"),
            ("chunked VLA speed-up over fused VLA", "vla_chunk", "vla_fused"),
            ("chunked VLA (TF32 dots) speed-up over fused VLA", "vla_chunk_tf32", "vla_fused"),
            ("fused VLA speed-up over fla fused_recurrent_delta_rule", "vla_fused", "fla_fused_recurrent_delta_rule"),
            ("chunked VLA speed-up over fla chunk_delta_rule", "vla_chunk", "fla_chunk_delta_rule"),
            ("chunked VLA (TF32 dots) speed-up over fla chunk_gdn", "vla_chunk_tf32", "fla_chunk_gdn"),
            ("chunked VLA (fla DPLR state) speed-up over fla chunk_gdn", "vla_chunk_dplr", "fla_chunk_gdn"),
            ("VLA fwd+bwd (fla DPLR) speed-up over fla chunk_gdn fwd+bwd", "vla_chunk_dplr_fwdbwd", "fla_chunk_gdn_fwdbwd"),
            ("chunked A pass speed-up over the sequential A pass", "vla_a_pass_chunked", "vla_a_pass_sequential"),
            ("fused VLA speed-up over fla chunk_gdn", "vla_fused", "fla_chunk_gdn"),
        ]:
            comparisons.append({"shape": s.name, "what": label, "speedup": _ratio(rows, s.name, num, den)})

    cx = CROSSOVER[shapes]
    cross_rows = []
    vla_ops = [o for o in ("vla_fused", "vla_chunk", "vla_chunk_tf32", "vla_chunk_dplr") if o in ops]
    cross_ops = vla_ops + ["sdpa_causal"] if vla_ops and "sdpa_causal" in ops and crossover else []
    for T in cx["Ts"] if cross_ops else []:
        s = Shape(cx["B"], T, cx["H"], cx["D"])
        cross_rows += [_run(op, s, gpu, device, dtype, repeats) for op in cross_ops]
    for r in cross_rows:
        r["mode"] = mode
    crossover = {}
    for op in cross_ops[:-1]:
        crossover[op] = next((T for T in cx["Ts"] if (r := _ratio(cross_rows, Shape(cx["B"], T, cx["H"], cx["D"]).name,
                                                                  op, "sdpa_causal")) is not None and r > 1), None)

    _print_table(rows)
    print(f"\nseed's 14x claim, {SEED_14X[shapes].name}:")
    _print_table(seed_rows)
    print(f"\ncrossover vs causal SDPA at B{cx['B']} H{cx['H']} D{cx['D']}, T in {cx['Ts']}:")
    _print_table(cross_rows)
    if gpu:
        print()
        for c in comparisons:
            if c["speedup"] is not None:
                print(f"{c['shape']:<22}{c['what']:<66}{c['speedup']:>8.2f}x")
        for op, T in crossover.items():
            print(f"  {op}: {'faster than causal SDPA from T = ' + str(T) if T else 'not faster than SDPA at any T swept'}")
    else:
        # Interpreter timings measure the interpreter: ratios of them would read as results.
        comparisons, crossover = [], {}
        print("\n(interpreter mode: no speed-up ratios or crossover are computed from these timings)")

    result = {
        "mode": mode,
        "device": torch.cuda.get_device_name() if gpu else platform.processor() or platform.machine(),
        "dtype": str(dtype).replace("torch.", ""),
        "versions": _versions(),
        "shapes": shapes,
        "results": rows,
        "seed_14x": {"shape": SEED_14X[shapes].name, "rows": seed_rows},
        "comparisons": comparisons,
        "crossover": {"B": cx["B"], "H": cx["H"], "D": cx["D"], "Ts": cx["Ts"], "rows": cross_rows,
                      "first_T_faster_than_sdpa": crossover},
    }
    if out_json:
        with open(out_json, "w") as f:
            json.dump(result, f, indent=2, default=str)
        print(f"\nwrote {out_json}")
    return result


def _versions() -> dict:
    import triton
    out = {"torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}
    try:
        from importlib.metadata import version
        out["fla-core"] = version("fla-core")
    except Exception:
        out["fla-core"] = None
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m specmem.bench_gpu", description=__doc__.split("\n\n")[0].replace("\n", " "))
    p.add_argument("--shapes", choices=sorted(SHAPES), default="small")
    p.add_argument("--out", default="bench_gpu.json", help="JSON output path")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per op on the CPU")
    p.add_argument("--ops", nargs="+", choices=sorted(OPS), help="subset of ops (default all)")
    p.add_argument("--shape", nargs="+", dest="shape_names", help="subset of the set's shapes, e.g. B1-T8192-H96-D128")
    p.add_argument("--no-crossover", action="store_true", help="skip the seed-claim and SDPA-crossover sweeps")
    a = p.parse_args(argv)
    try:
        bench_gpu(a.shapes, a.out, a.repeats, a.ops, a.shape_names, not a.no_crossover)
    except SpecmemInputError as exc:
        p.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
