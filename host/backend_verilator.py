"""The ``verilator`` backend: run an input through the Verilated RTL of the annihilation memory.

``verilator_backend("annihilation", {"x": x}, {"k": 4}, {"format": "int8"})`` returns the same
names, shapes and dtypes as the ``fixed`` backend (:func:`specmem.golden.fixed.run_fixed`), bit for
bit when the hardware is right:

* ``y_raw`` (the output stream), ``orth`` (per token, from the orthogonal-input counter), ``count``
  (``status_count``) and ``u_raw`` (the state RAM, read back through the simulator: the design has
  no port for it) come from the simulated hardware; ``y``, ``u`` and ``omega`` are derived from them
  exactly as the golden model derives its own;
* the hardware counts saturations in one counter, so the per-tensor ``sat_<tensor>`` counts and
  ``formats`` come from the golden model, after checking that their sum equals the hardware's
  counter (``sat_x`` is the host-side quantisation, the same code in both backends).

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

__all__ = ["verilator_backend", "VerilatorBackendError"]


class VerilatorBackendError(RuntimeError):
    """The simulated hardware disagreed with the fixed-point model, or the simulation failed."""


def _options(options: dict) -> tuple[str, dict]:
    opts = dict(options)
    preset = opts.pop("format", None) or "int8"
    sim = {}
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

    if algo != "annihilation":
        raise SpecmemInputError(f"algo: the verilator backend implements annihilation only, got {algo!r}")
    preset, sim_opts = _options(options)
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

    from specmem.sim.build import Design, build, run_cocotb
    from specmem.sim.suite import TOP_TB

    try:
        design = Design("top", d, k, preset, None if in_range is None else float(in_range))
        b = build(design, "plain")
    except ValueError as exc:  # the RTL's generics (k >= 2, d a multiple of k, ...)
        raise SpecmemInputError(f"k: the RTL cannot be built for d={d}, k={k}: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="specmem-vl-") as tmp:
        streams = Path(tmp) / "streams.npz"
        outputs = Path(tmp) / "outputs.npz"
        np.savez(streams, **{f"s{i}": X[i] for i in range(B)})
        run = run_cocotb(b, TOP_TB, {"name": f"backend-{os.getpid()}", "streams_file": str(streams),
                                     "outputs_file": str(outputs), **sim_opts}, testcase="streams")
        if not outputs.is_file():
            raise VerilatorBackendError(f"verilator: the simulation produced no outputs ({run.log}): "
                                        + "; ".join(run.failures.get("streams", "")[:500].splitlines()[:3]))
        hw = dict(np.load(outputs))
    y_raw = np.stack([hw[f"y{i}"] for i in range(B)])
    orth = np.stack([hw[f"orth{i}"] for i in range(B)])
    u_raw = np.stack([hw[f"u{i}"] for i in range(B)])
    status = np.stack([hw[f"status{i}"] for i in range(B)])  # tokens, saturations, orth_count, orth_flag, count, framing
    if y_raw.shape != (B, T, d) or orth.shape != (B, T):
        raise VerilatorBackendError(f"verilator: got outputs {y_raw.shape} and flags {orth.shape}, expected "
                                    f"{(B, T, d)} and {(B, T)} ({run.log})")
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
