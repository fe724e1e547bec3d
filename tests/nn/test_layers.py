"""specmem.nn layers: fla-style API, memory backends (golden, fixed point, float32) against direct calls, errors."""

import warnings

import numpy as np
import pytest
import torch

from specmem.golden.common import SpecmemInputError
from specmem.golden.fixed import run_fixed
from specmem.nn import RULES, fixed_formats_for, make_layer

D, H = 16, 2


def _x(T=21, B=2, seed=0):
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _layer(rule, **kw):
    torch.manual_seed(1)
    return make_layer(rule, D, H, **kw).double()


@pytest.mark.parametrize("rule", RULES)
def test_shapes_state_and_gradients(rule):
    """[B, T, D] in and out; split-with-state equals whole; every parameter receives a finite gradient."""
    layer = _layer(rule, **({} if rule == "softmax" else {"chunk_size": 8}))
    x = _x().requires_grad_()
    o, st = layer(x)
    assert o.shape == x.shape and st is None
    o1, st = layer(x[:, :10], output_final_state=True)
    o2, _ = layer(x[:, 10:], initial_state=st)
    np.testing.assert_allclose(torch.cat([o1, o2], 1).detach(), o.detach(), rtol=1e-11, atol=1e-13)
    o.square().sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert p.grad.abs().max() > 0, f"{name}: zero gradient"


@pytest.mark.parametrize("rule", [r for r in RULES if r != "softmax"])
def test_golden_and_float32_memory(rule):
    """The NumPy golden memory step gives the torch one's output (1e-12); float32 stays within float32 rounding."""
    layer = _layer(rule)
    x = _x()
    with torch.no_grad():
        ref, _ = layer(x)
        layer.memory = "golden"
        gold, _ = layer(x)
        layer.memory = "float32"
        f32, _ = layer(x)
    np.testing.assert_allclose(gold, ref, rtol=1e-12, atol=1e-14)
    err = float((f32 - ref).abs().max() / ref.abs().max())
    assert 0 < err < 1e-5, err


def test_softmax_is_causal_attention():
    layer = _layer("softmax")
    x = _x(T=9)
    with torch.no_grad():
        o, _ = layer(x)
        B, T, _ = x.shape
        q, k, v = (p(x).view(B, T, H, D // H).transpose(1, 2) for p in (layer.q_proj, layer.k_proj, layer.v_proj))
        s = q @ k.mT / np.sqrt(D // H) + torch.triu(torch.full((T, T), -np.inf, dtype=x.dtype), 1)
        ref = layer.o_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))
    np.testing.assert_allclose(o, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("rule,algo,fmt", [("vla", "vla", "int8"), ("vla_eq8", "vla", "legacy-int8"),
                                            ("deltanet", "deltanet", "int8"),
                                            ("gated_deltanet", "gated-deltanet", "int18"),
                                            ("gated_deltanet", "gated-deltanet", "legacy-int8"),
                                            ("linear", "linear", "int16")])
def test_fixed_memory_is_run_fixed_on_the_projections(rule, algo, fmt):
    """The fixed-point memory step is bit for bit run_fixed on the layer's per-head vectors."""
    layer = _layer(rule)
    x = _x(T=13)
    with torch.no_grad():
        vec = {n: layer._heads(getattr(layer, f"{n}_proj")(x)).numpy() for n in ("q", "k", "v") + layer.extra_vectors}
        vec.update({n: layer._scalars(n, x).numpy() for n in layer.token_scalars})
        params = {"u_scale": 1.0} if rule == "vla_eq8" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # saturation counts are compared below, not warned about
            r = run_fixed(algo, vec, fmt, params)
        B, Hh, T, d = r["o"].shape
        ref = layer.o_proj(torch.from_numpy(r["o"]).transpose(1, 2).reshape(B, T, Hh * d))
        layer.memory = fmt
        o, _ = layer(x)
    np.testing.assert_array_equal(o.numpy(), ref.numpy())
    assert set(layer.last_saturation) == {k for k in r if k.startswith("sat_")}


def test_fixed_formats_per_rule():
    from specmem.golden.fixed.formats import PRESETS

    assert fixed_formats_for("gated_deltanet") == list(PRESETS)  # the legacy presets: gated_deltanet_fixed
    assert {"int8", "int18", "int16", "wide", "legacy-int8"} <= set(fixed_formats_for("vla"))
    assert fixed_formats_for("softmax") == []


def test_bad_input_errors():
    layer = _layer("vla")
    with pytest.raises(SpecmemInputError, match="^memory"):
        layer.memory = "int4"
    with pytest.raises(SpecmemInputError, match="^memory"):
        _layer("gated_deltanet").memory = "int4"
    with pytest.raises(SpecmemInputError, match="^memory"):
        _layer("softmax").memory = "int8"
    with pytest.raises(SpecmemInputError, match="^x"):
        layer(torch.zeros(2, 5, D + 1, dtype=torch.float64))
    layer.memory = "int8"
    with pytest.raises(SpecmemInputError, match="^memory"):
        layer(_x(), output_final_state=True)
    with pytest.raises(SpecmemInputError, match="^rule"):
        make_layer("mamba", D, H)
    with pytest.raises(SpecmemInputError, match="^num_heads"):
        make_layer("deltanet", D, 3)
