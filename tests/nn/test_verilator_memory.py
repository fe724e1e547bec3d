"""The layers' Verilator memory for Gated DeltaNet: the Verilated gated core, fed the layer's decay ``g``,
equals the fixed-point golden model (``run_fixed`` on the layer's own projections) bit for bit.

Expected values come from ``run_fixed`` on vectors computed here from the layer's projection weights, not
from the layer's memory path; a run with ``g`` forced to 1 must differ, so a layer or backend that dropped
the decay fails. One build, d = 16, k = 4 (cached in ``build/sim/`` across runs).
"""

import shutil
import warnings

import numpy as np
import pytest
import torch

from specmem.golden.fixed import run_fixed
from specmem.nn import make_layer
from specmem.nn.layers import VERILATOR_ALGO, verilator_memory_error

_MISSING = [tool for tool in ("perl", "make", "c++") if shutil.which(tool) is None]
HIDDEN, HEADS, LANES, PRESET = 32, 2, 4, "legacy-int8"  # d_h = 16


def _fixed(inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saturation counts are compared, not warned about
        return run_fixed("gated-deltanet", inputs, PRESET)


@pytest.mark.skipif(bool(_MISSING), reason=f"Verilator toolchain incomplete: {_MISSING}")
def test_gated_layer_verilator_memory_is_its_fixed_memory_bit_for_bit():
    torch.manual_seed(3)
    layer = make_layer("gated_deltanet", HIDDEN, HEADS).double()
    torch.nn.init.zeros_(layer.g_proj.bias)  # g = sigmoid(W_g x) spread around 1/2: a decay no output can hide
    layer.keep_memory_io = True
    layer.verilator_options = {"lanes": LANES}
    x = torch.randn(2, 7, HIDDEN, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():  # the memory's inputs, computed here from the projection weights
        B, T, _ = x.shape
        vec = {n: getattr(layer, f"{n}_proj")(x).view(B, T, HEADS, -1).transpose(1, 2).numpy()
               for n in ("q", "k", "v")}
        vec.update({n: torch.sigmoid(getattr(layer, f"{n}_proj")(x)).transpose(1, 2).numpy() for n in ("beta", "g")})
        ref = _fixed(vec)
        ref_o = layer.o_proj(torch.from_numpy(ref["o"]).transpose(1, 2).reshape(B, T, -1))

        layer.memory = "verilator:" + PRESET
        o_v, _ = layer(x)
        hw = layer.last_memory_io["result"]
        layer.memory = PRESET
        o_f, _ = layer(x)

    for name in ("o", "o_raw", "s_raw", "s", "s_norm"):
        np.testing.assert_array_equal(hw[name], ref[name], err_msg=name)
    assert {n: int(v) for n, v in hw.items() if n.startswith("sat_")} == \
        {n: int(v) for n, v in ref.items() if n.startswith("sat_")}
    np.testing.assert_array_equal(o_v.numpy(), ref_o.numpy())
    np.testing.assert_array_equal(o_f.numpy(), o_v.numpy())  # the layer's fixed-point path agrees
    # the decay is in the result: without it (g = 1) the same stream gives other outputs and states
    assert vec["g"].max() < 0.9
    no_decay = _fixed({**vec, "g": np.ones_like(vec["g"])})
    assert not np.array_equal(no_decay["o_raw"], hw["o_raw"])
    assert not np.array_equal(no_decay["s_raw"], hw["s_raw"])


def test_verilator_memory_covers_every_recurrent_rule():
    assert VERILATOR_ALGO["gated_deltanet"] == "gated-deltanet"
    assert verilator_memory_error("gated_deltanet", "verilator:legacy-int8") is None
    assert verilator_memory_error("softmax", "verilator:legacy-int8") == (
        "memory: the Verilator backend runs vla, deltanet, gated_deltanet, linear (their RTL cores); softmax has "
        "none there")
    assert verilator_memory_error("gated_deltanet", "verilator:int8").startswith("memory: the RTL implements")
