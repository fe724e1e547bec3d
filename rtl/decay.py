"""Gated DeltaNet's decay as a global scale (``golden/fixed/scaled/deltanet.py``, ``g`` given): the
running ``gamma = prod g`` and ``1/gamma`` on the scalar unit, with ``gamma``'s unbounded exponent
never formed.

The model, per token: ``gamma <- su.mul(gamma, g)`` (the product's magnitude rounded back to ``P``
bits, ``block()`` of one element) and ``rg = su.recip(gamma)``. ``gamma``'s exponent grows
without bound (``-log2 prod g``), so the hardware keeps the state's exponents in ``S``'s frame
(``Ŝ``'s plus ``gamma``'s, bounded: ``docs/fixed-point.md``, "Exponents and shifts") and only
needs, per token:

* ``gam``: ``gamma``'s ``P``-bit mantissa (the reads ``sk``, ``sq`` are multiplied by it);
* ``delta``: the change of ``gamma``'s exponent (``g``'s exponent minus the product's
  normalising shift), which moves the state's exponents into the new token's frame;
* ``rg``, ``rgf``: ``recip(gam, frac = 0)``. The reciprocal's exponent is linear in its input's
  (``recip(x, f).f = recip(x, 0).f - f``, the mantissa the same), so ``rgf`` is ``1/gamma``'s
  exponent plus ``gamma``'s: the frame's exponent of ``bh = block(be rg)`` is ``be``'s plus
  ``rgf``.

Pipeline: the product registered, a :class:`~specmem.rtl.block_norm.BlockNormaliser` of one
element to ``P`` bits (its exponent in is ``g``'s, so its exponent out is ``delta``), then the
pipelined :class:`~specmem.rtl.scalar_unit.ScalarUnit`'s reciprocal. One token at a time:
``i_ready`` is low from a token's acceptance to its ``o_valid`` (:attr:`latency` cycles).
``gamma`` starts at 1 (the model's ``su.const(1.0)``) and again after a reset.

**Heads** (``heads = H``): ``H`` independent ``gamma``, one per memory of a core with heads;
``i_head`` names the token's head with ``i_valid``, and the outputs are that head's.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scalar_unit import ScalarUnit as GoldenScalarUnit

from .block_norm import BlockNormaliser
from .dsp import operand_product
from .scalar_unit import ScalarOp, ScalarUnit

__all__ = ["DecayScale"]


class DecayScale(wiring.Component):
    """``gamma <- gamma g`` and ``recip(gamma)`` per token for a gated state in ``S``'s frame; see
    the module docstring. ``su``: the preset's golden scalar unit (``P = su.out_bits``);
    ``exp_width``: signed bits of ``g``'s exponent and of ``delta``. Ports: ``i_valid``,
    ``i_ready``, ``i_g`` (``g``'s ``P``-bit mantissa, positive), ``i_fg``; ``o_valid`` (one
    cycle), ``o_gam`` (the running mantissa, held until the next token), ``o_delta``, ``o_rg``,
    ``o_rgf``; with ``heads`` > 1 also ``i_head``."""

    def __init__(self, su: GoldenScalarUnit, *, exp_width: int = 12, dsp: str = "registered", heads: int = 1):
        if not isinstance(su, GoldenScalarUnit):
            raise ValueError(f"su: expected a golden ScalarUnit, got {su!r}")
        if isinstance(exp_width, bool) or not isinstance(exp_width, int) or exp_width < 6:
            raise ValueError(f"exp_width: must be an integer >= 6, got {exp_width!r}")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"heads: must be an integer >= 1, got {heads!r}")
        self.su, self.P, self.exp_width, self.heads, self.dsp = su, su.out_bits, exp_width, heads, dsp
        P = self.P
        self.norm = BlockNormaliser(1, 2 * P, P, frac_width=exp_width)
        self.unit = ScalarUnit(su, P, frac_width=2, pipelined=True, dsp=dsp)
        self.rgf_width = self.unit.out_layout["f"].shape.width
        #: gamma's mantissa after a reset: the model's ``su.const(1.0)``
        self.one = int(su.const(1.0).m)
        #: cycles from a token accepted to ``o_valid``: product, normaliser, request, reciprocal
        self.latency = 1 + self.norm.latency + 1 + self.unit.latency[ScalarOp.RECIP] + 1 + int(heads > 1)
        extra = {"i_head": In(range(heads))} if heads > 1 else {}
        super().__init__({**extra,
            "i_valid": In(1), "i_ready": Out(1), "i_g": In(signed(P)), "i_fg": In(signed(exp_width)),
            "o_valid": Out(1), "o_gam": Out(signed(P)), "o_delta": Out(signed(exp_width)),
            "o_rg": Out(signed(P)), "o_rgf": Out(signed(self.rgf_width)),
        })

    def elaborate(self, platform):
        m = Module()
        P, EW = self.P, self.exp_width
        H = self.heads
        gam = Signal(signed(P), name="gam_r", init=self.one)  # the token's gamma, new
        busy = Signal(name="busy")
        m.d.comb += [self.i_ready.eq(~busy), self.o_gam.eq(gam)]
        take = self.i_valid & self.i_ready
        p1 = Signal(signed(2 * P), name="p1", reset_less=True)
        f1 = Signal(signed(EW), name="f1", reset_less=True)
        v1 = Signal(name="v1")
        if H == 1:
            m.d.sync += [p1.eq(gam * self.i_g), f1.eq(self.i_fg), v1.eq(take)]
        else:  # each head's gamma; the token's head's into the product, the new one written back
            gams = [Signal(signed(P), name=f"h{h}_gam", init=self.one) for h in range(H)]
            head = Signal(range(H), name="head_r")
            with m.If(take):
                m.d.sync += head.eq(self.i_head)
            # the selected gamma and g into a DSP's input registers, the product in its output
            # register (the head's select into a fabric multiply limited two heads at 72 MHz)
            m.d.comb += p1.eq(operand_product(m, Array(gams)[self.i_head], self.i_g, "p1", self.dsp))
            v0, f0 = Signal(name="v0"), Signal(signed(EW), name="f0", reset_less=True)
            m.d.sync += [v0.eq(take), f0.eq(self.i_fg), v1.eq(v0), f1.eq(f0)]
        with m.If(take):
            m.d.sync += busy.eq(1)

        m.submodules.norm = nb = self.norm
        m.d.comb += [nb.en.eq(1), nb.i_valid.eq(v1), nb.i_data[0].eq(p1), nb.i_frac.eq(f1)]
        rq_v = Signal(name="rq_v")  # the new gamma is in gam_r: its reciprocal requested
        m.d.sync += rq_v.eq(nb.o_valid)
        with m.If(nb.o_valid):
            m.d.sync += [gam.eq(nb.o_data[0]), self.o_delta.eq(nb.o_frac)]
            if H > 1:
                m.d.sync += Array(gams)[head].eq(nb.o_data[0])

        m.submodules.unit = su = self.unit
        m.d.comb += [su.i.valid.eq(rq_v), su.i.payload.x.eq(gam), su.i.payload.frac.eq(0),
                     su.i.payload.op.eq(ScalarOp.RECIP), su.o.ready.eq(1)]
        m.d.sync += self.o_valid.eq(su.o.valid)
        with m.If(su.o.valid):
            m.d.sync += [self.o_rg.eq(su.o.payload.m), self.o_rgf.eq(su.o.payload.f), busy.eq(0)]
        return m
