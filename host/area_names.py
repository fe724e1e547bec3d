"""Where a core's logic goes, by signal name: an estimate for designs Amaranth emits as one module.

``synth_ecp5 -noflatten`` (``synth.area_breakdown``) splits the area by module, but a core's
sequencer, vector work and normalisers are one module, so it cannot say which of them the LUTs
are in. This estimate works below the module: Yosys's coarse netlist (``proc; flatten; opt;
wreduce; alumacc; share; memory -nomap``: word-level cells, before technology mapping), each
cell costed in LUT4 equivalents by its type and widths (:func:`cell_cost`: an adder one per bit,
a barrel shifter a 4:1 level per two bits of shift amount, a 2:1 mux one per bit, ...), and
charged to the named signal it drives (the first named net reached from its outputs: Amaranth's
own names, ``vx_3_q``), then summed per name stem (digits as ``#``: the lanes of one thing
together) and per block (a stem's first word). Multipliers (DSPs) and flip-flops are counted apart. It is an estimate of the mapped
LUT count, not a replacement for it: the synthesis table's LUTs come from nextpnr.

``python -m specmem.area_names --algo vla --d 32 --k 4 [--top 30] [--stems]`` prints the blocks (or stems).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

__all__ = ["cell_cost", "estimate", "main"]

_SHIFTS = ("$shl", "$shr", "$sshr", "$sshl", "$shift", "$shiftx")


def _p(cell: dict, name: str) -> int:
    v = cell.get("parameters", {}).get(name, "0")
    return int(v, 2) if isinstance(v, str) else int(v)


def cell_cost(cell: dict) -> int:
    """LUT4 equivalents of one coarse Yosys cell (JSON), by type and widths; 0 for cells that map
    to no LUTs (flip-flops, memories, wiring; a multiplier's product, which goes to a DSP)."""
    t = cell["type"]
    y, a, b = _p(cell, "Y_WIDTH"), _p(cell, "A_WIDTH"), _p(cell, "B_WIDTH")
    if t in _SHIFTS:  # one 4:1 level (a LUT per output bit) per two bits of shift amount
        return y * max(1, math.ceil(min(b, 7) / 2))
    if t == "$mux":
        return _p(cell, "WIDTH")
    if t == "$pmux":
        return _p(cell, "WIDTH") * math.ceil(_p(cell, "S_WIDTH") / 2)
    if t in ("$alu", "$add", "$sub", "$neg"):
        return y
    if t in ("$macc", "$macc_v2"):  # the products go to DSPs (counted apart); each further term an adder
        return y * max(0, _p(cell, "NPRODUCTS") + _p(cell, "NADDENDS") - 1)
    if t in ("$lt", "$le", "$gt", "$ge"):
        return max(a, b)
    if t in ("$eq", "$ne", "$eqx", "$nex"):
        return math.ceil(max(a, b) / 2)
    if t in ("$and", "$or", "$xor", "$xnor", "$not"):
        return math.ceil(y / 2)
    if t.startswith("$reduce") or t.startswith("$logic"):
        return math.ceil(a / 3)
    return 0


def _stem(name: str) -> str:
    name = name.split(".", 1)[1] if name.startswith("core.") else name
    return re.sub(r"\d+", "#", name)


def _block(stem: str) -> str:
    """A stem's block: its first word (``vp#a_#_lr`` -> ``vp#a``, ``fe_rsv.s#_q#`` -> ``fe``)."""
    return re.split(r"[_.]", stem, maxsplit=1)[0] or stem


def _named(name: str) -> bool:
    last = name.split(".")[-1]
    return not ("$" in last or last.startswith("port__"))


def estimate(netlist: dict) -> dict:
    """``{"luts": total, "ffs": flip-flop bits, "multipliers": count, "blocks": {block: luts},
    "stems": {stem: luts}}`` of
    a coarse netlist (Yosys ``write_json``), its largest module (the flattened top)."""
    mod = max((m for m in netlist["modules"].values() if m.get("cells")), key=lambda m: len(m["cells"]))
    bit_name = {}
    for name, net in mod["netnames"].items():
        if net.get("hide_name") or not _named(name):
            continue
        for bit in net["bits"]:
            if isinstance(bit, int):
                bit_name.setdefault(bit, name)
    readers = defaultdict(list)
    outs = {}
    for cname, c in mod["cells"].items():
        dirs = c.get("port_directions", {})
        outs[cname] = [b for p, d in dirs.items() if d == "output" for b in c["connections"][p] if isinstance(b, int)]
        for p, d in dirs.items():
            if d == "input":
                for b in c["connections"][p]:
                    if isinstance(b, int):
                        readers[b].append(cname)

    def name_of(cname: str) -> str:  # the first named net reached from the cell's outputs
        seen, frontier = {cname}, [cname]
        for _ in range(8):
            nxt = []
            for cn in frontier:
                for b in outs[cn]:
                    if b in bit_name:
                        return bit_name[b]
                    for r in readers[b]:
                        if r not in seen:
                            seen.add(r)
                            nxt.append(r)
            frontier = nxt
        return "(unnamed)"

    stems, ffs, muls = Counter(), 0, 0
    for cname, c in mod["cells"].items():
        t = c["type"]
        if "dff" in t.lower():
            ffs += _p(c, "WIDTH")
        else:
            if t == "$mul":
                muls += 1
            elif t in ("$macc", "$macc_v2"):
                muls += _p(c, "NPRODUCTS")
            cost = cell_cost(c)
            if cost:
                stems[_stem(name_of(cname))] += cost
    blocks = Counter()
    for stem, v in stems.items():
        blocks[_block(stem)] += v
    return {"luts": sum(stems.values()), "ffs": ffs, "multipliers": muls, "blocks": dict(blocks.most_common()),
            "stems": dict(stems.most_common())}


def run(algo: str, d: int, k: int, preset: str = "legacy-int8", work=None, **params) -> dict:
    """Generate the core's Verilog, run Yosys's coarse passes on it and :func:`estimate` it."""
    from amaranth.back import verilog

    from specmem.rtl.generate import build
    from specmem.synth import _run_tool

    built = build(algo, d, k, preset, **params)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        Path(tmp, "core.v").write_text(verilog.convert(built.component, name=built.top, emit_src=False))
        Path(tmp, "coarse.ys").write_text(
            f"read_verilog core.v\nhierarchy -top {built.top}\nproc; flatten; opt_expr; opt_clean\n"
            "opt -nodffe -nosdff; wreduce; peepopt; opt_clean; alumacc; share; opt; wreduce; opt_clean\n"
            "memory -nomap; opt_clean\nwrite_json coarse.json\n")
        _run_tool("yosys", ["-q", "-s", "coarse.ys"], tmp)
        netlist = json.loads(Path(tmp, "coarse.json").read_text())
    return {"algo": algo, "d": d, "k": k, "preset": preset, "params": params, **estimate(netlist)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specmem.area_names", description=__doc__.split("\n\n")[0])
    ap.add_argument("--algo", required=True)
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--format", default="legacy-int8")
    ap.add_argument("--fe-lanes", type=int, default=None, help="vla only: the front end's lanes")
    ap.add_argument("--top", type=int, default=30, help="rows to print (default 30)")
    ap.add_argument("--stems", action="store_true", help="print name stems (default: blocks, a stem's first word)")
    ap.add_argument("--json", default=None, help="also write the whole estimate here")
    args = ap.parse_args(argv)
    params = {} if args.fe_lanes is None else {"fe_lanes": args.fe_lanes}
    from specmem.synth import SynthError

    try:
        r = run(args.algo, args.d, args.k, args.format, **params)
    except (ValueError, SynthError) as exc:
        print(f"specmem.area_names: error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.algo} d={args.d} k={args.k} {args.format}: about {r['luts']:,} LUT4 (estimate), "
          f"{r['ffs']:,} flip-flop bits, {r['multipliers']} multipliers")
    for stem, v in list(r["stems" if args.stems else "blocks"].items())[:args.top]:
        print(f"{v:8,d} {100 * v / r['luts']:5.1f} %  {stem}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
