"""The scalar unit: reciprocal and reciprocal square root, bit-exact with
``specmem.golden.fixed.scalar_unit.ScalarUnit`` (same normalisation, seed tables, Newton steps,
truncations and final rounding; the ROM contents are the golden model's tables).

One request at a time through a small FSM around one shared multiplier (the unit runs a few
times per token, so it is sized for area, not throughput):

    IDLE -> NORMALISE -> SEED -> {RECIP_T -> RECIP_Y | RSQRT_Y2 -> RSQRT_T -> RSQRT_Y} x steps
         -> FINISH -> OUTPUT

Input ``x`` (unsigned raw, ``frac`` fraction bits given per request) gives the floating scalar
``m * 2**-f`` with ``m`` in ``[2**(P-2), 2**(P-1))`` (a signed ``P``-bit multiplier operand) and
``f`` a signed exponent; ``x = 0`` gives ``m = f = 0``. Latency: 4 + 2·steps cycles (recip) or
4 + 3·steps (rsqrt) from the cycle a request is accepted to the cycle ``o.valid`` rises.
"""

from __future__ import annotations

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum as aenum, stream, wiring
from amaranth.lib.wiring import In, Out

from specmem.golden.fixed.scalar_unit import ScalarUnit as GoldenScalarUnit

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

    def __init__(self, config: GoldenScalarUnit, in_width: int, frac_width: int = 8):
        if not isinstance(config, GoldenScalarUnit):
            raise ValueError(f"config: expected a golden ScalarUnit, got {config!r}")
        for name, v, lo in (("in_width", in_width, 1), ("frac_width", frac_width, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if in_width > 62:
            raise ValueError(f"in_width: the golden scalar unit takes int64 raw values (<= 62 bits), got {in_width}")
        self.config = config
        self.in_width, self.frac_width = in_width, frac_width
        P = config.out_bits
        e_lo = -((1 << (frac_width - 1)) - 1)
        e_hi = in_width - 1 + (1 << (frac_width - 1))
        self.exp_width = min_signed_width(e_lo - 1, e_hi)
        self.f_width = min_signed_width(min(e_lo - 1, (e_lo - 1) // 2) + P - 2, e_hi + P - 1)
        # cycles from the cycle a request is accepted to the cycle o.valid is first high
        self.latency = {ScalarOp.RECIP: 4 + 2 * config.newton_steps, ScalarOp.RSQRT: 4 + 3 * config.newton_steps}
        self.in_layout = data.StructLayout({"x": unsigned(in_width), "frac": signed(frac_width), "op": ScalarOp})
        self.out_layout = data.StructLayout({"m": signed(P), "f": signed(self.f_width)})
        super().__init__({
            "i": In(stream.Signature(self.in_layout)),
            "o": Out(stream.Signature(self.out_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        P, N, W, b = cfg.out_bits, cfg.work_bits, cfg.work_bits, cfg.seed_bits

        x = Signal(unsigned(self.in_width))
        frac = Signal(signed(self.frac_width))
        op = Signal(ScalarOp)
        zero = Signal()
        xm = Signal(unsigned(W + 1))  # W bits; W+1 once doubled for an odd rsqrt exponent
        e = Signal(signed(self.exp_width))
        y = Signal(signed(N + 3))
        y2 = Signal(signed(N + 5))
        t = Signal(signed(N + 7))
        step = Signal(range(cfg.newton_steps + 1))

        recip_rom = Array(Const(int(v), unsigned(N + 1)) for v in cfg.recip_table())
        rsqrt_rom = Array(Const(int(v), unsigned(N + 1)) for v in cfg.rsqrt_table())

        # the one multiplier, operands chosen by the state
        mul_a = Signal(signed(max(W, N + 5) + 2))
        mul_b = Signal(signed(N + 8))
        prod = Signal(signed(len(mul_a) + len(mul_b)))
        m.d.comb += prod.eq(mul_a * mul_b)

        # normalisation datapath (used in NORMALISE): leading one of x to bit W-1
        x1 = Signal(unsigned(self.in_width))
        m.d.comb += x1.eq(Mux(x == 0, 1, x))
        msb = msb_index(m, x1)

        with m.FSM(init="IDLE"):
            with m.State("IDLE"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    m.d.sync += [x.eq(self.i.payload.x), frac.eq(self.i.payload.frac), op.eq(self.i.payload.op)]
                    m.next = "NORMALISE"

            with m.State("NORMALISE"):
                m.d.sync += [
                    zero.eq(x == 0),
                    xm.eq(((x1 << (W - 1)) >> msb)[:W]),
                    e.eq(msb - frac),
                ]
                m.next = "SEED"

            with m.State("SEED"):
                m.d.sync += step.eq(0)
                with m.If(op == ScalarOp.RECIP):
                    m.d.sync += y.eq(recip_rom[(xm >> (W - 1 - b))[:b]])
                    m.next = "RECIP_T" if cfg.newton_steps else "FINISH"
                with m.Else():
                    odd = e[0]
                    m.d.sync += [
                        e.eq(e - odd),
                        xm.eq(Mux(odd, xm << 1, xm)),
                        y.eq(rsqrt_rom[(odd << (b - 1)) | (xm >> (W - b))[:b - 1]]),
                    ]
                    m.next = "RSQRT_Y2" if cfg.newton_steps else "FINISH"

            # reciprocal: t = (mu y) >> (W-1); y = (y (2^(N+1) - t)) >> N
            with m.State("RECIP_T"):
                m.d.comb += [mul_a.eq(xm), mul_b.eq(y)]
                m.d.sync += t.eq(prod >> (W - 1))
                m.next = "RECIP_Y"
            with m.State("RECIP_Y"):
                m.d.comb += [mul_a.eq(y), mul_b.eq((2 << N) - t)]
                m.d.sync += [y.eq(prod >> N), step.eq(step + 1)]
                with m.If(step == cfg.newton_steps - 1):
                    m.next = "FINISH"
                with m.Else():
                    m.next = "RECIP_T"

            # rsqrt: y2 = (y y) >> N; t = (mu' y2) >> (W-1); y = (y (3 2^N - t)) >> (N+1)
            with m.State("RSQRT_Y2"):
                m.d.comb += [mul_a.eq(y), mul_b.eq(y)]
                m.d.sync += y2.eq(prod >> N)
                m.next = "RSQRT_T"
            with m.State("RSQRT_T"):
                m.d.comb += [mul_a.eq(xm), mul_b.eq(y2)]
                m.d.sync += t.eq(prod >> (W - 1))
                m.next = "RSQRT_Y"
            with m.State("RSQRT_Y"):
                m.d.comb += [mul_a.eq(y), mul_b.eq((3 << N) - t)]
                m.d.sync += [y.eq(prod >> (N + 1)), step.eq(step + 1)]
                with m.If(step == cfg.newton_steps - 1):
                    m.next = "FINISH"
                with m.Else():
                    m.next = "RSQRT_Y2"

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
