"""The tensor table of a scaled format: what each tensor is (block vector, row-BFP state,
floating scalar) and how wide, for the reports, the JSON ``formats`` output and the RTL.

In the scaled scheme nothing has a fixed binary point: every vector carries one power-of-two
scale per token (``block``), every state one exponent per row (``row-bfp``), per-token scalars
are floating (``scalar``, the scalar unit's ``P``-bit mantissa). So the table names widths
only; ``FxType.frac`` is the nominal ``width - 1`` (a mantissa in [-1, 1)).
"""

from __future__ import annotations

from specmem.golden.common import SpecmemInputError

from ..formats import FixedFormat, Preset
from ..fxtype import FxType

__all__ = ["scaled_format", "scaled_preset", "SCALED_ALGOS"]

SCALED_ALGOS = ("vla", "linear", "deltanet", "gated-deltanet")


def scaled_preset(preset) -> Preset:
    """``preset`` as a scaled :class:`Preset`: None is ``int8``; a name must be a scaled preset."""
    from ..formats import PRESETS

    if preset is None:
        preset = "int8"
    if isinstance(preset, str):
        if preset not in PRESETS:
            raise SpecmemInputError(f"preset: must be one of {', '.join(PRESETS)}, got {preset!r}")
        preset = PRESETS[preset]
    if not isinstance(preset, Preset) or preset.scheme != "scaled":
        raise SpecmemInputError(f"preset: the scaled models take a scaled preset "
                                f"({', '.join(n for n, q in PRESETS.items() if q.scheme == 'scaled')}), "
                                f"got {getattr(preset, 'name', preset)!r}")
    return preset


def scaled_format(algo: str, p: Preset, d: int, diag_bits: int | None = None) -> FixedFormat:
    """The :class:`FixedFormat` of ``algo`` under the scaled preset ``p`` (dimension ``d``)."""
    M, Ws, Wo = p.mul_bits, p.state_bits, p.out_bits
    P = p.mul_bits if p.scalar_bits is None else p.scalar_bits
    lg = max(int(d) - 1, 1).bit_length()
    Wd = diag_bits or (Ws + 8)
    for what, bits in (("the normaliser zkᵀqf", 32 + M + lg), ("a state update product", Ws + M + 2),
                       ("A's diagonal times a vector", Wd + M), ("an output times its reciprocal", Wo + P)):
        if bits > 62:
            raise SpecmemInputError(f"preset: {what} needs {bits} bits with {p.name} at d={d}; the model holds 62")
    if not (4 <= M <= 24 and M <= Ws):
        raise SpecmemInputError(f"preset: scaled formats need 4 <= mul_bits <= 24 and mul_bits <= state_bits, "
                                f"got {M}, {Ws}")
    f = FixedFormat(algo, p, {}, {}, {})

    def add(name, width, kind, why):
        f.tensors[name], f.kinds[name], f.why[name] = FxType(width, width - 1, rounding=p.rounding), kind, why

    blk = "block vector: M-bit mantissas, one power-of-two scale per token (from the vector's max)"
    unit = "unit vector as a block vector (its largest element fills the word)"
    for n in ("k", "v", "q"):
        add(n, M, "block", "input " + blk)
    if algo in ("vla", "linear"):
        add("kf", M, "block", "elu1(k): exact per element, then one rounding to a block vector")
        add("qf", M, "block", "elu1(q): exact per element, then one rounding to a block vector")
        add("zk" if algo == "vla" else "z", 32, "block",
            "running sum of kf: a 32-bit block vector (one exponent), re-normalised every token")
    if algo == "vla":
        add("u", M, "block", "input " + blk)
        add("kh", M, "block", unit)
        add("un", M, "block", unit + " times u_scale")
        add("zsm", M, "block", "A un (wide diagonal + M-bit off-diagonal reads), one rounding")
        add("w", M, "block", "zsm rsqrt(delta): A -= w wᵀ stays bit-exactly symmetric")
        add("alpha", M, "block", "A_new kh; only its direction is used")
        add("ah", M, "block", unit)
        add("a_diag", diag_bits or (Ws + 8), "block",
            "A's diagonal (≈ 1/lambda0): kept wide and out of the M-bit row reads, one exponent for the vector")
        add("a", Ws, "row-bfp", "A's off-diagonal part: Ws-bit mantissas, one exponent per row; read at M bits")
    if algo in ("deltanet", "gated-deltanet"):
        add("beta", M, "scalar", "beta in (0, 1], an M-bit floating scalar per token")
        add("kn", M, "block", unit)
        add("qn", M, "block", unit)
    if algo == "gated-deltanet":
        add("g", P, "scalar", "decay in (0, 1], a P-bit floating scalar per token")
        add("gamma", P, "scalar", "gamma = product of the decays (scalar unit); S = gamma Ŝ: the decay costs "
                                  "two scalar products per token, not d² multiplies")
    add("e", M, "block", "the delta rule's error vector, one rounding from per-row dot products")
    add("s", Ws, "row-bfp", "state S: Ws-bit mantissas, one exponent per row (chosen before the write from a "
                            "bound on the row's new magnitude); read at M bits")
    add("o", Wo, "block", "output: Wo-bit block vector per token (o_raw, o_frac)")
    f.constants["scheme"] = {"name": "scaled", "guard_bits": 16, "scalar_bits": P}
    return f
