"""The k-lane pipelined dot-product engine: k multipliers, a pipelined adder tree across lanes,
and a wide accumulator that never wraps for the configured length.

One input beat carries one element per lane (``a[l]``, ``b[l]``) plus ``first`` (clear the
accumulator before adding this beat) and ``last`` (emit the running sum after adding it). A dot
product of ``k * n`` terms therefore takes ``n`` beats, and ``first = last = 1`` on every beat turns
the engine into a one-result-per-cycle k-term reducer. With ``lane_sums=True`` the output also
carries each lane's own running sum (``Σ_t a[l] b[l]`` over the same beats), which the
annihilation core uses for ``Uᵀx``-style reductions over rows.

Pipeline (all stages advance together; ``ready = ~o.valid | o.ready``):

    i ─▶ [mul: p[l] = a[l]·b[l]] ─▶ [tree level 1] ─▶ ... ─▶ [tree level L] ─▶ [acc] ─▶ o

A register sits after the multipliers, after every ``tree_reg_every``-th tree level and after
the last level, and the accumulator register is the output register. Latency from an accepted
``last`` beat to ``o.valid`` is :attr:`DotEngine.latency` cycles.

``dsp`` picks the multiplier's registers (``rtl/dsp.py``): ``"fabric"`` (the product register
only; what the cores use), ``"registered"`` (input, pipeline and output registers, portable)
or ``"ecp5"`` (those registers inside a MULT18X18D); the last two add two cycles of latency.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, signed, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .dsp import LaneMultiplier, check_dsp

__all__ = ["DotEngine", "signed_range", "min_signed_width", "product_range", "dot_range"]


def signed_range(width: int) -> tuple[int, int]:
    """``(min, max)`` of a two's-complement integer of ``width`` bits."""
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def min_signed_width(lo: int, hi: int) -> int:
    """Fewest two's-complement bits that hold every integer in ``[lo, hi]``."""
    w = 1
    while not (signed_range(w)[0] <= lo and hi <= signed_range(w)[1]):
        w += 1
    return w


def product_range(a_width: int, b_width: int) -> tuple[int, int]:
    """Exact range of ``a * b`` for signed ``a`` (``a_width`` bits) and ``b`` (``b_width`` bits)."""
    alo, ahi = signed_range(a_width)
    blo, bhi = signed_range(b_width)
    corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
    return min(corners), max(corners)


def dot_range(a_width: int, b_width: int, terms: int) -> tuple[int, int]:
    """Exact range of a sum of ``terms`` such products."""
    lo, hi = product_range(a_width, b_width)
    return terms * lo, terms * hi


def _positive_int(name, value, lo=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name}: must be an integer >= {lo}, got {value!r}")
    return value


class DotEngine(wiring.Component):
    """k-lane pipelined signed dot product with accumulate/clear.

    Parameters
    ----------
    k : lanes (elements per lane per beat); any ``k >= 1``.
    max_len : most beats between a ``first`` and the ``last`` that emits (the accumulator is
        sized for ``k * max_len`` terms). Longer runs are a usage error the engine cannot detect.
    a_width, b_width : signed multiplier input widths (INT8 × INT8 by default).
    acc_width : accumulator/output width; ``None`` picks the smallest that never wraps. A value
        too small for ``k * max_len`` products raises ``ValueError``.
    tree_reg_every : a pipeline register after every this many adder-tree levels (1 = every
        level; the last level is always registered).
    lane_sums : also output the per-lane running sums (each ``lane_width`` bits).
    reduce : build the adder tree and the ``sum`` output (default). ``reduce=False`` (with
        ``lane_sums=True``) gives a bank of k independent multiply-accumulate lanes with latency 2
        (4 with ``dsp="registered"`` or ``"ecp5"``).
    dsp : ``"fabric"`` (default), ``"registered"`` or ``"ecp5"``: the lane multipliers' register
        arrangement (:mod:`specmem.rtl.dsp`); the last two add two cycles of latency.

    Members: ``i: In(stream.Signature(in_layout))``, ``o: Out(stream.Signature(out_layout))``.
    """

    def __init__(self, k: int, max_len: int, *, a_width: int = 8, b_width: int = 8,
                 acc_width: int | None = None, tree_reg_every: int = 1, lane_sums: bool = False,
                 reduce: bool = True, dsp: str = "fabric"):
        check_dsp(dsp, 2, 2)  # the style name first; operand widths once they are known
        self.dsp = dsp
        self.k = _positive_int("k", k)
        self.max_len = _positive_int("max_len", max_len)
        self.a_width = _positive_int("a_width", a_width, 2)
        self.b_width = _positive_int("b_width", b_width, 2)
        self.tree_reg_every = _positive_int("tree_reg_every", tree_reg_every)
        self.lane_sums = bool(lane_sums)
        self.reduce = bool(reduce)
        if not self.reduce and not self.lane_sums:
            raise ValueError("reduce: an engine without the adder tree must output lane_sums")

        self.product_width = self.a_width + self.b_width
        plo, phi = product_range(self.a_width, self.b_width)
        if min_signed_width(plo, phi) > self.product_width:  # cannot happen; guards the formula
            raise ValueError("a_width/b_width: product does not fit a_width + b_width bits")
        lo, hi = dot_range(self.a_width, self.b_width, self.k * self.max_len)
        need = min_signed_width(lo, hi)
        if acc_width is None:
            acc_width = need
        _positive_int("acc_width", acc_width, 2)
        if acc_width < need:
            raise ValueError(
                f"acc_width: {acc_width} bits cannot hold a sum of k*max_len = {self.k * self.max_len} "
                f"products of {self.a_width}x{self.b_width}-bit signed inputs (range [{lo}, {hi}] "
                f"needs {need} bits)")
        self.acc_width = acc_width
        llo, lhi = dot_range(self.a_width, self.b_width, self.max_len)
        self.lane_width = min_signed_width(llo, lhi)

        # adder tree: level widths are exact (Amaranth grows signed sums by one bit)
        self.levels = max(0, (self.k - 1).bit_length()) if self.reduce else 0
        regs = [lv for lv in range(1, self.levels + 1) if lv % self.tree_reg_every == 0 or lv == self.levels]
        self._tree_regs = set(regs)
        # mul register(s) + registered tree levels + accumulator/output register
        self.mul_latency = check_dsp(self.dsp, self.a_width, self.b_width)
        self.latency = self.mul_latency + len(regs) + 1

        self.in_layout = data.StructLayout({
            "a": data.ArrayLayout(signed(self.a_width), self.k),
            "b": data.ArrayLayout(signed(self.b_width), self.k),
            "first": 1,
            "last": 1,
        })
        out_fields = {"sum": signed(self.acc_width)} if self.reduce else {}
        if self.lane_sums:
            out_fields["lanes"] = data.ArrayLayout(signed(self.lane_width), self.k)
        self.out_layout = data.StructLayout(out_fields)
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        k = self.k
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]

        # stage 0: multiply (registered)
        valid = Signal(name="mul_valid")
        first = Signal(name="mul_first")
        last = Signal(name="mul_last")
        prods = [Signal(signed(self.product_width), name=f"mul_p{l}") for l in range(k)]
        if self.dsp == "fabric":
            with m.If(advance):
                m.d.sync += [valid.eq(self.i.valid), first.eq(self.i.payload.first), last.eq(self.i.payload.last)]
                for l in range(k):
                    m.d.sync += prods[l].eq(self.i.payload.a[l] * self.i.payload.b[l])
        else:
            # the control bits follow the multipliers' register stages
            v, f, la = self.i.valid, self.i.payload.first, self.i.payload.last
            for st in range(self.mul_latency - 1):
                nv, nf, nl = (Signal(name=f"mul_s{st}_valid"), Signal(name=f"mul_s{st}_first"),
                              Signal(name=f"mul_s{st}_last"))
                with m.If(advance):
                    m.d.sync += [nv.eq(v), nf.eq(f), nl.eq(la)]
                v, f, la = nv, nf, nl
            with m.If(advance):
                m.d.sync += [valid.eq(v), first.eq(f), last.eq(la)]
            for l in range(k):
                mul = LaneMultiplier(self.a_width, self.b_width, self.dsp)
                m.submodules[f"mul{l}"] = mul
                m.d.comb += [mul.a.eq(self.i.payload.a[l]), mul.b.eq(self.i.payload.b[l]), mul.en.eq(advance),
                             prods[l].eq(mul.p)]
        lanes_in = prods  # per-lane products travel beside the tree for the lane sums

        # adder tree across lanes; a register after the chosen levels
        level = list(prods)
        for lv in range(1, self.levels + 1):
            nxt = []
            for n in range(0, len(level), 2):
                nxt.append(level[n] + level[n + 1] if n + 1 < len(level) else level[n])
            if lv in self._tree_regs:
                regs = []
                for n, expr in enumerate(nxt):
                    r = Signal(expr.shape(), name=f"tree{lv}_{n}")
                    with m.If(advance):
                        m.d.sync += r.eq(expr)
                    regs.append(r)
                nxt = regs
                v, f, la = (Signal(name=f"tree{lv}_valid"), Signal(name=f"tree{lv}_first"),
                            Signal(name=f"tree{lv}_last"))
                lanes_reg = [Signal(signed(self.product_width), name=f"tree{lv}_lane{l}") for l in range(k)] \
                    if self.lane_sums else []
                with m.If(advance):
                    m.d.sync += [v.eq(valid), f.eq(first), la.eq(last)]
                    m.d.sync += [lr.eq(li) for lr, li in zip(lanes_reg, lanes_in)]
                valid, first, last = v, f, la
                lanes_in = lanes_reg
            level = nxt
        total = level[0] if self.reduce else None

        # accumulator = output register; `first` clears, `last` raises o.valid
        acc = self.o.payload.sum if self.reduce else None
        with m.If(advance):
            m.d.sync += self.o.valid.eq(valid & last)
            with m.If(valid):
                if self.reduce:
                    m.d.sync += acc.eq(Mux(first, 0, acc) + total)
                if self.lane_sums:
                    for l in range(k):
                        la = self.o.payload.lanes[l]
                        m.d.sync += la.eq(Mux(first, 0, la) + lanes_in[l])
        return m
