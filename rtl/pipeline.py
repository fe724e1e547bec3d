"""Pipeline-register helpers shared by the pipelined blocks: every register of a block advances
together while its enable is high (a pipeline-wide stall), so a block builds them through one
function instead of each writing its own."""

from __future__ import annotations

from amaranth.hdl import Array, Signal

__all__ = ["stage_register", "hold_register", "free_register", "register_chain", "reduce_tree", "tree4_levels",
           "tag_chain", "or_all", "select_levels", "select_pipe", "staggered"]


def _pipeline_signal(shape, name):
    """One-bit registers (the valid, first and last tags, flags) reset; wider ones hold data that a
    tag qualifies and have none: a reset net to every pipeline register (31,000 flip-flops in the
    scaled DeltaNet core) was a routed critical path, and a reset-less flip-flop packs freely."""
    r = Signal(shape, name=name)
    return r if len(r) <= 1 else Signal(shape, name=name, reset_less=True)


def stage_register(m, en):
    """``reg(value, shape, name)``: a ``sync`` register of ``shape`` loading ``value`` while ``en``
    is high; reset only when one bit wide (:func:`_pipeline_signal`)."""
    def reg(value, shape, name):
        r = _pipeline_signal(shape, name)
        with m.If(en):
            m.d.sync += r.eq(value)
        return r
    return reg


def data_register(m, en):
    """``reg(value, shape, name)``: a ``sync`` register loading ``value`` while ``en`` is high, with
    no reset at any width: data a valid tag beside it qualifies, one-bit flags included (the
    alignments' compare and non-zero flags on a block's reset branch were a routed critical path of
    the two-head DeltaNet core)."""
    def reg(value, shape, name):
        r = Signal(shape, name=name, reset_less=True)
        with m.If(en):
            m.d.sync += r.eq(value)
        return r
    return reg


def hold_register(m, en):
    """``held(value, shape, load, name)``: a ``sync`` register taking ``value`` only in a cycle with
    ``load`` (and ``en``): a vector's latched controls and exponents; reset only when one bit wide."""
    def held(value, shape, load, name):
        r = _pipeline_signal(shape, name)
        with m.If(en & load):
            m.d.sync += r.eq(value)
        return r
    return held


def free_register(m):
    """``reg(value, shape, name)``: a free-running ``sync`` register (a stage inside a multi-cycle
    step whose operands are held for the step's whole length). It has no reset: it holds data,
    rewritten every cycle, and a reset net to every datapath register was a routed critical path."""
    def reg(value, shape, name):
        r = Signal(shape, name=name, reset_less=True)
        m.d.sync += r.eq(value)
        return r
    return reg


def register_chain(m, sig, shape, n: int, name: str, *, reset_less: bool = False):
    """``sig`` through ``n`` free-running ``sync`` registers named ``{name}_d1`` .. ``{name}_dn``:
    the tags (valid, address, phase) that ride beside a fixed-latency pipeline; ``reset_less`` for
    data that a valid tag qualifies."""
    for i in range(n):
        r = Signal(shape, name=f"{name}_d{i + 1}", reset_less=reset_less)
        m.d.sync += r.eq(sig)
        sig = r
    return sig


def reduce_tree(m, values, pick, name: str):
    """``values`` (one per lane, one shape) reduced pairwise by ``pick(a, b)`` through
    ``ceil(log2 n)`` registered levels (the lane maxima and minima of the cores): the result a
    fixed number of cycles after its inputs, no k-long compare chain. Its registers hold data that
    a valid tag beside the tree qualifies, so they have no reset (the shell's reset net to them
    was the routed critical path of VLA at d = 64, k = 4)."""
    vals, lv = list(values), 0
    shape = vals[0].shape()
    while len(vals) > 1:
        lv += 1
        nxt = [pick(vals[i], vals[i + 1]) if i + 1 < len(vals) else vals[i] for i in range(0, len(vals), 2)]
        vals = [register_chain(m, x, shape, 1, f"{name}_t{lv}_{i}", reset_less=True) for i, x in enumerate(nxt)]
    return vals[0]


def tree4_levels(n: int) -> int:
    """Registered levels of a tree that combines four terms per level over ``n`` leaves (the OR
    trees of the normalisers, the saturation-count trees): ``ceil(log4 n)``, 0 for one leaf."""
    levels = 0
    while n > 1:
        n = -(-n // 4)
        levels += 1
    return levels


def tag_chain(reg, valid, first, last, n: int, name: str):
    """A beat's ``valid``, ``first`` and ``last`` flags through ``n`` registers made by ``reg``
    (a :func:`stage_register`), beside a streamed vector's data: ``(valid, first, last)``."""
    for i in range(n):
        valid, first, last = (reg(valid, 1, f"{name}{i}_v"), reg(first, 1, f"{name}{i}_first"),
                              reg(last, 1, f"{name}{i}_last"))
    return valid, first, last


def or_all(values):
    """The OR of a non-empty list of equal-width values (one level of an OR tree)."""
    acc = values[0]
    for x in values[1:]:
        acc = acc | x
    return acc


def select_levels(n: int) -> int:
    """Registered levels of :func:`select_pipe` over ``n`` items: ``ceil(log4 n)``, at least 1."""
    return max(1, tree4_levels(n))


def select_pipe(m, items, sel, shape, name: str, *, first_sel=None):
    """``items[sel]`` through registered 4:1 selects, one level per two bits of ``sel``: the value
    :func:`select_levels` ``(len(items))`` cycles after ``sel`` (a ``d``:1 select of a row's
    operand in one cycle was five LUT levels and the scaled cores' routed critical path). ``sel``
    is taken that many cycles ahead by the caller; each level's bits ride one more register. The
    registers hold data (no reset). ``first_sel``: one copy of ``sel`` per 4:1 group of the first
    level (:func:`~specmem.rtl.ff.replicas`), so that no one register drives every group."""
    vals = list(items)
    s = sel
    if first_sel is not None and len(first_sel) != -(-len(vals) // 4):
        raise ValueError(f"first_sel: one copy per group of four, {-(-len(vals) // 4)}, got {len(first_sel)}")
    for lv in range(select_levels(len(vals))):
        bits = s[2 * lv:2 * lv + 2] if len(vals) > 1 else 0
        nxt = []
        for g in range(0, len(vals), 4):
            group = vals[g:g + 4]
            if lv == 0 and first_sel is not None and len(group) > 1:
                bits = first_sel[g // 4][0:2]
            pick = group[0] if len(group) == 1 else Array(group)[bits]
            r = Signal(shape, name=f"{name}_s{lv}_{g // 4}", reset_less=True)
            m.d.sync += r.eq(pick)
            nxt.append(r)
        vals = nxt
        if lv + 1 < select_levels(len(items)):
            s = register_chain(m, s, len(s), 1, f"{name}_sel{lv}", reset_less=True)
    return vals[0]


def staggered(m, start, flag, n: int, name: str):
    """``n`` one-cycle enables in consecutive cycles after ``start`` (each with ``flag`` as it was
    at ``start``): ``[(en_1, flag_1), .., (en_n, flag_n)]``, each a flip-flop of its own. A copy of
    ``d``-wide vectors split over them puts each group's enable on its own register (one enable
    on over a thousand flip-flops was a 14 ns route on the ECP5-85F; identical replicas would be
    merged by synthesis, registers a cycle apart are not). Reset, so a reset leaves none pending."""
    out = []
    en, fl = start, flag
    for i in range(n):
        e = Signal(name=f"{name}{i + 1}")
        f = Signal(name=f"{name}{i + 1}_flag")
        m.d.sync += [e.eq(en), f.eq(fl)]
        out.append((e, f))
        en, fl = e, f
    return out
