"""Resuming a VLA stream: a call with ``initial_state`` = the previous call's ``final_state``
continues it exactly (S, A, the normaliser's running sum and the refresh phase), for every kernel
path; split points are chosen off the refresh period and off the chunk size."""

import pytest
import torch

from specmem.golden.common import SpecmemInputError
from specmem.kernels.utils import assert_close
from specmem.kernels.vla import chunk_vla, fused_recurrent_vla, vla_recurrence

from .test_vla_kernels import FP32, make_inputs, to_kernel

CASES = [   # (path, its options, split sizes before the last piece, refresh period)
    pytest.param(fused_recurrent_vla, {}, (7, 30), 5, id="fused-R5"),
    pytest.param(fused_recurrent_vla, {}, (33,), 0, id="fused-norefresh"),
    pytest.param(chunk_vla, dict(chunk_size=16), (7, 30), 5, id="chunk-R5"),
    pytest.param(chunk_vla, dict(chunk_size=16), (1, 16, 13), 3, id="chunk-R3-three-splits"),
    pytest.param(chunk_vla, dict(chunk_size=16), (20, 1), 20, id="chunk-R20-split-at-refresh"),
    pytest.param(chunk_vla, dict(chunk_size=16, a_pass="sequential"), (7, 30), 5, id="chunk-seqA-R5"),
]


@pytest.mark.parametrize("fn, kw, splits, R", CASES)
def test_split_stream_equals_whole(fn, kw, splits, R):
    T = sum(splits) + 11
    k, v, q, u = make_inputs(2, T, 2, 12, 10, seed=21)
    ref = vla_recurrence(k, v, q, u, refresh_period=R, eta=0.02)
    kk, vv, qq, uu = to_kernel(k, v, q, u)
    state, outs, t = None, [], 0
    for n in list(splits) + [T - sum(splits)]:
        sl = slice(t, t + n)
        r = fn(kk[:, sl], vv[:, sl], qq[:, sl], uu[:, sl], refresh_period=R, eta=0.02, initial_state=state, **kw)
        outs.append(r["o"])
        state = r["final_state"]
        t += n
    assert state["t"] == T
    assert_close("o", ref["o"], torch.cat(outs, dim=1), FP32)
    assert_close("s", ref["s"], state["s"], FP32)
    assert_close("a", ref["a"], state["a"], FP32)
    zk = torch.where(k > 0, k + 1, torch.exp(torch.clamp(k, max=0))).sum(1)
    assert_close("zk", zk, state["zk"], FP32)


def test_bad_initial_state():
    k, v, q, u = to_kernel(*make_inputs(1, 6, 1, 8))
    good = fused_recurrent_vla(k, v, q, u)["final_state"]
    bad = [
        ({"s": good["s"]}, "expected a dict with keys"),
        ({**good, "t": -1}, "t must be an integer >= 0"),
        ({**good, "a": good["a"][..., :4]}, "a must be a float32 tensor of shape"),
        ({**good, "zk": good["zk"].double()}, "zk must be a float32 tensor"),
    ]
    for fn in (fused_recurrent_vla, chunk_vla):
        for st, msg in bad:
            with pytest.raises(SpecmemInputError, match=f"^initial_state: .*{msg}"):
                fn(k, v, q, u, initial_state=st)
    assert fused_recurrent_vla(k, v, q, u, output_final_state=False)["final_state"] is None
