"""Accuracy report of the RTL's formats: legacy-int8 / legacy-int16 / legacy-wide against float32 and float64.

``write_accuracy_report`` writes ``docs/accuracy/README.md`` and its plots from seeded
standard-Gaussian streams (``specmem.vectors.make_vectors``): the annihilation memory (rank,
erasure, principal angle to the float64 subspace, retention), VLA (output error, state norms,
the spectrum of ``A`` over a long stream), the training-free recall sweep (spec §4) for VLA,
DeltaNet and linear attention, hls4ml-style range plots and saturation counts, and the
findings with their numbers. ``bench_fixed`` measures the fixed-point models' tokens/s.
"""

from __future__ import annotations

import json
import os
import platform
import time
import warnings

import numpy as np

from specmem.golden.common import SpecmemInputError, check_scalar
from specmem.exchange import write_atomic
from specmem.progress import Progress

from . import run_fixed
from .annihilation import annihilation_fixed
from .float32 import run_float32, vla_a_steps_f32
from .formats import PRESETS, formats_for
from .vla import vla_fixed

__all__ = ["write_accuracy_report", "bench_fixed", "FORMATS"]

# This report measures the RTL's fixed-binary-point formats (legacy-*); the scaled formats and
# the issue-12 targets are in :mod:`.targets` (docs/accuracy/formats.md).
FORMATS = ("legacy-int8", "legacy-int16", "legacy-wide", "float32", "float64")
FIXED = ("legacy-int8", "legacy-int16", "legacy-wide")
COLORS = {"legacy-int8": "tab:red", "legacy-int16": "tab:orange", "legacy-wide": "tab:green", "float32": "tab:blue",
          "float64": "black"}
RECALL_RULES = ("vla", "vla-eq8", "deltanet", "linear")  # variants of specmem.golden.recall
RECALL_IN_RANGE = 2.0  # recall inputs: unit vectors, and elu1 of them (the vla-eq8 u stream) reaches up to 2


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _style(f: str) -> dict:
    """float64 drawn thick and underneath, the other formats thin on top: where they agree with it
    (the usual case) each line stays visible instead of hiding under the reference."""
    return {"color": COLORS[f], "lw": 2.4 if f == "float64" else 0.9, "zorder": 1 if f == "float64" else 2}


def _figure_legend(fig, axes, top: float = 0.88) -> None:
    """One legend above the panels for every labelled line of ``axes`` (first of each label), in
    place of per-panel legends over the data; the panels keep the space below ``top``."""
    seen = {}
    for a in axes:
        for h, lab in zip(*a.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, top + 0.005),
               ncol=min(len(seen), 6), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, top - 0.05 * ((len(seen) - 1) // 6)))


def _plain_log_labels(ax, axis: str = "y") -> None:
    """Plain numbers (2, 3, 5, 10) instead of 2x10^0 on a log axis that spans less than two decades."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if lo <= 0 or hi / lo >= 100:
        return
    which = ax.yaxis if axis == "y" else ax.xaxis
    which.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    which.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    which.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _fmt(x, digits=3):
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"


# ---------------------------------------------------------------------------------------------
# annihilation


def _orth_basis(U):
    """Orthonormal bases of the column spaces of ``U`` [..., d, k] (QR; full rank assumed)."""
    q, _ = np.linalg.qr(U)
    return q


def _annihilation_section(d, k, T, seed, out_dir, progress):
    from specmem.golden.annihilation import annihilation_gram
    from specmem.vectors import make_vectors

    x = make_vectors("annihilation", T, d, seed)["x"]
    hists, xs, ys, runs = {}, {}, {}, {}
    for f in FORMATS:
        t0 = time.perf_counter()
        if f == "float64":
            r = annihilation_gram(x, k, history=True)
            hists[f], xs[f], ys[f] = r["u_hist"], x, r["y"]
        elif f == "float32":
            r = run_float32("annihilation", {"x": x}, {"k": k, "history": True})
            hists[f], xs[f], ys[f] = r["u_hist"].astype(np.float64), x.astype(np.float32).astype(np.float64), r["y"]
        else:
            r = annihilation_fixed(x, k, f, history=True)
            fm = r["fmt"]
            hists[f] = fm["u"].to_float(r["u_hist"])
            xs[f] = fm["x"].to_float(fm["x"].quantize(x)[0])
            ys[f] = r["y"]
        runs[f] = r
        progress(f"accuracy: annihilation {f:8s} d={d} k={k} T={T}: {time.perf_counter() - t0:.1f} s")
    # a perturbed float64 run: how much the memory itself amplifies a 1e-7 relative input change
    xp = x * (1 + 1e-7 * np.random.default_rng(seed + 99).standard_normal(x.shape))
    pert = annihilation_gram(xp, k, history=True)["u_hist"]

    ts = np.unique(np.linspace(k, T - 1, min(256, T - k)).astype(int))
    ref = hists["float64"][ts]
    Qref = _orth_basis(ref)
    om_ref = np.einsum("tik,tjk->tij", ref, ref)
    res = {}
    for f in FORMATS + ("perturbed",):
        U = pert[ts] if f == "perturbed" else hists[f][ts]
        Q = _orth_basis(U)
        sv = np.linalg.svd(np.einsum("tdi,tdj->tij", Qref, Q), compute_uv=False)
        angle = np.arccos(np.clip(sv[:, -1], -1, 1))
        om = np.einsum("tik,tjk->tij", U, U)
        om_err = np.linalg.norm(om - om_ref, axis=(1, 2)) / np.linalg.norm(om_ref, axis=(1, 2))
        if f == "perturbed":
            res[f] = {"angle": angle, "omega_err": om_err}
            continue
        Uall, yy, xx = hists[f], ys[f], xs[f]
        full = np.arange(k, T)
        oy = np.einsum("tdk,tk->td", Uall[full], np.einsum("tdk,td->tk", Uall[full], yy[full]))
        resid = np.linalg.norm(oy - xx[full] * np.sum(xx[full] * yy[full], axis=-1, keepdims=True), axis=-1)
        resid = resid / np.sum(xx[full] ** 2, axis=-1)
        resid[np.linalg.norm(yy[full], axis=-1) == 0] = np.nan
        ret = np.array([np.mean(np.linalg.norm(Q[i].T @ xx[t - k + 1:t + 1].T, axis=0)
                                / np.linalg.norm(xx[t - k + 1:t + 1], axis=1)) for i, t in enumerate(ts)])
        svU = np.linalg.svd(U, compute_uv=False)
        rank = np.sum(svU > 1e-9 * svU[:, :1], axis=1)
        res[f] = {"angle": angle, "omega_err": om_err, "resid": resid, "ret": ret, "rank": rank}

    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for f in FORMATS:
        c = COLORS[f]
        ax[0, 0].semilogy(np.arange(k, T) + 1, np.maximum(res[f]["resid"], 1e-18), ".", ms=1.5, color=c, label=f)
        if f != "float64":
            ax[0, 1].semilogy(ts + 1, np.maximum(res[f]["angle"], 1e-12), color=c, label=f)
        ax[1, 0].plot(ts + 1, res[f]["ret"], label=f, **_style(f))
        ax[1, 1].plot(ts + 1, res[f]["rank"], label=f, **_style(f))
    ax[0, 1].semilogy(ts + 1, np.maximum(res["perturbed"]["angle"], 1e-12), ":", color="gray",
                      label="float64, input x(1+1e-7 N(0,1))")
    ax[0, 0].set_title("erasure residual ||Ω_t y − x(xᵀy)|| / ||x||²")
    ax[0, 1].set_title("largest principal angle to float64's col(Ω_t) [rad]")
    ax[1, 0].set_title(f"retention of the last k={k} inputs (mean)")
    ax[1, 1].set_title("numerical rank of Ω_t")
    ax[1, 1].set_ylim(0, k + 1)  # the rank lives in 0..k: a flat line at k is full rank, not noise
    ax[1, 1].yaxis.set_major_locator(MaxNLocator(integer=True))
    if all(np.all(res[f]["rank"] == k) for f in FORMATS):
        ax[1, 1].text(0.5, 0.35, f"every format: rank {k} at every sampled token", ha="center",
                      transform=ax[1, 1].transAxes, fontsize=9)
    for a in ax.flat:
        a.set_xlabel("token t")
    fig.suptitle(f"Annihilation memory, d={d}, k={k}, Gaussian stream (seed {seed})")
    _figure_legend(fig, [ax[1, 0], ax[0, 1]], top=0.93)
    fig.savefig(os.path.join(out_dir, "annihilation.png"), dpi=100)
    plt.close(fig)

    summary = {}
    for f in FORMATS:
        r = res[f]
        summary[f] = {
            "median_erasure": float(np.nanmedian(r["resid"])),
            "max_erasure": float(np.nanmax(r["resid"])),
            "final_angle": float(r["angle"][-1]),
            "max_angle": float(np.max(r["angle"])),
            "final_omega_err": float(r["omega_err"][-1]),
            "max_omega_err": float(np.max(r["omega_err"])),
            "mean_retention": float(np.mean(r["ret"])),
            "min_rank": int(np.min(r["rank"])),
            "max_rank": int(np.max(r["rank"])),
        }
    summary["perturbed"] = {"final_omega_err": float(res["perturbed"]["omega_err"][-1]),
                            "max_angle": float(np.max(res["perturbed"]["angle"]))}
    return summary, runs


# ---------------------------------------------------------------------------------------------
# VLA


def _vla_section(d, T, long_T, seed, out_dir, progress):
    from specmem.golden.vla import vla
    from specmem.vectors import make_vectors

    vec = make_vectors("vla", T, d, seed)
    outs, runs = {}, {}
    for f in FORMATS:
        t0 = time.perf_counter()
        if f == "float64":
            outs[f] = vla(**vec)
        elif f == "float32":
            outs[f] = run_float32("vla", vec)
        else:
            runs[f] = outs[f] = vla_fixed(**vec, preset=f)
        progress(f"accuracy: vla {f:8s} d={d} T={T}: {time.perf_counter() - t0:.1f} s")
    ref = outs["float64"]
    err = {f: np.linalg.norm(outs[f]["o"] - ref["o"], axis=-1) / np.linalg.norm(ref["o"], axis=-1) for f in FORMATS}

    # long stream: the spectrum of A
    every = 7  # coprime with the refresh period: samples every phase of the refresh cycle
    spec = {}
    lvec = make_vectors("vla", long_T, d, seed + 1)
    for f in FORMATS:
        t0 = time.perf_counter()
        tt, lmin, cond = [], [], []
        bar = Progress(long_T, f"accuracy: vla A spectrum {f}", unit="tokens")

        def mon(t, A, tt=tt, lmin=lmin, cond=cond, bar=bar):
            ev = np.linalg.eigvalsh(0.5 * (A + A.T))
            bar.update(t - bar.done)
            tt.append(t)
            lmin.append(ev[0])
            cond.append(ev[-1] / ev[0] if ev[0] > 0 else np.inf)

        with bar:
            if f in FIXED:
                vla_fixed(**lvec, preset=f, trace=False, snapshot_every=every, monitor=mon)
            else:
                if f == "float64":
                    from specmem.golden.vla import _a_steps, _features

                    kh, un, _, _ = _features(lvec["k"], lvec["q"], lvec["u"], 1e-4, 1.0 / np.sqrt(d))
                    steps = (A for A, _, _ in _a_steps(kh, un, 0.1, 1e-4, 20, 1e-3))
                else:
                    steps = (A for A, _ in vla_a_steps_f32(lvec["k"], lvec["u"]))
                for t, A in enumerate(steps, 1):
                    if t % every == 0:
                        mon(t, np.asarray(A, dtype=np.float64))
            bar.update(long_T - bar.done)
        lmin_a = np.array(lmin)
        bad = np.flatnonzero(lmin_a <= 0)
        spec[f] = {"t": np.array(tt), "lmin": lmin_a, "cond": np.array(cond),
                   "first_not_pd": int(tt[bad[0]]) if bad.size else None,
                   "min_lmin": float(lmin_a.min()), "final_lmin": float(lmin_a[-1]),
                   "max_cond": float(np.max(np.array(cond)))}
        progress(f"accuracy: vla A spectrum {f:8s} T={long_T}: {time.perf_counter() - t0:.1f} s, "
                 f"min eig {spec[f]['min_lmin']:.3g}, first not PD: {spec[f]['first_not_pd']}")

    plt = _plt()
    t = np.arange(1, T + 1)
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.6))
    for f in FORMATS:
        if f != "float64":
            ax[0].semilogy(t, np.maximum(err[f], 1e-17), color=COLORS[f], lw=0.8, label=f)
        ax[1].plot(t, outs[f]["s_norm"], label=f, **_style(f))
        ax[2].plot(t, outs[f]["a_norm"], label=f, **_style(f))
    ax[0].set_title("per-token relative error of o vs float64")
    ax[1].set_title("||S_t||_F")
    ax[2].set_title("||A_t||_F")
    for a in ax:
        a.set_xlabel("token t")
    fig.suptitle(f"VLA, d={d}, Gaussian stream (seed {seed}), defaults lambda0=0.1 eta=1e-3 refresh 20")
    _figure_legend(fig, [ax[1]], top=0.86)
    fig.savefig(os.path.join(out_dir, "vla.png"), dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(1, 2, figsize=(12, 4.6))
    for f in FORMATS:
        s = spec[f]
        ax[0].semilogy(s["t"], np.where(s["lmin"] > 0, s["lmin"], np.nan), label=f, **_style(f))
        if s["first_not_pd"] is not None:
            ax[0].axvline(s["first_not_pd"], color=COLORS[f], ls=":", lw=1, label=f"{f}: not PD from here")
        ax[1].semilogy(s["t"], np.where(np.isfinite(s["cond"]), s["cond"], np.nan), label=f, **_style(f))
    ax[0].set_title("min eigenvalue of A_t (where positive)")
    ax[1].set_title("condition number of A_t (where PD)")
    for a in ax:
        a.set_xlabel("token t")
        _plain_log_labels(a)
    fig.suptitle(f"VLA's A over {long_T} tokens, d={d}, sampled every {every} tokens")
    _figure_legend(fig, [ax[0]], top=0.86)
    fig.savefig(os.path.join(out_dir, "vla_a_spectrum.png"), dpi=100)
    plt.close(fig)

    # lost updates: |w_i w_j| of the float64 A loop against half an LSB of A in 8 and 16 bits
    from specmem.golden.vla import _a_steps, _features

    kh, un, _, _ = _features(vec["k"], vec["q"], vec["u"], 1e-4, 1.0 / np.sqrt(d))
    ws, A_prev = [], np.eye(d) / 0.1
    for i, (A, delta, _) in enumerate(_a_steps(kh, un, 0.1, 1e-4, 20, 1e-3)):
        if i % 16 == 0:
            w = A_prev @ un[i] / np.sqrt(delta)
            ws.append(np.abs(np.outer(w, w)).ravel())
        A_prev = A
    ww = np.concatenate(ws)
    fa = formats_for("vla", "legacy-int8", d)["a"]
    lsb8 = 2.0 ** -(7 - fa.int_bits)
    lost = {"lsb8": lsb8, "lsb16": fa.lsb,
            "frac_below_half_lsb8": float(np.mean(ww < lsb8 / 2)),
            "frac_below_half_lsb16": float(np.mean(ww < fa.lsb / 2)),
            "median_ww": float(np.median(ww))}
    summary = {f: {"median_err": float(np.median(err[f])), "max_err": float(np.max(err[f])),
                   "final_err": float(err[f][-1]), **{kk: spec[f][kk] for kk in
                                                     ("first_not_pd", "min_lmin", "final_lmin", "max_cond")}}
               for f in FORMATS}
    summary["_lost_updates"] = lost
    summary["_eta_raw"] = {f: runs[f]["eta_raw"] for f in FIXED}
    summary["_o_last"] = float(np.max(np.abs(ref["o"][-1])))
    return summary, runs


# ---------------------------------------------------------------------------------------------
# recall


def _feature_cosine(d, pairs=2000, seed=0):
    """Mean cosine between elu1 features of two random unit keys (why ELU+1 rules fail this task)."""
    from specmem.golden.common import elu1

    k = np.random.default_rng(seed).standard_normal((2, pairs, d))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    f = elu1(k)
    f /= np.linalg.norm(f, axis=-1, keepdims=True)
    return float(np.mean(np.sum(f[0] * f[1], axis=-1)))


def _recall_runner(f):
    if f == "float64":
        from specmem.backends import run

        return lambda algo, inputs, params: run(algo, inputs, params=params)
    if f == "float32":
        return lambda algo, inputs, params: run_float32(algo, inputs, params)
    return lambda algo, inputs, params: run_fixed(algo, inputs, f, {**params, "in_range": RECALL_IN_RANGE})


def _recall_section(d, ns, seeds, out_dir, progress):
    from specmem.golden.recall import recall_accuracy

    acc = {}
    bar = Progress(len(RECALL_RULES) * len(FORMATS) * len(ns) * len(seeds), "accuracy: recall", unit="runs")
    # legacy-int8 saturates on purpose here (the range plots and tables below count it): no warnings
    with bar, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rule in RECALL_RULES:
            t0 = time.perf_counter()
            for f in FORMATS:
                runner = _recall_runner(f)
                per_n = []
                for n in ns:
                    per_seed = []
                    for s in seeds:
                        per_seed.append(recall_accuracy(rule, d, n, V=128, seed=s, run=runner))
                        bar.update()
                    per_n.append(np.mean(per_seed))
                acc[(rule, f)] = np.array(per_n)
            progress(f"accuracy: recall {rule:8s} d={d} n={ns[0]}..{ns[-1]} x {len(seeds)} seeds: "
                     f"{time.perf_counter() - t0:.1f} s")
    plt = _plt()
    fig, ax = plt.subplots(1, len(RECALL_RULES), figsize=(15, 4.6), sharey=True)
    for a, rule in zip(ax, RECALL_RULES):
        for f in FORMATS:
            a.plot(ns, acc[(rule, f)], "o-", ms=5 if f == "float64" else 3, label=f, **_style(f))
        a.axvline(d, color="gray", lw=0.5)
        a.set_title(f"{rule}: exact-match recall")
        a.set_xlabel("pairs n (d marked)")
        a.set_ylim(-0.02, 1.02)
    fig.suptitle(f"Training-free recall, d={d}, V=128 codebook, gap 0, {len(seeds)} seed(s)")
    _figure_legend(fig, [ax[0]], top=0.86)
    fig.savefig(os.path.join(out_dir, "recall.png"), dpi=100)
    plt.close(fig)
    return acc


# ---------------------------------------------------------------------------------------------
# ranges and saturation


def _range_runs(d, k, T, seed, progress):
    from specmem.vectors import make_vectors

    out = {}
    algos = ("annihilation", "vla", "linear", "deltanet")
    with Progress(len(algos) * len(FIXED), "accuracy: ranges", unit="runs") as bar:
        for algo in algos:
            vec = make_vectors(algo, T, d, seed)
            for p in FIXED:
                t0 = time.perf_counter()
                if algo == "annihilation":
                    r = annihilation_fixed(vec["x"], k, p)
                elif algo == "vla":
                    r = vla_fixed(**vec, preset=p)
                elif algo == "linear":
                    from .linear_attention import linear_attention_fixed

                    r = linear_attention_fixed(**vec, preset=p)
                else:
                    from .deltanet import deltanet_fixed

                    r = deltanet_fixed(**vec, preset=p)
                out[(algo, p)] = r
                bar.update()
            progress(f"accuracy: ranges {algo:12s} T={T}: {time.perf_counter() - t0:.1f} s (last preset)")
    return out


def _range_plot(algo, runs, out_dir):
    plt = _plt()
    fm = runs[(algo, "legacy-int8")]["fmt"]

    def drawn(n):  # a representable bar (fixed) or an observed range (any kind): otherwise an empty row
        return fm.kinds[n] == "fixed" or any(runs[(algo, p)]["ranges"].get(n) is not None for p in FIXED)

    names = [n for n in fm.tensors if fm.kinds[n] != "exact" and drawn(n)]
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(names) + 2.3))
    for i, n in enumerate(names):
        y = len(names) - 1 - i
        for j, p in enumerate(FIXED):
            f = runs[(algo, p)]["fmt"]
            fx, kind = f[n], f.kinds[n]
            off = (j - 1) * 0.22
            if kind == "fixed":
                ax.plot([np.log2(fx.lsb), np.log2(fx.max_value)], [y + off] * 2, color=COLORS[p], lw=4, alpha=0.3,
                        solid_capstyle="butt", label=f"{p} representable [LSB, max]" if i == 0 else None)
            rng = runs[(algo, p)]["ranges"].get(n)
            if rng is not None:
                mx = max(abs(rng[0]), abs(rng[1]))
                if mx > 0:
                    ax.plot([np.log2(mx)], [y + off], "|", color=COLORS[p], ms=10, mew=2,
                            label=f"{p} observed max |x|" if i == 0 else None)
        ax.text(1.0, y, "" if fm.kinds[n] == "fixed" else " block", va="center", fontsize=7,
                transform=ax.get_yaxis_transform())
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names[::-1])
    ax.set_xlabel("log2 |value|")
    ax.set_title(f"{algo}: per-tensor range (hls4ml style); block = block-floating, range per vector")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.08 - 0.6 / (len(names) + 4)), ncol=3,
              frameon=False)  # below the axes: the bars reach both sides
    fig.tight_layout()
    path = f"ranges_{algo}.png"
    fig.savefig(os.path.join(out_dir, path), dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------
# report


def write_accuracy_report(out_dir: str = "docs/accuracy", T: int = 4096, long_T: int = 100_000, small: bool = False,
                          progress=print, d: int = 64, k: int = 8) -> str:
    """Write ``out_dir/README.md`` and its plots; return the README path.

    ``small=True`` (the main job's setting) caps T at 1024 and the A stream at 10^4 tokens, and
    runs one recall seed on a coarser n sweep; the full report runs ``T``, ``long_T`` and three
    seeds. The recall sweep covers n = d/4 .. 2d.
    """
    T = check_scalar("T", T, lo=16, integer=True)
    long_T = check_scalar("long_T", long_T, lo=14, integer=True)
    d = check_scalar("d", d, lo=4, integer=True)
    k = check_scalar("k", k, lo=1, integer=True)
    if k >= T or k > d:
        raise SpecmemInputError(f"k: must be <= d ({d}) and below T ({T}), got {k}")
    if small:
        T, long_T = min(T, 1024), min(long_T, 10_000)
    seed = 0
    seeds = [0] if small else [0, 1, 2]
    ns = sorted({max(1, int(round(d * f))) for f in ((0.25, 0.5, 1, 1.5, 2) if small else
                                                     (0.25, 0.375, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2))})
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.perf_counter()

    ann, ann_runs = _annihilation_section(d, k, T, seed, out_dir, progress)
    vl, vla_runs = _vla_section(d, T, long_T, seed, out_dir, progress)
    rec = _recall_section(d, ns, seeds, out_dir, progress)
    rr = _range_runs(d, k, T, seed, progress)
    range_plots = {a: _range_plot(a, rr, out_dir) for a in ("annihilation", "vla", "linear", "deltanet")}
    text = _readme(d, k, T, long_T, seed, seeds, ns, ann, vl, rec, rr, range_plots, small, out_dir)
    path = os.path.join(out_dir, "README.md")
    write_atomic(path, text)
    write_atomic(os.path.join(out_dir, "summary.json"), json.dumps({"annihilation": ann, "vla": vl,
                   "recall": {f"{r}/{f}": a.tolist() for (r, f), a in rec.items()}, "ns": ns,
                   "config": {"d": d, "k": k, "T": T, "long_T": long_T, "seeds": seeds, "small": small}},
                  indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    progress(f"accuracy: report in {path} ({time.perf_counter() - t_start:.0f} s)")
    return path


#: the repository root (golden/fixed/ is two levels below it)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _repo_link(rel: str, out_dir: str) -> str:
    """The relative link to the repository file ``rel`` from a report in ``out_dir`` (docs/accuracy or out/...)."""
    return os.path.relpath(os.path.join(REPO, rel), os.path.abspath(out_dir)).replace(os.sep, "/")


def _readme(d, k, T, long_T, seed, seeds, ns, ann, vl, rec, rr, range_plots, small, out_dir) -> str:
    L = []
    add = L.append
    add("# Fixed-point accuracy of the RTL's formats: legacy-int8 / legacy-int16 / legacy-wide against float32 and float64\n")
    add(f"Generated by `specmem accuracy{'' if small else ' --full'}` "
        f"(`specmem.golden.fixed.accuracy.write_accuracy_report`, small={small}). Streams: seeded standard "
        f"Gaussian vectors (`specmem.vectors.make_vectors`, seed {seed}), d={d}, T={T}; annihilation k={k}; "
        f"VLA's A over {long_T} tokens (seed {seed + 1}). Formats and rounding points: "
        f"[`docs/fixed-point.md`]({_repo_link('docs/fixed-point.md', out_dir)}). float32 runs the golden loops in single precision "
        "(`golden/fixed/float32.py`). The scaled formats (`int8`, `int18`) and their targets are in `formats.md` "
        "(`specmem accuracy --formats`, written into the same folder).\n")
    add("| preset | multiplier operands | state | output | scalar unit (P, seed bits, Newton steps) | input range |")
    add("|---|---|---|---|---|---|")
    for p in FIXED:
        pr = PRESETS[p]
        add(f"| {p} | {pr.mul_bits} b | {pr.state_bits} b | {pr.out_bits} b | {pr.mul_bits}, {pr.seed_bits}, "
            f"{pr.newton_steps} | ±{pr.in_range:g} |")
    add("")

    # findings first: they are what a reader wants
    add("## Findings\n")
    add(_findings(d, k, T, long_T, ann, vl, rec, rr, ns))

    add("## Annihilation memory\n")
    add("![annihilation](annihilation.png)\n")
    add("| format | max rel. error of Ω_t vs float64 | at t=T | largest principal angle (max, rad) | "
        "median erasure residual | mean retention of last k | rank (min..max) |")
    add("|---|---|---|---|---|---|---|")
    for f in FORMATS:
        a = ann[f]
        add(f"| {f} | {_fmt(a['max_omega_err'])} | {_fmt(a['final_omega_err'])} | {_fmt(a['max_angle'])} | "
            f"{_fmt(a['median_erasure'])} | {_fmt(a['mean_retention'])} | {a['min_rank']}..{a['max_rank']} |")
    add(f"| float64, inputs × (1 + 1e-7 N(0,1)) | | {_fmt(ann['perturbed']['final_omega_err'])} | "
        f"{_fmt(ann['perturbed']['max_angle'])} | | | |")
    add("\nErasure residual: `||Ω_t y_t − x_t (x_tᵀ y_t)|| / ||x_t||²` with each format's own Ω, y and "
        "(quantised) x. Retention: `||proj_col(Ω_t) x_s|| / ||x_s||` averaged over the last k inputs. "
        "The perturbed float64 row measures the rule's own sensitivity: the fixed-point error at long T is "
        "this amplification applied to the per-step rounding.\n")

    add("## VLA\n")
    add("![vla](vla.png)\n")
    add("![vla A spectrum](vla_a_spectrum.png)\n")
    add(f"| format | per-token rel. error of o: median | max | at t=T | min eig(A) over {long_T} tokens | "
        "final min eig | max cond(A) | first token with A not PD |")
    add("|---|---|---|---|---|---|---|---|")
    for f in FORMATS:
        v = vl[f]
        add(f"| {f} | {_fmt(v['median_err'])} | {_fmt(v['max_err'])} | {_fmt(v['final_err'])} | "
            f"{_fmt(v['min_lmin'])} | {_fmt(v['final_lmin'])} | {_fmt(v['max_cond'])} | "
            f"{v['first_not_pd'] if v['first_not_pd'] is not None else 'never'} |")
    add("\nThe spectrum of A is sampled every 7 tokens (coprime with the refresh period 20), so "
        "'first token' has a resolution of 7.\n")

    add("## Training-free recall (spec §4)\n")
    add("![recall](recall.png)\n")
    add("Keys: random orthonormal (n ≤ d) or random unit vectors; values from a V=128 codebook of unit "
        "vectors; write n pairs, decode every key by nearest codebook cosine "
        "(`specmem.golden.recall`: `vla` is Algorithm 1 with u = elu1(k) and u_scale = 1/sqrt(d), `vla-eq8` "
        "the same with eq. (8)'s unit u; DeltaNet with beta = 1). The fixed-point runs size the "
        f"input format for unit vectors and their ELU+1 features (`in_range={RECALL_IN_RANGE:g}`); the read-out multiplies the "
        "dequantised final state by the query in float64 (the module's read-out), so the table measures "
        "the state each format stores.\n")
    add(f"Algorithm 1's VLA and linear attention sit near 1/n (only the most recent pair decodes) in float64 "
        f"as well: the ELU+1 features of random unit keys are nearly parallel (mean cosine between the "
        f"normalised features of two keys: {_feature_cosine(d):.3f} at d={d}) and Algorithm 1's u_scale = "
        f"1/sqrt(d) leaves A too close to I/lambda0 to separate them; `vla-eq8` (unit u) whitens them and "
        f"recalls, so the format comparison is informative for `vla-eq8` and DeltaNet and a consistency "
        f"check for the other two (see docs/claims.md).\n")
    add("| rule | format | " + " | ".join(f"n={n}" for n in ns) + " | max abs. gap to float64 |")
    add("|---|---|" + "---|" * (len(ns) + 1))
    for rule in RECALL_RULES:
        for f in FORMATS:
            a = rec[(rule, f)]
            dmax = np.max(np.abs(a - rec[(rule, "float64")]))
            add(f"| {rule} | {f} | " + " | ".join(f"{x:.3f}" for x in a) + f" | {dmax * 100:.1f} pp |")
    add("")

    add("## Ranges and saturation (hls4ml style)\n")
    add("Observed max |value| of every tensor (before it is narrowed) on the default stream against the "
        "representable band [LSB, max] of each preset; block-floating tensors have no fixed band.\n")
    for algo, path in range_plots.items():
        add(f"![{algo} ranges]({path})\n")
    add("Saturation counts on the default streams (T tokens; zero counts omitted):\n")
    add("| rule | preset | saturated elements |")
    add("|---|---|---|")
    for (algo, p), r in rr.items():
        nz = {n: c for n, c in r["sat"].items() if c}
        sat = ", ".join(f"{n}: {c}" for n, c in nz.items()) or "none"
        add(f"| {algo} | {p} | {sat} |")
    add("")
    return "\n".join(L) + "\n"


def _findings(d, k, T, long_T, ann, vl, rec, rr, ns) -> str:
    out = []
    lost = vl["_lost_updates"]
    fa8 = formats_for("vla", "legacy-int8", d)["a"]
    eta = 1e-3
    out.append(
        f"1. **VLA's A needs more than 8 bits of storage.** A starts at I/lambda0 = 10, so its format needs "
        f"{fa8.int_bits} integer bits; an 8-bit A would have an LSB of {lost['lsb8']:g}, and the refresh "
        f"eta = {eta:g} is {eta / lost['lsb8']:.4f} LSB: it rounds to zero and the refresh is lost "
        f"(`test_vla_refresh_below_half_lsb_is_lost_in_int8` shows the same for eta = 1e-4 at 16 bits). The "
        f"rank-one updates are worse: {lost['frac_below_half_lsb8'] * 100:.1f} % of the products |w_i w_j| of the "
        f"float64 run are below half an 8-bit LSB (median {lost['median_ww']:.2g}), against "
        f"{lost['frac_below_half_lsb16'] * 100:.1f} % at 16 bits (LSB {lost['lsb16']:.3g}, where eta is "
        f"{vl['_eta_raw']['legacy-int8']} LSB). Hence every preset stores A (and S, U) at twice the multiplier width "
        f"and reads it into the multipliers rounded.")
    lin8 = rr[("linear", "legacy-int8")]["sat"]
    fs = rr[("linear", "legacy-int8")]["fmt"]["s"]
    smax = {p: max(abs(v) for v in rr[("linear", p)]["ranges"]["s"]) for p in FIXED}
    out.append(
        f"2. **Linear attention's S grows like sqrt(t).** After {T} tokens max |S| is {smax['legacy-wide']:.0f} "
        f"(sqrt(T) = {np.sqrt(T):.0f}); its int8 state ({fs.qformat}, max {fs.max_value:g}, read into the "
        f"multipliers as {rr[('linear', 'legacy-int8')]['fmt']['s_mul'].qformat}) saturated {lin8.get('s', 0)} times; "
        f"longer streams saturate it. The normaliser z is kept exact "
        f"({rr[('linear', 'legacy-int8')]['fmt']['z'].width} bits) because it grows linearly. Unit vectors (kh, ah, kn, "
        f"ahat) have elements near 1/sqrt(d) = {1 / np.sqrt(d):.3f}: an 8-bit Q0.7 gives them about "
        f"{np.log2(1 / np.sqrt(d) / 2 ** -7):.0f} significant bits, which sets int8's error floor.")
    f8 = {a: rr[(a, "legacy-int8")]["fmt"] for a in ("vla", "linear")}
    o_rng = rr[("vla", "legacy-wide")]["ranges"]["o"]
    out.append(
        f"   Besides the states, these need more than 8 bits in every preset: the exact dot-product "
        f"accumulators ({f8['vla'].acc_bits['s_read']} bits at d={d} for int8), the normaliser z "
        f"({f8['linear']['z'].width} bits, exact, it grows linearly), the scalar unit's 30-bit Newton "
        f"iterations, and VLA's o, whose magnitude spans {max(abs(o_rng[0]), abs(o_rng[1])):.2g} down to "
        f"{_fmt(vl['_o_last'])} (at t={T}) because its normaliser grows like t: it leaves the engine as "
        f"block floating point (one exponent per token).")
    a8, a16, aw = (ann[p]["max_omega_err"] for p in FIXED)
    ranks = ", ".join(f"{f} {ann[f]['min_rank']}..{ann[f]['max_rank']}" for f in FIXED)
    erase = ", ".join(f"{f} {_fmt(ann[f]['median_erasure'])}" for f in FORMATS)
    verr = ", ".join(f"{f} {_fmt(vl[f]['median_err'])}" for f in FORMATS if f != "float64")
    out.append(
        f"3. **The annihilation memory amplifies rounding.** Max relative error of Ω_t: legacy-int8 {_fmt(a8)}, "
        f"legacy-int16 {_fmt(a16)}, legacy-wide {_fmt(aw)}, float32 {_fmt(ann['float32']['max_omega_err'])}; float64 with "
        f"inputs perturbed by 1e-7 (relative) ends {_fmt(ann['perturbed']['final_omega_err'])} away after "
        f"{T} tokens. The rank stays exactly k in every format "
        f"({ranks}), "
        f"the erasure residual stays at rounding level (median: "
        f"{erase}).")
    out.append(
        f"4. **VLA output error** (median per-token relative error of o vs float64): "
        f"{verr}. "
        f"The wide preset tracks float64 to ≤ 1e-5 on every rule "
        f"(`tests/fixed/test_models.py::test_wide_tracks_float64`); the annihilation memory only over the "
        f"test's horizon (finding 3).")
    pd = {f: vl[f]["first_not_pd"] for f in FORMATS}
    pd_text = [f"{f}: stays PD (min eig {_fmt(vl[f]['min_lmin'])})" if pd[f] is None
               else f"{f}: not PD from token {pd[f]}" for f in FORMATS]
    out.append(f"5. **Positive definiteness of A over {long_T} tokens:** " + ", ".join(pd_text) + ".")
    ok = []
    for p in FIXED:
        dmax = max(np.max(np.abs(rec[(r, p)] - rec[(r, "float64")])) for r in RECALL_RULES)
        ok.append((p, dmax, pd[p] is None))
    good = [p for p, dm, pdok in ok if dm <= 0.01 and pdok]
    out.append(
        "6. **Narrowest preset** whose recall is within 1 pp of float64 (every rule, every n in "
        f"{ns[0]}..{ns[-1]}) and whose A stays PD over {long_T} tokens: "
        f"**{good[0] if good else 'none'}** ("
        + "; ".join(f"{p}: max recall gap {dm * 100:.1f} pp, A {'PD' if pdok else 'not PD'}" for p, dm, pdok in ok)
        + ").")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# benchmark


def bench_fixed(out_json: str | None = None, d: int = 64, k: int = 8, T: int = 256, progress=print) -> dict:
    """Tokens per second of ``run_fixed`` for every rule and preset (one stream, NumPy, this host)."""
    from specmem.vectors import make_vectors

    d = check_scalar("d", d, lo=2, integer=True)
    T = check_scalar("T", T, lo=8, integer=True)
    if k > d:
        raise SpecmemInputError(f"k: must be <= d ({d}), got {k}")
    rows = {}
    for algo in ("annihilation", "vla", "linear", "deltanet"):
        vec = make_vectors(algo, T, d, 0)
        params = {"k": k} if algo == "annihilation" else {}
        for p in FIXED:
            t0 = time.perf_counter()
            run_fixed(algo, vec, p, params)
            dt = time.perf_counter() - t0
            rows[f"{algo}/{p}"] = T / dt
            progress(f"bench fixed: {algo:12s} {p:5s} d={d}: {T / dt:9.0f} tokens/s")
    rec = {"d": d, "k": k, "T": T, "tokens_per_s": rows, "python": platform.python_version(),
           "numpy": np.__version__, "machine": platform.machine()}
    if out_json:
        os.makedirs(os.path.dirname(os.path.abspath(out_json)), exist_ok=True)
        with open(out_json, "w") as fh:
            json.dump(rec, fh, indent=2)
    return rec
