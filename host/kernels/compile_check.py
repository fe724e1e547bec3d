"""Compile every kernel ahead of time for an NVIDIA target, no GPU needed, and report registers
and stack (spill) bytes per thread from the cubin.

The CPU interpreter runs kernels as numpy code and misses what only the compiler sees (types
of loop-carried values, ``tl.dot`` shape rules, register pressure). Run in a fresh process:

    python -m specmem.kernels.compile_check [--arch 90] [--json]
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "0"  # before the kernel modules are imported: compiled JITFunctions

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import warnings  # noqa: E402

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from specmem.kernels.annihilation.fused_recurrent import (  # noqa: E402
    annihilation_num_warps,
    fused_recurrent_annihilation_fwd_kernel,
)
from specmem.kernels.utils import block_size  # noqa: E402
from specmem.kernels.vla.chunk import CHUNK_BV, chunk_vla_fwd_kernel, vla_ah_fwd_kernel  # noqa: E402
from specmem.kernels.vla.chunk_a import A_SEGMENT, a_chunk_num_warps, vla_a_chunk_fwd_kernel  # noqa: E402
from specmem.kernels.vla.fused_recurrent import fused_recurrent_vla_fwd_kernel, recurrent_num_warps  # noqa: E402

__all__ = ["compile_all"]


def _cases(d: int):
    """(kernel, pointer/scalar signature, constexprs, num_warps) as the launchers pass them at head size ``d``."""
    bk, pb, p = block_size(d), "*bf16", "*fp32"
    scal = dict(T="i32", lambda0="fp32", eps="fp32", u_scale="fp32", eta="fp32", R="i32", PHASE="i32")
    rank = max(1, d // 4)
    bd, br = block_size(d, 1), block_size(rank, 1)
    return [
        (fused_recurrent_vla_fwd_kernel,
         dict(k=pb, v=pb, q=pb, u=pb, o=pb, s=p, a=p, z=p, s0=p, a0=p, z0=p, s_norm=p, a_norm=p, **scal),
         dict(H=8, K=d, V=d, BK=bk, BV=bk, USE_REFRESH=True, USE_INITIAL_STATE=True, STORE_FINAL_STATE=True),
         recurrent_num_warps(bk)),
        (vla_ah_fwd_kernel, dict(k=pb, u=pb, ah=p, a=p, a0=p, a_norm=p, **scal),
         dict(H=8, K=d, BK=bk, USE_REFRESH=True, USE_INITIAL_STATE=True, STORE_FINAL_STATE=True),
         recurrent_num_warps(bk)),
        *((vla_a_chunk_fwd_kernel, dict(k=pb, u=pb, ah=p, a=p, a0=p, **scal),
           dict(H=8, K=d, BT=A_SEGMENT, BK=bk, USE_REFRESH=True, USE_INITIAL_STATE=True, STORE_FINAL_STATE=True,
                DOT_PRECISION=prec),
           a_chunk_num_warps(bk)) for prec in ("ieee", "tf32x3")),
        *((chunk_vla_fwd_kernel, dict(k=pb, v=pb, q=pb, ah=p, o=pb, s=p, z=p, s0=p, z0=p, T="i32", eps="fp32"),
           dict(H=8, K=d, V=d, BT=16, BK=bk, BV=min(CHUNK_BV, bk), DOT_PRECISION=prec, USE_INITIAL_STATE=True,
                STORE_FINAL_STATE=True), 4) for prec in ("ieee", "tf32")),
        *((fused_recurrent_annihilation_fwd_kernel,
           dict(x=pb, u=p, y=pb, orth="*i8", count="*i32", T="i32", orth_tol="fp32", tie_rtol="fp32"),
           dict(EVICT=evict, H=8, D=d, K=rank, BD=bd, BK=br), annihilation_num_warps(bd, br))
          for evict in (True, False)),
    ]


def _usage(cubin: bytes) -> dict:
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", out)
    return {"registers": int(m[1]), "stack_bytes": int(m[2]), "shared_bytes": int(m[3])} if m else {}


def compile_all(arch: int = 90, dims=(60, 128)) -> list[dict]:
    """Compile each kernel for ``sm_<arch>`` at each head size; one row per compilation."""
    target = GPUTarget("cuda", arch, 32)
    rows = []
    for d in dims:
        for fn, sig, consts, nw in _cases(d):
            src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = triton.compile(src, target=target, options={"num_warps": nw})
            rows.append({"kernel": fn.__name__, "D": d, "num_warps": nw,
                         **{k: v for k, v in consts.items() if k in ("BT", "BK", "BV", "BD", "DOT_PRECISION", "EVICT")},
                         **_usage(compiled.asm["cubin"])})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specmem.kernels.compile_check", description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90, help="compute capability, e.g. 80, 90")
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    a = ap.parse_args(argv)
    rows = compile_all(a.arch)
    if a.json:
        print(json.dumps(rows))
        return 0
    print(f"sm_{a.arch}: registers and stack (spill) bytes per thread")
    for r in rows:
        extra = " ".join(f"{k}={r[k]}" for k in ("BT", "BK", "BV", "BD", "DOT_PRECISION", "EVICT") if k in r)
        print(f"  {r['kernel']:<42} D={r['D']:<4} warps={r['num_warps']:<3} {extra:<40} "
              f"regs={r.get('registers')} stack={r.get('stack_bytes')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
