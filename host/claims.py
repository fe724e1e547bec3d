"""``specmem claims``: measure each quantitative claim of the seeds and write ``docs/claims.md``.

Every row states the claim and its source, what was measured on which input
distribution, the numbers, and a verdict (holds / fails / partly) computed from
the numbers by the rule written next to it. Plots go to ``<out>/claims/``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from specmem.progress import Progress

__all__ = ["Claim", "cost_verdict", "growth_exponent", "step_op_counts", "table_row", "write_claims"]

SEED_ANN = "seed 000 (spectral-annihilation note)"
SEED_VLA = "seed 003 (VLA paper)"


@dataclass
class Claim:
    claim: str
    source: str
    measurement: str
    verdict: str
    plot: str | None = None
    #: the verdict of the same claim measured on trained models (MQAR), beside the row's own; None: no such column
    trained: str | None = None


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ann_rank_and_erasure(d: int, k: int, T: int, out_dir: str, plots: dict) -> list[Claim]:
    from specmem.golden.annihilation import annihilation_dense, annihilation_gram, erasure_residual, rank

    rng = np.random.default_rng(1)
    x = rng.standard_normal((T, d))
    ranks = {"exact": [], "literal": []}
    resid = {"exact": [], "literal": []}
    # Replay step by step through the public functions: the state after t tokens is the run on x[:t].
    # To keep this O(T) we run the dense model incrementally by re-running on prefixes at sampled steps.
    steps = np.unique(np.linspace(k + 1, T, num=min(T - k, 120), dtype=int))
    with Progress(2 * len(steps), "claims: rank and erasure", unit="prefixes") as bar:
        for variant in ("exact", "literal"):
            for t in steps:
                out = annihilation_dense(x[:t], k, variant=variant)
                ranks[variant].append(rank(out["omega"]))
                y = out["y"][t - 1]
                resid[variant].append(erasure_residual(out["omega"], x[t - 1], y) if np.any(y) else 0.0)
                bar.update()
    g = annihilation_gram(x, k)
    gram_rank = rank(g["omega"])
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    for variant, style in (("exact", "-"), ("literal", "--")):
        ax[0].plot(steps, ranks[variant], style, label=variant)
        ax[1].semilogy(steps, np.maximum(resid[variant], 1e-18), style, label=variant)
    ax[0].axhline(k, color="gray", lw=0.8, label=f"k = {k}")
    ax[0].set_xlabel("token t"); ax[0].set_ylabel("rank(Omega_t)"); ax[0].legend(); ax[0].set_title(f"rank, d={d}, k={k}")
    ax[1].set_xlabel("token t"); ax[1].set_ylabel("||Omega_t y - x(x.y)|| / ||x||^2"); ax[1].legend()
    ax[1].set_title("erasure residual of y")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "annihilation_rank_erasure.png"), dpi=110)
    plt.close(fig)
    plots["rank"] = "claims/annihilation_rank_erasure.png"
    ex_r, li_r = np.array(ranks["exact"]), np.array(ranks["literal"])
    ex_e, li_e = np.max(resid["exact"]), np.max(resid["literal"])
    dist = f"x_t ~ N(0, I_{d}), seed 1, d={d}, k={k}, T={T}, ranks at {len(steps)} sampled steps"
    rows = [
        Claim("Rank stays exactly k (\"Exactly k, provably\"); exact variant w = y",
              SEED_ANN + ", table row \"This\"",
              f"{dist}: dense exact rank min {ex_r.min()} / max {ex_r.max()}; Gram form final rank {gram_rank}",
              "holds" if ex_r.min() == ex_r.max() == k and gram_rank == k else "fails", plots["rank"]),
        Claim("Rank stays exactly k with the note's printed Sherman-Morrison w (literal, eps=1e-3)",
              SEED_ANN + ", eq. for w*",
              f"{dist}: literal rank min {li_r.min()} / max {li_r.max()} (reaches d={d}: {li_r.max() == d})",
              "holds" if li_r.max() == k else "fails", plots["rank"]),
        Claim("Exact spectral erasure of the removed direction y (Omega_t y = x (x.y))",
              SEED_ANN + ", \"the direction ceases to exist\"",
              f"{dist}: max relative residual exact {ex_e:.2e}, literal {li_e:.2e} (rule: holds if <= 1e-10)",
              "holds" if ex_e <= 1e-10 else "fails", plots["rank"]),
        Claim("Erasure with the literal w (as printed)", SEED_ANN,
              f"{dist}: max relative residual literal {li_e:.2e} (rule: holds if <= 1e-10)",
              "holds" if li_e <= 1e-10 else "fails", plots["rank"]),
    ]
    return rows


def step_op_counts(d: int, k: int, use_gram: bool = False, seed: int = 2) -> dict[str, int]:
    """Arithmetic operations of one full-memory step of the Gram form (``_gram_step``, batch 1),
    counted by running it on counting arrays (:mod:`specmem.opcount`): exact and load-independent."""
    from specmem.golden.annihilation import _gram_step
    from specmem.opcount import count_ops

    rng = np.random.default_rng(seed)
    U, x = rng.standard_normal((1, d, k)), rng.standard_normal((1, d))
    args = (U, x, np.array([True]), 1e-24)
    if use_gram:
        args += (np.einsum("bik,bil->bkl", U, U),)
    counter, _ = count_ops(_gram_step, *args)
    return {**{n: int(counter.counts[n]) for n in ("mul", "add", "div", "sqrt")}, "total": counter.arithmetic}


def growth_exponent(xs, counts) -> float:
    """Local exponent ``log(c2/c1) / log(x2/x1)`` between the two largest sizes: the growth of the
    leading term (lower-order terms only pull it below the leading power)."""
    return float(np.log(counts[-1] / counts[-2]) / np.log(xs[-1] / xs[-2]))


def cost_verdict(exponent: float) -> str:
    """Linear: holds if the exponent is <= 1.05, partly below 1.5, fails from 1.5 (quadratic is 2)."""
    return "holds" if exponent <= 1.05 else ("partly" if exponent < 1.5 else "fails")


def _ann_cost(out_dir: str, plots: dict, full: bool) -> list[Claim]:
    """Per-step cost of the Gram form: the verdict from operation counts (deterministic), the
    NumPy timings beside it (they depend on the machine and its load, so they decide nothing)."""
    from specmem.bench import loglog_slope, steady_rate
    from specmem.golden.annihilation import annihilation_dense, annihilation_gram

    ds = [64, 128, 256, 512, 1024]
    k_fixed = 8
    ks = [4, 8, 16, 32, 64]
    d_fixed = 512
    ops_d = [step_op_counts(d, k_fixed)["total"] for d in ds]
    ops_k = [step_op_counts(d_fixed, k)["total"] for k in ks]
    ops_kg = [step_op_counts(d_fixed, k, use_gram=True)["total"] for k in ks]
    e_d, e_k, e_kg = growth_exponent(ds, ops_d), growth_exponent(ks, ops_k), growth_exponent(ks, ops_kg)
    per_dk = ops_d[-1] / (ds[-1] * k_fixed)

    # timings, reported only
    rng = np.random.default_rng(2)
    batch = 16
    min_time = 0.2 if full else 0.08
    t_ds = ds if full else [64, 256, 1024]
    t_ks = ks if full else [4, 16, 64]
    t_d, t_dense, t_gram1, t_k = [], [], [], []
    with Progress(3 * len(t_ds) + len(t_ks), "claims: cost timings", unit="timings") as bar:
        for d in t_ds:
            x = rng.standard_normal((batch, k_fixed + 2 * 256 + 8, d))
            t_d.append(1 / steady_rate(lambda a, kk: annihilation_gram(a, kk), x, k_fixed, min_time=min_time,
                                       max_m=256))
            bar.update()
            # The dense reference is O(d^2) per step: time it at batch 1, beside the Gram form at batch 1.
            t_dense.append(1 / steady_rate(lambda a, kk: annihilation_dense(a, kk), x[0], k_fixed, min_time=min_time,
                                           max_m=32))
            bar.update()
            t_gram1.append(1 / steady_rate(lambda a, kk: annihilation_gram(a, kk), x[0], k_fixed, min_time=min_time,
                                           max_m=256))
            bar.update()
        for k in t_ks:
            x = rng.standard_normal((batch, k + 2 * 256 + 8, d_fixed))
            t_k.append(1 / steady_rate(lambda a, kk: annihilation_gram(a, kk), x, k, min_time=min_time, max_m=256))
            bar.update()
    s_d, s_dense, s_k = loglog_slope(t_ds, t_d), loglog_slope(t_ds, t_dense), loglog_slope(t_ks, t_k)

    plt = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    ax[0].loglog(ds, ops_d, "o-", label=f"Gram form, k={k_fixed} (exponent {e_d:.2f})")
    ax[0].loglog(ds, [ops_d[0] * d / ds[0] for d in ds], ":", color="gray", label="proportional to d")
    ax[0].set_xlabel("d"); ax[0].set_ylabel("arithmetic ops per step"); ax[0].set_title("counted ops vs d")
    ax[1].loglog(ks, ops_k, "o-", label=f"Gram form, d={d_fixed} (exponent {e_k:.2f})")
    ax[1].loglog(ks, ops_kg, "s--", label=f"with maintained G (exponent {e_kg:.2f})")
    ax[1].loglog(ks, [ops_k[0] * k / ks[0] for k in ks], ":", color="gray", label="proportional to k")
    ax[1].set_xlabel("k"); ax[1].set_ylabel("arithmetic ops per step"); ax[1].set_title("counted ops vs k")
    ax[2].loglog(t_ds, np.array(t_d) * 1e6, "o-", label=f"Gram, batch {batch}, k={k_fixed}")
    ax[2].loglog(t_ds, np.array(t_gram1) * 1e6, "^-", label="Gram, batch 1")
    ax[2].loglog(t_ds, np.array(t_dense) * 1e6, "s--", label="dense O(d^2), batch 1")
    ax[2].set_xlabel("d"); ax[2].set_ylabel("us per step (this run)"); ax[2].set_title("NumPy timings (not the verdict)")
    from matplotlib.ticker import NullFormatter

    for a, ticks in zip(ax, (ds, ks, t_ds)):  # the measured sizes as plain ticks: no crowded 10^x minor labels
        a.set_xticks(ticks)
        a.set_xticklabels([str(t) for t in ticks])
        a.xaxis.set_minor_formatter(NullFormatter())
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "annihilation_cost.png"), dpi=110)
    plt.close(fig)
    plots["cost"] = "claims/annihilation_cost.png"
    how = ("arithmetic operations (multiplies, adds, divides, square roots) of one full-memory step of the "
           "Gram form (`_gram_step`, batch 1, x ~ N(0, I)), counted by running the model's own code on "
           "counting arrays (`specmem.opcount`): exact, independent of the machine")
    rule = ("Rule: holds if the growth exponent between the two largest sizes, log(c2/c1)/log(n2/n1), "
            "is <= 1.05, partly below 1.5, fails from 1.5.")
    return [
        Claim("Per-step cost O(dk): linear in d", SEED_ANN + ", \"Total: O(dk) per step\"",
              f"{how}; k={k_fixed}, d in {ds}: {', '.join(map(str, ops_d))} ops; exponent {e_d:.3f} "
              f"({per_dk:.1f} ops per d*k at d={ds[-1]}). {rule} Timings beside it (this run, decide nothing): "
              f"steady-state us per step, batch {batch}, d in {t_ds}: {', '.join(f'{t*1e6:.0f}' for t in t_d)} "
              f"(log-log slope {s_d:.2f}); batch 1: Gram {', '.join(f'{t*1e6:.0f}' for t in t_gram1)}, dense "
              f"reference {', '.join(f'{t*1e6:.0f}' for t in t_dense)} (slope {s_dense:.2f}).",
              cost_verdict(e_d), plots["cost"]),
        Claim("Per-step cost O(dk): linear in k", SEED_ANN,
              f"same count, d={d_fixed}, k in {ks}: {', '.join(map(str, ops_k))} ops; exponent {e_k:.3f}. {rule} "
              f"With G = U^T U maintained instead of the second pass over U (`use_gram=True`), the "
              f"k x k update as written (dense products H M H) adds O(k^3): {', '.join(map(str, ops_kg))} ops, exponent "
              f"{e_kg:.2f}. The note's eigen-factored form needs a k x k eigendecomposition per step "
              f"(O(dk^2 + k^3), spec section 1). Timings beside it: batch {batch}, k in {t_ks}: "
              f"{', '.join(f'{t*1e6:.0f}' for t in t_k)} us (slope {s_k:.2f}).",
              cost_verdict(e_k), plots["cost"]),
    ]


def _vla_norms(out_dir: str, plots: dict) -> list[Claim]:
    from specmem.golden.linear_attention import linear_attention
    from specmem.golden.vla import vla

    d, T = 32, 1000
    rng = np.random.default_rng(3)
    k, v, q, u = (rng.standard_normal((T, d)) for _ in range(4))
    out = vla(k, v, q, u)
    lin = linear_attention(k, v, q)
    s_lin = np.linalg.norm(np.cumsum(v[:, :, None] * _elu1(k)[:, None, :], axis=0), axis=(1, 2))
    s_vla, a_vla = out["s_norm"], out["a_norm"]
    a0 = np.sqrt(d) / 0.1
    plt = _plt()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.6))
    ax[0].semilogy(np.arange(1, T + 1), s_lin, label="linear attention (ELU+1)")
    ax[0].semilogy(np.arange(1, T + 1), s_vla, label="VLA")
    ax[0].axhline(15, color="gray", ls=":", lw=0.8, label="paper: VLA < 15")
    ax[0].set_xlabel("t"); ax[0].set_ylabel("||S_t||_F"); ax[0].legend(); ax[0].set_title(f"d={d}, N(0,I) inputs")
    ax[1].plot(np.arange(1, T + 1), a_vla, label="VLA ||A_t||_F")
    ax[1].axhline(10, color="gray", ls=":", lw=0.8, label="paper: ~10 at t=1000")
    ax[1].set_xlabel("t"); ax[1].set_ylabel("||A_t||_F"); ax[1].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "vla_norms.png"), dpi=110)
    plt.close(fig)
    plots["norms"] = "claims/vla_norms.png"
    assert np.isclose(s_lin[-1], np.linalg.norm(lin["s"])), "linear attention state disagrees with its closed form"
    ratio = s_lin[-1] / s_vla[-1]
    dist = f"k, v, q, u ~ N(0, I_{d}) i.i.d., seed 3, default parameters (lambda0=0.1, eps=1e-4, refresh 20, eta=1e-3, u_scale=1/sqrt(d))"
    return [
        Claim("VLA ||S||_F stays below 15 up to T=1000", SEED_VLA + ", Fig. 2(b) and Fig. 4",
              f"{dist}: max_t ||S_t||_F = {s_vla.max():.2f}, at T=1000 {s_vla[-1]:.2f}",
              "holds" if s_vla.max() < 15 else "fails", plots["norms"]),
        Claim("Linear attention ||S||_F ~ 1600 at T=1000; VLA reduces it 109x", SEED_VLA + ", abstract, Fig. 4",
              f"{dist}: linear attention {s_lin[-1]:.1f} at T=1000 (paper 1600-1630 with trained projections), "
              f"ratio linear/VLA {ratio:.1f}x (paper 109x). Rule: holds if the ratio is within 2x of 109.",
              "holds" if 109 / 2 <= ratio <= 109 * 2 else ("partly" if ratio > 10 else "fails"), plots["norms"]),
        Claim("VLA ||A||_F decays from ~56 to ~10 over 1000 steps", SEED_VLA + ", Fig. 4 right",
              f"{dist}: ||A_0||_F = sqrt(d)/lambda0 = {a0:.1f}, ||A_t||_F at t=1: {a_vla[0]:.1f}, t=100: "
              f"{a_vla[99]:.2f}, t=1000: {a_vla[-1]:.2f}. Rule: holds if start within 10% of 56 and end within 30% of 10.",
              "holds" if abs(a_vla[0] - 56) <= 5.6 and abs(a_vla[-1] - 10) <= 3 else
              ("partly" if a_vla[-1] < a_vla[0] else "fails"), plots["norms"]),
    ]


def _elu1(x):
    from specmem.golden.common import elu1

    return elu1(x)


def _jacobian(out_dir: str, plots: dict) -> list[Claim]:
    from specmem.golden.vla import jacobian_spectral_norm, vla

    stats = {}
    T = 200
    with Progress(4 * T, "claims: Jacobian norms", unit="steps") as bar:
        for d in (32, 64, 96, 128):
            rng = np.random.default_rng(4)
            k, v, q, u = (rng.standard_normal((T, d)) for _ in range(4))
            tr = vla(k, v, q, u, return_trace=True)
            norms = []
            for t in range(T):
                norms.append(jacobian_spectral_norm(tr["kh"][t], tr["ah"][t]))
                bar.update()
            stats[d] = np.array(norms)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.boxplot([stats[d] for d in stats], tick_labels=[str(d) for d in stats])
    ax.axhline(1.0, color="gray", ls=":", lw=0.8, label="paper: 1.000")
    ax.set_xlabel("d_h"); ax.set_ylabel("||I - ah kh^T||_2 per step"); ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "vla_jacobian.png"), dpi=110)
    plt.close(fig)
    plots["jac"] = "claims/vla_jacobian.png"
    txt = "; ".join(f"d={d}: mean {s.mean():.4f}, min {s.min():.4f}, max {s.max():.4f}" for d, s in stats.items())
    worst = max(s.max() for s in stats.values())
    return [Claim("Jacobian spectral norm ||I - ah kh^T||_2 = 1.000 exactly (Prop. 2, Table 2) for d_h = 32...128",
                  SEED_VLA + ", Proposition 2 and Table 2",
                  f"k, v, q, u ~ N(0, I), seed 4, T=200 steps per d: {txt}. Rule: holds if every step is within "
                  f"5e-4 of 1 (the table's 3 decimals). The exact value for unit kh, ah with c = ah.kh is "
                  f"sqrt(((3-2c)+sqrt((3-2c)^2-4(1-c)^2))/2) >= 1, equal to 1 only when ah = kh (spec section 2).",
                  "holds" if worst <= 1.0005 else "fails", plots["jac"])]


RECALL_DS = (32, 64)


def _recall_ns(d: int) -> list[int]:
    return sorted({max(1, d // 4), d // 2, 3 * d // 4, d - 1, d, 3 * d // 2, 2 * d})


def _ann_retention(seeds) -> dict[str, dict[int, list[tuple[int, float, float]]]]:
    """The annihilation memory on the recall task's keys (k = d/4, exact Gram form), for each
    orthogonal-input policy: ``{policy: {d: [(n, mean last-k retention, mean all-n retention)]}}``."""
    from specmem.golden.annihilation import ORTH_POLICIES, annihilation_gram, retention
    from specmem.golden.recall import make_recall_task

    ann: dict[str, dict[int, list[tuple[int, float, float]]]] = {pol: {} for pol in ORTH_POLICIES}
    for d in RECALL_DS:
        k = d // 4
        for pol in ORTH_POLICIES:
            ann[pol][d] = []
            for n in _recall_ns(d):
                rl, ra = [], []
                for s in seeds:
                    kw, *_ = make_recall_task(d, n, seed=s)
                    ret = retention(annihilation_gram(kw, k, orth_policy=pol)["omega"], kw)
                    rl.append(float(np.mean(ret[-min(k, n):])))
                    ra.append(float(np.mean(ret)))
                ann[pol][d].append((n, float(np.mean(rl)), float(np.mean(ra))))
    return ann


def _ann_retention_claim(ann: dict, n_seeds: int, plot: str | None = None) -> Claim:
    """The ledger row "recent inputs are held": measured under both orthogonal-input policies,
    the verdict on the default (``evict``, spec section 1), ``skip``'s numbers and verdict beside it."""
    from specmem.golden.annihilation import ORTH_POLICIES

    default = ORTH_POLICIES[0]

    def txt(pol):
        return "; ".join(f"d={d}: " + ", ".join(f"n={n}: {rl:.2f}/{ra:.2f}" for n, rl, ra in rows)
                         for d, rows in ann[pol].items())

    def families(pol):
        ortho = [rl for d, rows in ann[pol].items() for n, rl, _ in rows if d // 4 < n <= d]
        rand = [rl for d, rows in ann[pol].items() for n, rl, _ in rows if n > d]
        return ortho, rand

    def verdict(pol):
        ortho, rand = families(pol)
        return ("holds" if min(ortho + rand) >= 0.9 else
                ("partly" if min(ortho) >= 0.9 or min(rand) >= 0.9 else "fails"))

    (o_ev, r_ev), (o_sk, r_sk) = families(default), families("skip")
    return Claim(
        "Annihilation memory: the new input replaces the direction most in its way, so recent inputs are "
        "held (rank-k working memory)", SEED_ANN + ", opening and \"Staleness without a trigger\"",
        f"keys of the recall task written in order, k = d/4, exact Gram form, mean over {n_seeds} seeds; "
        f"retention ||proj_col(Omega) x_s|| / ||x_s|| of the last k inputs / of all n. "
        f"Default orthogonal-input policy evict (spec section 1, step 4: an input orthogonal to the stored "
        f"span evicts the weakest column, ties round-robin): {txt(default)}. Orthonormal keys (n <= d; after "
        f"warm-up every key is orthogonal to the stored span, so nothing is \"in its way\" and the note's rule "
        f"is silent: this is the policy's result): last-k retention {min(o_ev):.2f}-{max(o_ev):.2f}; random "
        f"unit keys (n > d): {min(r_ev):.2f}-{max(r_ev):.2f}. Beside it, skip-and-flag (the RTL's policy): "
        f"{txt('skip')}; orthonormal keys are dropped, last-k retention {min(o_sk):.2f}-{max(o_sk):.2f}; random "
        f"unit keys {min(r_sk):.2f}-{max(r_sk):.2f} (no key is orthogonal there, so both policies agree). "
        f"Rule, on the default policy: holds if last-k retention >= 0.9 for both key families, partly if for "
        f"one (skip would rate: {verdict('skip')}).",
        verdict(default), plot)


def _recall(out_dir: str, plots: dict, full: bool, progress) -> list[Claim]:
    from specmem.golden.recall import RECALL_RULES, recall_accuracy

    seeds = range(5 if full else 3)
    res: dict[tuple[int, str], list[tuple[int, float]]] = {}
    runs = sum(len(_recall_ns(d)) for d in RECALL_DS) * len(RECALL_RULES) * len(seeds)
    with Progress(runs, "claims: recall sweep", unit="runs") as bar:
        for d in RECALL_DS:
            ns = _recall_ns(d)
            for rule in RECALL_RULES:
                res[(d, rule)] = []
                for n in ns:
                    accs = []
                    for s in seeds:
                        accs.append(recall_accuracy(rule, d, n, seed=s))
                        bar.update()
                    res[(d, rule)].append((n, float(np.mean(accs))))
            progress(f"claims: recall sweep d={d} done")
    ann_pol = _ann_retention(seeds)
    ann = ann_pol["evict"]
    progress("claims: annihilation retention (evict, skip) done")
    plt = _plt()
    fig, ax = plt.subplots(1, 3, figsize=(14, 3.8))
    for i, d in enumerate((32, 64)):
        for rule in RECALL_RULES:
            ns, acc = zip(*res[(d, rule)])
            ax[i].plot(np.array(ns) / d, acc, "o-", label=rule)
        ax[i].axvline(1.0, color="gray", ls=":", lw=0.8)
        ax[i].set_xlabel("n / d"); ax[i].set_ylabel("exact-match rate"); ax[i].set_title(f"training-free recall, d={d}")
        ax[i].legend(fontsize=8)
    for d in RECALL_DS:
        ns, rl, ra = zip(*ann[d])
        ax[2].plot(np.array(ns) / d, rl, "o-", label=f"last k, evict, d={d}")
        ax[2].plot(np.array(ns) / d, ra, "s--", label=f"all n, evict, d={d}")
        ns, rl, _ = zip(*ann_pol["skip"][d])
        ax[2].plot(np.array(ns) / d, rl, "x:", label=f"last k, skip, d={d}")
    ax[2].set_xlabel("n / d"); ax[2].set_ylabel("mean retention"); ax[2].set_title("annihilation memory, k = d/4")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "recall.png"), dpi=110)
    plt.close(fig)
    plots["recall"] = "claims/recall.png"

    def acc(d, rule, n):
        return dict(res[(d, rule)])[n]

    table = []
    for d in (32, 64):
        for rule in RECALL_RULES:
            table.append(f"{rule} d={d}: " + ", ".join(f"n={n}: {a:.2f}" for n, a in res[(d, rule)]))
        table.append(f"annihilation d={d}, k={d // 4}, evict (retention last k / all n): "
                     + ", ".join(f"n={n}: {rl:.2f}/{ra:.2f}" for n, rl, ra in ann[d]))
    dist = (f"training-free recall (spec section 4): orthonormal keys for n <= d, random unit keys above, "
            f"values from a codebook of 128 random unit vectors, no gap, mean over {len(seeds)} seeds; "
            f"VLA u = elu1(k) (vla: u_scale = 1/sqrt(d) as Algorithm 1; vla-eq8: u_scale = 1; vla-rawu: u = k); "
            f"DeltaNet beta = 1; Gated DeltaNet beta = 1, g = 0.99")
    def in_cap(rule):
        return min(acc(d, rule, 3 * d // 4) for d in (32, 64))

    v_alg, v_eq8, v_raw = in_cap("vla"), in_cap("vla-eq8"), in_cap("vla-rawu")
    tr = _trained_mqar()
    rows = [
        _ann_retention_claim(ann_pol, len(seeds), plots["recall"]),
        Claim("VLA: near-perfect recall within capacity (n < d_h), e.g. 1.000 at n = 24 < d_h = 32",
              SEED_VLA + ", Fig. 2(c), Fig. 5, Prop. 3",
              f"{dist}. Worst of d = 32, 64 at n = 3d/4: vla (Algorithm 1) {v_alg:.2f}, vla-eq8 {v_eq8:.2f}, "
              f"vla-rawu {v_raw:.2f}. Rule: holds if Algorithm 1's VLA reaches >= 0.99 at n = 3d/4 for both d; "
              f"partly if only the eq. (8) variant does. All rows: " + "; ".join(table) + ". " + tr["within"][0],
              "holds" if v_alg >= 0.99 else ("partly" if v_eq8 >= 0.99 else "fails"), plots["recall"],
              trained=tr["within"][1]),
        Claim("VLA beats DeltaNet and linear attention under increasing load (DeltaNet 0.010 at n = 24)",
              SEED_VLA + ", Fig. 5, Table 11",
              f"{dist}. At n = 3d/4, d=32: VLA {acc(32, 'vla', 24):.2f} (eq8 {acc(32, 'vla-eq8', 24):.2f}), "
              f"DeltaNet {acc(32, 'deltanet', 24):.2f}, Gated DeltaNet {acc(32, 'gated-deltanet', 24):.2f}, "
              f"linear {acc(32, 'linear', 24):.2f}. At n = 1.5d = 48: VLA {acc(32, 'vla', 48):.2f} "
              f"(eq8 {acc(32, 'vla-eq8', 48):.2f}), DeltaNet {acc(32, 'deltanet', 48):.2f}. "
              "Rule: holds if Algorithm 1's VLA >= DeltaNet + 0.05 and >= linear + 0.05 at n = 3d/4 for d = 32 and 64; "
              "partly if it beats linear attention only. The paper's numbers come from trained projections; this "
              "memory-only test gives DeltaNet exact storage of orthonormal keys with beta = 1. " + tr["beats"][0],
              "holds" if all(acc(d, "vla", 3 * d // 4) >= acc(d, r, 3 * d // 4) + 0.05
                             for d in (32, 64) for r in ("deltanet", "linear"))
              else ("partly" if all(acc(d, "vla", 3 * d // 4) >= acc(d, "linear", 3 * d // 4) + 0.05
                                    for d in (32, 64)) else "fails"), plots["recall"], trained=tr["beats"][1]),
        Claim("VLA keeps 62% at the capacity boundary n = d_h = 32 and ~0.04 at n = 48",
              SEED_VLA + ", Table 11, Fig. 8",
              f"{dist}. VLA at n = d: {acc(32, 'vla', 32):.2f} (d=32), {acc(64, 'vla', 64):.2f} (d=64); at n = 1.5 d: "
              f"{acc(32, 'vla', 48):.2f} (d=32). eq8 variant: {acc(32, 'vla-eq8', 32):.2f} and {acc(32, 'vla-eq8', 48):.2f}. "
              "Rule: holds if Algorithm 1's VLA is within 0.15 of 0.62 at n = d = 32. " + tr["boundary"][0],
              "holds" if abs(acc(32, "vla", 32) - 0.62) <= 0.15 else "fails", plots["recall"],
              trained=tr["boundary"][1]),
    ]
    return rows


# The trained-model record (``specmem mqar report`` writes it beside docs/mqar.md; runs trained on a lent GPU and the CPU).
MQAR_RECORD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "mqar", "runs.json")


def _trained_mqar(record: str = MQAR_RECORD) -> dict[str, tuple[str, str]]:
    """Seed 003's recall claims (rows "within", "beats", "boundary") on trained models, read from the MQAR
    record: ``{row: (measurement text, trained verdict)}``. The verdict is the MQAR report's rule
    (``specmem.mqar_report.verdict``): a cell is reproduced when our mean over seeds is within ``TOL`` of
    the paper's Table 11 number; a row is reproduced when every cell it cites is."""
    from specmem.mqar_report import (PAPER_SETUP, PAPER_TABLE11, TOL, device_label, load_record, setup_label,
                                     trained_cell, verdict)

    cited = {"within": [("vla", 8), ("vla", 16), ("vla", 24)],
             "beats": [("vla", 24), ("deltanet", 24), ("linear", 24)],
             "boundary": [("vla", 32), ("vla", 48)]}
    if not os.path.exists(record):
        return {k: (f"Trained (MQAR): no record at {os.path.relpath(record, REPO)}: not measured.", "not measured")
                for k in cited}
    runs = load_record(record)["runs"]
    names = {"vla": "VLA", "vla_eq8": "VLA eq. 8", "deltanet": "DeltaNet", "gated_deltanet": "Gated DeltaNet",
             "linear": "linear", "softmax": "softmax"}

    def fmt(c):
        return (f"{c['mean']:.3f}" if c["n"] == 1 else
                f"{c['mean']:.3f} ({c['min']:.3f}-{c['max']:.3f}, {c['n']} seeds)")

    variants = sorted({setup_label(r["config"]) for r in runs} - {PAPER_SETUP})
    out = {}
    for key, cells in cited.items():
        got = [(rule, n, trained_cell(runs, rule, n)) for rule, n in cited[key]]
        if any(c is None for *_, c in got):
            out[key] = ("Trained (MQAR): the record has no paper-setup run of "
                        + ", ".join(f"{names[r]} n = {n}" for r, n, c in got if c is None) + ": not measured.",
                        "not measured")
            continue
        ok = [verdict(PAPER_TABLE11[rule][n], c["mean"]) == "reproduced" for rule, n, c in got]
        devs = sorted({c["device"] for *_, c in got})
        seeds = sorted({s for *_, c in got for s in c["seeds"]})
        txt = (f"Trained (MQAR, `docs/mqar.md`, record `docs/mqar/runs.json`): the paper's model in the {PAPER_SETUP} "
               f"(no short convolution, lr 3e-4, 1000 steps, T = 3n + 1: Table 11's setting), {', '.join(devs)}, "
               f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}: "
               + "; ".join(f"{names[rule]} n = {n}: ours {fmt(c)}, paper {PAPER_TABLE11[rule][n]:.3f} "
                           f"({verdict(PAPER_TABLE11[rule][n], c['mean'])})" for rule, n, c in got)
               + f". Trained rule (the MQAR report's): reproduced when |our mean over seeds - paper| <= {TOL} for "
                 f"every cell cited ({sum(ok)} of {len(ok)} here).")
        for dev in sorted({device_label(r) for r in runs} - set(devs)):
            other = [(c, trained_cell(runs, rule, n, device=dev)) for rule, n, c in got]
            if all(o is not None for _, o in other):
                gap = max(abs(c["mean"] - o["mean"]) for c, o in other)
                txt += (f" The {dev} runs of these cells " + ("agree to 3 decimals." if gap < 5e-4 else
                                                               f"differ by at most {gap:.3f}."))
        if key == "within":
            txt += (" (The claim's 1.000 at n = 24 is Table 9's 2000-step three-seed mean, not run here; Table 11's "
                    "1000-step cells are compared.)")
        if key == "beats":
            d = dict(((rule, n), c["mean"]) for rule, n, c in got)
            txt += (f" Ours, VLA minus DeltaNet at n = 24: {d[('vla', 24)] - d[('deltanet', 24)]:+.3f}, VLA minus "
                    f"linear: {d[('vla', 24)] - d[('linear', 24)]:+.3f} (paper "
                    f"{PAPER_TABLE11['vla'][24] - PAPER_TABLE11['deltanet'][24]:+.3f} and "
                    f"{PAPER_TABLE11['vla'][24] - PAPER_TABLE11['linear'][24]:+.3f}).")
        for var in variants:
            cc = [(rule, n, trained_cell(runs, rule, n, variant=var)) for rule, n in cited[key]]
            extra = [("deltanet", n) for rule, n in cited[key] if rule == "vla" and key != "beats"]
            cc += [(rule, n, trained_cell(runs, rule, n, variant=var)) for rule, n in extra]
            cc = [(rule, n, c) for rule, n, c in cc if c is not None]
            if cc:
                txt += (f" Beside it, our variant {var} (convK: a causal depthwise convolution of kernel K before "
                        f"each mixer; not the paper's setup, no verdict): " + "; ".join(f"{names[rule]} n = {n}: {fmt(c)}" for rule, n, c in cc) + ".")
        out[key] = (txt, "reproduced" if all(ok) else "not reproduced")
    return out


# The GPU benchmark recorded on a lent GPU (``python -m specmem.bench_gpu --shapes full``); CI has none.
GPU_RECORD = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "gpu", "h100-bench-2.json")


def _gpu_claims(record: str = GPU_RECORD) -> list[Claim]:
    """Seed 003's GPU claims, decided from a recorded GPU benchmark (never timed here)."""
    import json

    claim14 = "Triton-fused VLA is 14x faster than sequential Python at T = 4096"
    claim43 = "VLA (Triton) crosses below softmax attention latency at ~43 000 tokens"
    src = SEED_VLA + ", abstract and section 6.1 (measured on a T4)"
    if not os.path.exists(record):
        return [Claim(c, src, f"no GPU record at {os.path.relpath(record)}: not measured", "not measured")
                for c in (claim14, claim43)]
    with open(record) as f:
        rec = json.load(f)
    if rec.get("mode") != "gpu":
        raise ValueError(f"{record}: mode {rec.get('mode')!r}, expected a GPU run")
    where = f"{rec['device']}, {rec['dtype']}, torch {rec['versions']['torch']}, triton {rec['versions']['triton']} " \
            f"(`docs/gpu.md`, record `{os.path.relpath(record, os.path.dirname(os.path.dirname(record)))}`)"
    seed = {r["op"]: r for r in rec["seed_14x"]["rows"] if r["status"] == "ok"}
    ratio = seed["vla_torch_loop"]["median_ms"] / seed["vla_fused"]["median_ms"]
    rows = [Claim(claim14, src,
                  f"{where}, {rec['seed_14x']['shape']}: PyTorch loop (`vla_recurrence`, float32) "
                  f"{seed['vla_torch_loop']['median_ms']:.0f} ms, fused kernel (bfloat16 in, float32 state) "
                  f"{seed['vla_fused']['median_ms']:.1f} ms: "
                  f"{ratio:.0f}x (do_bench medians, one run). Rule: holds if >= 14x.",
                  "holds" if ratio >= 14 else "fails")]
    cx = rec["crossover"]
    first = cx["first_T_faster_than_sdpa"]
    best = {}
    for T in cx["Ts"]:
        by = {r["op"]: r["median_ms"] for r in cx["rows"] if r["T"] == T and r["status"] == "ok"}
        vla = min(v for o, v in by.items() if o != "sdpa_causal")
        best[T] = vla / by["sdpa_causal"]
    crossed = [T for T in first.values() if T]
    Tmax = max(cx["Ts"])
    verdict = "holds" if crossed and 21_500 <= min(crossed) <= 86_000 else "fails"
    rows.append(Claim(
        claim43, src,
        f"{where}, B{cx['B']} H{cx['H']} D{cx['D']}, T = {cx['Ts'][0]}..{Tmax}, causal "
        f"`scaled_dot_product_attention` vs the fastest VLA kernel: VLA/SDPA time "
        + ", ".join(f"{best[T]:.1f}x at T = {T}" for T in cx["Ts"] if T >= 32768)
        + "; first T where VLA is faster: "
        f"{min(crossed) if crossed else 'none up to ' + str(Tmax)}. Rule: holds if the first crossing is within 2x of "
        f"43 000 tokens. FlashAttention-class SDPA on an H100 is far faster than the paper's T4 baseline.",
        verdict))
    return rows


def table_row(i: int, r: Claim) -> str:
    """One Markdown table row; pipes inside cells (norms like ||S||_F) are escaped."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    trained = "" if r.trained is None else f"; trained: **{r.trained}**"
    return f"| {i} | {cell(r.claim)} | {cell(r.source)} | {cell(r.measurement)} | **{r.verdict}**{trained} |"


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def doc_link(rel: str, out_dir: str) -> str:
    """A Markdown link to the repository file ``rel`` that works from ``out_dir`` (docs/ or out/...)."""
    return f"[`{rel}`]({os.path.relpath(os.path.join(REPO, rel), os.path.abspath(out_dir))})"


def footer(out_dir: str) -> list[str]:
    """The ledger's closing section, its links relative to where the ledger is written."""
    return [
        "## Not in this ledger",
        "",
        f"- The GPU rows are read from a benchmark recorded on a GPU ({doc_link('docs/gpu.md', out_dir)}); "
        "`specmem claims` times nothing on the GPU itself.",
        f"- The trained-model measurements of rows 12-14 (after \"trained:\") are read from the MQAR record "
        f"{doc_link('docs/mqar/runs.json', out_dir)} that `specmem mqar report` writes beside "
        f"{doc_link('docs/mqar.md', out_dir)}; `specmem claims` trains nothing.",
        "- The note's FPGA claim (k dot-product units pipeline the step to O(d) cycles) is measured on the RTL: "
        f"{doc_link('docs/rtl.md', out_dir)} gives 2d + 26..27 cycles per full token (58 at d=16, k=4; 91 at d=32, "
        "k=8), linear in d but with two passes over U (the floor d needs a maintained Gram matrix); fmax and "
        f"tokens/s are in {doc_link('docs/hardware.md', out_dir)}.",
        "",
    ]


def write_claims(out_dir: str = "docs", full: bool = False, progress=print) -> str:
    """Measure every row and write ``<out_dir>/claims.md`` with plots in ``<out_dir>/claims/``."""
    plot_dir = os.path.join(out_dir, "claims")
    os.makedirs(plot_dir, exist_ok=True)
    plots: dict[str, str] = {}
    t0 = time.perf_counter()
    rows: list[Claim] = []
    progress("claims: annihilation rank and erasure")
    rows += _ann_rank_and_erasure(32, 8, 2000 if full else 600, plot_dir, plots)
    progress("claims: annihilation per-step cost")
    rows += _ann_cost(plot_dir, plots, full)
    progress("claims: VLA state norms")
    rows += _vla_norms(plot_dir, plots)
    progress("claims: VLA Jacobian norm")
    rows += _jacobian(plot_dir, plots)
    progress("claims: training-free recall sweep")
    rows += _recall(plot_dir, plots, full, progress)
    rows += _gpu_claims()
    elapsed = time.perf_counter() - t0
    counts = {v: sum(r.verdict == v for r in rows) for v in ("holds", "partly", "fails", "not measured")}
    trained = [r.trained for r in rows if r.trained is not None]
    lines = [
        "# Claims ledger",
        "",
        "Generated by `specmem claims` (" + ("full" if full else "default") + f" size, {elapsed:.0f} s). "
        "Each row: a quantitative claim of the seeds about these update rules, where it comes from, what "
        "this project measured (inputs, numbers) and the verdict, decided by the rule stated in the row. "
        "Float64 golden models throughout (`specmem.golden`); the exact semantics are the project spec "
        "`shared/spec/algorithms.md` (beside the repository, not in it).",
        "",
        f"Summary: {counts['holds']} hold, {counts['partly']} partly, {counts['fails']} fail"
        + (f", {counts['not measured']} not measured." if counts["not measured"] else ".")
        + (f" Rows measured on trained models too (MQAR, the verdict after \"trained:\"): {len(trained)}, "
           f"{sum(t == 'reproduced' for t in trained)} reproduced." if trained else ""),
        "",
        "| # | claim | source | measurement | verdict |",
        "|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(table_row(i, r))
    lines += ["", "## Plots", ""]
    for name, path in plots.items():
        lines.append(f"![{name}]({path})")
        lines.append("")
    lines += footer(out_dir)
    from specmem.exchange import write_atomic

    path = os.path.join(out_dir, "claims.md")
    write_atomic(path, "\n".join(lines))
    progress(f"claims: wrote {path} ({len(rows)} rows: {counts})")
    return path
