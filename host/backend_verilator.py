"""The ``verilator`` backend: run an input through the Verilated RTL of the annihilation memory, of
variational linear attention (VLA), of linear attention, of DeltaNet or of Gated DeltaNet.

The RTL implements the legacy fixed-binary-point formats (``RTL_PRESETS``; default
``legacy-int8``); the annihilation also ``int18``, ``int16`` and ``int8`` (its core v2: the
co-accumulated Gram, orthogonal inputs evicted, those presets' defaults in the fixed model);
linear attention, DeltaNet and Gated DeltaNet also the scaled ``int8``
(``rtl/linear_attention_scaled.py``, ``rtl/deltanet_scaled.py``, below). Any other format is an
input error.

``verilator_backend("annihilation", {"x": x}, {"k": 4}, {"format": "legacy-int8"})`` returns the same
names, shapes and dtypes as the ``fixed`` backend (:func:`specmem.golden.fixed.run_fixed`) with the
same format, bit for bit when the hardware is right:

* ``y_raw`` (the output stream), ``orth`` (per token, from the orthogonal-input counter), ``count``
  (``status_count``) and ``u_raw`` (the state RAM, read back through the simulator: the design has
  no port for it) come from the simulated hardware; ``y``, ``u`` and ``omega`` are derived from them
  exactly as the golden model derives its own;
* the hardware counts saturations in one counter, so the per-tensor ``sat_<tensor>`` counts and
  ``formats`` come from the golden model, after checking that their sum equals the hardware's
  counter (``sat_x`` is the host-side quantisation, the same code in both backends; core v2
  counts ``u``, ``ahat``, ``q``, ``t`` and ``y`` only, and that sum is the one checked).

VLA (``verilator_backend("vla", {"k": .., "v": .., "q": .., "u": ..}, {"refresh_period": 3}, ...)``;
the parameters are generics of the generated design, one build per parameter set):

* ``o_raw`` and ``o_frac`` (the output stream and its ``tuser``), ``a_raw`` and ``s_raw`` (the
  state RAMs, read back through the simulator) come from the simulated hardware; ``o``, ``a`` and
  ``s`` are derived from them exactly as the golden model derives its own;
* ``s_norm`` and ``a_norm`` (per token: the Frobenius norms of the states after every token) are
  not observable (the hardware exposes the final state only), so they come from the golden model,
  after checking that their last entries equal the norms of the hardware's final ``S`` and ``A``;
  ``sat_<tensor>`` and ``formats`` come from the golden model as for the annihilation (sum checked
  against ``status_saturations``).

Linear attention, DeltaNet and Gated DeltaNet (``verilator_backend("linear", {"k": .., "v": .., "q": ..},
{}, ...)``, ``"deltanet"`` with ``beta`` as well, ``"gated-deltanet"`` with ``beta`` and the decay ``g``;
parameters ``eps``, ``in_range``, generics of the design):
``o_raw``, ``s_raw`` and linear attention's ``z_raw`` (the ``z`` memory) come from the simulated
hardware, ``o``, ``s``, ``z`` are derived from them as the golden model derives its own; ``s_norm``
comes from the golden model after checking its last entry against the hardware's final ``S``;
``sat_<tensor>`` and ``formats`` as for VLA. The option ``lanes`` is the design's ``k`` as for VLA.

DeltaNet and Gated DeltaNet at ``format="int8"`` run on the scaled core: the host quantises each
stream as the model does (block vectors; ``g`` as the scalar unit's floats), the testbench's
``streams`` case reads the state out with a flush; ``o_raw``, ``o_frac``, ``s_raw`` and ``s_frac``
come from the hardware (gated: ``s_frac`` is the core's row exponent, kept in ``S``'s frame, minus
its ``gamma`` exponent counter; ``s`` carries its ``gamma`` mantissa), ``o`` and ``s`` are derived
from them; ``s_norm``, ``sat_s`` and ``formats`` come from the golden model, the saturation count
checked against the core's. Every raw array must equal the model's, or this is an error.

Every stream (each leading batch index) runs after a reset in one simulator process, at full rate;
the testbench's scoreboard compares every output against the model as it runs, and a hardware
result that differs from the model is an error here (a back-end that silently returned wrong
numbers would be worse than none).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from specmem.golden.common import SpecmemInputError
from specmem.rtl.presets import check_rtl_preset, scaled_core

__all__ = ["verilator_backend", "VerilatorBackendError"]


class VerilatorBackendError(RuntimeError):
    """The simulated hardware disagreed with the fixed-point model, or the simulation failed."""


def _options(options: dict, algo: str = "") -> tuple[str, dict]:
    opts = dict(options)
    preset = opts.pop("format", None) or "legacy-int8"
    if algo == "annihilation":  # legacy-* -> core v1, int18/int16/int8 -> core v2
        from specmem.rtl.generate import annihilation_core_for

        try:
            annihilation_core_for(preset)
        except ValueError as exc:
            raise SpecmemInputError(str(exc).replace("preset:", "format:", 1)) from None
    elif scaled_core(algo, preset):  # the scaled cores
        pass
    else:  # the other RTL is bit-exact with the legacy fixed-binary-point formats only
        check_rtl_preset(preset, SpecmemInputError, "format")
    sim = {}
    if "lanes" in opts:  # VLA, linear, deltanet: the design's lane count k (the result does not depend on it)
        sim["lanes"] = opts.pop("lanes")
    for name in ("idle", "stall"):
        if name in opts:
            v = float(opts.pop(name))
            if not 0.0 <= v < 1.0:
                raise SpecmemInputError(f"{name}: must be in [0, 1), got {v}")
            sim[name] = v
    if opts:
        raise SpecmemInputError(f"backend: unknown option(s) for verilator: {', '.join(opts)}")
    return preset, sim


def verilator_backend(algo: str, inputs: dict, params: dict, options: dict) -> dict:
    """Run ``inputs`` through the simulated design; see the module docstring for the outputs."""
    from specmem.golden.fixed import run_fixed

    if algo not in ("annihilation", "vla", "linear", "deltanet", "gated-deltanet"):
        raise SpecmemInputError(f"algo: the verilator backend implements annihilation, vla, linear, deltanet and "
                                f"gated-deltanet, got {algo!r}")
    preset, sim_opts = _options(options, algo)
    lanes = sim_opts.pop("lanes", None)
    if scaled_core(algo, preset):
        return _scaled(algo, inputs, params, preset, sim_opts, lanes)
    if algo == "vla":
        return _vla(inputs, params, preset, sim_opts, lanes)
    if algo in ("linear", "deltanet", "gated-deltanet"):
        return _baseline(algo, inputs, params, preset, sim_opts, lanes)
    if lanes is not None:
        raise SpecmemInputError("lanes: an option of vla, linear, deltanet and gated-deltanet (the annihilation's "
                                "lane count is its parameter k)")
    from specmem.rtl.generate import annihilation_core_for

    v2 = annihilation_core_for(preset) == "v2"
    policy, gram = ("evict", "coaccumulate") if v2 else ("skip", "recompute")
    if params.get("orth_policy", policy) != policy:
        raise SpecmemInputError(f"orth_policy: the annihilation RTL at {preset} (core {'v2' if v2 else 'v1'}) "
                                f"implements {policy!r}; got {params['orth_policy']!r}"
                                + ("" if v2 else " (evict: core v2, --format int18, int16 or int8)"))
    if params.get("gram", gram) != gram:
        raise SpecmemInputError(f"gram: the annihilation RTL at {preset} (core {'v2' if v2 else 'v1'}) implements "
                                f"{gram!r}; got {params['gram']!r}")
    if v2 and params.get("in_range") is not None:
        raise SpecmemInputError(f"in_range: the annihilation core v2 ({preset}) takes its preset's input range")
    # the fixed-point model validates inputs and parameters exactly as --backend fixed does
    ref = run_fixed(algo, inputs, preset, params)
    x = np.asarray(inputs["x"], dtype=np.float64)
    k = int(params["k"])
    in_range = params.get("in_range")
    d = x.shape[-1]
    batch = x.shape[:-2]
    T = x.shape[-2]
    from specmem.golden.fixed.formats import formats_for

    fmt = formats_for("annihilation", preset, d, {"k": k, "in_range": in_range})
    X, _ = fmt["x"].quantize(x)
    X = np.asarray(X, dtype=np.int64).reshape((-1, T, d))
    B = X.shape[0]

    if T == 0 or B == 0:  # nothing reaches the hardware: its state stays zero, as the model's does
        return ref

    from specmem.sim.suite import TOP_TB

    design = _design("top", d, k, preset, None if in_range is None else float(in_range))
    hw, run = _simulate_streams(design, TOP_TB, X, sim_opts)
    y_raw = np.stack([hw[f"y{i}"] for i in range(B)])
    orth = np.stack([hw[f"orth{i}"] for i in range(B)])
    u_raw = np.stack([hw[f"u{i}"] for i in range(B)])
    status = np.stack([hw[f"status{i}"] for i in range(B)])  # tokens, saturations, orth_count, orth_flag, count, framing
    if y_raw.shape != (B, T, d) or orth.shape != (B, T):
        raise VerilatorBackendError(f"verilator: got outputs {y_raw.shape} and flags {orth.shape}, expected "
                                    f"{(B, T, d)} and {(B, T)} ({run.log})")
    if v2:  # core v2 counts the saturations of its manifest's status_saturation_tensors
        from specmem.sim.model import V2_SAT_TENSORS

        sat_model = sum(int(ref[f"sat_{n}"]) for n in V2_SAT_TENSORS)
    else:
        sat_model = sum(int(v) for n, v in ref.items() if n.startswith("sat_") and n != "sat_x")
    sat_hw = int(status[:, 1].sum())
    if not run.passed or sat_hw != sat_model:
        rec = run.record.get("streams", {})
        raise VerilatorBackendError(
            f"verilator: the hardware disagrees with the fixed-point model (saturations {sat_hw} vs {sat_model}; "
            f"{'; '.join(rec.get('errors', [])[:3]) or run.failures}); log {run.log}")
    u_f = fmt["u"].to_float(u_raw)
    out = {
        "omega": (u_f @ np.swapaxes(u_f, -1, -2)).reshape(batch + (d, d)),
        "y": fmt["y"].to_float(y_raw).reshape(batch + (T, d)),
        "u": u_f.reshape(batch + (d, k)),
        "orth": orth.reshape(batch + (T,)),
        "count": status[:, 4].astype(np.int64).reshape(batch),
        "u_raw": u_raw.reshape(batch + (d, k)),
        "y_raw": y_raw.reshape(batch + (T, d)),
    }
    for name, v in ref.items():
        if name.startswith("sat_") or name == "formats":
            out[name] = v
    return {name: out[name] for name in ref}  # the fixed backend's order


def _design(*args, **kwargs):
    from specmem.sim.build import Design

    try:
        return Design(*args, **kwargs)
    except ValueError as exc:
        raise SpecmemInputError(f"k: the RTL cannot be built for d={args[1]}, k={args[2]}: {exc}") from None


def _simulate_streams(design, tb: str, X: np.ndarray, sim_opts: dict) -> tuple[dict, object]:
    """Run the raw streams ``X`` ``[B, T, ...]`` through ``tb``'s ``streams`` test on ``design``;
    returns the testbench's outputs (``.npz`` contents) and the run."""
    return _simulate_raw(design, tb, {f"s{i}": X[i] for i in range(X.shape[0])}, sim_opts)


def _vla(inputs: dict, params: dict, preset: str, sim_opts: dict, lanes=None) -> dict:
    from specmem.golden.fixed import run_fixed
    from specmem.sim.model import VLA_TENSORS, VLAModel
    from specmem.sim.suite import RULE_TB

    ref = run_fixed("vla", inputs, preset, params)  # validates inputs and parameters as --backend fixed does
    x = {n: np.asarray(inputs[n], dtype=np.float64) for n in VLA_TENSORS}
    batch, T, d = x["k"].shape[:-2], x["k"].shape[-2], x["k"].shape[-1]
    if any(v.shape != x["k"].shape for v in x.values()):  # run_fixed accepts broadcasting shapes
        shape = np.broadcast_shapes(*(v.shape for v in x.values()))
        x = {n: np.broadcast_to(v, shape) for n, v in x.items()}
        batch = shape[:-2]
    p = dict(params)
    in_range = p.pop("in_range", None)
    k = _lanes(d) if lanes is None else lanes
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or d % k:
        raise SpecmemInputError(f"lanes: must be an integer >= 1 dividing d ({d}), got {k!r}")
    k = int(k)
    model = VLAModel(d, k, preset, dict(params))
    X = model.quantize({n: v.reshape((-1, T, d)) for n, v in x.items()})
    B = X.shape[0]
    design = _design("vla", d, k, preset, None if in_range is None else float(in_range), params=p)
    hw, run = _simulate_streams(design, RULE_TB, X, sim_opts)
    o_raw = np.stack([hw[f"o{i}"] for i in range(B)])
    o_frac = np.stack([hw[f"o_frac{i}"] for i in range(B)])
    a_raw = np.stack([hw[f"a{i}"] for i in range(B)])
    s_raw = np.stack([hw[f"s{i}"] for i in range(B)])
    status = np.stack([hw[f"status{i}"] for i in range(B)])  # tokens, saturations, refreshes, framing
    if o_raw.shape != (B, T, d) or o_frac.shape != (B, T):
        raise VerilatorBackendError(f"verilator: got outputs {o_raw.shape} and exponents {o_frac.shape}, expected "
                                    f"{(B, T, d)} and {(B, T)} ({run.log})")
    fmt = model.fmt
    sat_model = sum(int(v) for n, v in ref.items() if n.startswith("sat_") and n[4:] not in VLA_TENSORS)
    sat_hw = int(status[:, 1].sum()) - (B - 1) * model.const_saturations  # each stream counts the constants
    a_f, s_f = fmt["a"].to_float(a_raw), fmt["s"].to_float(s_raw)
    a_norm_hw = np.sqrt(np.einsum("bij,bij->b", a_f, a_f))
    s_norm_hw = np.sqrt(np.einsum("bij,bij->b", s_f, s_f))
    norms_ok = (np.array_equal(a_norm_hw, np.asarray(ref["a_norm"]).reshape(B, T)[:, -1])
                and np.array_equal(s_norm_hw, np.asarray(ref["s_norm"]).reshape(B, T)[:, -1]))
    if not run.passed or sat_hw != sat_model or not norms_ok:
        rec = run.record.get("streams", {})
        raise VerilatorBackendError(
            f"verilator: the hardware disagrees with the fixed-point model (saturations {sat_hw} vs {sat_model}; "
            f"final-state norms equal: {norms_ok}; {'; '.join(rec.get('errors', [])[:3]) or run.failures}); "
            f"log {run.log}")
    out = {
        "o": np.ldexp(o_raw.astype(np.float64), -o_frac[..., None]).reshape(batch + (T, d)),
        "s": s_f.reshape(batch + (d, d)),
        "a": a_f.reshape(batch + (d, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "o_frac": o_frac.astype(np.int64).reshape(batch + (T,)),
        "s_raw": s_raw.reshape(batch + (d, d)),
        "a_raw": a_raw.reshape(batch + (d, d)),
    }
    for name, v in ref.items():
        if name in ("s_norm", "a_norm") or name.startswith("sat_") or name == "formats":
            out[name] = v
    return {name: out[name] for name in ref}  # the fixed backend's order


def _baseline(algo: str, inputs: dict, params: dict, preset: str, sim_opts: dict, lanes=None) -> dict:
    from specmem.golden.fixed import run_fixed
    from specmem.sim.model import BaselineModel
    from specmem.sim.suite import RULE_TB

    ref = run_fixed(algo, inputs, preset, params)  # validates inputs and parameters as --backend fixed does
    names = ("k", "v", "q")
    x = {n: np.asarray(inputs[n], dtype=np.float64) for n in names}
    shape = np.broadcast_shapes(*(v.shape for v in x.values()))
    x = {n: np.broadcast_to(v, shape) for n, v in x.items()}
    batch, T, d = shape[:-2], shape[-2], shape[-1]
    for name in ("beta", "g"):  # the delta rules' scalars: scalar, per-token or per-batch, as the model takes them
        if name in inputs and algo != "linear":
            x[name] = np.broadcast_to(np.asarray(inputs[name], dtype=np.float64), batch + (T,))
    p = dict(params)
    in_range = p.pop("in_range", None)
    k = _lanes(d) if lanes is None else lanes
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or d % k:
        raise SpecmemInputError(f"lanes: must be an integer >= 1 dividing d ({d}), got {k!r}")
    k = int(k)
    if T == 0 or int(np.prod(batch, dtype=np.int64)) == 0:
        return ref  # nothing reaches the hardware: its state stays zero, as the model's does
    model = BaselineModel(algo, d, k, preset, dict(params))
    X = model.quantize({n: v.reshape((-1, T) + v.shape[len(batch) + 1:]) for n, v in x.items()})
    B = X.shape[0]
    design = _design(algo, d, k, preset, None if in_range is None else float(in_range), params=p)
    hw, run = _simulate_streams(design, RULE_TB, X, sim_opts)
    o_raw = np.stack([hw[f"o{i}"] for i in range(B)])
    s_raw = np.stack([hw[f"s{i}"] for i in range(B)])
    status = np.stack([hw[f"status{i}"] for i in range(B)])  # tokens, saturations, framing
    if o_raw.shape != (B, T, d):
        raise VerilatorBackendError(f"verilator: got outputs {o_raw.shape}, expected {(B, T, d)} ({run.log})")
    fmt = model.fmt
    sat_model = sum(int(v) for n, v in ref.items() if n.startswith("sat_") and n[4:] not in model.tensors)
    sat_hw = int(status[:, 1].sum())
    s_f = fmt["s"].to_float(s_raw)
    s_norm_hw = np.sqrt(np.einsum("bij,bij->b", s_f, s_f))
    norms_ok = np.array_equal(s_norm_hw, np.asarray(ref["s_norm"]).reshape(B, T)[:, -1])
    if not run.passed or sat_hw != sat_model or not norms_ok:
        rec = run.record.get("streams", {})
        raise VerilatorBackendError(
            f"verilator: the hardware disagrees with the fixed-point model (saturations {sat_hw} vs {sat_model}; "
            f"final-state norm equal: {norms_ok}; {'; '.join(rec.get('errors', [])[:3]) or run.failures}); "
            f"log {run.log}")
    out = {
        "o": fmt["o"].to_float(o_raw).reshape(batch + (T, d)),
        "s": s_f.reshape(batch + (d, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "s_raw": s_raw.reshape(batch + (d, d)),
    }
    if algo == "linear":
        z_raw = np.stack([hw[f"z{i}"] for i in range(B)])
        out["z"] = fmt["z"].to_float(z_raw).reshape(batch + (d,))
        out["z_raw"] = z_raw.reshape(batch + (d,))
    for name, v in ref.items():
        if name == "s_norm" or name.startswith("sat_") or name == "formats":
            out[name] = v
    return {name: out[name] for name in ref}  # the fixed backend's order


def _scaled(algo: str, inputs: dict, params: dict, preset: str, sim_opts: dict, lanes=None) -> dict:
    """Linear attention, DeltaNet, Gated DeltaNet or VLA on a scaled core (``LinearAttentionScaledCore``,
    ``DeltaNetScaledCore``, ``VlaScaledCore``): the host quantises each stream exactly as the model does (block
    vectors, ``g`` as the scalar unit's floats), the testbench's ``streams`` case runs them and
    reads the state (linear attention: and ``z``; VLA: and ``A``, its diagonal) out by a flush;
    every raw output and exponent must equal the model's."""
    from specmem.golden.fixed import run_fixed
    from specmem.golden.fixed.formats import PRESETS
    from specmem.golden.fixed.scaled.bfp import quantize_block, to_float
    from specmem.golden.fixed.scaled.deltanet import scalar_in

    ref = run_fixed(algo, inputs, preset, params)  # validates inputs and parameters as --backend fixed does
    gated, linear, vla = algo == "gated-deltanet", algo == "linear", algo == "vla"
    names = ("k", "v", "q", "u") if vla else ("k", "v", "q")
    x = {n: np.asarray(inputs[n], dtype=np.float64) for n in names}
    shape = np.broadcast_shapes(*(v.shape for v in x.values()))
    batch, T, d = shape[:-2], shape[-2], shape[-1]
    flat = {n: np.broadcast_to(v, shape).reshape((-1, T, d)) for n, v in x.items()}
    for name in ("beta", "g") if gated else () if linear or vla else ("beta",):
        flat[name] = np.broadcast_to(np.asarray(inputs[name], dtype=np.float64), batch + (T,)).reshape(-1, T)
    k = _lanes(d) if lanes is None else lanes
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 or d % k:
        raise SpecmemInputError(f"lanes: must be an integer >= 1 dividing d ({d}), got {k!r}")
    B = flat["k"].shape[0]
    if T == 0 or B == 0:
        return ref  # nothing reaches the hardware: its state stays zero, as the model's does
    p = PRESETS[preset]
    M = p.mul_bits
    streams = {"n": np.int64(B)}
    for i in range(B):
        for n, tag in (("k", "K"), ("v", "V"), ("q", "Q")) + ((("u", "U"),) if vla else ()):
            streams[f"{tag}{i}"], streams[f"f{n}{i}"] = quantize_block(flat[n][i], M, n, p.rounding)
        if not (linear or vla):
            bt, fb = quantize_block(flat["beta"][i][:, None], M, "beta", p.rounding)
            streams[f"beta{i}"], streams[f"fbeta{i}"] = bt[:, 0], fb
        if gated:
            streams[f"G{i}"], streams[f"fg{i}"] = scalar_in(p.scalar_unit(), flat["g"][i])
    design_params = [("gated", 1)] if gated else []  # the state in DP16KD through its model, as synthesised
    if "eps" in params:
        design_params.append(("eps", float(params["eps"])))
    if vla:  # the rule's parameters are the core's generics (the model has checked them)
        from specmem.rtl.generate import VLA_SCALED_PARAMS

        design_params += [(n, params[n]) for n in VLA_SCALED_PARAMS if params.get(n) is not None]
        unsupported = set(params) - {"eps", *VLA_SCALED_PARAMS}
        if unsupported:
            raise SpecmemInputError(f"{sorted(unsupported)[0]}: not a parameter of the scaled VLA core")
    kind = "vla-scaled" if vla else "linear-scaled" if linear else "deltanet-scaled"
    design = _design(kind, d, int(k), preset, params=tuple(design_params))
    hw, run = _simulate_raw(design, "specmem.sim.tb_scaled", streams, sim_opts)
    o_raw = np.stack([hw[f"o{i}"] for i in range(B)])
    o_frac = np.stack([hw[f"o_frac{i}"] for i in range(B)])
    s_raw = np.stack([hw[f"s{i}"] for i in range(B)])
    s_row = np.stack([hw[f"s_frac{i}"] for i in range(B)])  # S's row exponents (gated: Ŝ's plus gamma's)
    status = np.stack([hw[f"status{i}"] for i in range(B)])  # tokens, saturations, err
    if o_raw.shape != (B, T, d) or s_raw.shape != (B, d, d):
        raise VerilatorBackendError(f"verilator: got outputs {o_raw.shape} and states {s_raw.shape}, expected "
                                    f"{(B, T, d)} and {(B, d, d)} ({run.log})")
    if gated:
        gam = np.stack([hw[f"gamma{i}"] for i in range(B)])  # mantissa, exponent
        s_frac = s_row - gam[:, 1:2]
        s_f = to_float(s_raw, s_row) * gam[:, 0, None, None].astype(np.float64)
    else:
        s_frac, s_f = s_row, to_float(s_raw, s_row)
    want = {n: np.asarray(ref[n]).reshape((B,) + np.shape(v)[1:])
            for n, v in (("o_raw", o_raw), ("o_frac", o_frac), ("s_raw", s_raw), ("s_frac", s_frac))}
    got = {"o_raw": o_raw, "o_frac": o_frac, "s_raw": s_raw, "s_frac": s_frac}
    if vla:  # A's off-diagonal part and its diagonal read out at the flush
        for name, key in (("a_raw", "a"), ("a_frac", "a_frac"), ("a_diag_raw", "ad"), ("a_diag_frac", "ad_frac")):
            got[name] = np.stack([hw[f"{key}{i}"] for i in range(B)])
            want[name] = np.asarray(ref[name]).reshape(got[name].shape)
    if linear:  # z read out at the flush
        got["z_raw"] = np.stack([hw[f"z{i}"] for i in range(B)])
        got["z_frac"] = np.stack([hw[f"z_frac{i}"] for i in range(B)])
        want["z_raw"] = np.asarray(ref["z_raw"]).reshape(got["z_raw"].shape)
        want["z_frac"] = np.asarray(ref["z_frac"]).reshape(got["z_frac"].shape)
    bad = [n for n in got if not np.array_equal(got[n], want[n])]
    sat_model = sum(int(v) for n, v in ref.items() if n.startswith("sat_"))
    sat_hw = int(status[:, 1].sum()) + (int(status[:, 3].sum()) if vla else 0)  # VLA: S's, then A's
    if (bad or not run.passed or sat_hw != sat_model or np.any(status[:, 2])
            or np.any(status[:, 0] != T)):
        raise VerilatorBackendError(
            f"verilator: the scaled core disagrees with the fixed-point model ({', '.join(bad) or 'outputs equal'}; "
            f"saturations {sat_hw} vs {sat_model}; err {status[:, 2].tolist()}; tokens "
            f"{status[:, 0].tolist()} of {T}; {run.failures or 'run passed'}); log {run.log}")
    out = {
        "o": to_float(o_raw, o_frac).reshape(batch + (T, d)),
        "s": s_f.reshape(batch + (d, d)),
        "o_raw": o_raw.reshape(batch + (T, d)),
        "o_frac": o_frac.reshape(batch + (T,)),
        "s_raw": s_raw.reshape(batch + (d, d)),
        "s_frac": s_frac.reshape(batch + (d,)),
    }
    if vla:
        out["a_raw"] = got["a_raw"].reshape(batch + (d, d))
        out["a_frac"] = got["a_frac"].reshape(batch + (d,))
        out["a_diag_raw"] = got["a_diag_raw"].reshape(batch + (d,))
        out["a_diag_frac"] = got["a_diag_frac"].reshape(batch)
        dense = to_float(got["a_raw"], got["a_frac"][..., None])
        idx = np.arange(d)
        dense[:, idx, idx] = to_float(got["a_diag_raw"], got["a_diag_frac"][:, None])
        out["a"] = dense.reshape(batch + (d, d))
    if linear:
        out["z_raw"] = got["z_raw"].reshape(batch + (d,))
        out["z_frac"] = got["z_frac"].reshape(batch)
        out["z"] = to_float(got["z_raw"], got["z_frac"]).reshape(batch + (d,))
    for name, v in ref.items():
        if name in ("s_norm", "a_norm") or name.startswith("sat_") or name == "formats":
            out[name] = v
    return {name: out[name] for name in ref}  # the fixed backend's order


def _simulate_raw(design, tb: str, streams: dict, sim_opts: dict) -> tuple[dict, object]:
    """Run the arrays ``streams`` (the testbench's ``streams_file``) through ``tb``'s ``streams``
    case on ``design``; returns the testbench's outputs (``.npz`` contents) and the run."""
    from specmem.sim.build import build, run_cocotb

    try:
        b = build(design, "plain")
    except ValueError as exc:  # the RTL's generics (k >= 2, d a multiple of k, ...)
        raise SpecmemInputError(f"k: the RTL cannot be built for d={design.d}, k={design.k}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="specmem-vl-") as tmp:
        sfile, ofile = Path(tmp) / "streams.npz", Path(tmp) / "outputs.npz"
        np.savez(sfile, **streams)
        run = run_cocotb(b, tb, {"name": f"backend-{os.getpid()}", "streams_file": str(sfile),
                                 "outputs_file": str(ofile), **sim_opts}, testcase="streams")
        if not ofile.is_file():
            raise VerilatorBackendError(f"verilator: the simulation produced no outputs ({run.log}): "
                                        + "; ".join(run.failures.get("streams", "")[:500].splitlines()[:3]))
        return dict(np.load(ofile)), run


def _lanes(d: int) -> int:
    """The default lane count of the simulated VLA, linear or DeltaNet design (option ``lanes``; the
    fixed model has no ``k`` and the result does not depend on it): 2 where ``d`` is even, else 1."""
    return 2 if d % 2 == 0 and d >= 2 else 1
