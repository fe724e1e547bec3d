"""Place and route one building block of ``rtl/`` on its own (ECP5-85F, speed 6) for its fmax and
resources: the same tools, device and I/O shell as ``specmem synth``'s cores.

    python -m specmem.synth_block bram --style ecp5 --depth 128 --width 18
    python -m specmem.synth_block block_norm --n 8 --in-width 24 --M 18
    python -m specmem.synth_block block_norm_stream --k 8 --beats 8 --in-width 21 --M 8
    python -m specmem.synth_block row_bfp --k 8 --width 16 --M 8
    python -m specmem.synth_block align --k 8 --beats 8 --M 8 --in-width 22 --style registers
    python -m specmem.synth_block unit_norm --k 8 --beats 8
    python -m specmem.synth_block deltanet_scaled --d 32 --k 4 --style ecp5
    python -m specmem.synth_block gated_deltanet_scaled --d 32 --k 4 --style ecp5
    python -m specmem.synth_block linear_scaled --d 32 --k 4 --style ecp5
    python -m specmem.synth_block vla_scaled --d 32 --k 4 --style ecp5 --dsp ecp5
    python -m specmem.synth_block block_elu --k 4 --beats 8 --style ecp5
    python -m specmem.synth_block decay
    python -m specmem.synth_block saturate --k 8 --in-width 36 --out-width 18
    python -m specmem.synth_block round_shift --k 8 --in-width 36 --max-left 24
    python -m specmem.synth_block delay_line --style ecp5 --width 36 --n-stages 24
    python -m specmem.synth_block row_unit --d 64 --k 8 --preset int18 --dsp ecp5 --delays ecp5 --travelling --p-window
    python -m specmem.synth_block token_chain --d 64 --k 8 --preset int18
    python -m specmem.synth_block core_v2 --d 64 --k 8 --preset int18 --dsp ecp5 --style ecp5

Each block is synthesised inside ``synth_shell`` (every port from or into a flip-flop), so the
fmax is the block's own register-to-register limit plus one hop to the shell.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specmem.synth import DEVICE, SHELL_TOP, _main_clock_path, _run_tool, _stat_modules, critical_path_summary, \
    nextpnr_ecp5_args, shell_verilog, tool_versions

__all__ = ["synth_block", "BLOCKS", "main"]


def _bram(depth=128, width=18, style="ecp5"):
    from specmem.rtl.bram import RegisteredRAM
    return RegisteredRAM(depth, width, style), f"bram_{style}_{depth}x{width}"


def _delay_line(width=36, n=24, style="ecp5"):
    from specmem.rtl.delay_line import DelayLine
    return DelayLine(width, n, style, fabric_out=style != "registers"), f"delay_line_{style}_{width}x{n}"


def _block_norm(n=8, in_width=24, M=18, lanes=None):
    from specmem.rtl.block_norm import BlockNormaliser, SerialBlockNormaliser
    if lanes is None:
        return BlockNormaliser(n, in_width, M), f"block_norm_n{n}_w{in_width}_m{M}"
    return SerialBlockNormaliser(n, in_width, M, lanes=lanes), f"block_norm_serial_n{n}_w{in_width}_m{M}_l{lanes}"


def _block_norm_stream(lanes=8, beats=8, in_width=21, M=8):
    from specmem.rtl.block_norm import StreamBlockNormaliser
    return (StreamBlockNormaliser(lanes, beats, in_width, M),
            f"block_norm_stream_l{lanes}_b{beats}_w{in_width}_m{M}")


def _row_bfp(k=8, Ws=16, M=8):
    from specmem.rtl.row_bfp import RowBFPWrite
    return RowBFPWrite(k, Ws, M), f"row_bfp_write_k{k}_ws{Ws}_m{M}"


def _align(lanes=8, beats=8, M=8, sk_width=22, style="registers"):
    """The delta rules' ``e = v - gamma sk``: an ``M``-bit block vector and per-row dot products."""
    from specmem.rtl.align import StreamAlignBlock
    return (StreamAlignBlock(lanes, beats, ((M, False), (sk_width, True)), M, delay_style=style),
            f"align_l{lanes}_b{beats}_m{M}_w{sk_width}_{style}")


def _unit_norm(lanes=8, beats=8, preset="int8"):
    """The delta rules' kn / qn unit (scalar unit included) in a scaled preset."""
    from specmem.golden.fixed.formats import PRESETS
    from specmem.rtl.unit_norm import UnitNormaliser
    p = PRESETS[preset]
    return UnitNormaliser(lanes, beats, p.mul_bits, p.scalar_unit()), f"unit_norm_l{lanes}_b{beats}_{preset}"


def _gated_deltanet_scaled(d=32, k=4, preset="int8", ram="ecp5"):
    return _deltanet_scaled(d, k, preset, ram, gated=True)


def _decay(preset="int8"):
    from specmem.golden.fixed.formats import PRESETS
    from specmem.rtl.decay import DecayScale
    return DecayScale(PRESETS[preset].scalar_unit()), f"decay_{preset}"


def _deltanet_scaled(d=32, k=4, preset="int8", ram="ecp5", gated=False, dsp="registered", heads=1):
    """The scaled DeltaNet core (front end, fused pass, chain; ``heads`` memories)."""
    from specmem.rtl.deltanet_scaled import DeltaNetScaledCore
    return (DeltaNetScaledCore(d, k, preset, ram=ram, gated=gated, dsp=dsp, heads=heads),
            f"{'gated_' if gated else ''}deltanet_scaled_d{d}_k{k}_{preset}_{ram}" + ("_dsp_ecp5" if dsp == "ecp5" else "")
            + ("" if heads == 1 else f"_h{heads}"))


def _linear_scaled(d=32, k=4, preset="int8", ram="ecp5", dsp="registered"):
    """The scaled linear-attention core (ELU front end, running z, fused pass, output chain)."""
    from specmem.rtl.linear_attention_scaled import LinearAttentionScaledCore
    return (LinearAttentionScaledCore(d, k, preset, ram=ram, dsp=dsp),
            f"linear_scaled_d{d}_k{k}_{preset}_{ram}" + ("_dsp_ecp5" if dsp == "ecp5" else ""))


def _vla_scaled(d=32, k=4, preset="int8", ram="ecp5", dsp="registered", chain_lanes=None):
    """The scaled VLA core (ELU front end, two unit normalisers, the A and S passes, the chain on
    ``chain_lanes`` lanes, default ``k``)."""
    from specmem.rtl.vla_scaled import VlaScaledCore
    return (VlaScaledCore(d, k, preset, ram=ram, dsp=dsp, chain_lanes=chain_lanes),
            f"vla_scaled_d{d}_k{k}_{preset}_{ram}" + ("_dsp_ecp5" if dsp == "ecp5" else "")
            + (f"_c{chain_lanes}" if chain_lanes is not None else ""))


def _block_elu(k=4, beats=8, preset="int8", ram="ecp5"):
    """The scaled formats' ELU+1 (element pipeline and its alignment)."""
    from specmem.golden.fixed.formats import PRESETS
    from specmem.rtl.elu import BlockElu1
    p = PRESETS[preset]
    return (BlockElu1(k, beats, p.mul_bits, p.exp_lut_bits, rounding=p.rounding, delay_style=ram),
            f"block_elu_k{k}_b{beats}_{preset}_{ram}")


def _saturate(k=8, in_width=36, out_width=18):
    from specmem.rtl.saturate import SaturatingNarrow
    return SaturatingNarrow(k, in_width, out_width), f"saturate_k{k}_w{in_width}_o{out_width}"


def _lane_control(k=8):
    from amaranth.hdl import signed
    from amaranth.lib import data

    from specmem.rtl.lane_control import LaneControl
    layout = data.StructLayout({"shift": signed(7), "mask": 8, "select": 4, "enable": 1})
    return LaneControl(layout, k), f"lane_control_k{k}"


def _round_shift(k=8, in_width=36, max_left=24):
    from specmem.rtl.shift import RoundShiftVar
    return RoundShiftVar(k, in_width, max_left=max_left), f"round_shift_k{k}_w{in_width}_l{max_left}"


def _row_unit(d=64, k=8, preset="int18", dsp="registered", delays="registers", travelling=False, p_window=False):
    from specmem.golden.fixed.annihilation import p_shift_window
    from specmem.golden.fixed.formats import formats_for
    from specmem.rtl.row_unit import RowUnit
    tag = ("" if delays == "registers" else f"_dl{delays}") + ("_tc" if travelling else "") + ("_pw" if p_window else "")
    win = p_shift_window(formats_for("annihilation", preset, d, {"k": k, "in_range": None}), k) if p_window else None
    return (RowUnit(d, k, preset, dsp=dsp, delays=delays, travelling_controls=travelling, p_window=win),
            f"row_unit_d{d}_k{k}_{preset}_{dsp}{tag}")


def _token_chain(d=64, k=8, preset="int18", dsp="registered", norm_lanes=None):
    from specmem.rtl.token_chain import TokenChain
    tag = "" if norm_lanes is None else f"_nl{norm_lanes}"
    return TokenChain(d, k, preset, dsp=dsp, norm_lanes=norm_lanes), f"token_chain_d{d}_k{k}_{preset}_{dsp}{tag}"


def _core_v2(d=64, k=8, preset="int18", dsp="registered", bram="ecp5", norm_lanes=None, heads=1, chains=1):
    from specmem.rtl.annihilation_v2 import AnnihilationCoreV2
    tag = ("" if norm_lanes is None else f"_nl{norm_lanes}") + ("" if heads == 1 else f"_h{heads}c{chains}")
    return (AnnihilationCoreV2(d, k, preset, dsp=dsp, bram=bram, norm_lanes=norm_lanes, heads=heads, chains=chains),
            f"core_v2_d{d}_k{k}_{preset}_{dsp}_{bram}{tag}")


BLOCKS = {"bram": _bram, "delay_line": _delay_line, "block_norm": _block_norm, "block_norm_stream": _block_norm_stream, "row_bfp": _row_bfp,
          "align": _align, "unit_norm": _unit_norm, "deltanet_scaled": _deltanet_scaled,
          "gated_deltanet_scaled": _gated_deltanet_scaled, "linear_scaled": _linear_scaled, "vla_scaled": _vla_scaled,
          "block_elu": _block_elu, "decay": _decay, "saturate": _saturate, "lane_control": _lane_control,
          "round_shift": _round_shift, "row_unit": _row_unit, "token_chain": _token_chain, "core_v2": _core_v2}


def synth_block(component, name: str, out_dir="build/synth/blocks", *, target_mhz: float = 250.0,
                seed: int = 1, progress=None, router: str = "router1") -> dict:
    """Synthesise ``component`` as module ``name`` in the shell, place and route; returns the record
    (also written to ``<out_dir>/<name>/result.json``). ``progress``: a log callable for the
    stage lines (default none; a terminal still sees heartbeat lines, :mod:`specmem.progress`)."""
    from amaranth.back import verilog

    from specmem.progress import stage
    from specmem.rtl.generate import verilog_ports
    from specmem.synth import _pnr_status

    work = Path(out_dir) / name
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with stage(f"{name}: Verilog (amaranth)", progress):
        text = verilog.convert(component, name=name, emit_src=True)
    (work / f"{name}.v").write_text(text)
    shell, shell_info = shell_verilog(name, verilog_ports(text, name))
    (work / "shell.v").write_text(shell)
    (work / "ecp5.ys").write_text(
        f"read_verilog {name}.v shell.v\nhierarchy -top {SHELL_TOP}\n"
        f"setattr -mod -set keep_hierarchy 1 {name}\n"
        # proc + splitnets first: Yosys 0.70's ABC reintegration otherwise asserts on some Amaranth
        # netlists (`count_id(wire->name) == 0`, YosysHQ/yosys#4349; the block normaliser hits it)
        f"proc\nsplitnets\nsynth_ecp5 -top {SHELL_TOP} -json ecp5_netlist.json\ntee -q -o ecp5_stat.json stat -json\n")
    with stage(f"{name}: yosys synth_ecp5", progress):
        _run_tool("yosys", ["-q", "-l", "yosys_ecp5.log", "-s", "ecp5.ys"], work)
    cells = _stat_modules(work / "ecp5_stat.json")
    core, shell_cells = cells.get(name, {}), cells.get(SHELL_TOP, {})
    with stage(f"{name}: nextpnr-ecp5 (target {target_mhz:g} MHz)", progress,
               status=lambda: _pnr_status(work / "nextpnr.log")):
        _run_tool("nextpnr-ecp5", nextpnr_ecp5_args(target_mhz, seed, router), work, log="nextpnr.out")
    report = json.loads((work / "ecp5_report.json").read_text())
    fmax = min(v["achieved"] for v in report["fmax"].values())
    used = {b: v["used"] for b, v in report["utilization"].items() if v["used"]}
    cp = _main_clock_path(report)
    res = {"block": name, "device": {k: v for k, v in DEVICE.items() if k != "nextpnr_flag"},
           "target_mhz": target_mhz, "seed": seed, "router": router, "fmax_mhz": round(fmax, 2),
           "luts": used.get("TRELLIS_COMB", 0) - shell_cells.get("LUT4", 0),
           "ffs": used.get("TRELLIS_FF", 0) - shell_cells.get("TRELLIS_FF", 0),
           "dsp": used.get("MULT18X18D", 0), "ebr": used.get("DP16KD", 0),
           "yosys_core_cells": dict(sorted(core.items())), "io": shell_info,
           "critical_path": critical_path_summary(cp) if cp else None,
           "seconds": round(time.perf_counter() - t0, 1), "tools": tool_versions()}
    (work / "result.json").write_text(json.dumps(res, indent=1))
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m specmem.synth_block", description=__doc__.split("\n\n")[0])
    p.add_argument("block", choices=sorted(BLOCKS))
    p.add_argument("--style", default="ecp5", help="bram, delay_line and core_v2's RAMs: ecp5 or behavioural; "
                   "delay_line and align's wait also registers (default ecp5)")
    p.add_argument("--depth", type=int, default=128, help="bram words (default 128)")
    p.add_argument("--width", type=int, default=18, help="bram word bits, row_bfp state bits (default 18)")
    p.add_argument("--n", type=int, default=8, help="block_norm lanes (default 8)")
    p.add_argument("--in-width", type=int, default=24, help="block_norm input bits, align's per-row term "
                   "(default 24)")
    p.add_argument("--M", type=int, default=18, help="block_norm, align mantissa bits (default 18)")
    p.add_argument("--k", type=int, default=8, help="saturate, block_norm_stream, row_bfp, align lanes "
                   "(default 8)")
    p.add_argument("--beats", type=int, default=8, help="block_norm_stream, align beats per vector "
                   "(default 8)")
    p.add_argument("--d", type=int, default=64, help="row_unit, token_chain, core_v2, deltanet_scaled rows "
                   "(default 64; lanes: --k)")
    p.add_argument("--preset", default="int18", help="row_unit, token_chain, core_v2 golden preset (default int18)")
    p.add_argument("--dsp", default="registered", help="row_unit, token_chain, core_v2 and the scaled cores' "
                   "multipliers: registered, ecp5 or fabric (default registered)")
    p.add_argument("--delays", default="registers", help="row_unit: its delay lines in registers, or block RAM "
                   "(ecp5, behavioural); core_v2's follow --style (default registers)")
    p.add_argument("--n-stages", type=int, default=24, help="delay_line: stages (default 24; bits: --width, "
                   "style: --style)")
    p.add_argument("--travelling", action="store_true", help="row_unit: travelling controls, as in core_v2")
    p.add_argument("--p-window", action="store_true", help="row_unit: the clamped p's narrow shift, as in core_v2")
    p.add_argument("--heads", type=int, default=1, help="core_v2, deltanet_scaled, gated_deltanet_scaled: memories interleaved (default 1)")
    p.add_argument("--chain-lanes", type=int, default=None,
                   help="vla_scaled: the chain's lanes, a divisor of k by a power of two (default k)")
    p.add_argument("--chains", type=int, default=1, help="core_v2: token chains, 1 .. heads (default 1)")
    p.add_argument("--norm-lanes", type=int, default=None, help="token_chain, core_v2: lanes of the chain's units "
                   "(1 .. 4, or k: the wide ones; default 2); block_norm: the serial normaliser on this many lanes "
                   "(default: the wide one, --n lanes)")
    p.add_argument("--max-left", type=int, default=24, help="round_shift: largest left shift (default 24; "
                   "lanes: --k, input bits: --in-width)")
    p.add_argument("--out-width", type=int, default=18, help="saturate output bits (default 18; input: --in-width)")
    p.add_argument("--target-mhz", type=float, default=250.0, help="nextpnr target (default 250)")
    p.add_argument("--router", default="router1", choices=("router1", "router2"),
                   help="nextpnr router (default router1; router2 for a whole core)")
    p.add_argument("--seed", type=int, default=1, help="nextpnr placement seed (default 1)")
    p.add_argument("--out", default="build/synth/blocks", help="work folder (default build/synth/blocks)")
    a = p.parse_args(argv)
    try:
        if a.chain_lanes is not None and a.block != "vla_scaled":
            raise ValueError(f"chain-lanes: only vla_scaled runs a chain on fewer lanes, not {a.block}")
        if a.block == "bram":
            comp, name = _bram(a.depth, a.width, a.style)
        elif a.block == "delay_line":
            comp, name = _delay_line(a.width, a.n_stages, a.style)
        elif a.block == "lane_control":
            comp, name = _lane_control(a.k)
        elif a.block == "saturate":
            comp, name = _saturate(a.k, a.in_width, a.out_width)
        elif a.block == "row_unit":
            comp, name = _row_unit(a.d, a.k, a.preset, a.dsp, a.delays, a.travelling, a.p_window)
        elif a.block == "token_chain":
            comp, name = _token_chain(a.d, a.k, a.preset, a.dsp, a.norm_lanes)
        elif a.block == "core_v2":
            comp, name = _core_v2(a.d, a.k, a.preset, a.dsp, a.style, a.norm_lanes, a.heads, a.chains)
        elif a.block == "block_norm_stream":
            comp, name = _block_norm_stream(a.k, a.beats, a.in_width, a.M)
        elif a.block == "unit_norm":
            comp, name = _unit_norm(a.k, a.beats)
        elif a.block in ("deltanet_scaled", "gated_deltanet_scaled"):
            comp, name = _deltanet_scaled(a.d, a.k, "int8", a.style, a.block.startswith("gated"), a.dsp, a.heads)
        elif a.block == "linear_scaled":
            comp, name = _linear_scaled(a.d, a.k, "int8", a.style, a.dsp)
        elif a.block == "vla_scaled":
            if a.heads != 1:
                raise ValueError("heads: the scaled VLA core has one head (its heads are not built yet)")
            comp, name = _vla_scaled(a.d, a.k, "int8", a.style, a.dsp, a.chain_lanes)
        elif a.block == "block_elu":
            comp, name = _block_elu(a.k, a.beats, "int8", a.style)
        elif a.block == "decay":
            comp, name = _decay("int8")
        elif a.block == "align":
            comp, name = _align(a.k, a.beats, a.M, a.in_width, a.style)
        elif a.block == "row_bfp":
            comp, name = _row_bfp(a.k, a.width, a.M)
        elif a.block == "round_shift":
            comp, name = _round_shift(a.k, a.in_width, a.max_left)
        else:
            comp, name = _block_norm(a.n, a.in_width, a.M, a.norm_lanes)
    except ValueError as exc:
        p.error(str(exc))
    res = synth_block(comp, name, a.out, target_mhz=a.target_mhz, seed=a.seed, router=a.router,
                      progress=lambda msg: print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True))
    cp = res["critical_path"] or {}
    print(f"{name}: fmax {res['fmax_mhz']} MHz, {res['luts']} LUT, {res['ffs']} FF, {res['dsp']} DSP, "
          f"{res['ebr']} EBR ({res['seconds']} s); critical path: {cp.get('start')} -> {cp.get('end')} "
          f"({cp.get('total_ns')} ns, {cp.get('lut_levels')} LUT levels, {cp.get('carry_steps')} carry steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
