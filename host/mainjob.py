"""``specmem main``: the main job on the small default configuration.

Stages, in order: seeded vectors and a float64 golden run of every rule
(exchange-format files under ``out/main``); the bit-exact fixed-point model of
every rule in its hardware format (int18 for the annihilation memory, the scaled
int8 for the others), with its error against float64; the annihilation
RTL (core v2 in int18, its hardware default; core v1 in legacy-int8) and the VLA RTL
(legacy-int8) as Verilog plus manifest, linted by Verilator; the annihilation core v2
simulated in Verilator (cocotb) against the fixed-point model (int18, a stream with
evictions, random idle gaps and backpressure) and the scaled Gated DeltaNet core (int8, generated,
linted and simulated likewise); the claims ledger (``out/main/claims/claims.md``;
``specmem claims`` rewrites ``docs/claims.md``); the small INT8-vs-float accuracy report of the RTL's formats
and the small number-format report (``out/main/accuracy``, ``formats.md``; the full
ones are ``specmem accuracy [--formats] --full --out docs/accuracy``).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from specmem.algorithms import ALGORITHMS
from specmem.backends import run
from specmem.progress import stage
from specmem.vectors import make_vectors
from specmem.exchange import save_outputs, write_atomic

__all__ = ["DEFAULTS", "main_job"]

# The small default configuration shared by the main job and the tests.
DEFAULTS = {"d": 16, "k": 4, "T": 256, "seed": 0}
#: tokens through the scaled Gated DeltaNet, linear-attention and VLA cores in Verilator (their testbench
#: runs the model per token)
T_SCALED = 64


def main_job(out_dir: str = "out/main", progress=print) -> int:
    """Run every stage; return 0 on success (any failure raises)."""
    t0 = time.perf_counter()
    os.makedirs(out_dir, exist_ok=True)
    d, k, T, seed = DEFAULTS["d"], DEFAULTS["k"], DEFAULTS["T"], DEFAULTS["seed"]
    summary = {"config": dict(DEFAULTS), "golden": {}}
    for name in ALGORITHMS:
        vec = make_vectors(name, T, d, seed)
        params = {"k": k} if name == "annihilation" else {}
        t1 = time.perf_counter()
        out = run(name, vec, backend="float", params=params)
        dt = time.perf_counter() - t1
        save_outputs(os.path.join(out_dir, f"{name}.in.npz"), vec, {"algo": name, **DEFAULTS})
        save_outputs(os.path.join(out_dir, f"{name}.float.npz"), out, {"algo": name, "backend": "float", **params})
        finite = all(np.all(np.isfinite(np.asarray(v, dtype=float))) for v in out.values())
        if not finite:
            raise RuntimeError(f"{name}: golden output contains NaN or Inf")
        summary["golden"][name] = {"seconds": dt, "outputs": sorted(out)}
        progress(f"main: golden {name:15s} T={T} d={d}: {dt * 1e3:8.1f} ms")
    summary["fixed"] = {}
    from specmem.golden.fixed import DEFAULT_FORMAT

    for name in ("annihilation", "vla", "linear", "deltanet", "gated-deltanet"):
        fmt = DEFAULT_FORMAT.get(name, "int8")  # each rule's hardware format: int18 annihilation, int8 the rest
        vec = make_vectors("deltanet" if name == "gated-deltanet" else name, T, d, seed)
        if name == "gated-deltanet":
            vec["g"] = np.random.default_rng(seed).uniform(0.9, 1.0, T)
        params = {"k": k} if name == "annihilation" else {}
        ref = run(name, vec, backend="float", params=params)
        out = run(name, vec, backend="fixed", params=params, format=fmt)
        save_outputs(os.path.join(out_dir, f"{name}.fixed-{fmt}.npz"), out, {"algo": name, "backend": "fixed",
                                                                             "format": fmt, **params})
        key = "omega" if name == "annihilation" else "o"
        err = float(np.linalg.norm(out[key] - ref[key]) / max(np.linalg.norm(ref[key]), 1e-300))
        sats = int(sum(int(np.sum(v)) for n, v in out.items() if n.startswith("sat_")))
        summary["fixed"][name] = {"format": fmt, "rel_error_" + key: err, "saturations": sats}
        progress(f"main: fixed {fmt:5s} {name:14s} relative error of {key} vs float64 {err:.3g}, saturations {sats}")

    from specmem.rtl.generate import generate, lint, model_sources

    summary["rtl"] = {}
    # the annihilation's hardware default is core v2 in int18; core v1 (legacy-int8) and VLA stay generated
    for key, name, preset in (("annihilation", "annihilation", "int18"),
                              ("annihilation-v1", "annihilation", "legacy-int8"), ("vla", "vla", "legacy-int8"),
                              ("gated-deltanet-int8", "gated-deltanet", "int8"), ("linear-int8", "linear", "int8"),
                              ("vla-int8", "vla", "int8")):
        manifest = generate(name, d, k, preset, os.path.join(out_dir, "rtl", key))
        res = lint(manifest["paths"]["verilog"], models=model_sources(manifest))
        if res.returncode or res.warnings:
            raise RuntimeError(f"verilator lint of {manifest['paths']['verilog']} failed:\n"
                               + "\n".join(res.warnings or [res.output]))
        cpt = manifest["cycles_per_token"]["full_steady_state"]
        floor = d if name == "annihilation" else d * d // k
        summary["rtl"][key] = {"verilog": manifest["paths"]["verilog"], "preset": preset, "cycles_per_token": cpt,
                               "floor": floor}
        progress(f"main: Verilog {manifest['paths']['verilog']} ({preset}, lint clean), {cpt} cycles per token "
                 f"(floor {floor})")

    from specmem.sim.commands import simulate

    with stage("main: Verilator (annihilation core v2, int18)", progress, 30.0):
        sim = simulate("annihilation", d, k, T, seed, preset="int18", quiet=True)
    if not sim.passed:
        raise RuntimeError(f"Verilator simulation of the annihilation core v2 disagrees with the fixed-point "
                           f"model: {sim.first_mismatch}")
    summary["verilator"] = {"core": "annihilation v2", "preset": "int18", "tokens": T, "cycles": sim.cycles,
                            "cycles_per_token": sim.cycles / T, "cycles_per_s": sim.cycles_per_s,
                            "tokens_per_s": sim.tokens_per_s, "build": sim.build_dir}
    progress(f"main: Verilator: {T} tokens of the annihilation core v2 (int18, random idle gaps and backpressure) "
             f"bit exact against the fixed-point model; {sim.cycles / T:.0f} cycles per token in this stream")

    # the scaled int8 cores: every output, exponent and final state against the model
    for key, algo, core, what in (
            ("verilator_scaled", "gated-deltanet", "Gated DeltaNet",
             "decays down to 2^-700, random idle gaps and backpressure; state and gamma included"),
            ("verilator_scaled_linear", "linear", "linear-attention",
             "random idle gaps and backpressure; state and z included"),
            ("verilator_scaled_vla", "vla", "VLA",
             "refreshes every 20th token, random idle gaps and backpressure; S, A and A's diagonal included")):
        with stage(f"main: Verilator (scaled {core} core, int8)", progress, 30.0):
            ssim = simulate(algo, d, k, T_SCALED, seed, preset="int8", quiet=True)
        if not ssim.passed:
            raise RuntimeError(f"Verilator simulation of the scaled {core} core disagrees with the fixed-point "
                               f"model: {ssim.errors[:3]}")
        summary[key] = {"core": f"{algo} (scaled)", "preset": "int8", "tokens": T_SCALED, "cycles": ssim.cycles,
                        "cycles_per_token": ssim.cycles / T_SCALED, "build": ssim.build_dir}
        progress(f"main: Verilator: {T_SCALED} tokens of the scaled {core} core (int8) bit exact against the "
                 f"fixed-point model ({what})")

    from specmem.claims import write_claims

    # under out/: the checkout stays clean (``specmem claims`` regenerates docs/claims.md on purpose)
    with stage("main: claims ledger (small)", progress, 30.0) as hb:
        summary["claims"] = write_claims(out_dir=os.path.join(out_dir, "claims"), full=False,
                                         progress=hb.relay(progress))
    from specmem.golden.fixed.accuracy import write_accuracy_report

    with stage("main: accuracy report of the RTL's formats (small)", progress, 30.0) as hb:
        summary["accuracy"] = write_accuracy_report(out_dir=os.path.join(out_dir, "accuracy"), small=True,
                                                    progress=hb.relay(progress))
    from specmem.golden.fixed.targets import write_formats_report

    with stage("main: number-format report (small)", progress, 30.0) as hb:
        summary["formats"] = write_formats_report(os.path.join(out_dir, "accuracy"), "small",
                                                  progress=hb.relay(progress))
    summary["seconds"] = time.perf_counter() - t0
    write_atomic(os.path.join(out_dir, "summary.json"), json.dumps(summary, indent=2))
    progress(f"main: done in {summary['seconds']:.1f} s; outputs in {out_dir}, ledger in {summary['claims']}")
    return 0
