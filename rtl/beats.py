"""Register vectors that the scaled cores fill and read as beats of ``k`` elements: the token
taken in as beats, the select of one beat, the index of a stream's current beat, a stream stored
beat by beat, and the output buffer read out with backpressure. Shared by the cores, not owned by
one rule."""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Mux, Shape, Signal, Value, signed

from .beat_banks import BeatBanks

__all__ = ["token_input", "feed_pair", "beat_of", "beat_index", "store_beats", "beat_output", "vector_readout"]


def token_input(m, core, vectors, k: int, ready):
    """A token taken in as beats on ``core``'s ``i_valid`` / ``i_ready`` / ``i_data`` (``k``
    elements) / ``i_frac`` / ``i_flush``: the ``d/k`` beats of each of ``vectors`` (``(registers,
    exponent register)`` pairs, in order), each vector's exponent taken with its first beat; or a
    flush, one beat with ``i_flush`` set in a token's first slot. A vector may instead be a
    :class:`~specmem.rtl.beat_banks.BeatBanks`, written through its port (one may take several of
    the token's vectors, in order: its beat counter runs on). Every beat's enable reaches only
    its own ``k`` registers (a ``d``-wide port's load enable reached all ``3 d``, a routed
    critical path). ``core.d``: the vectors' length; ``ready``: the core can take a token (held
    while its beats arrive; it may fall only through this token's last beat or a flush being
    taken). ``i_ready`` is a register of it, cleared by those takes, so it rises a cycle after
    ``ready`` does (the core's state flags through the handshake into the LUT RAM's write enable
    were five LUT levels and a routed critical path); each ``BeatBanks``' "the next beat is one of
    mine" is a register beside the slot counter.

    Returns ``(flush, last, stray)``: high in the cycle a flush is taken, in the cycle a token's
    last beat is taken, and when ``i_flush`` comes inside a token (ignored as data would be
    wrong, so the caller raises its error flag)."""
    B = core.d // k
    nv = len(vectors)
    # the slot the next beat fills (vector v's beat b is slot v B + b), one-hot: each slot's enable
    # is the take and one flip-flop (a decode of vector and beat counters was a routed critical path)
    hot = Signal(nv * B, name="in_slot", init=1)
    ready_r = Signal(name="in_ready_r", init=1)
    m.d.comb += core.i_ready.eq(ready_r)
    take = core.i_valid & core.i_ready
    flush = Signal(name="in_flush")
    last = Signal(name="in_last")
    stray = Signal(name="in_stray_flush")
    m.d.comb += [flush.eq(take & core.i_flush & hot[0]), stray.eq(take & core.i_flush & ~hot[0]),
                 last.eq(take & ~core.i_flush & hot[nv * B - 1])]
    m.d.sync += ready_r.eq(ready & ~last & ~flush)
    advance = take & ~flush
    with m.If(advance):
        m.d.sync += hot.eq(hot.rotate_left(1))
    mine = {}  # a BeatBanks' slots, and the register saying the next beat is one of them
    for v, (regs, _) in enumerate(vectors):
        if isinstance(regs, BeatBanks):
            mine.setdefault(id(regs), (regs, []))[1].extend(range(v * B, (v + 1) * B))
    writes = {}  # a BeatBanks' write enable
    for key, (regs, slots) in mine.items():
        nxt = Signal(name=f"in_mine{len(writes)}", init=int(0 in slots))
        with m.If(advance):
            m.d.sync += nxt.eq(Cat(*[hot.rotate_left(1)[s] for s in slots]).any())
        writes[key] = (regs, [take & nxt & (~(core.i_flush & hot[0]) if 0 in slots else 1)])
    for v, (regs, frac) in enumerate(vectors):
        banked = isinstance(regs, BeatBanks)
        for b in range(B):
            slot = v * B + b
            with m.If(take & hot[slot] & (~core.i_flush if slot == 0 else 1)):
                if b == 0:
                    m.d.sync += frac.eq(core.i_frac)
                if not banked:
                    m.d.sync += [regs[b * k + j].eq(core.i_data[j]) for j in range(k)]
    for regs, ens in writes.values():
        m.d.comb += [regs.w_en.eq(Cat(*ens).any())] + [regs.w_data[j].eq(core.i_data[j]) for j in range(k)]
    return flush, last, stray


def feed_pair(m, unit, first, second, k: int, interval: int, start, reg, tag):
    """Feed two vectors (``(registers, exponent)`` pairs: ``k`` then ``q``) into the streaming
    ``unit`` (``i_valid``, ``i_data``, ``i_frac``) as beats, the second ``interval`` cycles after
    the first, from ``start`` (a one-cycle pulse) on: which vector and beat decoded from a counter
    a cycle ahead, the beat selected into registers (``reg`` for data, ``tag`` for the valid
    flag). Both may instead be one :class:`~specmem.rtl.beat_banks.BeatBanks` holding them one
    after the other (``2 d/k`` beats, its read bank: the token just taken): the beat is then a
    registered address into its LUT RAM (a ``B``:1 select and the choice of vector in one cycle
    were four LUT levels and DeltaNet's routed critical path); ``k``: the elements a beat (the
    bank's ``r_lanes``)."""
    (va, fa), (vb, fb) = first, second
    banked = isinstance(va, BeatBanks)
    if banked and vb is not va:
        raise ValueError("feed_pair: a BeatBanks source holds both vectors")
    if banked and va.r_lanes != k:
        raise ValueError(f"feed_pair: the bank's read beats are {va.r_lanes} elements, not {k}")
    B = va.d // 2 // k if banked else len(va) // k
    t = Signal(range(interval + B + 1), name="fe_t", init=interval + B)  # cycles since the first's first beat
    with m.If(start):
        m.d.sync += t.eq(0)
    with m.Elif(t != interval + B):
        m.d.sync += t.eq(t + 1)
    feed_a = tag(t < B, 1, "fe_feed_k")
    feed_b = tag((t >= interval) & (t < interval + B), 1, "fe_feed_q")
    m.d.comb += [unit.i_valid.eq(tag(feed_a | feed_b, 1, "fe_in_v")),
                 unit.i_frac.eq(reg(Mux(feed_a, fa, fb), fa.shape(), "fe_in_f"))]
    if banked:
        addr = reg(Mux(t < B, t, t - interval + B)[:len(va.r_addr)], range(2 * B), "fe_addr")
        m.d.comb += va.r_addr.eq(addr)
        m.d.comb += [unit.i_data[j].eq(reg(va.r_data[j].as_signed(), signed(va.width), f"fe_in_d{j}"))
                     for j in range(k)]
        return
    idx = reg(Mux(t < B, t, t - interval)[:max(1, (B - 1).bit_length())], range(max(B, 2)), "fe_beat")
    m.d.comb += [unit.i_data[j].eq(reg(Mux(feed_a, beat_of(va, idx, j, k), beat_of(vb, idx, j, k)), va[0].shape(),
                                       f"fe_in_d{j}")) for j in range(k)]


def beat_of(vec, idx, j: int, k: int):
    """Element ``j`` of beat ``idx`` of the register vector ``vec`` (``len(vec) / k`` beats): a
    ``B``:1 select."""
    return Array(vec[b * k + j] for b in range(len(vec) // k))[idx]


def beat_index(m, src, B: int, name: str):
    """The index of a stream's current beat (``src.o_valid``, ``o_first``, ``o_last``): a counter
    that its last beat resets, so a register, not a select by the stream's first flag (streams
    carry whole vectors; a ``B``:1 select keyed on ``o_first`` was linear attention's routed
    critical path)."""
    cnt = Signal(range(max(B, 2)), name=name)
    with m.If(src.o_valid):
        m.d.sync += cnt.eq(Mux(src.o_last, 0, cnt + 1))
    return cnt


def store_beats(m, vec, src, k: int, name: str):
    """Write a stream's beats (``src.o_valid``, ``o_first``, ``o_last``, ``o_data``) into the
    register vector ``vec`` in order; returns the beat index (a select)."""
    B = len(vec) // k
    sel = beat_index(m, src, B, name)
    with m.If(src.o_valid):
        for b in range(B):
            with m.If(sel == b):
                m.d.sync += [vec[b * k + j].eq(src.o_data[j]) for j in range(k)]
    return sel


def beat_output(m, core, src, d: int, k: int, shape, exp_shape, src_lanes: int | None = None):
    """A ``d``-element buffer filled from the stream ``src`` (with its exponent ``o_frac`` from
    the first beat; ``src_lanes`` elements a beat, default ``k``) and read out on ``core``'s
    ``o_valid`` / ``o_ready`` / ``o_first`` / ``o_last`` / ``o_data`` / ``o_frac`` as ``d/k`` beats. The buffer is a
    :class:`~specmem.rtl.beat_banks.BeatBanks` (its last beat flips it to the read side), so a
    beat leaves through one registered address into LUT RAM (a ``B``:1 select of ``d``
    registers into the port was DeltaNet's critical path at 98.5 MHz). Returns ``read_done``:
    high in the cycle the buffer's last beat is taken (the buffer is free for the next vector)."""
    B = d // k
    wl = k if src_lanes is None else src_lanes
    m.submodules.obuf = buf = BeatBanks(Shape.cast(shape).width, d, k, w_lanes=wl)
    ofrac = Signal(exp_shape, name="ofrac")
    ofull = Signal(name="o_full")
    m.d.comb += [buf.w_en.eq(src.o_valid), buf.flip.eq(src.o_valid & src.o_last)]
    m.d.comb += [buf.w_data[j].eq(src.o_data[j]) for j in range(wl)]
    with m.If(src.o_valid & src.o_first):
        m.d.sync += ofrac.eq(src.o_frac)
    with m.If(src.o_valid & src.o_last):
        m.d.sync += ofull.eq(1)
    orb = Signal(range(max(B, 2)), name="o_rd")
    m.d.comb += [core.o_valid.eq(ofull), core.o_first.eq(orb == 0), core.o_last.eq(orb == B - 1),
                 core.o_frac.eq(ofrac), buf.r_addr.eq(orb)]
    m.d.comb += [core.o_data[j].eq(buf.r_data[j]) for j in range(k)]
    read_done = Signal(name="o_read_done")
    m.d.comb += read_done.eq(core.o_valid & core.o_ready & (orb == B - 1))
    with m.If(core.o_valid & core.o_ready):
        m.d.sync += orb.eq(Mux(orb == B - 1, 0, orb + 1))
    with m.If(read_done):
        m.d.sync += ofull.eq(0)
    return read_done


def vector_readout(m, port, vec, frac, start, k: int, names) -> None:
    """A register vector ``vec`` (exponent ``frac``) read out on ``port``'s ``valid``, ``first``,
    ``data``, ``frac`` (its members named ``<prefix>_...``: a ``(prefix, core)`` pair) as
    ``d/k`` beats, beat ``i`` read from ``vec`` ``i + 1`` cycles after ``start`` (a one-cycle
    pulse) and on the port one cycle later, through a register: the unregistered ``d/k``:1
    select into the port was the scaled VLA core's routed limit (71.7 MHz). ``names``: the beat
    counter's and the beat index's register names."""
    prefix, core = port
    B = len(vec) // k
    rd = Signal(range(B + 1), name=names[0])
    with m.If(start):
        m.d.sync += rd.eq(B)
    with m.Elif(rd != 0):
        m.d.sync += rd.eq(rd - 1)
    sel = Signal(range(max(B, 2)), name=names[1])
    m.d.comb += sel.eq(B - rd)
    valid, first = Signal(name=f"{prefix}_rd_valid"), Signal(name=f"{prefix}_rd_first")
    fr = Signal(Value.cast(frac).shape(), name=f"{prefix}_rd_frac", reset_less=True)
    data = [Signal(Value.cast(vec[0]).shape(), name=f"{prefix}_rd_data{j}", reset_less=True) for j in range(k)]
    m.d.sync += [valid.eq(rd != 0), first.eq(rd == B), fr.eq(frac)]
    m.d.sync += [data[j].eq(beat_of(vec, sel, j, k)) for j in range(k)]
    m.d.comb += [getattr(core, f"{prefix}_valid").eq(valid), getattr(core, f"{prefix}_first").eq(first),
                 getattr(core, f"{prefix}_frac").eq(fr)]
    m.d.comb += [getattr(core, f"{prefix}_data")[j].eq(data[j]) for j in range(k)]
