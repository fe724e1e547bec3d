"""Registered saturation: ``k`` lanes narrowed to a signed format with a sign-extension test, and
a running count of the lanes that overflowed, summed through a registered tree.

Timing discipline (``hardware.md``): "saturation is detected by a sign-extension check; overflow
counts are registered per stage and summed later". Today's cores compare each lane with the
format's limits (two carry chains) and add all lanes' flags into the counter in the same cycle;
this block does neither:

1. register the wide lanes; per lane, ``fits`` = the bits from the output sign bit up are all
   equal (an AND and an OR of those bits: LUTs, no carry), registered with the truncated value
   and the input's sign;
2. output: the truncated value, or the limit on the side of the sign, registered;
   the flags enter a tree that adds four counts per registered level;
3. the tree's root is added to a 32-bit counter (one carry chain).

``o_data`` follows ``i_data`` by :attr:`latency` (3) cycles; ``count`` includes a beat's
overflows :attr:`count_latency` (``4 +`` tree levels) cycles after the beat. Only ``i_valid`` beats count. Everything
advances while ``en`` is high. Bit-exact with ``FxType.saturate`` of the golden model
(saturation mode) for every input that fits ``in_width`` bits.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .pipeline import stage_register, tree4_levels

__all__ = ["SaturatingNarrow", "count_tree", "fits_signed"]

COUNT_WIDTH = 32


def count_tree(m, flags, en=1, *, name: str = "c", width: int = COUNT_WIDTH, init: int = 0):
    """A running count of 1-bit ``flags``: each registered, then summed four per registered level,
    the root added to a ``width``-bit counter (one carry chain per cycle, never a k-wide sum).
    Every register advances while ``en`` is high.

    ``init``: the counter's reset value. Returns ``(count, pending)``: the counter, and a signal that is high while a flag is still
    inside the tree (``count`` includes a flag ``2 + tree4_levels(len(flags))`` cycles after it).
    """
    reg = stage_register(m, en)
    terms = [reg(f, unsigned(1), f"{name}0_{i}") for i, f in enumerate(flags)]
    inside = list(terms)
    level = 0
    while len(terms) > 1:
        level += 1
        nxt = []
        for j in range(0, len(terms), 4):
            group = terms[j:j + 4]
            w = (sum((1 << len(t)) - 1 for t in group)).bit_length()
            nxt.append(reg(sum(group), unsigned(w), f"{name}{level}_{j // 4}"))
        terms = nxt
        inside += nxt
    cnt = Signal(width, name=f"{name}_count", init=init)
    if terms:
        with m.If(en):
            m.d.sync += cnt.eq(cnt + terms[0])
    pending = Signal(name=f"{name}_pending")
    m.d.comb += pending.eq(Cat(*inside).any() if inside else 0)
    return cnt, pending


def fits_signed(x, width):
    """``x`` fits ``width`` signed bits: the bits from its sign bit up are all equal (LUTs, no carry)."""
    top = x[width - 1:]
    return (top == 0) | (top == (1 << len(top)) - 1)


class SaturatingNarrow(wiring.Component):
    """``k`` signed ``in_width``-bit lanes -> signed ``out_width``-bit lanes, saturating; see module doc."""

    latency = 3

    def __init__(self, k: int, in_width: int, out_width: int):
        for name, v, lo in (("k", k, 1), ("in_width", in_width, 2), ("out_width", out_width, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if out_width > in_width:
            raise ValueError(f"out_width: must be <= in_width ({in_width}), got {out_width}: nothing to saturate")
        self.k, self.in_width, self.out_width = k, in_width, out_width
        self.tree_levels = tree4_levels(k)
        self.count_latency = 4 + self.tree_levels
        super().__init__({
            "en": In(1),
            "i_valid": In(1),
            "i_data": In(data.ArrayLayout(signed(in_width), k)),
            "o_valid": Out(1),
            "o_data": Out(data.ArrayLayout(signed(out_width), k)),
            "count": Out(COUNT_WIDTH),
        })

    def elaborate(self, platform):
        m = Module()
        k, W, N = self.k, self.in_width, self.out_width
        en = self.en

        reg = stage_register(m, en)

        # 1. inputs, then the sign-extension test on the registered value
        xs = [reg(self.i_data[i], signed(W), f"s1_x{i}") for i in range(k)]
        v1 = reg(self.i_valid, 1, "s1_v")
        trunc, neg, over = [], [], []
        for i, x in enumerate(xs):
            top = x[N - 1:]                      # the output sign bit and everything above it
            fits = (top == 0) | (top == (1 << (W - N + 1)) - 1)
            trunc.append(reg(x[:N], unsigned(N), f"s2_t{i}"))
            neg.append(reg(x[W - 1], 1, f"s2_n{i}"))
            over.append(reg(~fits, 1, f"s2_o{i}"))
        v2 = reg(v1, 1, "s2_v")
        # 2. outputs
        hi = Const((1 << (N - 1)) - 1, signed(N))
        lo = Const(-(1 << (N - 1)), signed(N))
        for i in range(k):
            with m.If(en):
                m.d.sync += self.o_data[i].eq(Mux(over[i], Mux(neg[i], lo, hi), trunc[i].as_signed()))
        with m.If(en):
            m.d.sync += self.o_valid.eq(v2)
        # counts: valid beats only, four per registered level
        count, _ = count_tree(m, [o & v2 for o in over], en, name="c")
        m.d.comb += self.count.eq(count)
        return m
