"""The board design: a UART-to-stream bridge in front of the annihilation top with its register
block (:class:`~specmem.rtl.csr_top.AnnihilationCSRTop`), so that a host with nothing but a
serial port streams tokens through the core and reads its registers.

:class:`UARTBridge` speaks a small command/reply byte protocol (below) and is a master on the
top's ``s_axis`` (beats in), ``m_axis`` (beats out) and ``s_axil`` (registers). :class:`BoardTop`
is bridge + top with two pins, ``uart_rx`` and ``uart_tx``, and eight LEDs: the plain top that
is simulated (``sim/tb_board.py``) and that ``rtl/board_ulx3s.py`` puts on the ULX3S-85F.

Protocol (8N1 bytes; multi-byte values little-endian). The host sends one command, then reads
its whole reply before sending the next; the bridge ignores (and flags on an LED) bytes that
arrive while it executes or replies, so the link never needs flow control::

    command                          payload                   reply
    0x00 PING                        -                         0xB5, version, NB_IN, NB_OUT
    0x10 | last  BEAT (s_axis)       NB_IN bytes of tdata      0x00 once the top accepted the beat
    0x20 READ (m_axis)               -                         flags, NB_OUT bytes of tdata
    0x30 CSR_READ (AXI4-Lite)        address (1 byte)          resp, 4 bytes of rdata
    0x31 CSR_WRITE (AXI4-Lite)       address, 4 bytes of wdata resp
    anything else                    -                         0xEE

``NB_IN = ceil(k * x.width / 8)``, ``NB_OUT = ceil(k * y.width / 8)``: one AXI4-Stream beat (the
top's packing: lane ``l`` of a beat at bits ``[l*w, (l+1)*w)``), ``last`` (bit 0 of the BEAT
opcode) is its ``tlast``. BEAT waits for ``s_axis_tready`` (the top holds its input back while it
works on a token, for microseconds, and while an earlier output waits to be read, so a host that
reads each token's output before sending the next never waits for long). READ does not wait: ``flags`` bit 0 says whether a beat was there
(``m_axis_tvalid``; it is then taken), bit 1 is its ``tlast``; without a beat the data bytes are
0 and the host asks again. ``resp`` is the AXI response (0 OKAY, 2 SLVERR). PING's ``version``
is :data:`PROTOCOL_VERSION`.

LEDs: 0 the core is busy, 1 an orthogonal input was seen (sticky), 2 the saturation counter is
nonzero, 3 a received byte had a bad stop bit or arrived while the bridge was busy (sticky),
7 a heartbeat (bit 23 of a free-running counter: the clock runs).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr_top import AnnihilationCSRTop
from .uart import UARTRx, UARTTx, check_divisor

__all__ = ["UARTBridge", "BoardTop", "PROTOCOL_VERSION", "OP_PING", "OP_BEAT", "OP_READ", "OP_CSR_READ",
           "OP_CSR_WRITE", "PING_MAGIC", "REPLY_OK", "REPLY_BAD_OPCODE", "divisor_for"]

PROTOCOL_VERSION = 1
OP_PING, OP_BEAT, OP_READ, OP_CSR_READ, OP_CSR_WRITE = 0x00, 0x10, 0x20, 0x30, 0x31
PING_MAGIC, REPLY_OK, REPLY_BAD_OPCODE = 0xB5, 0x00, 0xEE


def divisor_for(clock_hz: float, baud: int) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``, refused where the rate would be off by
    more than 2 % (a UART tolerates a few percent over a 10-bit frame)."""
    if isinstance(baud, bool) or not isinstance(baud, int) or baud <= 0:
        raise ValueError(f"baud: must be a positive integer, got {baud!r}")
    divisor = round(clock_hz / baud)
    if divisor < 4 or abs(clock_hz / divisor - baud) / baud > 0.02:
        raise ValueError(f"baud: {baud} is not reachable from a {clock_hz / 1e6:g} MHz clock within 2 % "
                         f"(the UART needs at least 4 clock cycles per bit)")
    return divisor


class UARTBridge(wiring.Component):
    """Command/reply bridge (protocol: the module doc) from ``uart_rx``/``uart_tx`` to an
    AXI4-Stream source (``s_axis_*``, driving the top's input), an AXI4-Stream sink
    (``m_axis_*``, from the top's output) and an AXI4-Lite master (``s_axil_*``, named after the
    top's slave ports they drive). ``error`` is sticky: a framing error or a byte while busy."""

    def __init__(self, divisor: int, in_width: int, out_width: int, addr_width: int = 8):
        self.divisor = check_divisor(divisor)
        self.in_width, self.out_width, self.addr_width = in_width, out_width, addr_width
        self.nb_in, self.nb_out = -(-in_width // 8), -(-out_width // 8)
        if not (1 <= self.nb_in <= 255 and 1 <= self.nb_out <= 255 and addr_width <= 8):
            raise ValueError("bridge: beats of 1..255 bytes and 8-bit register addresses only")
        aw = addr_width
        super().__init__({
            "uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "error": Out(1),
            "s_axis_tdata": Out(in_width), "s_axis_tvalid": Out(1), "s_axis_tready": In(1), "s_axis_tlast": Out(1),
            "m_axis_tdata": In(out_width), "m_axis_tvalid": In(1), "m_axis_tready": Out(1), "m_axis_tlast": In(1),
            "s_axil_awaddr": Out(aw), "s_axil_awvalid": Out(1), "s_axil_awready": In(1),
            "s_axil_wdata": Out(32), "s_axil_wstrb": Out(4), "s_axil_wvalid": Out(1), "s_axil_wready": In(1),
            "s_axil_bresp": In(2), "s_axil_bvalid": In(1), "s_axil_bready": Out(1),
            "s_axil_araddr": Out(aw), "s_axil_arvalid": Out(1), "s_axil_arready": In(1),
            "s_axil_rdata": In(32), "s_axil_rresp": In(2), "s_axil_rvalid": In(1), "s_axil_rready": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = UARTRx(self.divisor)
        m.submodules.tx = tx = UARTTx(self.divisor)
        m.d.comb += [rx.rx.eq(self.uart_rx), self.uart_tx.eq(tx.tx)]

        nb_in, nb_out = self.nb_in, self.nb_out
        n_payload = max(nb_in, 5)
        n_reply = max(1 + nb_out, 5)
        op = Signal(8)
        payload = Signal(8 * n_payload)
        count = Signal(range(max(n_payload, n_reply) + 1))   # payload bytes received / reply bytes left
        reply = Signal(8 * n_reply)
        aw_done, w_done = Signal(), Signal()
        error = Signal()
        m.d.comb += self.error.eq(error)
        with m.If(rx.framing_error):
            m.d.sync += error.eq(1)

        addr = payload[:8][:self.addr_width]
        m.d.comb += [
            self.s_axis_tdata.eq(payload[:self.in_width]),
            self.s_axis_tlast.eq(op[0]),
            self.s_axil_awaddr.eq(addr), self.s_axil_araddr.eq(addr),
            self.s_axil_wdata.eq(payload[8:40]), self.s_axil_wstrb.eq(0xF),
            tx.i.payload.eq(reply[:8]),
        ]

        def start_reply(*byte_values, length: int):
            m.d.sync += [reply.eq(Cat(*byte_values)), count.eq(length)]
            m.next = "SEND"

        with m.FSM(name="bridge") as fsm:
            with m.State("IDLE"):
                with m.If(rx.o.valid):
                    m.d.sync += [op.eq(rx.o.payload), count.eq(0)]
                    with m.Switch(rx.o.payload):
                        with m.Case(OP_PING):
                            start_reply(Const(PING_MAGIC, 8), Const(PROTOCOL_VERSION, 8), Const(nb_in, 8),
                                        Const(nb_out, 8), length=4)
                        with m.Case(OP_BEAT, OP_BEAT | 1, OP_CSR_READ, OP_CSR_WRITE):
                            m.next = "RECV"
                        with m.Case(OP_READ):
                            m.next = "EXEC"
                        with m.Default():
                            start_reply(Const(REPLY_BAD_OPCODE, 8), length=1)
            with m.State("RECV"):
                need = Signal(range(n_payload + 1))
                m.d.comb += need.eq(nb_in)
                with m.Switch(op):
                    with m.Case(OP_CSR_READ):
                        m.d.comb += need.eq(1)
                    with m.Case(OP_CSR_WRITE):
                        m.d.comb += need.eq(5)
                with m.If(rx.o.valid):
                    with m.Switch(count):
                        for i in range(n_payload):
                            with m.Case(i):
                                m.d.sync += payload[8 * i:8 * i + 8].eq(rx.o.payload)
                    m.d.sync += count.eq(count + 1)
                    with m.If(count == need - 1):
                        m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                        m.next = "EXEC"
            with m.State("EXEC"):
                with m.Switch(op):
                    with m.Case(OP_BEAT, OP_BEAT | 1):
                        m.d.comb += self.s_axis_tvalid.eq(1)
                        with m.If(self.s_axis_tready):
                            start_reply(Const(REPLY_OK, 8), length=1)
                    with m.Case(OP_READ):
                        valid = self.m_axis_tvalid
                        m.d.comb += self.m_axis_tready.eq(1)   # takes the beat if there is one
                        start_reply(Cat(valid, self.m_axis_tlast & valid, Const(0, 6)),
                                    self.m_axis_tdata & valid.replicate(self.out_width), length=1 + nb_out)
                    with m.Case(OP_CSR_READ):
                        m.d.comb += self.s_axil_arvalid.eq(1)
                        with m.If(self.s_axil_arready):
                            m.next = "CSR_R"
                    with m.Case(OP_CSR_WRITE):
                        m.d.comb += [self.s_axil_awvalid.eq(~aw_done), self.s_axil_wvalid.eq(~w_done)]
                        aw_ok = aw_done | self.s_axil_awready
                        w_ok = w_done | self.s_axil_wready
                        m.d.sync += [aw_done.eq(aw_ok), w_done.eq(w_ok)]
                        with m.If(aw_ok & w_ok):
                            m.next = "CSR_B"
            with m.State("CSR_R"):
                m.d.comb += self.s_axil_rready.eq(1)
                with m.If(self.s_axil_rvalid):
                    start_reply(self.s_axil_rresp, Const(0, 6), self.s_axil_rdata, length=5)
            with m.State("CSR_B"):
                m.d.comb += self.s_axil_bready.eq(1)
                with m.If(self.s_axil_bvalid):
                    start_reply(self.s_axil_bresp, Const(0, 6), length=1)
            with m.State("SEND"):
                m.d.comb += tx.i.valid.eq(1)
                with m.If(tx.i.ready):
                    m.d.sync += [reply.eq(reply >> 8), count.eq(count - 1)]
                    with m.If(count == 1):
                        m.next = "IDLE"
        # a byte while executing or replying: the host broke the protocol; dropped and flagged
        with m.If(rx.o.valid & ~fsm.ongoing("IDLE") & ~fsm.ongoing("RECV")):
            m.d.sync += error.eq(1)
        return m


class BoardTop(wiring.Component):
    """:class:`UARTBridge` + :class:`~specmem.rtl.csr_top.AnnihilationCSRTop` (d, k, preset) with
    ``divisor`` clock cycles per UART bit. Ports: ``uart_rx``, ``uart_tx``, ``leds`` (8; the module
    doc says what each shows). The plain top the simulation and the board build share."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, divisor: int):
        self.core_top = AnnihilationCSRTop(d, k, preset)
        self.d, self.k, self.preset = d, k, preset
        sig = self.core_top.signature.members
        self.bridge = UARTBridge(divisor, Shape.cast(sig["s_axis_tdata"].shape).width,
                                 Shape.cast(sig["m_axis_tdata"].shape).width,
                                 self.core_top.regmap.addr_width)
        self.divisor = divisor
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1), "leds": Out(8)})

    def manifest(self) -> dict:
        """The top's manifest (parameters, formats, stream packing, registers) and the bridge's."""
        b = self.bridge
        return {**self.core_top.manifest(),
                "bridge": {"protocol_version": PROTOCOL_VERSION, "divisor": self.divisor, "nb_in": b.nb_in,
                           "nb_out": b.nb_out, "beats_per_token": self.d // self.k,
                           "opcodes": {"ping": OP_PING, "beat": OP_BEAT, "read": OP_READ,
                                       "csr_read": OP_CSR_READ, "csr_write": OP_CSR_WRITE}}}

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = self.bridge
        m.submodules.core_top = top = self.core_top
        m.d.comb += [bridge.uart_rx.eq(self.uart_rx), self.uart_tx.eq(bridge.uart_tx)]
        for name, member in top.signature.members.items():
            if member.flow == wiring.In:
                m.d.comb += getattr(top, name).eq(getattr(bridge, name))
            else:
                m.d.comb += getattr(bridge, name).eq(getattr(top, name))
        heartbeat = Signal(24)
        m.d.sync += heartbeat.eq(heartbeat + 1)
        inner = top.top
        m.d.comb += self.leds.eq(Cat(inner.status_busy, inner.status_orth_flag, inner.status_saturations != 0,
                                     bridge.error, Const(0, 3), heartbeat[-1]))
        return m
