"""The ``specmem`` command line: run, vectors, claims, bench, accuracy and the main job."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings

import numpy as np

from specmem.algorithms import ALGORITHMS, get_algorithm
from specmem.exchange import write_atomic
from specmem.golden.common import SpecmemInputError

__all__ = ["main"]


def _cmd_run(args) -> int:
    from specmem.backends import run
    from specmem.exchange import load_inputs, save_outputs

    spec = get_algorithm(args.algo)
    inputs = load_inputs(args.inp, spec)
    options = {}
    if args.format is not None:
        if args.backend == "float":
            raise SpecmemInputError("format: --format applies to the fixed and hardware backends, not float")
        options["format"] = args.format
    t0 = time.perf_counter()
    out = run(args.algo, inputs, backend=args.backend, params=args.param, **options)
    dt = time.perf_counter() - t0
    meta = {"algo": args.algo, "backend": args.backend, "params": args.param or [], **options}
    save_outputs(args.out, out, meta)
    shape = inputs[spec.inputs[0]].shape
    lead = shape if spec.inputs[0] in spec.token_scalars else shape[:-1]  # [*batch, T]
    tokens = f"{int(np.prod(lead))} tokens" + (f" ({' x '.join(map(str, lead))}: batch x T)" if len(lead) > 1 else "")
    print(f"specmem run: {args.algo} on {args.backend}: {tokens} in {dt:.3f} s -> {args.out} "
          f"({', '.join(sorted(out))})")
    return 0


def _cmd_vectors(args) -> int:
    from specmem.exchange import save_outputs
    from specmem.vectors import make_vectors

    vec = make_vectors(args.algo, args.T, args.d, args.seed, tuple(args.batch or ()))
    save_outputs(args.out, vec, {"algo": args.algo, "T": args.T, "d": args.d, "seed": args.seed,
                                 "distribution": "standard normal"})
    print(f"specmem vectors: {args.algo} T={args.T} d={args.d} seed={args.seed} -> {args.out}")
    return 0


def _cmd_claims(args) -> int:
    from specmem.claims import write_claims

    write_claims(out_dir=args.out, full=args.full, progress=_progress)
    return 0


def _cmd_bench(args) -> int:
    if args.engine != "cocotb" and args.what != "sim":
        raise SpecmemInputError(f"engine: --engine applies to 'specmem bench sim' only, not {args.what}")
    if args.what == "golden":
        from specmem.bench import bench_golden

        bench_golden(out_json=args.json, quick=args.quick, progress=_progress)
    elif args.what == "gpu":
        from specmem.bench_gpu import bench_gpu

        bench_gpu("small" if args.quick else "full", out_json=args.json)
    elif args.what == "sim" and args.engine == "native":
        from specmem.sim.native import bench_native

        rec = bench_native(tokens=2000 if args.quick else 20_000, cocotb_tokens=50 if args.quick else 300)
        if args.json:
            write_atomic(args.json, json.dumps(rec, indent=2))
    elif args.what == "sim":
        from specmem.sim.commands import bench_sim

        rec = bench_sim(tokens=500 if args.quick else 2000)
        if args.json:
            write_atomic(args.json, json.dumps(rec, indent=2))
    elif args.what == "fixed":
        from specmem.golden.fixed.accuracy import bench_fixed

        bench_fixed(out_json=args.json, T=64 if args.quick else 256)
    return 0


def _cmd_accuracy(args) -> int:
    if args.inp is not None or args.algo is not None:
        return _cmd_accuracy_in(args)
    for name in ("format", "param", "json"):
        if getattr(args, name):
            raise SpecmemInputError(f"{name}: --{name} applies to the comparison on your own inputs (--in and --algo)")
    args.out = args.out or "docs/accuracy"
    if args.formats and args.sweep:
        raise SpecmemInputError("sweep: --sweep is part of --formats; give one of them")
    size = "full" if args.full else "small"
    if args.sweep:
        from specmem.golden.fixed.targets import write_sweep_report

        with _report_heartbeat("accuracy --sweep", None, size) as hb:
            write_sweep_report(args.out, size, progress=hb.relay(_progress))
        return 0
    if args.formats:
        from specmem.golden.fixed.targets import write_formats_report

        with _report_heartbeat("accuracy --formats", os.path.join(args.out, "formats.json"), size) as hb:
            write_formats_report(args.out, size, progress=hb.relay(_progress))
        return 0
    from specmem.golden.fixed.accuracy import write_accuracy_report

    write_accuracy_report(out_dir=args.out, small=not args.full, progress=_progress)
    return 0


def _report_heartbeat(label: str, previous_json: str | None, size: str):
    """A heartbeat over a number-format report: its stages log as they finish, some take minutes
    (the full VLA A stream); a line after 30 s of silence, with the estimate of the rest from the
    previous report of the same size in ``previous_json`` (its ``seconds``) where there is one."""
    from specmem.progress import Heartbeat

    expect = None
    if previous_json:
        try:
            with open(previous_json) as fh:
                prev = json.load(fh)
            if prev.get("size") == size:
                expect = float(prev["seconds"])
        except (OSError, ValueError, KeyError, TypeError):
            expect = None
    took = (f"{expect / 60:.0f} min" if expect >= 120 else f"{expect:.0f} s") if expect else None
    note = f"the previous {size} report took {took}" if expect else None
    return Heartbeat(label, 30.0, expect_s=expect, note=note)


def _cmd_accuracy_in(args) -> int:
    from specmem.algorithms import parse_params
    from specmem.exchange import load_inputs
    from specmem.golden.fixed.compare import compare_formats, format_table

    if args.inp is None or args.algo is None:
        raise SpecmemInputError(f"{'in' if args.inp is None else 'algo'}: --in and --algo go together "
                                "(compare every format with float64 on your inputs)")
    if args.formats or args.full or args.sweep or args.out:
        raise SpecmemInputError("formats: --formats/--sweep/--full/--out write a report; with --in the comparison "
                                "prints a table (and --json writes it)")
    spec = get_algorithm(args.algo)
    inputs = load_inputs(args.inp, spec)
    params = parse_params(spec, args.param)
    if spec.name == "annihilation" and "k" not in params:
        raise SpecmemInputError("k: required for annihilation (--param k=N)")
    fmts = [f.strip() for f in args.format.split(",")] if args.format else None
    res = compare_formats(spec.name, inputs, params, fmts, progress=_progress)
    print(format_table(res))
    if args.json:
        write_atomic(args.json, json.dumps(res, indent=1))
        print(f"specmem accuracy: JSON -> {args.json}")
    return 0


def _cmd_rtl(args) -> int:
    from specmem.rtl.generate import generate, lint, model_sources
    from specmem.rtl.presets import scaled_core

    params = {"dsp": args.dsp} if args.dsp else {}
    if args.core:
        params["core"] = args.core
    if args.bram:
        params["bram"] = args.bram
    for name in ("heads", "chains", "norm_lanes"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    if args.fe_lanes is not None:
        params["fe_lanes"] = args.fe_lanes
    if args.chain_lanes is not None:
        params["chain_lanes"] = args.chain_lanes
    if args.csr:
        params["csr"] = True
    fmt = args.format or ("legacy-int8" if args.algo != "annihilation" or args.core != "v2" else "int18")
    t0 = time.perf_counter()
    try:
        if "core" in params and args.algo != "annihilation":
            raise ValueError(f"core: only the annihilation has two cores (v1, v2), not {args.algo}")
        scaled = scaled_core(args.algo, fmt)  # the scaled cores take bram
        for name in ("bram", "heads", "chains", "norm_lanes"):
            if name in params and args.algo != "annihilation" and not (scaled and name == "bram") \
                    and not (scaled and name == "heads" and args.algo in ("deltanet", "gated-deltanet")):
                who = ("the annihilation core v2 and the scaled deltanet and gated-deltanet cores (--format int8) "
                       "take it" if name == "heads"
                       else "the annihilation core v2 takes it")
                raise ValueError(f"{name}: only {who}, not {args.algo}")
        if "fe_lanes" in params and args.algo != "vla":
            raise ValueError(f"fe_lanes: only the VLA core takes it, not {args.algo}")
        if "fe_lanes" in params and scaled:
            raise ValueError("fe_lanes: the scaled VLA core (--format int8) takes --chain-lanes instead")
        if "chain_lanes" in params and not (args.algo == "vla" and scaled):
            raise ValueError(f"chain_lanes: only the scaled VLA core (--algo vla --format int8) takes it, not "
                             f"{args.algo} {fmt}")
        if args.csr and args.algo == "engine":
            raise ValueError("csr: the engine has no register block (it is a datapath, not a core top)")
        if "dsp" in params and args.algo not in ("engine", "annihilation") and not scaled:
            raise ValueError(f"dsp: only the engine, the annihilation core v2 and the scaled cores (--format "
                             f"int8) take it (the other cores use 'fabric'), not {args.algo}")
        if args.algo == "annihilation" and "dsp" in params and params["dsp"] == "fabric":
            raise ValueError("dsp: core v2 takes registered or ecp5 (fabric is the engine's product register)")
        manifest = generate(args.algo, args.d, args.k, fmt, args.out, **params)
    except ValueError as exc:  # parameter validation in rtl/ names the argument
        raise SpecmemInputError(str(exc)) from None
    info = manifest.get("cycles_per_token")
    cpt = info.get("full_steady_state", info) if isinstance(info, dict) else info
    if manifest.get("core") == "v2":  # measured, not derived: say which, and what the design gives
        cpt = (f"{cpt} (measured in simulation)" if cpt is not None else "not measured at this size") \
            + f"; one pass over U {info['pass_cycles']} + the token chain; core v2"
    if isinstance(info, dict) and "floor_d2_over_k" in info:  # VLA and the baselines: d^2/k multiplies per token
        floor = f", floor d^2/k = {info['floor_d2_over_k']}"
    elif args.algo == "annihilation":
        floor = f", floor d = {args.d}"
    else:
        floor = ""
    print(f"specmem rtl: {manifest['paths']['verilog']} and {manifest['paths']['manifest']} "
          f"(steady-state cycles per token: {cpt}{floor}) in {time.perf_counter() - t0:.1f} s", flush=True)
    if args.no_lint:
        return 0
    t0 = time.perf_counter()
    res = lint(manifest["paths"]["verilog"], models=model_sources(manifest))
    if res.returncode or res.warnings:
        print("\n".join(res.warnings) or res.output, file=sys.stderr)
        print(f"specmem: error: verilator lint failed ({len(res.warnings)} warnings)", file=sys.stderr)
        return 1
    print(f"specmem rtl: verilator --lint-only -Wall: clean in {time.perf_counter() - t0:.1f} s "
          "(waivers: rtl/lint_waivers.vlt)")
    return 0


def _cmd_regs(args) -> int:
    from specmem.regs import write_all
    from specmem.rtl.csr import core_register_map

    try:
        rm = core_register_map(args.algo, args.d, args.k, args.format, heads=args.heads)
        paths = write_all(rm, args.out)
    except ValueError as exc:  # the description names the argument
        raise SpecmemInputError(str(exc)) from None
    print(f"specmem regs: {len(rm.registers)} registers ({args.algo}, d={args.d}, k={args.k}, {args.format}) -> "
          + ", ".join(paths[k] for k in ("header", "markdown", "systemrdl", "ipxact")))
    return 0


#: ``specmem sim`` defaults; the options default to None so that --mutants can tell what was given
SIM_DEFAULTS = {"algo": "annihilation", "d": 16, "k": 4, "tokens": 256, "seed": 0, "format": "legacy-int8"}


def _cmd_sim(args) -> int:
    from specmem.sim.commands import mutation_command, simulate

    from specmem.rtl.presets import scaled_core

    if args.chain_lanes is not None and (args.engine == "native" or args.algo != "vla"
                                         or not scaled_core(args.algo, args.format)):
        raise SpecmemInputError("chain_lanes: only the scaled VLA core (--algo vla --format int8) on the cocotb "
                                "engine takes it")
    if args.engine == "native":  # the native Verilator harness (specmem.sim.native)
        from specmem.sim.native import cli_native

        return cli_native(args, SIM_DEFAULTS)
    from specmem.sim.native import cocotb_refuses

    cocotb_refuses(args)
    if args.mutants:
        scaled = args.algo is not None and scaled_core(args.algo, args.format)
        named = ("algo", "format") if scaled else ("format",)
        given = [f"--{n}" for n in (*SIM_DEFAULTS, "param") if n not in named and getattr(args, n) is not None]
        given += [f"--{n}" for n in ("coverage", "waves") if getattr(args, n)]
        if not scaled and args.format not in (None, "legacy-int8", "int18"):
            given.append(f"--format {args.format}")
        if given:
            raise SpecmemInputError(f"mutants: the mutation check runs its own fixed configuration (the annihilation "
                                    f"top, d=16, k=4, legacy-int8 (core v1) or with --format int18 core v2, seeds 0 "
                                    f"and 1, 24 tokens; or with --algo NAME --format int8 that rule's scaled core, "
                                    f"d=8, k=4 (linear d=16, k=1), seed 0, 24 tokens); {', '.join(given)} do not "
                                    f"apply to it")
        if scaled:
            base, res = mutation_command(algo=args.algo)
        else:
            base, res = mutation_command(preset=args.format or "legacy-int8")
        return 0 if base.passed and all(r.caught for r in res) else 1
    for name, default in SIM_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    params = None
    if args.param:  # the VLA's rule parameters (generics of the design)
        from specmem.algorithms import parse_params

        params = parse_params(get_algorithm(args.algo), args.param)
    if args.chain_lanes is not None:  # a hardware parameter beside the rule's
        params = {**(params or {}), "chain_lanes": args.chain_lanes}
    res = simulate(args.algo, args.d, args.k, args.tokens, args.seed, preset=args.format,
                   coverage=args.coverage, waves=args.waves, params=params)
    return 0 if res.passed else 1


def _cmd_main(args) -> int:
    from specmem.mainjob import main_job

    return main_job(out_dir=args.out, progress=_progress)


def _progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class _Parser(argparse.ArgumentParser):
    """argparse with the one error format of every specmem command: ``specmem: error: ...``, exit 2."""

    def error(self, message):
        self.exit(2, f"specmem: error: {message} (see '{self.prog} --help')\n")


def _show_default(value) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join("auto" if v is None else str(v) for v in value)
    return str(value)


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless the help already states its default."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (re.search(r"\bdefault\b", text) or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS or action.required
                or not action.option_strings):
            return text
        return f"{text} (default: {_show_default(action.default).replace('%', '%%')})"


# Help for options defined elsewhere without any (synth's and mqar's own argument functions).
_EXTRA_HELP = {
    ("synth", "--d"): "state dimension d of the configuration (required unless --sweep/--report-only)",
    ("synth", "--k"): "memory columns k of the configuration (required unless --sweep/--report-only)",
    ("mqar", "--n-pairs"): "comma-separated numbers of key-value pairs per sequence",
    ("mqar", "--seeds"): "comma-separated training seeds",
    ("mqar", "--steps"): "training steps per run",
}


def _fill_help(name: str, parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        for opt in action.option_strings:
            if not action.help and (name, opt) in _EXTRA_HELP:
                action.help = _EXTRA_HELP[(name, opt)]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("specmem")
    except Exception:  # not installed as a distribution: the package's own constant
        from specmem import __version__

        return __version__


_DESCRIPTION = ("specmem: bounded-memory sequence-model update rules from golden model to RTL. "
                "'specmem COMMAND --help' lists a command's options with their defaults; bad input is one "
                "'specmem: error:' line and exit status 2.")
_EPILOG = "Start with 'specmem main' (the small default configuration, everything under out/main)."


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="specmem", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=_HelpFormatter)
    p.add_argument("--version", action="version", version=f"specmem {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    _add = sub.add_parser

    def add_parser(name, **kw):
        return _add(name, formatter_class=_HelpFormatter, **kw)

    sub.add_parser = add_parser

    r = sub.add_parser("run", help="run an input .npz through one update rule on one backend")
    r.add_argument("--algo", required=True, help=f"one of: {', '.join(ALGORITHMS)}")
    r.add_argument("--in", dest="inp", required=True, metavar="IN.npz",
                   help="input arrays in the exchange format (spec section 5), e.g. from specmem vectors")
    r.add_argument("--out", required=True, metavar="OUT.npz",
                   help="where to write the outputs (the folder must exist; written whole or not at all)")
    r.add_argument("--backend", default="float",
                   help="float (default; float64 golden model), fixed (bit-exact fixed-point model), verilator "
                        "(the RTL: annihilation, vla, linear, deltanet, gated-deltanet), triton (GPU kernels, where installed)")
    r.add_argument("--format", default=None,
                   help="number format for --backend fixed (default: the rule's own, int18 annihilation, int8 the "
                        "others): int8, int18, int16, wide, legacy-int8, legacy-int16, legacy-wide; "
                        "--backend verilator takes the legacy-* ones (default legacy-int8), for annihilation also "
                        "int18, int16, int8 (core v2), for linear, deltanet and gated-deltanet also int8 (the scaled cores)")
    r.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="rule parameter, repeatable (default: the rule's own defaults; annihilation needs k=N)")
    r.set_defaults(fn=_cmd_run)

    v = sub.add_parser("vectors", help="write seeded input vectors for a rule")
    v.add_argument("--algo", required=True, help=f"the rule whose inputs to write: {', '.join(ALGORITHMS)}")
    v.add_argument("--T", type=int, default=1000, help="tokens per stream")
    v.add_argument("--d", type=int, default=64, help="vector dimension")
    v.add_argument("--seed", type=int, default=0, help="random seed (numpy default_rng)")
    v.add_argument("--batch", type=int, action="append",
                   help="leading batch dimension, repeatable (default: none, arrays [T, d])")
    v.add_argument("--out", required=True, metavar="IN.npz",
                   help="where to write the .npz (the folder must exist)")
    v.set_defaults(fn=_cmd_vectors)

    c = sub.add_parser("claims", help="measure every quantitative claim of the seeds -> docs/claims.md "
                                      "(same verdicts every run)")
    c.add_argument("--out", default="docs",
                   help="folder for claims.md and its plots in OUT/claims/ (default docs; created if missing)")
    c.add_argument("--full", action="store_true", help="longer runs and bigger sweeps (default: the small ones)")
    c.set_defaults(fn=_cmd_claims)

    b = sub.add_parser("bench", help="benchmarks that print numbers and write JSON")
    b.add_argument("what", choices=["golden", "gpu", "fixed", "sim"],
                   help="golden: float64 Gram vs dense forms; gpu: Triton kernels (needs a GPU); fixed: the "
                        "fixed-point models; sim: Verilator simulation speed")
    b.add_argument("--json", default=None, metavar="OUT.json",
                   help="where to write the JSON record (default: print only; the folder must exist)")
    b.add_argument("--quick", action="store_true",
                   help="small sizes only: golden d <= 256, gpu the interpreter shapes, fixed T=64, sim 500 tokens "
                        "(default: the full set)")
    b.add_argument("--engine", choices=("cocotb", "native"), default="cocotb",
                   help="sim only: cocotb (default, d=16 k=4) or native (d=64 k=8, 20000 tokens, with the cocotb "
                        "engine on 300 tokens of the same configuration side by side)")
    b.set_defaults(fn=_cmd_bench)

    a = sub.add_parser("accuracy", help="INT8-vs-float accuracy report -> docs/accuracy/")
    a.add_argument("--out", default=None, help="folder for the report (default docs/accuracy; created if missing)")
    a.add_argument("--full", action="store_true", help="T=4096 streams and the 10^5-token run (with --formats: d=64, "
                   "20 seeds, 10^5 tokens; about an hour on 2 cores)")
    a.add_argument("--in", dest="inp", default=None, metavar="IN.npz",
                   help="compare every fixed-point format with float64 on these inputs (with --algo); prints a table")
    a.add_argument("--algo", default=None, help="the rule for --in (default: none; required with --in)")
    a.add_argument("--format", default=None, metavar="F1,F2",
                   help="with --in: the formats to compare (default: every format the rule supports)")
    a.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="with --in: rule parameter, repeatable (default: the rule's defaults)")
    a.add_argument("--json", default=None, metavar="OUT.json",
                   help="with --in: also write the rows as JSON (default: print only)")
    a.add_argument("--sweep", action="store_true",
                   help="the precision sweep only: operand bits x state bits x scheme per rule, and each rule's "
                        "float64 sensitivity -> OUT/sweep.md")
    a.add_argument("--formats", action="store_true",
                   help="the number-format targets instead (scaled int8/int18 vs legacy-int8 vs float64): recall, "
                        "output error, width sweep, sensitivity, annihilation angle, VLA's A -> OUT/formats.md")
    a.set_defaults(fn=_cmd_accuracy)

    g = sub.add_parser("rtl", help="generate Verilog and a JSON manifest, then lint it")
    g.add_argument("--algo", required=True, help="annihilation, vla, linear, deltanet, gated-deltanet, or engine (the bare dot-product engine)")
    g.add_argument("--d", type=int, required=True, help="vector dimension d")
    g.add_argument("--k", type=int, required=True,
                   help="memory columns (annihilation) or dot-product lanes (the others); must divide d")
    g.add_argument("--format", default=None,
                   help="fixed-point preset the RTL implements: legacy-int8 (default), legacy-int16, legacy-wide; "
                        "annihilation also int18, int16, int8 (core v2); linear, deltanet and gated-deltanet also "
                        "int8 (the scaled cores, d-wide token ports)")
    g.add_argument("--core", choices=("v1", "v2"), default=None,
                   help="annihilation only: v1 (legacy-* formats, skip policy) or v2 (int18/int16/int8, "
                        "co-accumulated Gram, evict); default: the format decides (--core v2 alone: int18)")
    g.add_argument("--out", required=True, help="output folder (created if missing)")
    g.add_argument("--no-lint", action="store_true", help="skip the Verilator lint (default: lint)")
    g.add_argument("--dsp", choices=("fabric", "registered", "ecp5"), default=None,
                   help="engine: multiplier registers (default fabric = product register, as in the cores; "
                        "registered = input+output registers; ecp5 = those inside MULT18X18D); annihilation core "
                        "v2: its row unit's multipliers (registered, default, or ecp5)")
    g.add_argument("--bram", choices=("behavioural", "ecp5"), default=None,
                   help="annihilation core v2 and the scaled linear / deltanet / gated-deltanet cores (--format int8): the "
                        "state RAM (behavioural, default, or ecp5 = DP16KD)")
    g.add_argument("--heads", type=int, default=None,
                   help="annihilation core v2 and the scaled deltanet and gated-deltanet cores (--format int8): independent memories "
                        "interleaved on one datapath, tokens in the order time step then head (default 1)")
    g.add_argument("--chains", type=int, default=None,
                   help="annihilation core v2 only: token-chain units, 1..heads (default 1; 2 with 3 heads makes "
                        "d=64 k=8 pass-bound)")
    g.add_argument("--norm-lanes", type=int, default=None,
                   help="annihilation core v2 only: lanes of the token chain's block normalisers: 1..4 (serial, "
                        "2*ceil(k/lanes)+7 cycles a vector; default 2) or k (wide and pipelined: fewer cycles per "
                        "token, about 6.5k more LUT4 at k=8)")
    g.add_argument("--fe-lanes", type=int, default=None,
                   help="vla only: lanes of the front end (ELU+1, norms, scale passes), a divisor of k; each input "
                        "beat goes through it in k/fe_lanes sub-beats (default: the fewest that provably keep up "
                        "with the core, e.g. 1 at d=32 k=4, 2 at d=32 k=8)")
    g.add_argument("--chain-lanes", type=int, default=None,
                   help="vla --format int8 only: lanes of the front end and the per-token chain, a divisor of k by a "
                        "power of two (default k; fewer lanes: fewer multipliers, d/chain_lanes-beat feeds)")
    g.add_argument("--csr", action="store_true",
                   help="every core but the engine: the top with its AXI4-Lite control/status registers "
                        "(specmem_<algo>_csr; the register map's C header, Markdown, SystemRDL and IP-XACT "
                        "beside it)")
    g.set_defaults(fn=_cmd_rtl)

    rg = sub.add_parser("regs", help="control/status register map of a core (rtl/csr.py) -> C header, Markdown, "
                                      "SystemRDL, IP-XACT")
    rg.add_argument("--algo", default="annihilation", help="the core: annihilation, vla, linear, deltanet or gated-deltanet")
    rg.add_argument("--d", type=int, default=64, help="vector dimension d (a build parameter in PARAMS_DK)")
    rg.add_argument("--k", type=int, default=8, help="memory columns / lanes (a build parameter in PARAMS_DK)")
    rg.add_argument("--format", default="legacy-int8",
                    help="fixed-point preset: legacy-int8, legacy-int16 or legacy-wide; the annihilation core v2's "
                         "int18, int16 or int8")
    rg.add_argument("--heads", type=int, default=1, help="heads on the datapath (a build parameter in PARAMS_CORE)")
    rg.add_argument("--out", required=True,
                    help="output folder (created if missing): specmem_csr.h, registers.md, specmem_csr.rdl, "
                         "specmem_csr.xml")
    rg.set_defaults(fn=_cmd_regs)

    sm = sub.add_parser("sim", help="simulate the RTL in Verilator against the fixed-point golden model")
    sm.add_argument("--algo", default=None,
                    help="the top to simulate: annihilation (default), vla, linear, deltanet or gated-deltanet")
    sm.add_argument("--d", type=int, default=None, help="vector dimension (default 16)")
    sm.add_argument("--k", type=int, default=None, help="memory columns / lanes, must divide d (default 4)")
    sm.add_argument("--tokens", type=int, default=None, help="tokens in the random stream (default 256)")
    sm.add_argument("--seed", type=int, default=None, help="stream seed (default 0)")
    sm.add_argument("--format", default=None,
                    help="fixed-point preset the RTL implements: legacy-int8 (default), legacy-int16, legacy-wide; "
                         "annihilation also int18, int16, int8 (core v2: co-accumulated Gram, evict); linear, deltanet "
                         "and gated-deltanet also int8 (the scaled cores: block vectors, row-BFP state)")
    sm.add_argument("--coverage", action="store_true",
                    help="line/toggle coverage of the directed cases and the stream, summary and what is not "
                         "covered (default off)")
    sm.add_argument("--waves", action="store_true", help="record a VCD waveform; its path is printed (default off)")
    sm.add_argument("--param", action="append", metavar="NAME=VALUE",
                    help="rule parameter of --algo vla, linear, deltanet or gated-deltanet, repeatable, e.g. refresh_period=3 "
                         "(default: the rule's)")
    sm.add_argument("--chain-lanes", type=int, default=None,
                    help="vla --format int8 only: lanes of the core's front end and chain (as specmem rtl "
                         "--chain-lanes; default k)")
    sm.add_argument("--mutants", action="store_true",
                    help="run the mutation check instead (its own fixed configuration: the annihilation top, or with "
                         "--algo NAME --format int8 that rule's scaled core; takes no other option)")
    sm.add_argument("--engine", choices=("cocotb", "native"), default="cocotb",
                    help="cocotb (default: the reference testbench, protocol checks included) or native (a C++ "
                         "Verilator harness for long runs; annihilation and vla; outputs and counters checked)")
    sm.add_argument("--reset-every", type=int, default=None, metavar="N",
                    help="native: a synchronous reset every N tokens, drained or cut mid-stream (default: none)")
    sm.add_argument("--in", dest="inp", default=None, metavar="TOKENS",
                    help="native: raw input tokens (.npy [T, elements per token] or text, one token per line; "
                         "default: a seeded stream)")
    sm.add_argument("--threads", type=int, default=None,
                    help="native: Verilator model threads (default 1)")
    sm.add_argument("--soak", action="store_true",
                    help="native: the soak, 10^6 tokens at d=64, k=8 with a reset every 1000 tokens (each overridable; "
                         "default off)")
    sm.set_defaults(fn=_cmd_sim)

    from specmem.synth import add_synth_arguments, cmd_synth

    sy = add_synth_arguments(sub.add_parser(
        "synth", help="ECP5 place and route (yowasp) and a 7-series estimate; --sweep writes docs/hardware.md"))
    _fill_help("synth", sy)
    sy.set_defaults(fn=cmd_synth)

    from specmem.mqar import add_mqar_arguments, cmd_mqar

    mq = add_mqar_arguments(sub.add_parser("mqar", help="train the rules on MQAR (the VLA paper's task); int8 "
                                                         "accuracy of trained models; docs/mqar.md"))
    _fill_help("mqar", mq)
    mq.set_defaults(fn=cmd_mqar)

    from specmem.board import add_board_arguments, cmd_board

    bd = add_board_arguments(sub.add_parser(
        "board", help="ULX3S-85F: build a bitstream (UART bridge + core + registers); run tokens through the "
                      "board on a serial port, checked bit for bit against the fixed-point model"))
    bd.set_defaults(fn=cmd_board)

    m = sub.add_parser("main", help="the main job on the small default configuration -> out/main")
    m.add_argument("--out", default="out/main",
                   help="folder for every generated file (default out/main; created if missing)")
    m.set_defaults(fn=_cmd_main)
    return p


# The output paths each command writes: checked before any work starts (kind: a file or a folder).
_OUTPUTS = {
    "run": [("out", "file")], "vectors": [("out", "file")], "claims": [("out", "dir")],
    "bench": [("json", "file")], "accuracy": [("out", "dir"), ("json", "file")], "rtl": [("out", "dir")],
    "regs": [("out", "dir")],
    "synth": [("out", "dir"), ("docs", "dir")], "main": [("out", "dir")],
}


def _check_outputs(args) -> None:
    from specmem.exchange import check_out_dir, check_out_file

    outputs = list(_OUTPUTS.get(args.cmd, []))
    if args.cmd == "mqar":  # report writes --doc; the other actions write into --out
        outputs = [("doc", "file")] if args.action == "report" else [("out", "dir")]
    if args.cmd == "board":  # build writes a folder, run an .npz
        outputs = [("out", "dir")] if args.action == "build" else [("out", "file")]
    for attr, kind in outputs:
        path = getattr(args, attr, None)
        if path is None:
            continue
        if not isinstance(path, str) or not path:
            raise SpecmemInputError(f"{attr}: --{attr} needs a path")
        (check_out_file if kind == "file" else check_out_dir)(attr, path)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"specmem: warning: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the command; 0 ok, 1 a check failed, 2 bad input (one ``specmem: error:`` line)."""
    args = build_parser().parse_args(argv)
    shown = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        _check_outputs(args)
        return args.fn(args)
    except SpecmemInputError as exc:
        print(f"specmem: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"specmem: error: out of memory in specmem {args.cmd}; try smaller sizes", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        print(f"specmem: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specmem: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = shown


if __name__ == "__main__":
    sys.exit(main())


def _entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
