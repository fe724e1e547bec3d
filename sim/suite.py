"""The verification suite as functions: the top's testbench, the engine's and the scalar unit's,
the coverage run and the mutation check. The pytest files in ``tests/sim`` and the commands in
:mod:`specmem.sim.commands` call these.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .build import BUILD_ROOT, REPO_ROOT, SCALED_KINDS, Build, Design, SimRun, build, run_cocotb
from .coverage import CoverageReport, merge, summarise, write_report
from .mutants import MUTANTS, RULE_MUTANTS, SCALED_MUTANTS, V2_MUTANTS, Mutant, apply_schema

__all__ = ["TOP_TB", "V2_DIRECTED", "top_directed", "RULE_TB",
           "VLA_TB", "VLA_DIRECTED", "BASELINE_DIRECTED", "RULE_DIRECTED", "run_rule", "run_vla",
           "ENGINE_TB", "SCALAR_UNIT_TB", "BRAM_TB", "SCALED_TB", "SCALED_CASES", "run_bram", "DIRECTED", "run_top", "run_engine",
           "run_scalar_unit", "coverage_suite", "MutantResult", "run_mutants", "DEFAULT_SEEDS"]

TOP_TB = "specmem.sim.tb_top"
#: one testbench for the attention-rule tops: VLA, linear attention, DeltaNet, Gated DeltaNet (``sim/tb_rules.py``)
RULE_TB = "specmem.sim.tb_rules"
VLA_TB = RULE_TB
ENGINE_TB = "specmem.sim.tb_engine"
SCALAR_UNIT_TB = "specmem.sim.tb_scalar_unit"
BRAM_TB = "specmem.sim.tb_bram"
#: the scaled cores' testbench and its cases (``sim/tb_scaled.py``; ``streams`` is the back-end's)
SCALED_TB = "specmem.sim.tb_scaled"
SCALED_CASES = ("random_stream", "reset_mid_stream", "full_rate")
#: the directed cocotb tests of the top (everything but the generic ``stream`` test)
DIRECTED = ("steady_state", "warm_up_and_latency", "orthogonal_and_zero", "saturating", "reset_mid_stream",
            "framing_errors", "random_stream")
#: ... and of the annihilation core v2's top (int18/int16/int8): the same, plus round-robin ties
#: among evictions (``round_robin_ties``)
V2_DIRECTED = DIRECTED + ("round_robin_ties",)
DEFAULT_SEEDS = tuple(range(10))
#: the directed cocotb tests of the VLA top (``sim/tb_rules.py``)
VLA_DIRECTED = ("steady_state", "latency", "saturating", "reset_mid_stream", "framing_errors", "random_stream")
#: ... and of the linear-attention and DeltaNet tops (their manifests state no latency)
BASELINE_DIRECTED = ("steady_state", "saturating", "reset_mid_stream", "framing_errors", "random_stream")
RULE_DIRECTED = {"vla": VLA_DIRECTED, "linear": BASELINE_DIRECTED, "deltanet": BASELINE_DIRECTED,
                 "gated-deltanet": BASELINE_DIRECTED}


def top_directed(design: Design) -> tuple:
    """The directed tests of an annihilation top: :data:`DIRECTED` (core v1), :data:`V2_DIRECTED`
    (core v2: the int18/int16/int8 presets)."""
    from specmem.rtl.generate import annihilation_core_for

    return V2_DIRECTED if annihilation_core_for(design.preset) == "v2" else DIRECTED


def run_top(design: Design = Design(), testcases=None, *, seeds=DEFAULT_SEEDS, stream: dict | None = None,
            flavour: str = "plain", waves: bool = False, plusargs=(), name: str = "top", b: Build | None = None,
            quiet: bool = True) -> SimRun:
    """Build (or reuse) ``design`` and run the top testbench's ``testcases`` (default: the design's
    directed tests, :func:`top_directed`) in one simulator process. ``stream``: ``{kind, T, seed,
    idle, stall}`` for ``random_stream``/``stream``."""
    if testcases is None:
        testcases = top_directed(design)
    b = b or build(design, "waves" if waves else flavour, quiet=quiet)
    case = {"name": name, "seeds": list(seeds), "stream": dict(stream or {})}
    if waves:
        case["waves_file"] = "dump.vcd"
    return run_cocotb(b, TOP_TB, case, testcase=list(testcases) if testcases else None, waves=waves,
                      plusargs=plusargs)


def run_rule(design: Design, testcases=None, *, seeds=(0, 1, 2), stream: dict | None = None, flavour: str = "plain",
             waves: bool = False, plusargs=(), name: str | None = None, b: Build | None = None,
             quiet: bool = True) -> SimRun:
    """Build (or reuse) an attention-rule top ``design`` (``Design("vla" | "linear" | "deltanet", d,
    k, preset, params=...)``) and run ``sim/tb_rules.py``'s ``testcases`` (default: the rule's
    directed tests, :data:`RULE_DIRECTED`) in one simulator process. ``stream``: ``{kind, T, seed,
    idle, stall}`` for ``random_stream``/``stream``."""
    if design.kind not in RULE_DIRECTED:
        raise ValueError(f"design: a {', '.join(RULE_DIRECTED)} design is needed, got {design.kind!r}")
    if testcases is None:
        testcases = RULE_DIRECTED[design.kind]
    b = b or build(design, "waves" if waves else flavour, quiet=quiet)
    case = {"name": name or design.kind, "seeds": list(seeds), "stream": dict(stream or {})}
    if waves:
        case["waves_file"] = "dump.vcd"
    return run_cocotb(b, RULE_TB, case, testcase=list(testcases) if testcases else None, waves=waves,
                      plusargs=plusargs)


def scaled_algo(design: Design) -> str:
    """The rule a scaled-core design builds (``deltanet-scaled`` with ``gated`` is Gated DeltaNet)."""
    return "gated-deltanet" if dict(design.params or ()).get("gated", 0) else SCALED_KINDS[design.kind]


def run_scaled(design: Design, testcases=SCALED_CASES, *, seeds=(0,), stream: dict | None = None, plusargs=(),
               name: str | None = None, b: Build | None = None, quiet: bool = True) -> SimRun:
    """Build (or reuse) a scaled-core ``design`` and run ``sim/tb_scaled.py``'s ``testcases``, one
    simulator process per seed (``stream["T"]`` tokens, default 24); returns the first failing
    run, else the last."""
    if design.kind not in SCALED_KINDS:
        raise ValueError(f"design: a {', '.join(SCALED_KINDS)} design is needed, got {design.kind!r}")
    if not seeds:
        raise ValueError("seeds: at least one")
    b = b or build(design, "plain", quiet=quiet)
    run = None
    for s in seeds:
        case = {"name": f"{name or design.kind}-s{s}", "seed": s, "tokens": int((stream or {}).get("T", 24))}
        run = run_cocotb(b, SCALED_TB, case, testcase=list(testcases), plusargs=plusargs)
        if not run.passed:
            break
    return run


def run_vla(design: Design, testcases=VLA_DIRECTED, *, seeds=(0, 1, 2), stream: dict | None = None,
            waves: bool = False, name: str = "vla", b: Build | None = None, quiet: bool = True) -> SimRun:
    """:func:`run_rule` for a VLA design (``Design("vla", d, k, preset, params=...)``)."""
    if design.kind != "vla":
        raise ValueError(f"design: a vla design is needed, got {design.kind!r}")
    return run_rule(design, testcases, seeds=seeds, stream=stream, waves=waves, name=name, b=b, quiet=quiet)


def run_engine(design: Design = Design(kind="engine"), *, seeds=(0, 1, 2), runs: int = 60) -> SimRun:
    b = build(design, "plain")
    return run_cocotb(b, ENGINE_TB, {"name": "engine", "seeds": list(seeds), "runs": runs})


def run_bram(depth: int = 40, width: int = 20, *, seed: int = 0, cycles: int = 2000) -> SimRun:
    """Both block-RAM styles (``rtl/bram.py``) against the two-register read reference in Verilator."""
    b = build(Design("bram", depth, 1, params=(("width", width),)), "plain")
    return run_cocotb(b, BRAM_TB, {"name": "bram", "seed": seed, "cycles": cycles})


def run_scalar_unit(design: Design = Design(kind="scalar_unit"), *, seeds=(0, 1, 2), requests: int = 150) -> SimRun:
    b = build(design, "plain")
    return run_cocotb(b, SCALAR_UNIT_TB, {"name": "scalar_unit", "seeds": list(seeds), "requests": requests})


def coverage_suite(design: Design = Design(), *, seeds=(0, 1, 2, 3), T: int = 200, extra_runs=(),
                   out_dir: Path | None = None) -> tuple[CoverageReport, list[SimRun], Path]:
    """Run the directed tests and ``len(seeds)`` random streams of ``T`` tokens on a coverage build
    (``--coverage-line --coverage-toggle``), merge, summarise; writes ``coverage.txt`` and
    ``coverage.json`` under ``out_dir`` (default ``build/sim/<config>/coverage``). The annihilation
    top runs ``sim/tb_top.py``'s directed tests, a rule top (``vla``, ``linear``, ``deltanet``)
    ``sim/tb_rules.py``'s (:data:`RULE_DIRECTED`), a scaled core (``deltanet-scaled``,
    ``linear-scaled``, ``vla-scaled``) ``sim/tb_scaled.py``'s cases (:data:`SCALED_CASES`) once per seed."""
    b = build(design, "cov")
    if design.kind == "top":
        runs = [run_top(design, seeds=seeds, stream={"T": T}, name="coverage", b=b)]
    elif design.kind in RULE_DIRECTED:
        runs = [run_rule(design, seeds=seeds, stream={"T": T}, name="coverage", b=b)]
    elif design.kind in SCALED_KINDS:
        runs = [run_cocotb(b, SCALED_TB, {"name": f"coverage-s{s}", "seed": s, "tokens": T}, testcase=list(SCALED_CASES))
                for s in seeds]
    else:
        raise ValueError(f"design: no coverage suite for a {design.kind!r} design")
    runs += list(extra_runs)
    files = [r.coverage for r in runs if r.coverage is not None]
    rep = summarise(merge(files), b.verilog, runs=len(files), repo_root=REPO_ROOT)
    out = out_dir or (BUILD_ROOT / design.name / "coverage")
    write_report(rep, Path(out))
    return rep, runs, Path(out)


@dataclass
class MutantResult:
    name: str
    what: str
    expect: str
    caught: bool
    failing_tests: list[str] = field(default_factory=list)
    first_error: str = ""
    seconds: float = 0.0


def run_mutants(design: Design = Design(), mutants: list[Mutant] | None = None, *, ci: bool = True,
                seeds=(0, 1), T: int = 24, testcases=None) -> tuple[SimRun, list[MutantResult]]:
    """Build the mutant schema of ``design`` once, run the testbench on the unmodified design
    (``+SPECMEM_MUTANT=0``, must pass) and on each mutant (must fail). Returns the baseline run and
    one :class:`MutantResult` per mutant. ``ci=True`` keeps the small default set. The annihilation
    top (``kind="top"``) uses :data:`~specmem.sim.mutants.MUTANTS` (core v2, the int18/int16/int8
    presets: :data:`~specmem.sim.mutants.V2_MUTANTS`) and ``sim/tb_top.py``; the rule
    tops (``vla``, ``linear``, ``deltanet``) their :data:`~specmem.sim.mutants.RULE_MUTANTS` and
    ``sim/tb_rules.py``; ``testcases`` default to the design's directed tests."""
    if design.kind == "top" and top_directed(design) is V2_DIRECTED:
        schema, runner = V2_MUTANTS, run_top
        testcases = V2_DIRECTED if testcases is None else testcases
    elif design.kind == "top":
        schema, runner = MUTANTS, run_top
        testcases = DIRECTED if testcases is None else testcases
    elif design.kind in RULE_MUTANTS:
        schema, runner = RULE_MUTANTS[design.kind], run_rule
        testcases = RULE_DIRECTED[design.kind] if testcases is None else testcases
    elif design.kind in SCALED_KINDS:
        schema, runner = SCALED_MUTANTS[scaled_algo(design)], run_scaled
        testcases = SCALED_CASES if testcases is None else testcases
    else:
        raise ValueError(f"design: no mutants for a {design.kind!r} design")
    chosen = [m for m in (mutants or schema) if m.ci or not ci]
    ids = {}

    def mutate(text):
        out, got = apply_schema(text, schema)  # always the full schema: one build for every subset
        ids.update(got)
        return out

    b = build(design, "plain", mutate=mutate, mutant="schema")
    if not ids:  # reused build: recompute the numbering (deterministic)
        from .build import verilog_for

        ids.update(apply_schema(verilog_for(design)[0], schema)[1])
    stream = {"T": T}
    baseline = runner(design, testcases, seeds=seeds, stream=stream, plusargs=["+SPECMEM_MUTANT=0"],
                      name="mutant-0", b=b)
    results = []
    for m in chosen:
        t0 = time.perf_counter()
        r = runner(design, testcases, seeds=seeds, stream=stream, plusargs=[f"+SPECMEM_MUTANT={ids[m.name]}"],
                   name=f"mutant-{ids[m.name]}", b=b)
        failing = [t for t, ok in r.tests.items() if not ok] or (["<simulator>"] if not r.tests else [])
        err = ""
        for t in failing:
            rec = r.record.get(t) or next((v for k, v in r.record.items() if k.startswith(t.split("/")[0])), None)
            if rec and rec.get("errors"):
                err = rec["errors"][0]
                break
            if t in r.failures:
                err = r.failures[t].strip().splitlines()[0][:300]
                break
        results.append(MutantResult(m.name, m.what, m.expect, caught=not r.passed, failing_tests=failing,
                                    first_error=err, seconds=time.perf_counter() - t0))
    return baseline, results
