"""Every fixed-point format against float64 on the user's own inputs (``specmem accuracy --in``).

For each format that supports the rule: the median and maximum per-token relative error of the
output (``o``), the relative Frobenius error of the final state, the saturation count, and for
the annihilation memory the median and maximum principal angle between the stored subspace and
float64's over time, and the final rank. One row per format; ``format_table`` prints them.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from specmem.golden.common import SpecmemInputError

from . import FIXED_ALGOS, PRESETS, SaturationWarning, _check_params, run_fixed

__all__ = ["compare_formats", "formats_for_algo", "format_table"]


def formats_for_algo(algo: str) -> list[str]:
    """The formats ``run_fixed`` accepts for ``algo``: every preset (Gated DeltaNet's fixed-binary-point ones
    run ``gated_deltanet_fixed``, the scaled ones the scaled model)."""
    return list(PRESETS)


def _angles_deg(U, Uref):
    qa, _ = np.linalg.qr(U)
    qb, _ = np.linalg.qr(Uref)
    sv = np.linalg.svd(np.swapaxes(qb, -1, -2) @ qa, compute_uv=False)
    return np.degrees(np.arccos(np.clip(sv[..., -1], -1, 1)))


def compare_formats(algo: str, inputs: dict, params: dict | None = None, formats=None, progress=None) -> dict:
    """Run ``algo`` in float64 and in each of ``formats`` (default: every supported one) on
    ``inputs``; return ``{"algo", "tokens", "rows": [...]}`` (see the module docstring)."""
    from specmem.backends import run

    algo = {"linear_attention": "linear", "gated_deltanet": "gated-deltanet"}.get(algo, algo)
    if algo not in FIXED_ALGOS:
        raise SpecmemInputError(f"algo: the fixed-point formats cover {', '.join(FIXED_ALGOS)}; got {algo!r}")
    ok = formats_for_algo(algo)
    formats = list(formats) if formats else ok
    for f in formats:
        if f not in PRESETS:
            raise SpecmemInputError(f"format: must be one of {', '.join(PRESETS)}, got {f!r}")
        if f not in ok:
            raise SpecmemInputError(f"format: {algo} does not support {f!r} (supported: {', '.join(ok)})")
    params = dict(params or {})
    ann = algo == "annihilation"
    ref = run(algo, inputs, params=params)
    if ann:
        from specmem.golden.annihilation import annihilation_gram

        fp = {n: v for n, v in params.items() if n in ("orth_tol", "orth_policy")}
        uref = annihilation_gram(inputs["x"], params["k"], history=True, **fp)["u_hist"]
    tokens = int(np.prod(next(iter(inputs.values())).shape[:-1])) if not ann else int(np.prod(inputs["x"].shape[:-1]))
    rows = []
    for f in formats:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SaturationWarning)  # the table reports the counts
            if ann:
                from .annihilation import annihilation_fixed

                fixed_params = _check_params(algo, params)  # the checks run_fixed makes (variant, form, ...)
                r = annihilation_fixed(inputs["x"], fixed_params.pop("k"), f, history=True, **fixed_params)
                out = {"omega": r["omega"], "u": r["u"], **{f"sat_{n}": v for n, v in r["sat"].items()}}
            else:
                out = run_fixed(algo, inputs, f, params)
        row = {"format": f, "seconds": time.perf_counter() - t0,
               "saturations": int(sum(int(np.sum(v)) for n, v in out.items() if n.startswith("sat_")))}
        if ann:
            k = params["k"]
            U = r["fmt"]["u"].to_float(r["u_hist"])[..., k:, :, :]
            a = _angles_deg(U, uref[..., k:, :, :]).ravel()
            row.update({"median_angle_deg": float(np.median(a)) if a.size else float("nan"),
                        "max_angle_deg": float(np.max(a)) if a.size else float("nan"),
                        "omega_rel_err": float(np.linalg.norm(out["omega"] - ref["omega"])
                                               / max(np.linalg.norm(ref["omega"]), 1e-300)),
                        "rank": int(np.linalg.matrix_rank(np.asarray(r["u"]).reshape(-1, *r["u"].shape[-2:])[-1]))})
        else:
            e = np.linalg.norm(out["o"] - ref["o"], axis=-1) / np.maximum(np.linalg.norm(ref["o"], axis=-1), 1e-300)
            row.update({"median_o_err": float(np.median(e)), "max_o_err": float(np.max(e)),
                        "s_rel_err": float(np.linalg.norm(out["s"] - ref["s"]) / max(np.linalg.norm(ref["s"]), 1e-300))})
        rows.append(row)
        if progress:
            progress(f"accuracy: {algo} {f}: {row['seconds']:.1f} s")
    return {"algo": algo, "tokens": tokens, "params": {n: (v if np.isscalar(v) else str(v)) for n, v in params.items()},
            "rows": rows}


def format_table(res: dict) -> str:
    """The comparison as a plain-text table."""
    ann = res["algo"] == "annihilation"
    cols = (["format", "median angle", "max angle", "Ω rel err", "rank", "saturations"] if ann else
            ["format", "median o err", "max o err", "S rel err", "saturations"])
    lines = [f"{res['algo']}: {res['tokens']} tokens, every format against float64"]
    body = []
    for r in res["rows"]:
        if ann:
            body.append([r["format"], f"{r['median_angle_deg']:.3g}°", f"{r['max_angle_deg']:.3g}°",
                         f"{r['omega_rel_err']:.3g}", str(r["rank"]), str(r["saturations"])])
        else:
            body.append([r["format"], f"{100 * r['median_o_err']:.3g} %", f"{100 * r['max_o_err']:.3g} %",
                         f"{r['s_rel_err']:.3g}", str(r["saturations"])])
    w = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    lines.append("  ".join(c.ljust(w[i]) for i, c in enumerate(cols)))
    lines += ["  ".join(b[i].ljust(w[i]) for i in range(len(cols))) for b in body]
    return "\n".join(lines)
