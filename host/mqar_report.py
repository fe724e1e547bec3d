"""``specmem mqar report``: docs/mqar.md from the run JSONs: the paper's numbers beside ours, plots, the INT8 table.

Verdict rule (per cell with a paper number): *reproduced* when our accuracy, the mean over the
cell's seeds, is within 0.05 of the paper's, otherwise *not reproduced*, with the gap. Only the
paper setup (no short convolution, the paper's learning rate) is judged, and only runs whose
steps match the paper column's steps (Table 11: 1000 steps; Table 9: 2000 steps).

Runs of one cell (rule, setup, steps, device) with several seeds are shown as the mean over the
seeds, their minimum–maximum and the number of seeds. Runs on different devices stay apart
(a seed trained on the CPU and on the GPU is one seed measured twice, not two seeds).

The report also writes a compact record of what it shows (``<doc dir>/mqar/runs.json``: per run
the config, device, speed, held-out accuracy and training curve, per checkpoint the fixed-point
evaluation; no checkpoints). A results folder that is absent is read from that record, so the
page and the claims ledger regenerate from the repository alone.
"""

from __future__ import annotations

import glob
import json
import os
from collections import defaultdict

__all__ = ["PAPER_TABLE11", "PAPER_TABLE9", "PAPER_FIG6", "TOL", "RECORD_FORMAT", "PAPER_SETUP", "write_report",
           "load_runs", "load_record", "seed_stats", "verdict", "trained_cell", "device_label", "setup_label",
           "default_record"]

#: Table 11 (seed 42, 1000 steps, T = 3n + 1): rule -> {n_pairs: accuracy}
PAPER_TABLE11 = {
    "softmax": {8: 0.152, 16: 0.091, 24: 0.070, 32: 0.057, 48: 0.043},
    "linear": {8: 0.150, 16: 0.091, 24: 0.069, 32: 0.056, 48: 0.043},
    "deltanet": {8: 0.965, 16: 0.009, 24: 0.007, 32: 0.008, 48: 0.008},
    "vla": {8: 0.997, 16: 0.990, 24: 0.994, 32: 0.623, 48: 0.044},
}
#: Table 9 (n = 24, 2000 steps, mean over seeds 42/123/999)
PAPER_TABLE9 = {"softmax": 0.081, "linear": 0.074, "deltanet": 0.011, "vla": 1.000}
#: Fig. 6 / §6.5 text (n = 8, T = 64…512, 2000 steps): only the text's summary values exist
PAPER_FIG6 = {"vla": 1.000, "linear": 0.15, "softmax": 0.15, "deltanet": 0.01}
TOL = 0.05
PAPER_SETUP = "paper setup"
RULE_NAMES = {"vla": "VLA (Alg. 1)", "vla_eq8": "VLA (eq. 8)", "deltanet": "DeltaNet",
              "gated_deltanet": "Gated DeltaNet", "linear": "Linear attn", "softmax": "Softmax"}
RECORD_FORMAT = "specmem-mqar-runs/1"
NS = (8, 16, 24, 32, 48)


# ------------------------------------------------------------------------------------------
# loading: results folders, the committed record


def load_runs(dirs) -> tuple[list[dict], list[dict]]:
    """Training records and fixed-point evaluations (``*.int8-*.json``) from the folders."""
    runs, evals = [], []
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            if os.path.basename(path).startswith("speed-"):
                continue
            with open(path) as f:
                rec = json.load(f)
            rec["_dir"] = d
            (evals if ".int8-" in path else runs).append(rec)
    return runs, evals


def _load_speeds(d: str) -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(d, "speed-*.json"))):
        with open(path) as f:
            out.append({"_dir": d, "file": os.path.basename(path), "runs": json.load(f)["runs"]})
    return out


def default_record(doc: str = "docs/mqar.md") -> str:
    """The record beside a report page: ``<doc dir>/mqar/runs.json``."""
    return os.path.join(os.path.dirname(os.path.abspath(doc)), "mqar", "runs.json")


def _r(x, nd: int = 6):
    return None if x is None else round(float(x), nd)


def _compact_run(r: dict) -> dict:
    cur = r.get("curve", [])
    return {"source": r["_dir"], "name": r["name"], "config": r["config"], "device": r["device"],
            "device_name": r["device_name"], "torch": r.get("torch"), "threads": r.get("threads"),
            "train_s": r["train_s"], "steps_per_s": r["steps_per_s"],
            "eval": {"acc": r["eval"]["acc"], "loss": _r(r["eval"]["loss"], 5),
                     "n_queries": r["eval"]["n_queries"]},
            "chance": r["chance"], "initial_loss": _r(r["initial_loss"], 4), "final_loss": _r(r["final_loss"], 4),
            "curve": {"step": [c["step"] for c in cur], "loss": [_r(c["loss"], 4) for c in cur],
                      "train_acc": [_r(c["train_acc"], 4) for c in cur],
                      "elapsed_s": [_r(c["elapsed_s"], 1) for c in cur]}}


def _expand_run(c: dict) -> dict:
    r = {k: v for k, v in c.items() if k not in ("source", "curve")}
    r["_dir"] = c["source"]
    cols = c["curve"]
    r["curve"] = [dict(zip(cols, vals)) for vals in zip(*cols.values())]
    return r


#: the Verilator comparison's fields kept in the record (``specmem mqar int8 --verilator N``)
VERILATOR_KEYS = ("preset", "reference", "lanes", "d", "sequences", "layers", "heads", "streams", "tokens", "equal",
                  "mismatches", "mismatched_values", "compared", "acc_fixed", "acc_verilator", "predictions_equal",
                  "n_queries", "seconds", "seconds_fixed", "setup_seconds", "unsupported", "error")


def _compact_verilator(v: dict) -> dict:
    return {k: v[k] for k in VERILATOR_KEYS if k in v}  # exactly: the page prints the seconds rounded


def _compact_eval(e: dict) -> dict:
    return {"source": e["_dir"], "name": e["name"], "config": e["config"], "n_seqs": e["n_seqs"],
            "n_queries": e["n_queries"],
            "formats": {f: {"acc": x["acc"], "agree_float64": x["agree_float64"],
                            **({"saturated": {k: v for k, v in x["saturated"].items() if v}}
                               if any(x.get("saturated", {}).values()) else {})}
                        for f, x in e["formats"].items()},
            **({"verilator": _compact_verilator(e["verilator"])} if "verilator" in e else {})}


def _expand_eval(c: dict) -> dict:
    e = {k: v for k, v in c.items() if k != "source"}
    e["_dir"] = c["source"]
    return e


def load_record(path: str) -> dict:
    """The committed record: ``{"sources", "runs", "evals", "speeds"}`` in the folders' own structure."""
    with open(path) as f:
        rec = json.load(f)
    if rec.get("format") != RECORD_FORMAT:
        raise ValueError(f"{path}: format {rec.get('format')!r}, expected {RECORD_FORMAT!r}")
    return {"sources": rec["sources"], "runs": [_expand_run(c) for c in rec["runs"]],
            "evals": [_expand_eval(c) for c in rec["evals"]],
            "speeds": [{"_dir": s["source"], "file": s["file"], "runs": s["runs"]} for s in rec["speeds"]]}


def _write_record(path: str, sources, runs, evals, speeds) -> None:
    """One run per line (diffs stay readable). Everything the page prints is kept exactly; the curves (plots
    only) and losses are rounded."""
    from specmem.exchange import write_atomic

    def block(items):
        return "[\n" + ",\n".join(json.dumps(x, separators=(",", ":")) for x in items) + "\n]"

    head = {"format": RECORD_FORMAT, "generated_by": "specmem mqar report",
            "about": "MQAR training runs (no checkpoints): config, device, speed, held-out accuracy, training curve; "
                     "fixed-point evaluations of the checkpoints (acc, agree_float64 = fraction of predictions "
                     "equal to the float64 memory's, saturated value counts). See docs/mqar.md.",
            "sources": list(sources)}
    text = json.dumps(head, indent=1)[:-2] + ",\n"
    text += ' "runs": ' + block(sorted((_compact_run(r) for r in runs), key=lambda c: (c["source"], c["name"])))
    text += ',\n "evals": ' + block(sorted((_compact_eval(e) for e in evals),
                                           key=lambda c: (c["source"], c["name"], c["n_seqs"])))
    text += ',\n "speeds": ' + block({"source": s["_dir"], "file": s["file"], "runs": s["runs"]} for s in speeds)
    write_atomic(path, text + "\n}\n")


def _norm(d: str) -> str:
    return os.path.normpath(d)


def collect(dirs, record: str | None, progress=None):
    """Runs, evaluations and speed tables of ``dirs``: each folder read from disk when present, else its
    part of ``record``; ``dirs`` None means the record's own sources. Returns ``(dirs, runs, evals, speeds,
    from_disk)``."""
    from specmem.golden.common import SpecmemInputError

    rec = load_record(record) if record and os.path.exists(record) else None
    if dirs is None:
        if rec is None:
            raise SpecmemInputError(f"out: no results folders given and no record at {record}")
        dirs = rec["sources"]
    dirs = [_norm(d) for d in dirs]
    runs, evals, speeds, from_disk = [], [], [], False
    for d in dirs:
        if os.path.isdir(d):
            r, e = load_runs([d])
            runs += r
            evals += e
            speeds += _load_speeds(d)
            from_disk = True
        elif rec is not None and d in rec["sources"]:
            runs += [r for r in rec["runs"] if r["_dir"] == d]
            evals += [e for e in rec["evals"] if e["_dir"] == d]
            speeds += [s for s in rec["speeds"] if s["_dir"] == d]
            if progress:
                progress(f"mqar report: {d} absent, read from the record {os.path.relpath(record)}")
        elif progress:
            progress(f"mqar report: {d}: no such folder and not in the record; skipped")
    return dirs, runs, evals, speeds, from_disk


# ------------------------------------------------------------------------------------------
# aggregation


def seed_stats(values) -> dict:
    """Mean, minimum, maximum and count of one cell's accuracies (one per seed)."""
    v = [float(x) for x in values]
    if not v:
        raise ValueError("seed_stats: no values")
    return {"n": len(v), "mean": sum(v) / len(v), "min": min(v), "max": max(v)}


def _fmt_stats(s: dict) -> str:
    return f"{s['mean']:.3f}" if s["n"] == 1 else f"{s['mean']:.3f} ({s['min']:.3f}–{s['max']:.3f})"


def verdict(paper: float, ours: float) -> str:
    """The report's rule: reproduced when |ours − paper| ≤ TOL, else not reproduced with the signed gap."""
    gap = ours - paper
    return "reproduced" if abs(gap) <= TOL else f"not reproduced ({gap:+.3f})"


def setup_label(cfg: dict) -> str:
    """The setup's label: ``paper setup``, or what differs from it (``conv4, lr 0.001``)."""
    bits = []
    if cfg.get("short_conv"):
        bits.append(f"conv{cfg['short_conv']}")
    if cfg.get("lr", 3e-4) != 3e-4:
        bits.append(f"lr {cfg['lr']:g}")
    return ", ".join(bits) or PAPER_SETUP


def device_label(r: dict) -> str:
    """Short device label: the GPU's name without the vendor, or ``CPU (<arch>)``."""
    if str(r["device"]).startswith("cuda"):
        return r["device_name"].replace("NVIDIA ", "")
    return f"CPU ({r['device_name']})"


def _rule_key(rule: str):
    return (list(RULE_NAMES).index(rule) if rule in RULE_NAMES else len(RULE_NAMES), rule)


def _var_key(var: str):
    return (var != PAPER_SETUP, var)


def _dev_key(dev: str):
    return (dev.startswith("CPU"), dev)


def _cap(runs):
    return [r for r in runs if r["config"]["seq_len"] is None]


def _groups(runs) -> dict:
    """(rule, variant, steps, device) -> {n_pairs: {seed: acc}} over the capacity runs."""
    g = defaultdict(lambda: defaultdict(dict))
    for r in _cap(runs):
        c = r["config"]
        g[(c["rule"], setup_label(c), c["steps"], device_label(r))][c["n_pairs"]][c["seed"]] = r["eval"]["acc"]
    return dict(sorted(g.items(), key=lambda kv: (_rule_key(kv[0][0]), _var_key(kv[0][1]), kv[0][2],
                                                  _dev_key(kv[0][3]))))


def trained_cell(runs, rule: str, n: int, variant: str = PAPER_SETUP, steps: int = 1000,
                 device: str | None = None) -> dict | None:
    """Seed statistics of one capacity cell, with its device: ``device``'s runs (a label of ``device_label``), by
    default the GPU's when there are any, else the CPU's (the same seed on two devices is one seed measured
    twice, so devices are never pooled); None when the cell was not run there."""
    by_dev = defaultdict(dict)
    for r in _cap(runs):
        c = r["config"]
        if c["rule"] == rule and c["n_pairs"] == n and setup_label(c) == variant and c["steps"] == steps:
            by_dev[device_label(r)][c["seed"]] = r["eval"]["acc"]
    if device is not None:
        by_dev = {device: by_dev[device]} if device in by_dev else {}
    if not by_dev:
        return None
    dev = sorted(by_dev, key=_dev_key)[0]
    return {**seed_stats(by_dev[dev].values()), "device": dev, "seeds": sorted(by_dev[dev])}


# ------------------------------------------------------------------------------------------
# plots


def _plots(runs, doc_dir, progress):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(os.path.join(doc_dir, "mqar"), exist_ok=True)
    files = []
    groups = _groups(runs)
    rules = sorted({k[0] for k in groups}, key=_rule_key)
    variants = sorted({k[1] for k in groups}, key=_var_key)
    colours = {v: f"C{i}" for i, v in enumerate(variants)}
    if groups:
        cols = min(3, len(rules))
        rows = -(-len(rules) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False, sharey=True)
        for ax, rule in zip(axes.flat, rules):
            paper_rule = "vla" if rule == "vla_eq8" else rule
            if paper_rule in PAPER_TABLE11:
                p = PAPER_TABLE11[paper_rule]
                ax.plot(list(p), list(p.values()), "k--x", alpha=0.7, label=f"paper {RULE_NAMES[paper_rule]}")
            for (g_rule, var, steps, dev), cells in groups.items():
                if g_rule != rule:
                    continue
                ns = sorted(cells)
                st = [seed_stats(cells[n].values()) for n in ns]
                mean = [s["mean"] for s in st]
                err = [[s["mean"] - s["min"] for s in st], [s["max"] - s["mean"] for s in st]]
                seeds = max(s["n"] for s in st)
                cpu = dev.startswith("CPU")
                ax.errorbar(ns, mean, yerr=err, fmt="s:" if cpu else "o-", color=colours[var], capsize=3,
                            mfc="none" if cpu else None, alpha=0.8 if cpu else 1.0,
                            label=f"{var}, {steps} st, {'CPU' if cpu else dev.split()[0]}, "
                                  f"{seeds} seed{'s' if seeds > 1 else ''}")
            ax.plot(NS, [1 / n for n in NS], color="grey", lw=0.6, ls=":", label="1/n plateau")
            ax.axvline(32, color="grey", lw=0.4)
            ax.set(title=RULE_NAMES.get(rule, rule), xlabel="n_pairs (T = 3n + 1)", ylim=(-0.02, 1.05), xticks=NS)
            ax.legend(fontsize=6, loc="best")
        for ax in axes[:, 0]:
            ax.set_ylabel("held-out accuracy")
        for ax in list(axes.flat)[len(rules):]:
            ax.axis("off")
        fig.suptitle("MQAR capacity: ours (mean over seeds, bars min–max) vs the paper's Table 11", fontsize=10)
        fig.tight_layout()
        files.append("mqar/capacity.png")
        fig.savefig(os.path.join(doc_dir, files[-1]), dpi=100)
        plt.close(fig)
    lc = [r for r in runs if r["config"]["seq_len"] is not None]
    if lc:
        fig, ax = plt.subplots(figsize=(6, 4))
        lg = defaultdict(lambda: defaultdict(list))
        for r in lc:
            c = r["config"]
            lg[(c["rule"], c["n_pairs"], setup_label(c), device_label(r))][c["seq_len"]].append(r["eval"]["acc"])
        for (rule, n, var, dev), cells in sorted(lg.items()):
            Ts = sorted(cells)
            ax.plot(Ts, [seed_stats(cells[T])["mean"] for T in Ts], "-o",
                    label=f"{RULE_NAMES.get(rule, rule)} n={n} ({var}, {dev})")
        ax.set(xscale="log", xlabel="T", ylabel="accuracy (mean over seeds)", title="Long-context MQAR",
               ylim=(0, 1.05))
        ax.legend(fontsize=6)
        fig.tight_layout()
        files.append("mqar/long_context.png")
        fig.savefig(os.path.join(doc_dir, files[-1]), dpi=110)
        plt.close(fig)
    if runs:
        import matplotlib.cm as cm

        cap = _cap(runs)
        all_ns = sorted({r["config"]["n_pairs"] for r in cap}) or [1]
        norm = matplotlib.colors.Normalize(min(all_ns), max(all_ns) + 1e-9)
        for fname, key, ylabel in (("mqar/training_curves.png", "train_acc", "train accuracy"),
                                   ("mqar/training_loss.png", "loss", "train loss (query positions)")):
            fig, axes = plt.subplots(len(variants), len(rules), figsize=(2.9 * len(rules), 2.6 * len(variants)),
                                     squeeze=False, sharex=True, sharey=True, layout="constrained")
            for i, var in enumerate(variants):
                for j, rule in enumerate(rules):
                    ax = axes[i, j]
                    for r in sorted(cap, key=lambda r: (r["config"]["n_pairs"], r["config"]["seed"])):
                        c = r["config"]
                        if c["rule"] != rule or setup_label(c) != var:
                            continue
                        cpu = device_label(r).startswith("CPU")
                        ax.plot([p["step"] for p in r["curve"]], [p[key] for p in r["curve"]],
                                ls=":" if cpu else "-", lw=0.9, color=cm.viridis(norm(c["n_pairs"])))
                    if i == 0:
                        ax.set_title(RULE_NAMES.get(rule, rule), fontsize=9)
                    if j == 0:
                        ax.set_ylabel(f"{var}\n{ylabel}", fontsize=8)
                    if i == len(variants) - 1:
                        ax.set_xlabel("step", fontsize=8)
                    if key == "train_acc":
                        ax.set_ylim(-0.02, 1.05)
                    ax.tick_params(labelsize=7)
            sm = cm.ScalarMappable(norm=norm, cmap=cm.viridis)
            fig.colorbar(sm, ax=axes, label="n_pairs", shrink=0.8, fraction=0.02, pad=0.01)
            fig.suptitle(f"MQAR {ylabel} per rule and setup (every seed a line; dotted: CPU runs)", fontsize=10)
            files.append(fname)
            fig.savefig(os.path.join(doc_dir, fname), dpi=90)
            plt.close(fig)
    if progress:
        progress(f"mqar report: plots {', '.join(files)}")
    return files


# ------------------------------------------------------------------------------------------
# tables


def _capacity_section(runs) -> list[str]:
    groups = _groups(runs)
    ns = sorted({n for cells in groups.values() for n in cells} | set(NS))
    L = ["## Capacity curve (T = 3n + 1): paper Table 11 vs ours", "",
         "Cell: paper / **ours**. Ours is the held-out accuracy (15 × 64 sequences per run); with several "
         "seeds, the mean over the seeds and (min–max); the `seeds` column counts them. Runs on different "
         f"devices are separate rows. Verdict rule: reproduced when |mean − paper| ≤ {TOL} (paper setup only). "
         "Chance 1/128 ≈ 0.008; a model that knows which values occur in the context but not which key owns "
         "which scores ≈ 1/n (0.125 / 0.063 / 0.042 / 0.031 / 0.021).", "",
         "| rule | our variant | steps | device | seeds | " + " | ".join(f"n={n}" for n in ns) + " |",
         "|---|---|---|---|---|" + "---|" * len(ns)]
    for rule in PAPER_TABLE11:
        L.append(f"| {RULE_NAMES[rule]} | paper | 1000 | (paper) | 42 | "
                 + " | ".join(f"{PAPER_TABLE11[rule][n]:.3f}" if n in PAPER_TABLE11[rule] else "–" for n in ns) + " |")
    multi = []
    for (rule, var, steps, dev), cells in groups.items():
        paper = PAPER_TABLE11.get("vla" if rule == "vla_eq8" else rule, {}) if steps == 1000 else {}
        seeds = sorted({s for c in cells.values() for s in c})
        nmax = len(seeds)
        out = []
        for n in ns:
            if n not in cells:
                out.append("–")
                continue
            st = seed_stats(cells[n].values())
            txt = f"**{_fmt_stats(st)}**" + (f" [{st['n']} seeds]" if st["n"] != nmax else "")
            out.append(f"{paper[n]:.3f} / {txt}" if n in paper else txt)
        L.append(f"| {RULE_NAMES.get(rule, rule)} | {var} | {steps} | {dev} | "
                 f"{nmax} ({', '.join(map(str, seeds))}) | " + " | ".join(out) + " |")
        if nmax > 1:
            multi.append(((rule, var, steps, dev), cells, seeds))
    L += ["", "The paper's VLA row is compared with both of our VLA rules (Algorithm 1 and eq. 8); the paper "
              "has no Gated DeltaNet row.", ""]
    if multi:
        L += ["Per seed (the rows above with more than one seed):", "",
              "| rule | our variant | steps | device | seed | " + " | ".join(f"n={n}" for n in ns) + " |",
              "|---|---|---|---|---|" + "---|" * len(ns)]
        for (rule, var, steps, dev), cells, seeds in multi:
            for s in seeds:
                L.append(f"| {RULE_NAMES.get(rule, rule)} | {var} | {steps} | {dev} | {s} | "
                         + " | ".join(f"{cells[n][s]:.3f}" if s in cells.get(n, {}) else "–" for n in ns) + " |")
        L += [""]
    # verdicts: the paper setup at the paper's steps, per device
    vrows = []
    for (rule, var, steps, dev), cells in groups.items():
        if var != PAPER_SETUP or steps != 1000 or rule not in PAPER_TABLE11:
            continue
        paper = PAPER_TABLE11[rule]
        cells_v = []
        for n in ns:
            if n in cells and n in paper:
                m = seed_stats(cells[n].values())["mean"]
                v = verdict(paper[n], m)
                cells_v.append("reproduced" if v == "reproduced" else f"no ({m - paper[n]:+.3f})")
            else:
                cells_v.append("–")
        seeds = sorted({s for c in cells.values() for s in c})
        vrows.append(f"| {RULE_NAMES[rule]} | {dev} | {len(seeds)} | " + " | ".join(cells_v) + " |")
    if vrows:
        L += [f"Verdicts (paper setup, 1000 steps, the Table 11 cells we ran; reproduced when |mean − paper| ≤ {TOL}, "
              "else the gap ours − paper):", "",
              "| rule | device | seeds | " + " | ".join(f"n={n}" for n in ns) + " |",
              "|---|---|---|" + "---|" * len(ns)] + vrows + [""]
    n24 = [r for r in _cap(runs) if r["config"]["n_pairs"] == 24 and r["config"]["steps"] == 2000
           and setup_label(r["config"]) == PAPER_SETUP]
    if n24:
        by = defaultdict(list)
        for r in n24:
            by[(r["config"]["rule"], device_label(r))].append(r["eval"]["acc"])
        L += ["Table 9 (n = 24, 2000 steps, paper: mean over seeds 42/123/999): " + "; ".join(
            f"{RULE_NAMES.get(rule, rule)} ({dev}): ours {_fmt_stats(seed_stats(a))} over {len(a)} seed(s), "
            + (f"paper {PAPER_TABLE9[rule]:.3f}: {verdict(PAPER_TABLE9[rule], seed_stats(a)['mean'])}"
               if rule in PAPER_TABLE9 else "no paper number")
            for (rule, dev), a in sorted(by.items())), ""]
    return L


def _speed_section(runs, speeds) -> list[str]:
    L = ["## Training speed", "",
         "From the training records: median steps/s over the runs of each cell (all seeds), wall time, so the "
         "load of the machine at the time shows (other jobs on the shared CPU; other training processes sharing "
         "the GPU, see the notes). The `specmem mqar speed` tables after it time 10 steps of one process.", ""]
    sp = defaultdict(lambda: defaultdict(list))
    for r in runs:
        c = r["config"]
        T = c["seq_len"] or 3 * c["n_pairs"] + 1
        sp[(c["rule"], setup_label(c), device_label(r), r.get("threads"))][T].append(r["steps_per_s"])
    Ts = sorted({T for cells in sp.values() for T in cells})
    L += ["| rule | variant | device | threads | runs | " + " | ".join(f"T={T}" for T in Ts) + " |",
          "|---|---|---|---|---|" + "---|" * len(Ts)]
    for (rule, var, dev, th), cells in sorted(sp.items(), key=lambda kv: (_rule_key(kv[0][0]), _var_key(kv[0][1]),
                                                                           _dev_key(kv[0][2]))):
        nruns = sum(len(v) for v in cells.values())
        L.append(f"| {RULE_NAMES.get(rule, rule)} | {var} | {dev} | {th} | {nruns} | "
                 + " | ".join(f"{sorted(cells[T])[(len(cells[T]) - 1) // 2]:.2f}" if T in cells else "–"
                              for T in Ts) + " |")
    for s in speeds:
        sr = s["runs"]
        Ts = sorted({r["T"] for r in sr})
        rules = list(dict.fromkeys(r["rule"] for r in sr))
        L += ["", f"`specmem mqar speed` ({s['_dir']}/{s['file']}: {sr[0]['device']}, {sr[0]['device_name']}, "
                  f"{sr[0]['threads']} thread(s), batch {sr[0]['batch']}, paper shapes): training steps/s", "",
              "| rule | " + " | ".join(f"T={T}" for T in Ts) + " |", "|---|" + "---|" * len(Ts)]
        for rule in rules:
            by = {r["T"]: r["steps_per_s"] for r in sr if r["rule"] == rule}
            L.append(f"| {RULE_NAMES.get(rule, rule)} | " + " | ".join(f"{by[T]:.2f}" if T in by else "–"
                                                                      for T in Ts) + " |")
    return L + [""]


def _int8_section(runs, evals) -> list[str]:
    L = ["## INT8 on trained weights", "",
         "Every mixer layer's memory step swapped (`specmem mqar int8`, on the CPU in float64 around the memory); "
         "the same held-out sample for every column. Softmax attention has no memory step to swap (float64 and "
         "float32 only). Gated DeltaNet's fixed-binary-point columns (int16, wide, legacy-*) run "
         "`gated_deltanet_fixed`, the model its RTL core implements.", ""]
    if not evals:
        return L + ["No fixed-point evaluation yet (`specmem mqar int8 --out DIR`).", ""]
    dev_of = {(r["_dir"], r["name"]): device_label(r) for r in runs}
    fmts = []
    for e in evals:
        for f in e["formats"]:
            if f not in fmts:
                fmts.append(f)
    other = [f for f in fmts if f != "float64"]

    def key(e):
        return (_rule_key(e["config"]["rule"]), _var_key(setup_label(e["config"])),
                _dev_key(dev_of.get((e["_dir"], e["name"]), "?")), e["config"]["n_pairs"], e["config"]["seed"])

    # per rule, setup and device: the accuracy change of each format over the runs
    by = defaultdict(lambda: defaultdict(list))
    base = defaultdict(list)
    for e in sorted(evals, key=key):
        g = (e["config"]["rule"], setup_label(e["config"]), dev_of.get((e["_dir"], e["name"]), "?"))
        ref = e["formats"]["float64"]["acc"]
        base[g].append((e["config"]["n_pairs"], ref))
        for f, x in e["formats"].items():
            if f != "float64":
                by[g][f].append((x["acc"] - ref, 1 - x["agree_float64"], sum(x.get("saturated", {}).values())))
    L += ["Per rule, setup and training device, over its checkpoints: accuracy change vs the float64 memory, "
          "min … max (largest fraction of query predictions changed; `sat`: some values saturated).", "",
          "| rule | setup | trained on | models (n: float64 acc) | " + " | ".join(other) + " |",
          "|---|---|---|---|" + "---|" * len(other)]
    for g in sorted(base, key=lambda g: (_rule_key(g[0]), _var_key(g[1]), _dev_key(g[2]))):
        cells = []
        for f in other:
            v = by[g].get(f)
            cells.append("–" if not v else f"{min(a for a, _, _ in v):+.3f} … {max(a for a, _, _ in v):+.3f} "
                                         f"({max(c for _, c, _ in v):.1%})" + (" sat" if any(s for *_, s in v) else ""))
        models = ", ".join(f"{n}: {a:.3f}" for n, a in base[g])
        L.append(f"| {RULE_NAMES.get(g[0], g[0])} | {g[1]} | {g[2]} | {models} | " + " | ".join(cells) + " |")
    missing = sorted({r["config"]["rule"] for r in runs} - {e["config"]["rule"] for e in evals}, key=_rule_key)
    if missing:
        L += ["", "Not evaluated in fixed point: " + ", ".join(RULE_NAMES.get(r, r) for r in missing) + "."]
    L += ["", "<details><summary>Per checkpoint</summary>", "",
          "Cell: accuracy change vs float64 (fraction of predictions changed), `sat N` = N saturated values.", "",
          "| run | setup | trained on | sample (queries) | " + " | ".join(fmts) + " |",
          "|---|---|---|---|" + "---|" * len(fmts)]
    for e in sorted(evals, key=key):
        ref = e["formats"]["float64"]["acc"]
        cells = []
        for f in fmts:
            x = e["formats"].get(f)
            if x is None:
                cells.append("–")
            elif f == "float64":
                cells.append(f"{ref:.3f}")
            else:
                sat = sum(x.get("saturated", {}).values())
                cells.append(f"{x['acc'] - ref:+.3f} ({1 - x['agree_float64']:.1%})" + (f" sat {sat}" if sat else ""))
        L.append(f"| {e['name']} | {setup_label(e['config'])} | {dev_of.get((e['_dir'], e['name']), '?')} | "
                 f"{e['n_seqs']} ({e['n_queries']}) | " + " | ".join(cells) + " |")
    return L + ["", "</details>", ""] + _verilator_section(runs, evals)


def _verilator_section(runs, evals) -> list[str]:
    """The Verilated RTL against the fixed-point model on trained weights (``specmem mqar int8 --verilator N``)."""
    vl = [e for e in evals if "verilator" in e]
    if not vl:
        return []
    dev_of = {(r["_dir"], r["name"]): device_label(r) for r in runs}
    L = ["### The Verilator backend on trained weights", "",
         "`specmem mqar int8 --verilator N`: for the first N held-out sequences, every mixer layer's memory step "
         "runs on the Verilated RTL (`specmem run --backend verilator`; design d = d_h, k lanes), one stream per "
         "(sequence, head) after a reset, since each core holds one memory; the same model runs with the "
         "fixed-point model in the same preset. Bit-exact: every output integer (`o_raw`, VLA's exponents "
         "`o_frac`), the outputs as floats and the final state RAMs read back from the simulation equal the "
         "fixed-point model's, in every stream of every layer. Accuracy: exact match at the query positions of "
         "those sequences, fixed-point model vs RTL.", "",
         "| run | rule | setup | trained on | preset | d, k | sequences (queries) | streams simulated (tokens) | "
         "bit-exact | accuracy fixed / RTL | predictions equal | RTL time |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    skipped = []

    def key(e):
        return (_rule_key(e["config"]["rule"]), _var_key(setup_label(e["config"])), e["config"]["n_pairs"],
                e["config"]["seed"], e["name"])

    for e in sorted(vl, key=key):
        v = e["verilator"]
        c = e["config"]
        head = (f"| {e['name']} | {RULE_NAMES.get(c['rule'], c['rule'])} | {setup_label(c)} | "
                f"{dev_of.get((e['_dir'], e['name']), '?')} | ")
        if "unsupported" in v:
            skipped.append(e["name"])
            continue
        ref = "" if v.get("reference", v["preset"]) == v["preset"] else f" (vs fixed {v['reference']})"
        if v.get("error"):
            L.append(head + f"{v['preset']}{ref} | {v['d']}, {v['lanes']} | {v['sequences']} | {v['streams']} "
                            f"({v['tokens']}) | **no**: simulation failed | – | – | – |")
            continue
        exact = "yes" if v["equal"] else f"**no** ({v['mismatches']} streams, {v['mismatched_values']} values)"
        L.append(head + f"{v['preset']}{ref} | {v['d']}, {v['lanes']} | {v['sequences']} ({v['n_queries']}) | "
                        f"{v['streams']} ({v['tokens']}) | {exact} | {v['acc_fixed']:.3f} / {v['acc_verilator']:.3f} "
                        f"| {'yes' if v['predictions_equal'] else 'no'} | {v['seconds']:.0f} s |")
    ran = [e["verilator"] for e in vl if "unsupported" not in e["verilator"]]
    if ran:
        exact = sum(1 for v in ran if v.get("equal"))
        L += ["", f"In all: {len(ran)} model{'s' if len(ran) > 1 else ''}, {sum(v['streams'] for v in ran)} streams and "
                  f"{sum(v['tokens'] for v in ran)} tokens simulated in {sum(v.get('seconds', 0) for v in ran):.0f} s; "
                  + ("bit-exact in every one." if exact == len(ran) else f"bit-exact in {exact} of {len(ran)}.")]
    if skipped:  # grouped by reason
        why = defaultdict(list)
        for e in sorted(vl, key=key):
            if "unsupported" in e["verilator"]:
                why[e["verilator"]["unsupported"]].append(e["name"])
        L += ["", "Not run on the RTL: " + "; ".join(f"{w} ({len(n)} model{'s' if len(n) > 1 else ''}: "
                                                      f"{', '.join(n)})" for w, n in why.items()) + "."]
    return L + [""]


def write_report(out_dirs, doc: str = "docs/mqar.md", progress=None, notes: str | None = None,
                 record: str | None = "") -> str:
    """Write ``doc`` (plots and the record under ``<doc dir>/mqar/``) from the runs in ``out_dirs``.

    ``out_dirs``: a comma-separated string or a list of folders, or None for the record's sources;
    ``record``: the compact record's path ("" for the default beside ``doc``, None for none). The record
    is rewritten whenever some folder was read from disk.
    """
    from specmem.golden.common import SpecmemInputError

    if record == "":
        record = default_record(doc)
    dirs = None if out_dirs is None else [d for d in (out_dirs.split(",") if isinstance(out_dirs, str)
                                                      else out_dirs) if d]
    dirs, runs, evals, speeds, from_disk = collect(dirs, record, progress)
    if not runs:
        raise SpecmemInputError(f"out: no MQAR run records (*.json) in {', '.join(dirs)}")
    doc_dir = os.path.dirname(os.path.abspath(doc))
    plots = _plots(runs, doc_dir, progress)
    rel_record = os.path.relpath(record, doc_dir) if record else None
    L = ["# MQAR: the VLA paper's experiment with our code", "",
         "Generated by `specmem mqar report` from the run records"
         + (f" (sources {', '.join(f'`{d}`' for d in dirs)}; their compact record, from which this page "
            f"regenerates without them, is [`{rel_record}`]({rel_record}))" if record else "")
         + "; numbers are measured, the paper's are copied from its tables (seed `003_…`, appendix B).", ""]
    if notes:
        L += [notes.rstrip(), ""]
    L += _capacity_section(runs)
    lc = [r for r in runs if r["config"]["seq_len"] is not None]
    if lc:
        L += ["## Long context (n = 8, T = 64…512): paper Fig. 6 vs ours", "",
              "| run | device | T | ours | paper (Fig. 6 text) |", "|---|---|---|---|---|"]
        for r in sorted(lc, key=lambda r: (r["config"]["rule"], r["config"]["seq_len"], r["config"]["seed"])):
            p = PAPER_FIG6.get(r["config"]["rule"])
            L.append(f"| {r['name']} | {device_label(r)} | {r['config']['seq_len']} | {r['eval']['acc']:.3f} | "
                     f"{'–' if p is None else f'≈{p:.2f}'} |")
        L += [""]
    for p in plots:
        L += [f"![{p}]({p})", ""]
    L += _speed_section(runs, speeds)
    L += _int8_section(runs, evals)
    from specmem.exchange import write_atomic

    if record and from_disk:
        _write_record(record, dirs, runs, evals, speeds)
        if progress:
            progress(f"mqar report: record {record} ({os.path.getsize(record) // 1024} KiB)")
    write_atomic(doc, "\n".join(L))
    if progress:
        progress(f"mqar report: {len(runs)} runs, {len(evals)} fixed-point evaluations -> {doc}")
    return doc
