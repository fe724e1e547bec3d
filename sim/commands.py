"""Commands for the ``specmem sim`` subcommand: simulate one stream through the Verilated design,
benchmark the simulation, the coverage run and the mutation check.

``simulate("annihilation", d=16, k=4, tokens=10_000, seed=0)`` builds (or reuses) the top for
``(d, k, preset)``, streams ``tokens`` seeded tokens through it under random idle gaps and random
backpressure, checks every output bit, the status counters and the final state against the
fixed-point golden model, prints pass/fail and the first mismatch, and returns a
:class:`SimResult`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from specmem.golden.common import SpecmemInputError

from .build import Design, build
from .suite import coverage_suite, run_mutants, run_rule, run_top

__all__ = ["SimResult", "simulate", "bench_sim", "coverage_command", "mutation_command", "SCALED_MUTATION_DESIGNS",
           "SIM_ALGOS"]

SIM_ALGOS = ("annihilation", "vla", "linear", "deltanet", "gated-deltanet")
_V2_PRESETS = ("int18", "int16", "int8")  # the annihilation core v2's (rtl/generate.py: V2_PRESETS)


@dataclass
class SimResult:
    """What one ``simulate`` call saw."""

    passed: bool
    algo: str
    d: int
    k: int
    preset: str
    tokens: int
    seed: int
    cycles: int
    wall_s: float
    model_s: float
    first_mismatch: dict | None
    errors: list[str]
    waves: str | None
    build_dir: str
    build_reused: bool
    coverage: dict | None = None
    coverage_report: str | None = None
    record: dict = field(default_factory=dict)

    @property
    def cycles_per_s(self) -> float:
        sim = max(self.wall_s - self.model_s, 1e-9)
        return self.cycles / sim

    @property
    def tokens_per_s(self) -> float:
        sim = max(self.wall_s - self.model_s, 1e-9)
        return self.tokens / sim


def _check(algo, d, k, tokens, seed, preset):
    if algo not in SIM_ALGOS:
        rtl_only = algo == "engine"
        raise SpecmemInputError(
            f"algo: specmem sim has testbenches for {', '.join(SIM_ALGOS)} only; "
            + (f"{algo} has RTL (specmem rtl --algo {algo} generates and lints it) but no testbench"
               if rtl_only else f"got {algo!r}"))
    for name, v, lo in (("d", d, 2), ("k", k, 2), ("tokens", tokens, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpecmemInputError(f"{name}: must be an integer >= {lo}, got {v!r}")
    if k > d or d % k:
        raise SpecmemInputError(f"d: must be a multiple of k ({k}) and at least k, got {d}")
    need, avail = _stream_bytes(algo, d, tokens), _available_bytes()
    if avail is not None and need > avail // 2:
        raise SpecmemInputError(
            f"tokens: {tokens} tokens at d={d} need about {need / 2**30:.1f} GiB for the stimulus, the model's "
            f"outputs and the observed outputs (held for the whole stream); {avail / 2**30:.1f} GiB is available. "
            f"Use at most {max(1, tokens * (avail // 2) // need)} tokens per run")
    if algo == "annihilation":  # legacy-* -> core v1, int18/int16/int8 -> core v2
        from specmem.rtl.generate import annihilation_core_for

        try:
            annihilation_core_for(preset)
        except ValueError as exc:
            raise SpecmemInputError(str(exc)) from None
        return
    from specmem.rtl.presets import SCALED_CORE_ALGOS, check_rtl_preset, scaled_core

    if scaled_core(algo, preset):  # the scaled cores (sim/tb_scaled.py)
        return

    try:  # the RTL is bit-exact with the legacy formats, linear attention's and the delta rules' also int8
        check_rtl_preset(preset, SpecmemInputError)
    except SpecmemInputError as exc:
        if algo in SCALED_CORE_ALGOS:
            raise SpecmemInputError(f"{exc}; {algo} also int8 (the scaled core)") from None
        raise


#: bytes held per token and element of the stream: float stimulus and its copies, the raw
#: integers, the model's expected and the observed outputs (a generous bound, not a measurement)
_BYTES_PER_ELEMENT = 256


def _stream_bytes(algo: str, d: int, tokens: int) -> int:
    """Rough upper bound of the memory a ``tokens``-long stream holds at once."""
    per = {"vla": 4, "linear": 3, "deltanet": 4, "gated-deltanet": 4}.get(algo, 1)  # VLA: k, v, q, u; the baselines k, v, q (beta, g)
    return _BYTES_PER_ELEMENT * d * tokens * per


def _available_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


_RATE_FILE = "specmem-last-rate.json"


def _last_rate(directory) -> float | None:
    """Tokens/s of the last stream simulated in this build folder (wall time, model included)."""
    import json
    import os

    try:
        with open(os.path.join(directory, _RATE_FILE)) as f:
            return float(json.load(f)["tokens_per_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save_rate(directory, rate: float) -> None:
    import json
    import os

    try:
        with open(os.path.join(directory, _RATE_FILE), "w") as f:
            json.dump({"tokens_per_s": rate}, f)
    except OSError:
        pass  # only an estimate for the next run's progress lines


def _heartbeat(label: str, tokens: int, rate: float | None, enabled: bool = True):
    """While the simulator subprocess runs: a line every 10 s with the elapsed time and, from the
    last run's rate in this build, the expected rest (terminals only, see specmem.progress)."""
    from specmem.progress import Heartbeat

    note = (f"last run here: {rate:,.0f} tokens/s" if rate else
            "no earlier run in this build to estimate the rest from")
    return Heartbeat(f"{label}: {tokens} tokens", 10.0, expect_s=tokens / rate if rate else None, note=note,
                     enabled=None if enabled else False)


def simulate(algo: str, d: int, k: int, tokens: int, seed: int, preset: str = "legacy-int8", coverage: bool = False,
             waves: bool = False, *, idle: float = 0.3, stall: float = 0.3, kind: str | None = None,
             quiet: bool = False, params: dict | None = None) -> SimResult:
    """Simulate ``tokens`` tokens of a seeded ``kind`` stream (default ``mixed``: Gaussian with zero,
    orthogonal and large tokens mixed in; for the annihilation core v2, ``evictions``: many
    orthogonal tokens, each evicting a column) through the Verilated top; print pass/fail and the
    first mismatch. The annihilation's ``preset`` picks the core: ``legacy-*`` v1, ``int18``,
    ``int16``, ``int8`` v2 (bit-exact with the co-accumulated, evicting golden model).

    ``waves``: record a VCD waveform (``dump.vcd`` in the run folder). ``coverage``: build with
    line/toggle coverage, run the directed cases as well, and print the coverage summary with what
    is not covered (also written to ``build/sim/<config>/coverage/``).

    ``algo="vla"``: the VLA top (``sim/tb_rules.py``; ``kind`` ``mixed``, ``gaussian`` or
    ``saturating``; ``params``: the rule's parameters, generics of the design, e.g.
    ``{"refresh_period": 3}``); every ``o_raw``/``o_frac``, the counters and the final ``A``, ``S``
    are checked. ``algo="linear"`` / ``"deltanet"`` / ``"gated-deltanet"``: the linear-attention /
    DeltaNet / Gated DeltaNet top (the same testbench; ``kind`` as for VLA; ``params``: ``eps``); every ``o_raw``, the counters and the final
    ``S`` (and linear attention's ``z``) are checked. ``coverage`` runs the rule's directed cases
    (:data:`~specmem.sim.suite.RULE_DIRECTED`) on the coverage build."""
    _check(algo, d, k, tokens, seed, preset)
    if coverage and waves:
        raise SpecmemInputError("waves: the coverage build records no waveform; run --waves and --coverage separately")
    from specmem.rtl.presets import scaled_core

    if scaled_core(algo, preset):
        return _simulate_scaled(algo, d, k, tokens, seed, preset, coverage, waves, idle=idle, stall=stall, kind=kind,
                                quiet=quiet, params=params)
    if algo != "annihilation":
        design = Design(algo, d, k, preset, params=dict(params or {}))
    else:
        if params:
            raise SpecmemInputError("params: the annihilation top takes no parameters here (k is an argument)")
        design = Design("top", d, k, preset)
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    t0 = time.perf_counter()
    if kind is None:
        kind = "evictions" if algo == "annihilation" and preset in _V2_PRESETS else "mixed"
    stream = {"kind": kind, "T": tokens, "seed": seed, "idle": idle, "stall": stall}
    flavour = "cov" if coverage else ("waves" if waves else "plain")
    from specmem.progress import Heartbeat

    with Heartbeat(f"specmem sim: Verilator build of {design.name} ({flavour})", 10.0,
                   enabled=False if quiet else None):  # a new build takes a minute or so
        b = build(design, flavour, quiet=quiet)
    say(f"specmem sim: {design.name}: {tokens} tokens, seed {seed}, idle {idle}, backpressure {stall} "
        f"({'reused' if b.reused else 'new'} build {b.directory})")
    with _heartbeat(f"specmem sim: {design.name}", tokens, _last_rate(b.directory), enabled=not quiet):
        if algo != "annihilation":
            run = run_rule(design, ["stream"], stream=stream, waves=waves, name=f"sim-s{seed}-T{tokens}", b=b)
        else:
            run = run_top(design, ["stream"], stream=stream, waves=waves and not coverage,
                          name=f"sim-s{seed}-T{tokens}", b=b)
    rec = run.record.get("stream", {})
    if rec.get("wall_s"):
        _save_rate(b.directory, tokens / float(rec["wall_s"]))
    cov = cov_text = None
    if coverage:
        with Heartbeat(f"specmem sim: coverage (the directed cases on the coverage build of {design.name})", 10.0,
                       enabled=False if quiet else None):
            rep, _, out = coverage_suite(design, extra_runs=[run])
        cov = rep.to_json()
        from .coverage import format_report

        cov_text = format_report(rep)
    res = SimResult(
        passed=run.passed, algo=algo, d=d, k=k, preset=preset, tokens=tokens, seed=seed,
        cycles=int(rec.get("test_cycles", rec.get("cycles", 0)) or 0), wall_s=float(rec.get("wall_s", 0.0)),
        model_s=float(rec.get("model_s", 0.0)), first_mismatch=rec.get("first_mismatch"),
        errors=list(rec.get("errors", [])) or [f"{k_}: {v[:400]}" for k_, v in run.failures.items()],
        waves=str(run.waves) if run.waves else None, build_dir=str(b.directory), build_reused=b.reused,
        coverage=cov, coverage_report=cov_text, record=rec)
    _say_verdict(say, res, rec, run)
    if res.passed and res.waves:
        say(f"specmem sim: waveform {res.waves}")
    if cov_text:
        say(cov_text)
        say(f"specmem sim: coverage report in {out}/coverage.txt and coverage.json")
    say(f"specmem sim: {time.perf_counter() - t0:.1f} s in all")
    return res


def _say_verdict(say, res: SimResult, rec: dict, run) -> None:
    """Print PASS with the cycle and simulation rates, or FAIL with the first mismatch, the errors,
    the waveform and the log."""
    if res.passed:
        say(f"specmem sim: PASS: {rec.get('tokens_compared')} tokens bit exact, counters and final state equal "
            f"to the model; {res.cycles} cycles ({res.cycles / max(res.tokens, 1):.1f} per token), "
            f"{res.cycles_per_s:,.0f} cycles/s, {res.tokens_per_s:,.0f} tokens/s in simulation")
        return
    fm = res.first_mismatch
    say(f"specmem sim: FAIL ({rec.get('mismatched_tokens', '?')} mismatched tokens)")
    if fm:
        cyc = "" if fm.get("cycle") is None else f", cycle {fm['cycle']}"
        say(f"  first mismatch: token {fm['token']}, element {fm['element']} (beat {fm['beat']}, lane {fm['lane']}): "
            f"expected {fm['expected']}, observed {fm['observed']}{cyc}")
    for e in res.errors[:5]:
        say(f"  {e}")
    say(f"  waveform: {res.waves}" if res.waves else "  waveform: none (rerun with waves=True / --waves)")
    say(f"  log: {run.log}")


def _simulate_scaled(algo, d, k, tokens, seed, preset, coverage, waves, *, idle, stall, kind, quiet,
                     params) -> SimResult:
    """``simulate`` on a scaled core (linear attention, DeltaNet, Gated DeltaNet, VLA): ``tb_scaled``'s
    ``random_stream`` (Gaussian tokens, gated: decays from 1 down to 2^-700) with ``idle`` and
    ``stall``; every output, its exponent, the final state (gated: and ``gamma``; linear: and
    ``z``; VLA: and ``A``, its diagonal) checked. VLA takes ``lambda0``, ``refresh_period``,
    ``eta``, ``u_scale`` beside ``eps``, and the hardware's ``chain_lanes``."""
    from .build import run_cocotb
    from .suite import SCALED_TB, coverage_suite

    if coverage and waves:
        raise SpecmemInputError("waves: the coverage build records no waveform; run --waves and --coverage separately")
    if kind not in (None, "gaussian"):
        raise SpecmemInputError(f"kind: the scaled core's stream is Gaussian (gaussian), got {kind!r}")
    from specmem.rtl.generate import VLA_SCALED_PARAMS

    p = dict(params or {})
    takes = {"eps"} | ({"chain_lanes", *VLA_SCALED_PARAMS} if algo == "vla" else set())
    extra = set(p) - takes
    if extra:
        raise SpecmemInputError(f"{sorted(extra)[0]}: not a parameter of the scaled {algo} core (it takes "
                                f"{', '.join(sorted(takes))})")
    if "eps" in p:  # the core's own check, as a one-line input error
        from specmem.rtl.presets import check_scaled_core

        try:
            p["eps"] = float(p["eps"])
        except (TypeError, ValueError):
            raise SpecmemInputError(f"eps: must be a positive finite number, got {params['eps']!r}") from None
        try:
            check_scaled_core(d, k, preset, p["eps"])
        except ValueError as exc:
            raise SpecmemInputError(str(exc)) from None
    if algo == "vla":  # the rule's parameters checked as the core checks them, before a build
        from specmem.rtl.vla_scaled import check_vla_scaled

        try:
            check_vla_scaled(d, k, preset, **p)
        except ValueError as exc:
            raise SpecmemInputError(str(exc)) from None
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    t0 = time.perf_counter()
    design = Design({"linear": "linear-scaled", "vla": "vla-scaled"}.get(algo, "deltanet-scaled"), d, k, preset, params={**({"gated": 1} if algo == "gated-deltanet" else {}), **p})
    from specmem.progress import Heartbeat

    flavour = "cov" if coverage else ("waves" if waves else "plain")
    with Heartbeat(f"specmem sim: Verilator build of {design.name} ({flavour})", 10.0, enabled=False if quiet else None):
        b = build(design, flavour, quiet=quiet)
    say(f"specmem sim: {design.name}: {tokens} tokens, seed {seed}, idle {idle}, backpressure {stall} "
        f"({'reused' if b.reused else 'new'} build {b.directory})")
    with _heartbeat(f"specmem sim: {design.name}", tokens, _last_rate(b.directory), enabled=not quiet):
        run = run_cocotb(b, SCALED_TB, {"name": f"sim-s{seed}-T{tokens}", "seed": seed,
                                                               "tokens": tokens, "idle": idle, "stall": stall},
                         testcase="random_stream", waves=waves)
    rec = run.record.get("random_stream", {})
    if rec.get("wall_s"):
        _save_rate(b.directory, tokens / float(rec["wall_s"]))
    cov = cov_text = None
    if coverage:
        with Heartbeat(f"specmem sim: coverage (the testbench's cases on the coverage build of {design.name})", 10.0,
                       enabled=False if quiet else None):
            rep, _, out = coverage_suite(design, seeds=(seed, seed + 1), T=48, extra_runs=[run])
        cov = rep.to_json()
        from .coverage import format_report

        cov_text = format_report(rep)
    res = SimResult(
        passed=run.passed, algo=algo, d=d, k=k, preset=preset, tokens=tokens, seed=seed,
        cycles=int(rec.get("cycles", 0) or 0), wall_s=float(rec.get("wall_s", 0.0)),
        model_s=float(rec.get("model_s", 0.0)), first_mismatch=rec.get("first_mismatch"),
        errors=list(rec.get("errors", [])) or [f"{k_}: {v[:400]}" for k_, v in run.failures.items()],
        waves=str(run.waves) if run.waves else None, build_dir=str(b.directory), build_reused=b.reused,
        coverage=cov, coverage_report=cov_text, record=rec)
    _say_verdict(say, res, rec, run)
    if res.passed and res.waves:
        say(f"specmem sim: waveform {res.waves}")
    if cov_text:
        say(cov_text)
        say(f"specmem sim: coverage report in {out}/coverage.txt and coverage.json")
    say(f"specmem sim: {time.perf_counter() - t0:.1f} s in all")
    return res


def bench_sim(d: int = 16, k: int = 4, preset: str = "legacy-int8", tokens: int = 2000, *, seed: int = 0,
              quiet: bool = False) -> dict:
    """Simulation speed of the Verilated top under cocotb: one stream at full rate (no idle gaps,
    sink always ready) and one with 30 % gaps and backpressure. Prints and returns cycles/s and
    tokens/s of the simulation (golden-model time excluded; it is reported separately)."""
    from specmem.progress import Heartbeat

    out = {"d": d, "k": k, "preset": preset, "tokens": tokens, "runs": []}
    for i, (idle, stall) in enumerate(((0.0, 0.0), (0.3, 0.3)), 1):
        with Heartbeat(f"specmem sim bench: run {i}/2 (idle {idle}, backpressure {stall}), {tokens} tokens", 10.0,
                       enabled=False if quiet else None):
            r = simulate("annihilation", d, k, tokens, seed, preset, idle=idle, stall=stall, kind="gaussian",
                         quiet=True)
        row = {"idle": idle, "stall": stall, "passed": r.passed, "cycles": r.cycles, "wall_s": round(r.wall_s, 3),
               "model_s": round(r.model_s, 3), "cycles_per_s": round(r.cycles_per_s), "tokens_per_s": round(r.tokens_per_s, 1),
               "cycles_per_token": round(r.cycles / tokens, 2)}
        out["runs"].append(row)
        if not quiet:
            print(f"specmem sim bench: d={d} k={k} {preset} T={tokens} idle={idle} backpressure={stall}: "
                  f"{row['cycles']} cycles in {row['wall_s'] - row['model_s']:.2f} s -> {row['cycles_per_s']:,} cycles/s, "
                  f"{row['tokens_per_s']:,} tokens/s ({row['cycles_per_token']} cycles/token; golden model "
                  f"{row['model_s']:.2f} s extra){'' if r.passed else '  FAILED'}", flush=True)
    return out


def coverage_command(d: int = 16, k: int = 4, preset: str = "legacy-int8", *, seeds=(0, 1, 2, 3), tokens: int = 200,
                     quiet: bool = False):
    """The directed cases and ``len(seeds)`` random streams on a coverage build; prints the summary
    and what is not covered; returns the :class:`~specmem.sim.coverage.CoverageReport`."""
    from .coverage import format_report

    from specmem.progress import Heartbeat

    with Heartbeat("specmem sim: coverage (directed cases and random streams on the coverage build)", 10.0,
                   enabled=False if quiet else None):
        rep, runs, out = coverage_suite(Design("top", d, k, preset), seeds=seeds, T=tokens)
    if not quiet:
        print(format_report(rep))
        print(f"specmem sim: coverage report in {out}/coverage.txt and coverage.json"
              f"{'' if all(r.passed for r in runs) else ' (SOME TESTS FAILED)'}")
    return rep


#: the scaled cores' mutation-check configurations: d = 8, k = 4 (VLA refreshing every third
#: token); linear attention at d = 16, k = 1, where its pass and not its front end sets the cycles
#: per token (at d = 8, k = 4 a pass one cycle longer is hidden: the timing mutant is equivalent)
SCALED_MUTATION_DESIGNS = {
    "deltanet": Design("deltanet-scaled", 8, 4, "int8"),
    "gated-deltanet": Design("deltanet-scaled", 8, 4, "int8", params=(("gated", 1),)),
    "linear": Design("linear-scaled", 16, 1, "int8"),
    "vla": Design("vla-scaled", 8, 4, "int8", params=(("refresh_period", 3),)),
}


def mutation_command(*, ci: bool = True, seeds=(0, 1), tokens: int = 24, quiet: bool = False,
                     preset: str = "legacy-int8", algo: str | None = None):
    """Build the mutant schema of the annihilation top at d=16, k=4 (``preset``: legacy-int8, core
    v1; int18, core v2), or with ``algo`` that rule's scaled int8 core
    (:data:`SCALED_MUTATION_DESIGNS`, seed 0), and show that the testbench catches each mutant; returns
    ``(baseline_run, [MutantResult])``."""
    from specmem.progress import Heartbeat

    if algo is None:
        design = Design("top", 16, 4, preset)
    elif algo in SCALED_MUTATION_DESIGNS:
        design, seeds = SCALED_MUTATION_DESIGNS[algo], seeds[:1]
    else:
        raise SpecmemInputError(f"algo: the scaled cores' mutation checks are {', '.join(SCALED_MUTATION_DESIGNS)}, "
                                f"got {algo!r}")
    with Heartbeat("specmem sim: mutation check (one build of the mutant schema, then the testbench on each "
                   "mutant)", 10.0, enabled=False if quiet else None):
        base, res = run_mutants(design, ci=ci, seeds=seeds, T=tokens)
    if not quiet:
        print(f"specmem sim: unmodified design {'PASS' if base.passed else 'FAIL'}")
        for r in res:
            print(f"  {r.name:28s} {'caught' if r.caught else 'SURVIVED'}  by {', '.join(r.failing_tests[:3]) or '-'}: "
                  f"{r.first_error[:120]}")
    return base, res
