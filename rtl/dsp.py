"""One lane's multiplier, with the register arrangement chosen for the target's DSP block.

The dot-product engine's lanes multiply through :class:`LaneMultiplier`. Three arrangements:

* ``"fabric"``: ``p <= a * b`` (one register, after the multiplier). The cores use this one.
  Yosys maps the product to a combinational MULT18X18D and the register to fabric flip-flops,
  so the path is FF -> routing -> DSP (3.9 ns) -> routing -> FF: 133-143 MHz for the engine
  on an ECP5 speed 6 (docs/hardware.md).
* ``"registered"``: ``ra <= a; rb <= b; m <= ra * rb; p <= m`` (input, pipeline and output
  registers, portable Verilog). Yosys 0.70 does not absorb these registers into the ECP5 DSP,
  so on ECP5 the multiply stays combinational between fabric flip-flops; 7-series
  ``synth_xilinx`` packs them into the DSP48E1 (AREG/BREG, MREG, PREG).
* ``"ecp5"``: the same three-register behaviour as a ``MULT18X18D`` instance with
  ``REG_INPUTA/B_CLK = REG_PIPELINE_CLK = REG_OUTPUT_CLK = "CLK0"`` and ``CE0`` as the stage
  enable: every register is the DSP's own. nextpnr times the block's pins only (setup at A/B,
  clock-to-out at P); the stages inside it are the DSP's own pipeline, whose limit is Lattice's
  rating for that configuration, not something this flow checks (docs/hardware.md).
  Only for ECP5 synthesis; Verilator simulates it through ``rtl/vendor/MULT18X18D.v``.

Latency (accepted inputs to ``p``): 1 for ``"fabric"``, 3 for the others. Every register
advances only while ``en`` is high (the engine's pipeline-advance signal).
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DSP_STYLES", "LaneMultiplier", "PipelinedMultiplier", "ECP5_MULT_WIDTH", "check_dsp", "operand_product",
           "wide_operand_product",
           "PRODUCT_STYLES"]

#: register arrangements of :class:`LaneMultiplier`, with their latency in cycles
DSP_STYLES = {"fabric": 1, "registered": 3, "ecp5": 3}
#: operand width of one ECP5 MULT18X18D (signed operands are sign-extended to it)
ECP5_MULT_WIDTH = 18


def check_dsp(style: str, a_width: int, b_width: int) -> int:
    """Validate a register arrangement for ``a_width x b_width`` operands; returns its latency."""
    if style not in DSP_STYLES:
        raise ValueError(f"dsp: must be one of {', '.join(DSP_STYLES)}, got {style!r}")
    if style == "ecp5" and max(a_width, b_width) > ECP5_MULT_WIDTH:
        raise ValueError(f"dsp: 'ecp5' maps one MULT18X18D per lane; operands of {a_width} x {b_width} "
                         f"bits exceed its {ECP5_MULT_WIDTH}-bit inputs")
    return DSP_STYLES[style]


def _mult18x18d(a18, b18, p36, ce, *, pipeline: bool):
    """A signed ``MULT18X18D`` with its input registers and output register on ``CLK0``/``CE0``
    and, with ``pipeline``, its pipeline register (the two configurations
    ``rtl/vendor/MULT18X18D.v`` models); ``a18``, ``b18`` 18 bits in, ``p36`` 36 bits out."""
    w = ECP5_MULT_WIDTH
    ports = {f"i_A{n}": a18[n] for n in range(w)}
    ports.update({f"i_B{n}": b18[n] for n in range(w)})
    ports.update({f"i_C{n}": Const(0, 1) for n in range(w)})
    ports.update({f"o_P{n}": p36[n] for n in range(2 * w)})
    return Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK="CLK0", p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
        p_REG_INPUTB_CLK="CLK0", p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
        p_REG_PIPELINE_CLK="CLK0" if pipeline else "NONE", p_REG_PIPELINE_CE="CE0", p_REG_PIPELINE_RST="RST0",
        p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0",
        p_REG_OUTPUT_RST="RST0", p_GSR="DISABLED", p_RESETMODE="SYNC",
        p_SOURCEB_MODE="B_SHIFT", p_MULT_BYPASS="DISABLED",
        i_SIGNEDA=Const(1, 1), i_SIGNEDB=Const(1, 1), i_SOURCEA=Const(0, 1), i_SOURCEB=Const(0, 1),
        i_CLK0=ClockSignal(), i_CE0=ce, i_RST0=Const(0, 1),
        **ports)


#: styles of :func:`operand_product`
PRODUCT_STYLES = ("registered", "ecp5")


def operand_product(m, a, b, name: str, style: str = "registered", *, en=None):
    """``a * b`` (signed) two cycles later, free-running (or advancing with ``en``, the DSP's clock
    enable): the operands into registers, then the product into one. ``"ecp5"``: both inside one ``MULT18X18D`` (input registers and output
    register, no pipeline register) when both operands fit its 18 bits, so the multiply sits
    between the DSP's own registers and no route enters or leaves it mid-path; wider operands, and
    ``"registered"``, the same two steps in fabric registers (Yosys then maps the multiply between
    them to a combinational DSP). Returns the product, ``len(a) + len(b)`` bits."""
    if style not in PRODUCT_STYLES:
        raise ValueError(f"dsp: must be one of {', '.join(PRODUCT_STYLES)}, got {style!r}")
    if not (a.shape().signed and b.shape().signed):
        raise TypeError(f"{name}: operand_product multiplies signed operands")
    wa, wb = len(a), len(b)
    out = Signal(signed(wa + wb), name=f"{name}_p")
    if style == "ecp5" and max(wa, wb) <= ECP5_MULT_WIDTH:
        w = ECP5_MULT_WIDTH
        a18, b18 = Signal(signed(w), name=f"{name}_a18"), Signal(signed(w), name=f"{name}_b18")
        p36 = Signal(2 * w, name=f"{name}_p36")
        m.d.comb += [a18.eq(a), b18.eq(b), out.eq(p36[:wa + wb])]
        m.submodules[f"{name}_mult"] = _mult18x18d(a18, b18, p36, Const(1, 1) if en is None else en, pipeline=False)
        return out
    ra = Signal(signed(wa), name=f"{name}_ra", reset_less=True)
    rb = Signal(signed(wb), name=f"{name}_rb", reset_less=True)
    r = Signal(signed(wa + wb), name=f"{name}_r", reset_less=True)
    if en is None:
        m.d.sync += [ra.eq(a), rb.eq(b)]
        m.d.sync += r.eq(ra * rb)
    else:
        with m.If(en):
            m.d.sync += [ra.eq(a), rb.eq(b), r.eq(ra * rb)]
    m.d.comb += out.eq(r)
    return out


def wide_operand_product(m, a, b, name: str, style: str = "registered"):
    """``a * b`` (signed) three cycles later, free-running, for ``b`` wider than a DSP's 18 bits
    (``a`` at most 18 with ``"ecp5"``): ``b`` cut into 17-bit pieces (the top one signed), each
    piece's product in one ``MULT18X18D``'s input and output registers, their shifted sum in a
    fabric register. :func:`operand_product` maps such a product to DSPs used combinationally
    and their sum's carry chain in one cycle (DeltaNet's ``be C`` at 101 MHz). ``"registered"``,
    and ``"ecp5"`` with ``a`` wider than 18 bits: operand, product and output registers in fabric.
    Returns ``len(a) + len(b)`` bits."""
    if style not in PRODUCT_STYLES:
        raise ValueError(f"dsp: must be one of {', '.join(PRODUCT_STYLES)}, got {style!r}")
    if not (a.shape().signed and b.shape().signed):
        raise TypeError(f"{name}: wide_operand_product multiplies signed operands")
    wa, wb = len(a), len(b)
    out = Signal(signed(wa + wb), name=f"{name}_p", reset_less=True)
    if style == "ecp5" and wa <= ECP5_MULT_WIDTH:
        w, step = ECP5_MULT_WIDTH, ECP5_MULT_WIDTH - 1
        pieces = []
        for i, lo in enumerate(range(0, wb, step)):
            top = lo + step >= wb
            piece = b[lo:].as_signed() if top else Cat(b[lo:lo + step], Const(0, 1)).as_signed()
            a18, b18 = Signal(signed(w), name=f"{name}_a18_{i}"), Signal(signed(w), name=f"{name}_b18_{i}")
            p36 = Signal(2 * w, name=f"{name}_p36_{i}")
            m.d.comb += [a18.eq(a), b18.eq(piece)]
            m.submodules[f"{name}_mult{i}"] = _mult18x18d(a18, b18, p36, Const(1, 1), pipeline=False)
            pieces.append((p36.as_signed(), lo))
        m.d.sync += out.eq(sum(p << lo for p, lo in pieces))
        return out
    ra = Signal(signed(wa), name=f"{name}_ra", reset_less=True)
    rb = Signal(signed(wb), name=f"{name}_rb", reset_less=True)
    r = Signal(signed(wa + wb), name=f"{name}_r", reset_less=True)
    m.d.sync += [ra.eq(a), rb.eq(b), r.eq(ra * rb), out.eq(r)]
    return out


class LaneMultiplier(wiring.Component):
    """Signed ``a * b`` with ``latency`` register stages, each enabled by ``en``.

    Members: ``a: In(signed(a_width))``, ``b: In(signed(b_width))``, ``en: In(1)``,
    ``p: Out(signed(a_width + b_width))``.
    """

    def __init__(self, a_width: int, b_width: int, style: str = "fabric"):
        self.latency = check_dsp(style, a_width, b_width)
        self.a_width, self.b_width, self.style = a_width, b_width, style
        super().__init__({
            "a": In(signed(a_width)),
            "b": In(signed(b_width)),
            "en": In(1),
            "p": Out(signed(a_width + b_width)),
        })

    def elaborate(self, platform):
        m = Module()
        if self.style == "fabric":
            with m.If(self.en):
                m.d.sync += self.p.eq(self.a * self.b)
        elif self.style == "registered":
            # operands, product and output register: data (the caller's valid tags qualify it), no reset
            ra = Signal(signed(self.a_width), name="ra", reset_less=True)
            rb = Signal(signed(self.b_width), name="rb", reset_less=True)
            mid = Signal(signed(self.a_width + self.b_width), name="m", reset_less=True)
            out = Signal(signed(self.a_width + self.b_width), name="p_r", reset_less=True)
            with m.If(self.en):
                m.d.sync += [ra.eq(self.a), rb.eq(self.b), mid.eq(ra * rb), out.eq(mid)]
            m.d.comb += self.p.eq(out)
        else:
            w = ECP5_MULT_WIDTH
            a18, b18 = Signal(signed(w), name="a18"), Signal(signed(w), name="b18")
            p36 = Signal(2 * w, name="p36")
            m.d.comb += [a18.eq(self.a), b18.eq(self.b), self.p.eq(p36[:len(self.p)])]
            m.submodules.mult = _mult18x18d(a18, b18, p36, self.en, pipeline=True)
        return m


class PipelinedMultiplier(wiring.Component):
    """Signed ``a * b`` of any widths from 18 x 18 pieces: each operand split into 17-bit unsigned
    limbs under a signed top limb of at most 18 bits, one :class:`LaneMultiplier` (``style``) per
    pair of limbs, and the shifted partial products summed through a registered adder tree (one
    carry chain per level). For operands of at most 18 bits it is one ``LaneMultiplier``.

    Why: a product wider than one DSP written as ``a * b`` becomes several DSPs whose partial
    sums Yosys adds in the fabric in the same cycle as the DSPs' outputs (``hardware.md``,
    "Timing discipline"). Members as :class:`LaneMultiplier`; :attr:`latency` =
    the style's latency + :attr:`tree_levels` (+ 1 with ``input_register``: operands that a
    state machine selects get a fabric register before the DSPs' own).
    """

    LIMB = ECP5_MULT_WIDTH - 1

    @classmethod
    def limbs(cls, width: int) -> list[tuple[int, int, bool]]:
        """``(offset, bits, signed)`` of each limb of a signed ``width``-bit operand."""
        if width <= ECP5_MULT_WIDTH:
            return [(0, width, True)]
        out, off = [], 0
        while width - off > ECP5_MULT_WIDTH:
            out.append((off, cls.LIMB, False))
            off += cls.LIMB
        out.append((off, width - off, True))
        return out

    @classmethod
    def latency_for(cls, style: str, a_width: int, b_width: int, *, input_register: bool = False) -> int:
        n = len(cls.limbs(a_width)) * len(cls.limbs(b_width))
        return (check_dsp(style, min(a_width, ECP5_MULT_WIDTH), min(b_width, ECP5_MULT_WIDTH))
                + (n - 1).bit_length() + int(bool(input_register)))

    def __init__(self, a_width: int, b_width: int, style: str = "registered", *, input_register: bool = False):
        for name, v in (("a_width", a_width), ("b_width", b_width)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 2:
                raise ValueError(f"{name}: must be an integer >= 2, got {v!r}")
        self.input_register = bool(input_register)  # operands chosen by a state machine: a register first
        self.latency = self.latency_for(style, a_width, b_width, input_register=input_register)
        self.n_partials = len(self.limbs(a_width)) * len(self.limbs(b_width))
        self.tree_levels = (self.n_partials - 1).bit_length()
        self.a_width, self.b_width, self.style = a_width, b_width, style
        super().__init__({
            "a": In(signed(a_width)),
            "b": In(signed(b_width)),
            "en": In(1),
            "p": Out(signed(a_width + b_width)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.a_width + self.b_width
        a, b = self.a, self.b
        if self.input_register:
            a = Signal(signed(self.a_width), name="a_r", reset_less=True)  # operands and sums: data, no reset
            b = Signal(signed(self.b_width), name="b_r", reset_less=True)
            with m.If(self.en):
                m.d.sync += [a.eq(self.a), b.eq(self.b)]
        terms = []
        for ia, (oa, wa, sa) in enumerate(self.limbs(self.a_width)):
            for ib, (ob, wb, sb) in enumerate(self.limbs(self.b_width)):
                la = a[oa:oa + wa]
                lb = b[ob:ob + wb]
                mm = LaneMultiplier(wa + (0 if sa else 1), wb + (0 if sb else 1), self.style)
                m.submodules[f"pp{ia}_{ib}"] = mm
                m.d.comb += [mm.a.eq(la.as_signed() if sa else la), mm.b.eq(lb.as_signed() if sb else lb),
                             mm.en.eq(self.en)]
                terms.append((oa + ob, mm.p))
        level = 0
        while len(terms) > 1:
            level += 1
            nxt = []
            for i in range(0, len(terms) - 1, 2):
                (o1, t1), (o2, t2) = terms[i], terms[i + 1]
                o = min(o1, o2)
                r = Signal(signed(W - o), name=f"sum{level}_{i // 2}", reset_less=True)
                with m.If(self.en):
                    m.d.sync += r.eq((t1 << (o1 - o)) + (t2 << (o2 - o)))
                nxt.append((o, r))
            if len(terms) % 2:
                o, t = terms[-1]
                r = Signal(signed(W - o), name=f"sum{level}_odd", reset_less=True)
                with m.If(self.en):
                    m.d.sync += r.eq(t)
                nxt.append((o, r))
            terms = nxt
        o, t = terms[0]
        m.d.comb += self.p.eq(t << o)
        return m
