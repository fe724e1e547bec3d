"""Presets and per-tensor formats of the fixed-point models (the width analysis lives here).

A :class:`Preset` fixes four widths: ``mul_bits`` (``M``, every multiplier operand),
``state_bits`` (``Ws``, the stored recurrent state: ``U``, ``A``, ``S``), ``out_bits``
(``Wo``, the output stream) and the scalar unit's configuration. :func:`formats_for` turns a
preset, the rule and its parameters into one :class:`FixedFormat`: an :class:`FxType` per
tensor, chosen from a range bound written next to it (``why``), so the RTL generator, the
golden model and the reports read the same table.

Three kinds of tensor:

* ``fixed``: a fixed binary point from a range bound (inputs, states, unit vectors, ...);
* ``block``: an ``M``-bit block-floating vector: one shift per vector and token, chosen so
  its largest element fills the word (used where only the direction matters, or the scale
  is carried as an exponent: ``a``, ``g``, ``p``, ``zsm``, ``w``, ``alpha``, VLA's ``o``);
* ``exact``: an integer register that never rounds (the normaliser ``z``).

Every accumulator is exact: its width (in ``acc_bits``) is the product width plus
``ceil(log2(terms))``, checked to fit the 62-bit host integers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import numpy as np

from specmem.golden.common import SpecmemInputError

from .fxtype import MAX_WIDTH, FxType
from .scalar_unit import ScalarUnit

__all__ = ["Preset", "PRESETS", "RTL_PRESETS", "FixedFormat", "formats_for", "Z_GUARD_BITS"]

Z_GUARD_BITS = 24  # the exact normaliser z holds 2^24 tokens of the largest feature


@dataclass(frozen=True)
class Preset:
    """Widths of one preset (see ``docs/fixed-point.md`` for the analysis behind them)."""

    name: str
    mul_bits: int
    state_bits: int
    out_bits: int
    newton_steps: int
    seed_bits: int = 6
    exp_lut_bits: int = 6
    in_range: float = 8.0
    rounding: str = "rne"
    #: ``fixed``: a fixed binary point per tensor (the legacy models and the annihilation memory);
    #: ``scaled``: per-vector power-of-two scales and block-floating-point states
    #: (``golden/fixed/scaled/``; the delta-rule family: VLA, DeltaNet, Gated DeltaNet, linear).
    scheme: str = "fixed"
    #: the scalar unit's output mantissa (None: ``mul_bits``); one unit per core, so it may be
    #: wider than the lanes' operands
    scalar_bits: int | None = None

    def scalar_unit(self) -> ScalarUnit:
        P = self.mul_bits if self.scalar_bits is None else self.scalar_bits
        return ScalarUnit(out_bits=P, seed_bits=self.seed_bits, newton_steps=self.newton_steps)


PRESETS: dict[str, Preset] = {
    # The scaled formats (issue 12): int8 is the scaled design for the delta-rule family; for the
    # annihilation memory (a fixed-point model in every preset) it has legacy-int8's widths and
    # fails the subspace target, which is why the annihilation memory's default is int18.
    "int8": Preset("int8", mul_bits=8, state_bits=16, out_bits=16, newton_steps=1, exp_lut_bits=4, in_range=4.0,
                   scheme="scaled", scalar_bits=12),
    "int18": Preset("int18", mul_bits=18, state_bits=28, out_bits=18, newton_steps=2, exp_lut_bits=6, in_range=8.0,
                    scheme="scaled"),
    # wider references: the fixed-binary-point design at 16 and 28 bits
    "int16": Preset("int16", mul_bits=16, state_bits=32, out_bits=32, newton_steps=2, exp_lut_bits=6, in_range=8.0),
    "wide": Preset("wide", mul_bits=28, state_bits=48, out_bits=48, newton_steps=2, exp_lut_bits=8, in_range=8.0),
    # Today's RTL formats, unchanged, until the RTL issues move the cores to the scaled formats.
    # in_range: the input magnitude the input format holds. Unit-variance streams: 4 (sigma) clips
    # 6.3e-5 of N(0, 1) samples and buys int8 one fraction bit; 8 clips none in practice.
    "legacy-int8": Preset("legacy-int8", mul_bits=8, state_bits=16, out_bits=16, newton_steps=1, exp_lut_bits=4,
                          in_range=4.0),
    "legacy-int16": Preset("legacy-int16", mul_bits=16, state_bits=32, out_bits=32, newton_steps=2, exp_lut_bits=6,
                           in_range=8.0),
    "legacy-wide": Preset("legacy-wide", mul_bits=28, state_bits=48, out_bits=48, newton_steps=2, exp_lut_bits=8,
                          in_range=8.0),
}
#: the presets the RTL generators implement today (fixed binary points)
RTL_PRESETS = ("legacy-int8", "legacy-int16", "legacy-wide")


@dataclass
class FixedFormat:
    """Every tensor format of one rule under one preset, plus the scalar unit and constants."""

    algo: str
    preset: Preset
    tensors: dict[str, FxType]
    kinds: dict[str, str]
    why: dict[str, str]
    acc_bits: dict[str, int] = field(default_factory=dict)
    constants: dict[str, dict] = field(default_factory=dict)

    @property
    def scalar_unit(self) -> ScalarUnit:
        return self.preset.scalar_unit()

    def __getitem__(self, name: str) -> FxType:
        return self.tensors[name]

    def to_dict(self) -> dict:
        return {
            "algo": self.algo,
            "preset": asdict(self.preset),
            "scalar_unit": self.scalar_unit.to_json(),
            "tensors": {n: {**t.to_json(), "kind": self.kinds[n], "why": self.why[n]} for n, t in self.tensors.items()},
            "acc_bits": dict(self.acc_bits),
            "constants": dict(self.constants),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def _get_preset(preset) -> Preset:
    if isinstance(preset, Preset):
        return preset
    if not isinstance(preset, str) or preset not in PRESETS:
        raise SpecmemInputError(f"preset: must be one of {', '.join(PRESETS)}, got {preset!r}")
    return PRESETS[preset]


class _Builder:
    def __init__(self, algo: str, p: Preset, d: int):
        self.f = FixedFormat(algo, p, {}, {}, {})
        self.p = p
        self.d = d

    def add(self, name, fx: FxType, kind: str, why: str):
        if fx.rounding != self.p.rounding:
            fx = FxType(fx.width, fx.frac, fx.signed, self.p.rounding, fx.saturation)
        self.f.tensors[name], self.f.kinds[name], self.f.why[name] = fx, kind, why

    def rng(self, name, max_abs, width, why, kind="fixed"):
        self.add(name, FxType.for_range(max_abs, width), kind, why)

    def block(self, name, why, width=None):
        w = self.p.mul_bits if width is None else width
        self.add(name, FxType(w, w - 1), "block", why)

    def acc(self, name, a: str | int, b: str | int, terms: int):
        wa = a if isinstance(a, int) else self.f.tensors[a].width
        wb = b if isinstance(b, int) else self.f.tensors[b].width
        bits = wa + wb - 1 + int(np.ceil(np.log2(max(terms, 1))))  # |product| <= 2^(wa+wb-2), plus sign
        if bits > MAX_WIDTH:
            raise SpecmemInputError(
                f"d: accumulator {name} needs {bits} bits for d={self.d} with preset {self.p.name}; "
                f"the model holds at most {MAX_WIDTH}")
        self.f.acc_bits[name] = bits


def formats_for(algo: str, preset, d: int, params: dict | None = None) -> FixedFormat:
    """The per-tensor formats of ``algo`` for dimension ``d`` (``params``: the rule's parameters;
    ``in_range`` is the largest input magnitude the input format must hold; None or absent:
    the preset's)."""
    p = _get_preset(preset)
    params = dict(params or {})
    if p.scheme == "scaled" and algo != "annihilation":
        from .scaled.formats import scaled_format

        return scaled_format(algo, p, d)
    R = params.get("in_range", None)
    R = p.in_range if R is None else float(R)
    M, Ws, Wo = p.mul_bits, p.state_bits, p.out_bits
    b = _Builder(algo, p, d)
    inp = f"inputs, |x| <= in_range = {R:g}"
    unit = "unit vector: every element in [-1, 1]"
    if algo == "annihilation":
        k = int(params["k"])
        b.rng("x", R, M, inp)
        b.rng("u", 2 * R, Ws, "state U: columns are inputs mixed by orthogonal Householder reflections and "
                             "projections; measured max |U| 4.5 at R=4 (d=64, k=8..16); 2R")
        b.rng("u_mul", 2 * R, M, "U read into the multipliers (same range as U)")
        b.block("a", "a = Uᵀx: only its direction matters (P U and H are scale-free in a)")
        b.add("ahat", FxType(M, M - 1), "fixed", unit)
        b.rng("r", R * np.sqrt(k), M, "r = U a with max|a| in [1/2, 1): |r_i| <= ||U_i|| ||a||; "
                                      "measured max 7.5 at R=4, k=8 (d=64); R sqrt(k)")
        b.block("gram", "G = Σ_i Um_iᵀ Um_i co-accumulated from the stored rows (gram='coaccumulate'): one "
                        "exponent per token")
        b.block("g", "g = Uᵀ r (or G a): carried with its exponent")
        b.add("t", FxType(M + 1, M - 1), "fixed", "t = -g + (beta s g_j) ahat, in g's block scale: |t| < 1.5")
        b.block("p", "p = t / n², carried with its exponent")
        b.add("q", FxType(M, M), "fixed", "q_l = -beta s ahat_l: |q_l| = |ahat_l| / (1 + |ahat_j|) < 1/2")
        b.add("y", FxType(Wo, Wo - 1), "fixed", "y = r / ||r||: " + unit)
        b.acc("a_acc", "u_mul", "x", d)
        b.acc("g_acc", "u_mul", "r", d)
        b.acc("n2_acc", "r", "r", d)
    elif algo == "vla":
        lam = float(params.get("lambda0", 0.1))
        us = params.get("u_scale", None)
        us = 1.0 / np.sqrt(d) if us is None else float(us)
        amax = 1.5 / lam
        b.rng("k", R, M, inp)
        b.rng("v", R, M, inp)
        b.rng("q", R, M, inp)
        b.rng("u", R, M, inp)
        b.rng("kf", R + 1, M, "elu1 output: (0, in_range + 1]")
        b.rng("qf", R + 1, M, "elu1 output: (0, in_range + 1]")
        b.add("zk", FxType(M + Z_GUARD_BITS, b.f.tensors["kf"].frac), "exact",
              f"zk = sum of kf, exact: {Z_GUARD_BITS} guard bits (2^{Z_GUARD_BITS} tokens)")
        b.add("kh", FxType(M, M - 1), "fixed", unit)
        b.add("ah", FxType(M, M - 1), "fixed", unit)
        b.rng("un", us, M, f"normalised u times u_scale = {us:.4g}: |un_i| <= u_scale")
        b.rng("a", amax, Ws, f"state A: starts at I/lambda0 = {1 / lam:g} and only shrinks between refreshes "
                             f"(+eta I); 1.5/lambda0 leaves room for {0.5 / lam:g}/eta refreshes")
        b.rng("a_mul", amax, M, "A read into the multipliers (same range as A)")
        b.block("zsm", "zsm = A un: shrinks with A (10x over 4096 tokens), carried with its exponent")
        b.rng("delta", 1.0 + amax * us * us, 2 * M, "delta = 1 + unᵀ A un <= 1 + ||A|| u_scale²")
        b.block("w", "w = zsm / sqrt(delta): A -= w wᵀ keeps A bit-exactly symmetric")
        b.block("alpha", "alpha = A kh: only its direction is used (ah = alpha / ||alpha||)")
        b.rng("s", 2 * R, Ws, "state S: a delta rule on unit keys holds values of size |v| <= in_range; "
                             "measured max |S| 3.8 at R=4 (d=64, T=4096); 2R")
        b.rng("s_mul", 2 * R, M, "S read into the multipliers (same range as S)")
        b.rng("e", 2 * R, M, "e = v - S kh: |v| + |S kh| <= 2 in_range")
        b.block("o", "o = S qf / (zkᵀ qf) decays like 1/t: a per-token block exponent (o_frac)", width=Wo)
        b.acc("a_read", "a_mul", "un", d)
        b.acc("s_read", "s_mul", "qf", d)
    elif algo in ("deltanet", "linear"):
        b.rng("k", R, M, inp)
        b.rng("v", R, M, inp)
        b.rng("q", R, M, inp)
        if algo == "deltanet":
            b.add("beta", FxType(M, M - 2), "fixed", "beta in (0, 1]: Q1 so that beta = 1 is exact")
            b.add("kn", FxType(M, M - 1), "fixed", unit)
            b.add("qn", FxType(M, M - 1), "fixed", unit)
            b.rng("s", 2 * R, Ws, "state S: a delta rule on unit keys holds values |v| <= in_range; "
                                 "measured max |S| 2.3 at R=4 (d=64, T=4096); 2R")
            b.rng("s_mul", 2 * R, M, "S read into the multipliers (same range as S)")
            b.rng("e", 2 * R, M, "e = v - S k: |v| + |S k| <= 2 in_range")
            b.rng("o", 2 * R, Wo, "o = S q: |S q| <= 2 in_range")
            b.acc("s_read", "s_mul", "kn", d)
        else:
            srange = 16 * R * (R + 1)
            b.rng("kf", R + 1, M, "elu1 output: (0, in_range + 1]")
            b.rng("qf", R + 1, M, "elu1 output: (0, in_range + 1]")
            b.add("z", FxType(M + Z_GUARD_BITS, b.f.tensors["kf"].frac), "exact",
                  f"z = sum of kf, exact: {Z_GUARD_BITS} guard bits (2^{Z_GUARD_BITS} tokens)")
            b.rng("s", srange, Ws, "state S = sum of v kfᵀ grows like sqrt(t) in_range (in_range+1): "
                                   "measured max 363 at R=4 after 4096 Gaussian tokens; 16 R (R+1) covers "
                                   "~4096 tokens, longer streams saturate (counted)")
            b.rng("s_mul", srange, M, "S read into the multipliers (same range as S)")
            b.rng("o", R, Wo, "o = S qf / zᵀqf is a convex combination of the v_t: |o| <= in_range")
            b.acc("s_read", "s_mul", "qf", d)
    else:
        raise SpecmemInputError(f"algo: the fixed-point model covers annihilation, vla, linear, deltanet; got {algo!r}")
    return b.f
