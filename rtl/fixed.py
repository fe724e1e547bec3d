"""Round-and-saturate in hardware, the same operations as ``specmem.golden.fixed.fxtype``.

Amaranth 0.5 has no fixed-point library; values are plain ``signed(n)`` raw integers and every
narrowing goes through :func:`requantize` / :func:`requantize_var`: one rounding right shift
(``rne``, ``floor`` or ``half_up``, exactly as :func:`specmem.golden.fixed.fxtype.round_shift`),
then one saturation to the target width, with an overflow flag for the status counters.

Every helper takes the ``Module`` and returns ``Signal``s driven combinationally from it: an
Amaranth expression used twice is emitted twice, so operands are materialised once here.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Mux, Shape, Signal, Value, signed, unsigned

__all__ = ["shape_of", "materialise", "round_shift", "round_shift_var", "round_shift_right_parts",
           "ShiftCode", "shift_code", "shift_code_table", "select_code", "saturate", "requantize", "requantize_var",
           "msb_index", "abs_value"]

_ROUNDING = ("rne", "floor", "half_up")


def shape_of(fx) -> Shape:
    """Amaranth shape of an ``FxType``'s raw integer."""
    return signed(fx.width) if fx.signed else unsigned(fx.width)


def materialise(m, value, name: str = "v", shape=None) -> Signal:
    """``value`` as a combinationally driven ``Signal`` (so later uses share one copy)."""
    value = Value.cast(value)
    if isinstance(value, Signal) and shape is None:
        return value
    s = Signal(value.shape() if shape is None else shape, name=name)
    m.d.comb += s.eq(value)
    return s


def _check_rounding(rounding):
    if rounding not in _ROUNDING:
        raise ValueError(f"rounding: must be one of {_ROUNDING}, got {rounding!r}")


def round_shift(m, value, shift: int, rounding: str, name: str = "rs"):
    """``value * 2**-shift`` rounded to an integer (constant ``shift``); an exact left shift when
    ``shift <= 0``. The result has one bit of headroom, so it never overflows."""
    _check_rounding(rounding)
    value = materialise(m, value, f"{name}_in")
    if shift <= 0:
        return materialise(m, value << (-shift), name)
    if shift >= len(value):  # every bit dropped: extend first so q, rem and half stay exact
        pad = shift + 1 - len(value)
        ext = Cat(value, value[-1].replicate(pad)).as_signed() if value.shape().signed else Cat(value, Const(0, pad))
        value = materialise(m, ext, f"{name}_ext")
    q = materialise(m, value >> shift, f"{name}_q")
    if rounding == "floor":
        return q
    if rounding == "half_up":
        return materialise(m, q + value[shift - 1], name)
    rem = value[:shift]
    half = 1 << (shift - 1)
    return materialise(m, q + ((rem > half) | ((rem == half) & q[0])), name)


class ShiftCode:
    """A run-time shift amount decoded for :func:`round_shift_var` on ``width``-bit values: ``neg``
    (the shift is negative), ``rs`` (the right shift, clamped), ``ls`` (the left shift, clamped to
    ``max_left``; ``None`` for an unsigned shift), and the right shift's rounding masks: ``rb``
    (one-hot at bit ``rs - 1``, the rounding bit; zero for ``rs = 0``) and ``below`` (the bits
    under it, for ``rne``'s sticky bit). Held shifts fan out to many lanes' shifters; decoding
    once into registers takes the negation, the clamps and the mask arithmetic (``(1 << rs) - 1``
    is a carry chain as wide as the value) out of the lanes' cycle."""

    def __init__(self, neg, rs, ls, rb, below, width: int, max_left: int):
        self.neg, self.rs, self.ls, self.rb, self.below = neg, rs, ls, rb, below
        self.width, self.max_left = width, max_left

    def fields(self):
        return [f for f in (self.neg, self.rs, self.ls, self.rb, self.below) if f is not None]

    @classmethod
    def held(cls, shift_shape, width: int, *, max_left: int, name: str) -> "ShiftCode":
        """Registers for the code of a ``shift_shape`` shift on ``width``-bit values, to capture
        one with :meth:`eq` (e.g. in the cycle its shift is found)."""
        shift_shape = Shape.cast(shift_shape)
        rs = Signal(unsigned(max(1, (width + 1).bit_length())), name=f"{name}_rs")
        ls = Signal(unsigned(max(1, max_left.bit_length())), name=f"{name}_ls") if shift_shape.signed else None
        rb, below = Signal(unsigned(width + 2), name=f"{name}_rb"), Signal(unsigned(width + 2), name=f"{name}_bl")
        return cls(Signal(name=f"{name}_neg"), rs, ls, rb, below, width, max_left)

    def eq(self, other: "ShiftCode"):
        if (self.width, self.max_left, self.ls is None) != (other.width, other.max_left, other.ls is None):
            raise ValueError(f"shift: a code for {other.width}-bit values (max_left={other.max_left}) captured "
                             f"into one for {self.width} bits (max_left={self.max_left})")
        return [a.eq(b) for a, b in zip(self.fields(), other.fields())]


def _mask_values(rs: int, smax: int):
    """The rounding masks of a right shift by ``rs`` as integers over ``smax + 1`` bits: ``rb`` (bit
    ``rs - 1``; 0 for ``rs = 0``) and ``below`` (the bits under it)."""
    top = (1 << (smax + 1)) - 1
    return ((1 << (rs - 1)) & top, ((1 << (rs - 1)) - 1) & top) if rs else (0, 0)


def _rounding_masks(m, rs, smax: int, name: str):
    """``rb`` and ``below`` (:func:`_mask_values`) for a run-time right shift ``rs`` (at most
    ``smax``): tables indexed by ``rs``, a few LUT levels and no carry chain."""
    masks = [_mask_values(j, smax) for j in range(1 << len(rs))]
    rb_t = Array(Const(rb, unsigned(smax + 1)) for rb, _ in masks)
    bl_t = Array(Const(bl, unsigned(smax + 1)) for _, bl in masks)
    return (materialise(m, rb_t[rs], f"{name}_rb", unsigned(smax + 1)),
            materialise(m, bl_t[rs], f"{name}_bl", unsigned(smax + 1)))


def shift_code(m, shift, width: int, *, max_left: int, name: str = "sc", reg=None) -> ShiftCode:
    """``shift`` decoded for :func:`round_shift_var` on ``width``-bit values, exactly as it decodes
    a plain shift. ``reg`` (a register maker): each field registered, so a caller holding
    ``shift`` gets the code a cycle later."""
    shift = materialise(m, shift, f"{name}_sh")
    smax = width + 1
    neg = materialise(m, shift < 0, f"{name}_neg") if shift.shape().signed else Const(0, 1)
    rs_w = max(1, smax.bit_length())
    rs = Signal(unsigned(rs_w), name=f"{name}_r")
    m.d.comb += rs.eq(Mux(neg, 0, Mux(shift > smax, smax, shift[:rs_w + 1])))
    rb, below = _rounding_masks(m, rs, smax, name)
    ls = None
    if shift.shape().signed:
        ls_w = max(1, max_left.bit_length())
        ls = Signal(unsigned(ls_w), name=f"{name}_l")
        nsh = -shift
        m.d.comb += ls.eq(Mux(nsh > max_left, max_left, nsh[:ls_w + 1]))
    if reg is not None:
        neg = reg(neg, 1, f"{name}_negq")
        rs = reg(rs, rs.shape(), f"{name}_rq")
        ls = None if ls is None else reg(ls, ls.shape(), f"{name}_lq")
        rb, below = reg(rb, rb.shape(), f"{name}_rbq"), reg(below, below.shape(), f"{name}_blq")
    return ShiftCode(neg, rs, ls, rb, below, width, max_left)


def shift_code_table(m, idx, shift_of, width: int, *, max_left: int, signed_shift: bool = True, name: str = "sct",
                     reg=None) -> ShiftCode:
    """The code :func:`shift_code` gives for the shift ``shift_of(v)``, where ``v`` is the value of
    the small unsigned signal ``idx`` (a leading-one index, say): every field read from a table on
    ``idx``, so the decode is a few LUT levels with no arithmetic before it (``top - c`` and the
    clamps are folded into the tables). ``signed_shift``: the code has a left shift. ``reg``: each
    field registered."""
    smax = width + 1
    rs_w = max(1, smax.bit_length())
    ls_w = max(1, max_left.bit_length())
    rows = []
    for v in range(1 << len(idx)):
        sh = int(shift_of(v))
        if sh < 0 and not signed_shift:
            raise ValueError(f"shift_of({v}) = {sh}: negative, for an unsigned shift")
        rs = 0 if sh < 0 else min(sh, smax)
        rows.append((int(sh < 0), rs, min(-sh, max_left) if sh < 0 else 0, *_mask_values(rs, smax)))
    shapes = (unsigned(1), unsigned(rs_w), unsigned(ls_w), unsigned(smax + 1), unsigned(smax + 1))
    fields = []
    for j, (fname, shape) in enumerate(zip(("neg", "rs", "ls", "rb", "bl"), shapes)):
        if fname == "ls" and not signed_shift:
            fields.append(None)
            continue
        f = materialise(m, Array(Const(r[j], shape) for r in rows)[idx], f"{name}_{fname}", shape)
        fields.append(f if reg is None else reg(f, shape, f"{name}_{fname}q"))
    neg, rs, ls, rb, below = fields
    return ShiftCode(neg, rs, ls, rb, below, width, max_left)


def select_code(sel, a: ShiftCode, b: ShiftCode) -> ShiftCode:
    """``a`` where ``sel`` is high, else ``b`` (codes for the same width and ``max_left``)."""
    if (a.width, a.max_left, a.ls is None) != (b.width, b.max_left, b.ls is None):
        raise ValueError("select_code: codes for different widths or max_left")
    pick = [None if x is None else Mux(sel, x, y) for x, y in
            zip((a.neg, a.rs, a.ls, a.rb, a.below), (b.neg, b.rs, b.ls, b.rb, b.below))]
    return ShiftCode(*pick, a.width, a.max_left)


def round_shift_var(m, value, shift, rounding: str, *, max_left: int, name: str = "rsv", reg=None):
    """``value * 2**-shift`` rounded, for a run-time signed ``shift`` (right when positive, an
    exact left shift when negative), exactly as ``fxtype.round_shift`` with an array shift.

    Right shifts beyond ``len(value) + 1`` give the same result as ``len(value) + 1`` (only the
    sign is left), so the barrel shifter stops there. Left shifts are clamped to ``max_left``:
    the caller saturates next, and a nonzero value shifted left by ``max_left`` already lies
    beyond the saturation threshold (callers pass ``max_left`` with that margin), so the clamp
    never changes a result.

    ``reg`` (``reg(value, shape, name)``, e.g. a free-running register): one register stage
    between the shifters and the rounding add, so the result follows its operands by a cycle.
    ``shift`` may be a :class:`ShiftCode` (decoded by :func:`shift_code` for this value's width
    and ``max_left``), used as it is.
    """
    value, shift, neg, q, inc = round_shift_right_parts(m, value, shift, rounding, name)
    n = len(value)
    sv = value.shape().signed
    # a right shift leaves at most n bits plus a rounding carry; a left shift at most n + max_left
    out_w = n + max(max_left, 1) + 1
    out_shape = signed(out_w) if sv else unsigned(out_w)
    left = None
    if isinstance(shift, ShiftCode):
        if shift.ls is not None:
            if shift.max_left != max_left:
                raise ValueError(f"shift: a code for max_left={shift.max_left}, used with max_left={max_left}")
            left = value << shift.ls
    elif shift.shape().signed:
        ls_w = max(1, max_left.bit_length())
        ls = Signal(unsigned(ls_w), name=f"{name}_l")
        nsh = -shift
        m.d.comb += ls.eq(Mux(nsh > max_left, max_left, nsh[:ls_w + 1]))
        left = value << ls
    if reg is not None:
        q = reg(q, q.shape(), f"{name}_qr")
        inc = None if inc is None else reg(inc, 1, f"{name}_incr")
        if left is not None:
            left, neg = reg(left, left.shape(), f"{name}_lr"), reg(neg, 1, f"{name}_negr")
    right = q if inc is None else q + inc
    return materialise(m, right if left is None else Mux(neg, left, right), name, out_shape)


def round_shift_right_parts(m, value, shift, rounding: str, name: str = "rsv"):
    """The right-shift half of :func:`round_shift_var`, before its rounding add: ``(value, shift,
    neg, q, inc)`` with ``q = floor(value * 2**-shift)`` and ``inc`` the rounding increment (a
    one-bit expression; ``None`` for ``floor``), so a pipelined caller can register ``q`` and
    ``inc`` and add them a stage later. ``neg``: the shift is negative (``q`` is then ``value``).
    ``shift`` may be a :class:`ShiftCode` for this value's width."""
    _check_rounding(rounding)
    value = materialise(m, value, f"{name}_in")
    code = shift if isinstance(shift, ShiftCode) else None
    if code is None:
        shift = materialise(m, shift, f"{name}_sh")
    n = len(value)
    smax = n + 1
    sv = value.shape().signed
    ext = Cat(value, value[-1].replicate(smax + 1)) if sv else Cat(value, Const(0, smax + 1))
    ext = materialise(m, ext.as_signed() if sv else ext, f"{name}_ext")
    rs_w = max(1, smax.bit_length())
    if code is not None:
        if code.width != n:
            raise ValueError(f"shift: a code for {code.width}-bit values, used on {n} bits")
        neg, rs = code.neg, code.rs
    else:
        neg = materialise(m, shift < 0, f"{name}_neg") if shift.shape().signed else Const(0, 1)
        rs = Signal(unsigned(rs_w), name=f"{name}_r")
        m.d.comb += rs.eq(Mux(neg, 0, Mux(shift > smax, smax, shift[:rs_w + 1])))
    q = materialise(m, ext >> rs, f"{name}_q")
    if rounding == "floor":
        return value, shift, neg, q, None
    if code is not None:  # the masks decoded with the code: an AND and an OR tree here
        low = ext.as_unsigned()[:smax + 1]
        rnd = materialise(m, (low & code.rb) != 0, f"{name}_rb")
        if rounding == "half_up":
            return value, shift, neg, q, rnd
        return value, shift, neg, q, rnd & (((low & code.below) != 0) | q[0])
    rnd = materialise(m, Mux(rs == 0, 0, ext.as_unsigned().bit_select((rs - 1).as_unsigned()[:rs_w], 1)), f"{name}_rb")
    if rounding == "half_up":
        return value, shift, neg, q, rnd
    mask = materialise(m, ((Const(1, smax + 2) << rs) - 1)[:smax + 1], f"{name}_mask")
    sticky = (ext.as_unsigned()[:smax + 1] & (mask >> 1)) != 0
    return value, shift, neg, q, rnd & (sticky | q[0])


def msb_index(m, value, name: str = "msb", *, tree: bool = False):
    """Index of the most significant set bit of an unsigned ``value`` (0 for 0: callers test
    for zero separately). ``tree=False``: a priority encoder (a chain of ``len(value)`` muxes
    after Yosys); ``tree=True``: a leading-one detector of ``ceil(log2 n)`` mux levels, the same
    function (the chain stays the default so the cores whose synthesis is recorded with it
    generate the same Verilog)."""
    value = materialise(m, value, f"{name}_in")
    n = len(value)
    out = Signal(range(max(n, 2)), name=name)
    if tree:
        levels = max(1, (n - 1).bit_length())
        bits = Cat(value, Const(0, (1 << levels) - n))
        nodes = [(bits[i], None) for i in range(1 << levels)]  # (any bit set, index within the node)
        for lv in range(levels):
            nxt = []
            for j in range(len(nodes) // 2):
                (a_lo, i_lo), (a_hi, i_hi) = nodes[2 * j], nodes[2 * j + 1]
                a_hi = materialise(m, a_hi, f"{name}_a{lv}_{j}")
                low = Mux(a_hi, i_hi, i_lo) if i_hi is not None else Const(0, 0)
                nxt.append((a_hi | a_lo, Cat(low, a_hi)))
            nodes = nxt
        m.d.comb += out.eq(nodes[0][1])
        return out
    for i in range(n):
        with m.If(value[i]):
            m.d.comb += out.eq(i)
    return out


def abs_value(m, value, name: str = "abs"):
    """``|value|`` of a signed value, one bit wider, unsigned."""
    value = materialise(m, value, f"{name}_in")
    return materialise(m, Mux(value < 0, -value, value), name, unsigned(len(value) + 1))


def saturate(m, value, fx, name: str = "sat"):
    """``(raw, overflow)``: ``value`` clipped to ``fx``'s range (``fx.saturation == "saturate"``)
    or wrapped to its width (``"wrap"``)."""
    value = materialise(m, value, f"{name}_in")
    lo, hi = fx.min_raw, fx.max_raw
    shape = shape_of(fx)
    above = materialise(m, value > hi, f"{name}_hi")
    below = materialise(m, value < lo, f"{name}_lo")
    narrow = value[:fx.width].as_signed() if fx.signed else value[:fx.width]
    if fx.saturation == "wrap":
        out = narrow
    else:
        out = Mux(above, Const(hi, shape), Mux(below, Const(lo, shape), narrow))
    return materialise(m, out, name, shape), materialise(m, above | below, f"{name}_ov")


def requantize(m, value, from_frac: int, fx, name: str = "rq"):
    """Narrow ``value`` (``from_frac`` fraction bits) to ``fx``: round, then saturate.
    Returns ``(raw, overflow)`` like ``fx.saturate(round_shift(...))`` in the golden model."""
    return saturate(m, round_shift(m, value, from_frac - fx.frac, fx.rounding, f"{name}_r"), fx, name)


def requantize_var(m, value, from_frac, fx, *, max_left: int | None = None, name: str = "rqv"):
    """Like :func:`requantize` with a run-time ``from_frac`` (a block exponent or a scalar-unit
    exponent folded into the narrowing shift): ``(raw, overflow)``."""
    shift = materialise(m, Value.cast(from_frac) - fx.frac, f"{name}_sh")
    ml = fx.width + 1 if max_left is None else max_left
    return saturate(m, round_shift_var(m, value, shift, fx.rounding, max_left=ml, name=f"{name}_r"), fx, name)
