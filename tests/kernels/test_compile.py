"""Every kernel compiles for an NVIDIA GPU (sm_90 cubin), checked without a GPU.

The interpreter runs kernels as numpy code; only the compiler checks loop-carried types,
``tl.dot`` shape rules and register allocation. Runs in a subprocess because the kernel
modules of this session were decorated for the interpreter.
"""

import json
import os
import subprocess
import sys

import pytest
import triton

BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "cuobjdump")),
                    reason="this triton build has no NVIDIA backend tools (ptxas, cuobjdump)")
def test_kernels_compile_for_sm90():
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    res = subprocess.run([sys.executable, "-m", "specmem.kernels.compile_check", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    for r in rows:
        print(r)
    kernels = {r["kernel"] for r in rows}
    assert kernels == {"fused_recurrent_vla_fwd_kernel", "vla_ah_fwd_kernel", "vla_a_chunk_fwd_kernel",
                       "chunk_vla_fwd_kernel", "fused_recurrent_annihilation_fwd_kernel"}
    assert all(r.get("registers", 0) > 0 for r in rows), "a cubin without resource usage"
