"""specmem.nn.ops: chunked forms against their sequential references, both against the NumPy golden models, gradcheck.

Tolerances: float64 throughout; chunk vs sequential and torch vs golden agree to 1e-12 relative
(the forms differ only in summation order; measured ~1e-15).
"""

import numpy as np
import pytest
import torch

from specmem.golden.common import SpecmemInputError
from specmem.golden.deltanet import deltanet as g_deltanet, gated_deltanet as g_gated
from specmem.golden.linear_attention import linear_attention as g_linear
from specmem.golden.vla import vla as g_vla
from specmem.nn import ops

RTOL = 1e-12


def assert_close(name, ref, out, rtol=RTOL):
    ref, out = np.asarray(ref, np.float64), np.asarray(out.detach() if isinstance(out, torch.Tensor) else out)
    err = np.sqrt(np.mean((ref - out) ** 2)) / max(np.sqrt(np.mean(ref ** 2)), 1e-300)
    assert err <= rtol, f"{name}: relative RMS error {err:.3e} > {rtol:.0e} (max abs diff {np.abs(ref - out).max():.3e})"


def _inputs(shape=(2, 3, 37, 6), seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k, v, u = (torch.randn(shape, generator=g, dtype=torch.float64) for _ in range(4))
    beta = torch.rand(shape[:-1], generator=g, dtype=torch.float64) * 0.9 + 0.05
    gate = torch.rand(shape[:-1], generator=g, dtype=torch.float64) * 0.6 + 0.4
    return q, k, v, u, beta, gate


@pytest.mark.parametrize("erase,use_beta,use_g,chunk", [
    pytest.param(True, True, True, 8, id="gated-C8"),
    pytest.param(True, True, False, 16, id="deltanet-C16"),
    pytest.param(True, False, False, 5, id="asym-nobeta-C5"),
    pytest.param(False, False, False, 16, id="linear-C16"),
    pytest.param(True, True, True, 64, id="gated-one-chunk"),
])
def test_chunk_delta_rule_matches_recurrent(erase, use_beta, use_g, chunk):
    q, k, v, u, beta, gate = _inputs()
    kr = torch.nn.functional.normalize(k, dim=-1) if erase else None
    kw = torch.nn.functional.normalize(u, dim=-1)  # a different write key: the asymmetric rule
    b, g = (beta if use_beta else None), (gate if use_g else None)
    s0 = torch.randn(2, 3, 6, 6, dtype=torch.float64) * 0.3
    o_r, s_r = ops.recurrent_delta_rule(q, kr, kw, v, b, g, s0)
    o_c, s_c = ops.chunk_delta_rule(q, kr, kw, v, b, g, s0, chunk_size=chunk)
    assert_close("o", o_r, o_c)
    assert_close("s", s_r, s_c)


@pytest.mark.parametrize("refresh,chunk,t0", [(0, 16, 0), (3, 16, 0), (20, 7, 0), (20, 64, 0), (7, 5, 12)])
def test_chunk_vla_a_matches_recurrent(refresh, chunk, t0):
    _, k, _, u, _, _ = _inputs()
    kh = ops.safe_normalize(ops.elu1(k), 1e-4)
    un = ops.safe_normalize(u, 1e-4) / np.sqrt(6)
    A0 = torch.eye(6, dtype=torch.float64).expand(2, 3, 6, 6) * 10
    a_r, A_r = ops.recurrent_vla_a(kh, un, A0, t0, refresh_period=refresh, eta=1e-2)
    a_c, A_c = ops.chunk_vla_a(kh, un, A0, t0, refresh_period=refresh, eta=1e-2, chunk_size=chunk)
    assert_close("alpha", a_r, a_c)
    assert_close("A", A_r, A_c)


@pytest.mark.parametrize("mode", ops.MODES)
@pytest.mark.parametrize("u_scale,refresh", [(None, 20), (1.0, 7), (None, 0)])
def test_vla_matches_golden(mode, u_scale, refresh):
    q, k, v, u, _, _ = _inputs()
    o, st = ops.vla(q, k, v, u, u_scale=u_scale, refresh_period=refresh, mode=mode, chunk_size=16)
    ref = g_vla(k.numpy(), v.numpy(), q.numpy(), u.numpy(), u_scale=u_scale, refresh_period=refresh)
    assert_close("o", ref["o"], o)
    assert_close("s", ref["s"], st["s"])
    assert_close("a", ref["a"], st["a"])


@pytest.mark.parametrize("mode", ops.MODES)
def test_baselines_match_golden(mode):
    q, k, v, _, beta, gate = _inputs()
    o, s = ops.deltanet(q, k, v, beta, mode=mode, chunk_size=16)
    ref = g_deltanet(k.numpy(), v.numpy(), q.numpy(), beta.numpy())
    assert_close("deltanet o", ref["o"], o)
    assert_close("deltanet s", ref["s"], s)
    o, s = ops.gated_deltanet(q, k, v, beta, gate, mode=mode, chunk_size=16)
    ref = g_gated(k.numpy(), v.numpy(), q.numpy(), beta.numpy(), gate.numpy())
    assert_close("gated o", ref["o"], o)
    assert_close("gated s", ref["s"], s)
    o, st = ops.linear_attention(q, k, v, mode=mode, chunk_size=16)
    ref = g_linear(k.numpy(), v.numpy(), q.numpy())
    assert_close("linear o", ref["o"], o)
    assert_close("linear s", ref["s"], st["s"])


@pytest.mark.parametrize("mode", ops.MODES)
def test_initial_state_continues_a_sequence(mode):
    """Two calls (the second from the first's final state) equal one call over the whole sequence."""
    q, k, v, u, beta, gate = _inputs()
    cut = 23  # not a multiple of the refresh period (7) or the chunk (16)
    for fn, extra in [(ops.vla, (u,)), (ops.linear_attention, ()), (ops.gated_deltanet, (beta, gate))]:
        kw = {"refresh_period": 7} if fn is ops.vla else {}
        full, _ = fn(q, k, v, *extra, mode=mode, chunk_size=16, **kw)
        head = [x[..., :cut, :] if x.ndim == 4 else x[..., :cut] for x in (q, k, v) + extra]
        tail = [x[..., cut:, :] if x.ndim == 4 else x[..., cut:] for x in (q, k, v) + extra]
        o1, st = fn(*head, mode=mode, chunk_size=16, **kw)
        o2, _ = fn(*tail, initial_state=st, mode=mode, chunk_size=16, **kw)
        assert_close(fn.__name__, full, torch.cat([o1, o2], dim=-2))


def test_gradcheck_chunk_delta_rule():
    q, k, v, u, beta, gate = (x[:1, :1, :7, :3].clone().requires_grad_() if x.ndim == 4 else
                              x[:1, :1, :7].clone().requires_grad_() for x in _inputs())

    def f(q, k, v, u, beta, gate):
        kr, kw = ops.safe_normalize(k, 1e-6), ops.safe_normalize(u, 1e-6)
        return ops.chunk_delta_rule(q, kr, kw, v, beta, gate, chunk_size=3)

    assert torch.autograd.gradcheck(f, (q, k, v, u, beta, gate))


@pytest.mark.parametrize("u_scale", [None, 1.0])
def test_gradcheck_vla_chunk(u_scale):
    q, k, v, u = (x[:1, :1, :8, :3].clone().requires_grad_() for x in _inputs()[:4])

    def f(q, k, v, u):
        o, st = ops.vla(q, k, v, u, refresh_period=3, eta=0.05, u_scale=u_scale, mode="chunk", chunk_size=4)
        return o, st["a"]

    assert torch.autograd.gradcheck(f, (q, k, v, u))


def test_bad_inputs_raise_named_errors():
    q, k, v, u, beta, _ = _inputs()
    with pytest.raises(SpecmemInputError, match="^mode"):
        ops.vla(q, k, v, u, mode="fused")
    with pytest.raises(SpecmemInputError, match="^chunk_size"):
        ops.deltanet(q, k, v, beta, chunk_size=0)
    with pytest.raises(SpecmemInputError, match="^u:"):
        ops.vla(q, k, v, u[..., :-1])
    with pytest.raises(SpecmemInputError, match="^beta"):
        ops.deltanet(q, k, v, beta[..., :-1])
    with pytest.raises(SpecmemInputError, match="^initial_state"):
        ops.vla(q, k, v, u, initial_state={"s": 0})


@pytest.mark.parametrize("rule", ["deltanet", "gated_deltanet", "linear"])
def test_gradcheck_rules_chunk(rule):
    q, k, v, _, beta, gate = (x[:1, :1, :7, :3].clone().requires_grad_() if x.ndim == 4 else
                              x[:1, :1, :7].clone().requires_grad_() for x in _inputs())
    fn = {"deltanet": lambda q, k, v: ops.deltanet(q, k, v, beta, chunk_size=3)[0],
          "gated_deltanet": lambda q, k, v: ops.gated_deltanet(q, k, v, beta, gate, chunk_size=3)[0],
          "linear": lambda q, k, v: ops.linear_attention(q, k, v, chunk_size=3)[0]}[rule]
    assert torch.autograd.gradcheck(fn, (q, k, v))
