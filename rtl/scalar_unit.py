"""The scalar unit: reciprocal and reciprocal square root, bit-exact with
``specmem.golden.fixed.scalar_unit.ScalarUnit`` (same normalisation, seed tables, Newton steps,
truncations and final rounding; the ROM contents are the golden model's tables).

One request at a time through a small FSM around one shared multiplier (the unit runs a few
times per token, so it is sized for area, not throughput). With ``pipelined=True`` (the
annihilation core v2's token chain) every step is one register after a carry chain or a few LUT
levels: the multiplier is a :class:`~specmem.rtl.dsp.PipelinedMultiplier` whose product each
step waits for, and the leading-one search, the final rounding and the exponent take cycles of
their own (:attr:`latency` gives both arrangements' cycles). The compact arrangement:

    IDLE -> NORMALISE [-> NORM_SHIFT] -> SEED -> {RECIP_T -> RECIP_Y | RSQRT_Y2 -> RSQRT_T -> RSQRT_Y}
         x steps -> FINISH -> OUTPUT

Input ``x`` (unsigned raw, ``frac`` fraction bits given per request) gives the floating scalar
``m * 2**-f`` with ``m`` in ``[2**(P-2), 2**(P-1))`` (a signed ``P``-bit multiplier operand) and
``f`` a signed exponent; ``x = 0`` gives ``m = f = 0``. Latency: 4 + 2·steps cycles (recip) or
4 + 3·steps (rsqrt) from the cycle a request is accepted to the cycle ``o.valid`` rises;
with ``split_mul`` each multiply takes four cycles and the normalisation two (5 + 8·steps,
5 + 12·steps).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum as aenum, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scalar_unit import ScalarUnit as GoldenScalarUnit

from .dsp import PipelinedMultiplier
from .engine import min_signed_width
from .fixed import msb_index

__all__ = ["ScalarOp", "ScalarUnit"]


class ScalarOp(aenum.Enum, shape=1):
    RECIP = 0
    RSQRT = 1


class ScalarUnit(wiring.Component):
    """Reciprocal / rsqrt of an unsigned ``in_width``-bit raw value with a per-request ``frac``.

    ``config`` is the golden :class:`~specmem.golden.fixed.scalar_unit.ScalarUnit` (``out_bits``
    ``P``, ``seed_bits``, ``newton_steps``, ``work_bits``); ``frac_width`` sizes the signed
    ``frac`` field. Members: ``i`` (payload ``x``, ``frac``, ``op``) and ``o`` (payload ``m``,
    ``f``), both ``amaranth.lib.stream``.
    """

    def __init__(self, config: GoldenScalarUnit, in_width: int, frac_width: int = 8, *, pipelined: bool = False,
                 dsp: str = "registered", seed_register: bool = False, lod_tree: bool = False,
                 split_mul: bool = False):
        if not isinstance(config, GoldenScalarUnit):
            raise ValueError(f"config: expected a golden ScalarUnit, got {config!r}")
        for name, v, lo in (("in_width", in_width, 1), ("frac_width", frac_width, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if in_width > 62:
            raise ValueError(f"in_width: the golden scalar unit takes int64 raw values (<= 62 bits), got {in_width}")
        self.config = config
        #: the compact arrangement's leading one as a tree (``fixed.msb_index(tree=True)``; the
        #: chain stays the default so the cores synthesised with it generate the same Verilog)
        self.lod_tree = bool(lod_tree)
        #: the compact arrangement's Newton multiplies in four cycles each instead of one: the
        #: operands registered (as wide as the model's operand bound), the products of their
        #: 17-bit pieces registered (one 18 x 18 multiplier each), their sum registered, then used
        self.split_mul = bool(split_mul)
        if self.split_mul and pipelined:
            raise ValueError("split_mul: only the compact arrangement has it (the pipelined one is registered)")
        self.in_width, self.frac_width = in_width, frac_width
        self.pipelined, self.dsp = bool(pipelined), dsp
        if seed_register and not self.pipelined:
            raise ValueError("seed_register: only the pipelined arrangement has it")
        #: pipelined: both seed tables read into registers a cycle before the seed is taken (the
        #: tables' LUT trees then end at a register, not in y's input multiplexer): one cycle more
        self.seed_register = bool(seed_register)
        P = config.out_bits
        e_lo = -((1 << (frac_width - 1)) - 1)
        e_hi = in_width - 1 + (1 << (frac_width - 1))
        self.exp_width = min_signed_width(e_lo - 1, e_hi)
        self.f_width = min_signed_width(min(e_lo - 1, (e_lo - 1) // 2) + P - 2, e_hi + P - 1)
        # cycles from the cycle a request is accepted to the cycle o.valid is first high
        mc = 4 if self.split_mul else 1  # cycles per Newton multiply
        ns = 5 if self.split_mul else 4    # the other states (split: the normalisation in two)
        self.latency = {ScalarOp.RECIP: ns + 2 * mc * config.newton_steps,
                        ScalarOp.RSQRT: ns + 3 * mc * config.newton_steps}
        if self.split_mul:
            self.mul_width = config.newton_operand_width()
        if self.pipelined:
            N = config.work_bits
            # operands as wide as the golden model's bound on every Newton operand (33 bits at
            # N = 30: 2 x 2 pieces of 18 x 18, where the registers' widths would take 3 x 3)
            self.mul_width = config.newton_operand_width()
            self.mul_latency = PipelinedMultiplier.latency_for(dsp, self.mul_width, self.mul_width,
                                                               input_register=True)
            M = self.mul_latency + 1  # cycles per multiply: issue, then wait for the product
            s = int(self.seed_register)
            self.latency = {ScalarOp.RECIP: 8 + s + 2 * M * config.newton_steps,
                            ScalarOp.RSQRT: 8 + s + 3 * M * config.newton_steps}
        self.in_layout = data.StructLayout({"x": unsigned(in_width), "frac": signed(frac_width), "op": ScalarOp})
        self.out_layout = data.StructLayout({"m": signed(P), "f": signed(self.f_width)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        P, N, W = cfg.out_bits, cfg.work_bits, cfg.work_bits

        # the request and the working values: written before they are read in every request, so no
        # reset (a reset net into the normalised operand was a routed critical path of the scaled core)
        x = Signal(unsigned(self.in_width), reset_less=True)
        frac = Signal(signed(self.frac_width), reset_less=True)
        op = Signal(ScalarOp, reset_less=True)
        zero = Signal(reset_less=True)
        xm = Signal(unsigned(W + 1), reset_less=True)  # W bits; W+1 once doubled for an odd rsqrt exponent
        e = Signal(signed(self.exp_width), reset_less=True)
        y = Signal(signed(N + 3), reset_less=True)
        y2 = Signal(signed(N + 5), reset_less=True)
        t = Signal(signed(N + 7), reset_less=True)
        step = Signal(range(cfg.newton_steps + 1))

        recip_rom = Array(Const(int(v), unsigned(N + 1)) for v in cfg.recip_table())
        rsqrt_rom = Array(Const(int(v), unsigned(N + 1)) for v in cfg.rsqrt_table())

        # the one multiplier, operands chosen by the state; pipelined, they take the width of the
        # model's bound (``newton_operand_range``: every operand of every input fits, so none wraps)
        mul_a = Signal(signed(self.mul_width if self.pipelined else max(W, N + 5) + 2))
        mul_b = Signal(signed(self.mul_width if self.pipelined else N + 8))
        prod = Signal(signed(len(mul_a) + len(mul_b)))
        if self.pipelined:
            return self._elaborate_pipelined(m, x, frac, op, zero, xm, e, y, y2, t, step, recip_rom, rsqrt_rom,
                                             mul_a, mul_b, prod)
        if not self.split_mul:
            m.d.comb += prod.eq(mul_a * mul_b)

        # normalisation datapath (used in NORMALISE): leading one of x to bit W-1
        x1 = Signal(unsigned(self.in_width))
        m.d.comb += x1.eq(Mux(x == 0, 1, x))
        msb = msb_index(m, x1, tree=self.lod_tree)

        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += [x.eq(self.i.payload.x), frac.eq(self.i.payload.frac), op.eq(self.i.payload.op)]
                    m.next = "NORMALISE"

            if not self.split_mul:
                with m.State("NORMALISE"):
                    m.d.sync += [
                        zero.eq(x == 0),
                        xm.eq(((x1 << (W - 1)) >> msb)[:W]),
                        e.eq(msb - frac),
                    ]
                    m.next = "SEED"
            else:  # the leading one, then the shift by it: a cycle each
                msb_r = Signal.like(msb, name="msb_r")
                with m.State("NORMALISE"):
                    m.d.sync += [zero.eq(x == 0), msb_r.eq(msb), e.eq(msb - frac)]
                    m.next = "NORM_SHIFT"
                with m.State("NORM_SHIFT"):  # x itself, not x1: for x = 0 the result is masked by
                    # zero, and the shifter starts from a register, no zero test in front of it
                    m.d.sync += xm.eq(((x << (W - 1)) >> msb_r)[:W])
                    m.next = "SEED"

            with m.State("SEED"):
                self._seed(m, op, e, xm, y, step, recip_rom, rsqrt_rom, "FINISH")

            split = self.split_mul
            if split:
                mul_ar = Signal(signed(self.mul_width), name="mul_ar")
                mul_br = Signal(signed(self.mul_width), name="mul_br")
                prod_r = self._piece_product(m, mul_ar, mul_br)

            def mul_state(name, a, b, use):
                """One Newton multiply: ``use(product)`` in the state's cycle, or (``split_mul``)
                operands registered in ``name``, the pieces' products in ``name_P``, their sum in
                ``name_S``, used in ``name_U``."""
                if not split:
                    with m.State(name):
                        m.d.comb += [mul_a.eq(a), mul_b.eq(b)]
                        use(prod)
                    return
                with m.State(name):
                    m.d.sync += [mul_ar.eq(a), mul_br.eq(b)]
                    m.next = f"{name}_P"
                with m.State(f"{name}_P"):
                    m.next = f"{name}_S"
                with m.State(f"{name}_S"):
                    m.next = f"{name}_U"
                with m.State(f"{name}_U"):
                    use(prod_r)

            def last_step(again):
                m.d.sync += step.eq(step + 1)
                with m.If(step == cfg.newton_steps - 1):
                    m.next = "FINISH"
                with m.Else():
                    m.next = again

            # reciprocal: t = (mu y) >> (W-1); y = (y (2^(N+1) - t)) >> N
            def recip_t(p):
                m.d.sync += t.eq(p >> (W - 1))
                m.next = "RECIP_Y"

            def recip_y(p):
                m.d.sync += y.eq(p >> N)
                last_step("RECIP_T")

            mul_state("RECIP_T", xm, y, recip_t)
            mul_state("RECIP_Y", y, (2 << N) - t, recip_y)

            # rsqrt: y2 = (y y) >> N; t = (mu' y2) >> (W-1); y = (y (3 2^N - t)) >> (N+1)
            def rsqrt_y2(p):
                m.d.sync += y2.eq(p >> N)
                m.next = "RSQRT_T"

            def rsqrt_t(p):
                m.d.sync += t.eq(p >> (W - 1))
                m.next = "RSQRT_Y"

            def rsqrt_y(p):
                m.d.sync += y.eq(p >> (N + 1))
                last_step("RSQRT_Y2")

            mul_state("RSQRT_Y2", y, y, rsqrt_y2)
            mul_state("RSQRT_T", xm, y2, rsqrt_t)
            mul_state("RSQRT_Y", y, (3 << N) - t, rsqrt_y)

            # mantissa to P bits (round half to even), exponent
            with m.State("FINISH"):
                sh = N - (P - 1)
                if sh > 0:
                    q = y >> sh
                    rem = y[:sh]
                    half = 1 << (sh - 1)
                    mr = q + ((rem > half) | ((rem == half) & q[0]))
                else:
                    mr = y << (-sh)
                top = mr >= (1 << (P - 1))
                mant = Mux(top, mr >> 1, mr)
                ee = Mux(op == ScalarOp.RECIP, e, e >> 1)
                m.d.sync += [
                    self.o.payload.m.eq(Mux(zero, 0, mant)),
                    self.o.payload.f.eq(Mux(zero, 0, ee + (P - 1) - top)),
                ]
                m.next = "OUTPUT"

            with m.State("OUTPUT"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.next = "IDLE"
        return m

    #: bits of a low piece of ``split_mul``'s operands (unsigned; the top piece is signed): every
    #: piece is an 18-bit signed multiplier operand
    PIECE = 17

    def _piece_product(self, m, a, b):
        """``a * b`` from free-running registers: the products of the operands' pieces, then their
        sum. The products of equal pieces below the top are unsigned and shorter than their
        spacing, so they are concatenated, not added. Returns the registered product."""
        B = self.PIECE

        def pieces(x):
            n = -(-len(x) // B)
            return [x[B * i:B * (i + 1)] for i in range(n - 1)] + [x[B * (n - 1):].as_signed()]

        pa, pb = pieces(a), pieces(b)
        n = len(pa)
        pp = {}
        for i in range(n):
            for j in range(n):
                x, y = pa[i], pb[j]
                pp[i, j] = Signal(signed(len(x) + len(y) + 1), name=f"mul_pp{i}{j}")
                m.d.sync += pp[i, j].eq(x * y)
        diag = Cat(*[pp[i, i][:2 * B] for i in range(n - 1)], pp[n - 1, n - 1]).as_signed()
        total = diag
        for (i, j), p in pp.items():
            if i != j:
                total = total + (p << (B * (i + j)))
        prod_r = Signal(signed(len(a) + len(b)), name="prod_r")
        m.d.sync += prod_r.eq(total)
        return prod_r

    @staticmethod
    def _seed_index(cfg, xm, e):
        """The two tables' indices from the normalised ``xm`` (and for rsqrt the exponent's parity)."""
        W, b = cfg.work_bits, cfg.seed_bits
        return (xm >> (W - 1 - b))[:b], (e[0] << (b - 1)) | (xm >> (W - b))[:b - 1]

    def _seed(self, m, op, e, xm, y, step, recip_rom, rsqrt_rom, done_state, seeds=None):
        """The SEED state's body (both arrangements): the table's first guess, and for rsqrt an
        even exponent; then the first Newton step, or ``done_state`` when there are none.
        ``seeds``: the tables' words already read into registers (``seed_register``)."""
        cfg = self.config
        ri, si = self._seed_index(cfg, xm, e)
        rseed, sseed = seeds if seeds is not None else (recip_rom[ri], rsqrt_rom[si])
        m.d.sync += step.eq(0)
        with m.If(op == ScalarOp.RECIP):
            m.d.sync += y.eq(rseed)
            m.next = "RECIP_T" if cfg.newton_steps else done_state
        with m.Else():
            odd = e[0]
            m.d.sync += [
                e.eq(e - odd),
                xm.eq(Mux(odd, xm << 1, xm)),
                y.eq(sseed),
            ]
            m.next = "RSQRT_Y2" if cfg.newton_steps else done_state

    def _elaborate_pipelined(self, m, x, frac, op, zero, xm, e, y, y2, t, step, recip_rom, rsqrt_rom,
                             mul_a, mul_b, prod):
        """The same steps with every cycle one register after a carry chain or a few LUT levels:
        the leading-one search and the normalising shift in cycles of their own, the multiplier a
        :class:`~specmem.rtl.dsp.PipelinedMultiplier` (each step waits for its product), the final
        rounding and the exponent in two cycles."""
        cfg = self.config
        P, N, W = cfg.out_bits, cfg.work_bits, cfg.work_bits
        mul = PipelinedMultiplier(len(mul_a), len(mul_b), self.dsp, input_register=True)
        m.submodules.mul = mul
        m.d.comb += [mul.a.eq(mul_a), mul.b.eq(mul_b), mul.en.eq(1), prod.eq(mul.p)]
        wait = Signal(range(mul.latency + 1))
        msb = Signal(range(max(self.in_width, 2)))
        # the leading one in two registered steps: within each 8-bit group, then the top group;
        # x = 0 is searched as x = 1 (msb 0, the default) so the request's payload meets only x
        groups = [x[i:i + 8] for i in range(0, self.in_width, 8)]
        g_any = [Signal(name=f"lo_any{gi}") for gi in range(len(groups))]
        g_idx = [Signal(range(8), name=f"lo_idx{gi}") for gi in range(len(groups))]
        fine = Signal(3)
        xc = Signal(unsigned(self.in_width + W - 1))
        mr = Signal(signed(len(y) + max(0, (P - 1) - N) + 1))
        ee = Signal(signed(len(e)))
        top = Signal()

        # wait counts the cycles of a multiply state and is 0 in every other state, so done
        # (wait == mul.latency, as a register: a state's exit is not a compare) needs no state decode
        done = Signal()
        m.d.sync += [wait.eq(0), done.eq(wait == mul.latency - 1)]

        def multiply(a, bb, result, next_state):
            """Issue ``a * bb`` (held while waiting), then ``result(prod)`` and go on."""
            m.d.comb += [mul_a.eq(a), mul_b.eq(bb)]
            m.d.sync += wait.eq(wait + 1)
            with m.If(done):
                m.d.sync += [*result(prod), wait.eq(0)]
                next_state()

        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += [x.eq(self.i.payload.x), frac.eq(self.i.payload.frac), op.eq(self.i.payload.op),
                                 wait.eq(0)]
                    m.next = "LEADING_ONE"
            with m.State("LEADING_ONE"):
                for gi, grp in enumerate(groups):
                    m.d.sync += [g_any[gi].eq(grp.any()), g_idx[gi].eq(msb_index(m, grp, f"lo_msb{gi}"))]
                m.d.sync += zero.eq(x == 0)
                m.next = "TOP_GROUP"
            with m.State("TOP_GROUP"):  # and the coarse half of the normalising shift, by 8 x the group
                x1 = x | zero
                m.d.sync += [msb.eq(0), fine.eq(0), xc.eq(x1 << (W - 1))]
                for gi in range(len(groups)):  # the last true assignment wins: the highest group
                    with m.If(g_any[gi]):
                        m.d.sync += [msb.eq(8 * gi + g_idx[gi]), fine.eq(g_idx[gi]),
                                     xc.eq((x1 << (W - 1)) >> (8 * gi))]
                m.next = "NORMALISE"
            with m.State("NORMALISE"):  # the fine half: the leading one to bit W - 1
                m.d.sync += [xm.eq((xc >> fine)[:W]), e.eq(msb - frac)]
                m.next = "SEED_READ" if self.seed_register else "SEED"
            seeds = None
            if self.seed_register:
                seeds = (Signal(unsigned(N + 1), name="recip_seed"), Signal(unsigned(N + 1), name="rsqrt_seed"))
                with m.State("SEED_READ"):
                    ri, si = self._seed_index(cfg, xm, e)
                    m.d.sync += [seeds[0].eq(recip_rom[ri]), seeds[1].eq(rsqrt_rom[si])]
                    m.next = "SEED"
            with m.State("SEED"):
                self._seed(m, op, e, xm, y, step, recip_rom, rsqrt_rom, "ROUND", seeds)

            def after_step(loop_state):
                def go():
                    with m.If(step == cfg.newton_steps - 1):
                        m.next = "ROUND"
                    with m.Else():
                        m.next = loop_state
                return go

            def goto(state):
                def go():
                    m.next = state
                return go

            # reciprocal: t = (mu y) >> (W-1); y = (y (2^(N+1) - t)) >> N
            # (t is kept as the factor 2^(N+1) - t, or 3 2^N - t: the subtraction ends at t's register,
            # not in front of the multiplier's operand select)
            with m.State("RECIP_T"):
                multiply(xm, y, lambda p_: [t.eq((2 << N) - (p_ >> (W - 1)))], goto("RECIP_Y"))
            with m.State("RECIP_Y"):
                multiply(y, t, lambda p_: [y.eq(p_ >> N), step.eq(step + 1)], after_step("RECIP_T"))
            # rsqrt: y2 = (y y) >> N; t = (mu' y2) >> (W-1); y = (y (3 2^N - t)) >> (N+1)
            with m.State("RSQRT_Y2"):
                multiply(y, y, lambda p_: [y2.eq(p_ >> N)], goto("RSQRT_T"))
            with m.State("RSQRT_T"):
                multiply(xm, y2, lambda p_: [t.eq((3 << N) - (p_ >> (W - 1)))], goto("RSQRT_Y"))
            with m.State("RSQRT_Y"):
                multiply(y, t, lambda p_: [y.eq(p_ >> (N + 1)), step.eq(step + 1)], after_step("RSQRT_Y2"))

            # mantissa to P bits (round half to even), then the exponent
            with m.State("ROUND"):
                sh = N - (P - 1)
                if sh > 0:
                    q = y >> sh
                    rem = y[:sh]
                    half = 1 << (sh - 1)
                    m.d.sync += mr.eq(q + ((rem > half) | ((rem == half) & q[0])))
                else:
                    m.d.sync += mr.eq(y << (-sh))
                m.d.sync += ee.eq(Mux(op == ScalarOp.RECIP, e, e >> 1))
                m.next = "SCALE"
            with m.State("SCALE"):
                m.d.sync += top.eq(mr >= (1 << (P - 1)))
                m.next = "FINISH"
            with m.State("FINISH"):
                mant = Mux(top, mr >> 1, mr)
                m.d.sync += [
                    self.o.payload.m.eq(Mux(zero, 0, mant)),
                    self.o.payload.f.eq(Mux(zero, 0, ee + (P - 1) - top)),
                ]
                m.next = "OUTPUT"

            with m.State("OUTPUT"):
                m.d.comb += self.o.valid.eq(1)
                with m.If(self.o.ready):
                    m.next = "IDLE"
        return m
