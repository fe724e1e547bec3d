"""Control and status registers: one register description, and the AXI4-Lite register block it
elaborates into.

The description (:class:`RegisterMap` of :class:`Register` of :class:`Field`, built for a core by
:func:`core_register_map`) is the single source of truth. This module turns it into the Amaranth
block :class:`CSRBlock`; ``host/regs.py`` (``specmem regs``) turns the same object into a C
header, a Markdown register map (``docs/registers.md``), SystemRDL text and IP-XACT XML.

Layout (32-bit registers, byte addresses, one 256-byte window by default)::

    0x00 ID          magic                    constant 0x534D454D ("SMEM")
    0x04 VERSION     minor[15:0] major[31:16] register-map version (constant)
    0x08 PARAMS_DK   d[15:0] k[31:16]         build parameters (constant)
    0x0C PARAMS_CORE core[7:0] format[15:8] heads[23:16] counters[31:24]   (constant)
    0x10 CTRL        soft_reset[0] clear_counters[1]     write 1: one-cycle pulse; read 0
    0x14 CONFIG      orth_policy[0]           read/write; only where the policy is a run-time choice
    0x18 SCRATCH     value[31:0]              read/write, no effect (bus checks)
    0x20 STATUS      the core's status bits (busy, orth_flag, count, ...), read-only
    0x40 + 4 i       counter i: TOKENS, SATURATIONS, ORTH_INPUTS, then the core's extras

Field kinds (``Field.access``): ``const`` (read-only constant), ``status`` (read-only, from an
input port), ``counter`` (read-only 32-bit, from an input port, minus the value latched by
``CTRL.clear_counters``), ``rw`` (storage driving an output port), ``pulse`` (write 1: the output
port is high for the one cycle after the write; reads 0).

Bus behaviour of :class:`CSRBlock` (``s_axil_*`` ports, AXI4-Lite, 32-bit data, synchronous to
``clk``/``rst``):

* write: ``AW`` and ``W`` are independent channels, accepted in either order or together; each
  is held until the other arrives, then the write is applied (byte strobes honoured per field)
  and ``B`` is raised. One write is outstanding at a time: ``awready``/``wready`` stay low from
  the channel's handshake until the ``B`` handshake. ``awready``, ``wready``, ``bvalid``,
  ``arready``, ``rvalid`` are registered state (no combinational path from a valid to a ready).
* read: one outstanding; ``rdata``/``rresp`` are registered on the ``AR`` handshake and held
  until ``rready``. Reads have no side effects (counters are not clear-on-read).
* addresses: the word ``addr[aw-1:2]`` is decoded, ``addr[1:0]`` ignored. An address that maps
  no register answers ``SLVERR`` (``0b10``) in either direction: a read returns ``rdata = 0``, a
  write changes nothing. A write to a read-only register answers ``OKAY`` and changes nothing
  (SystemRDL's ``sw = r``).
* counters: ``CTRL.clear_counters`` latches every counter input as its base; a counter register
  reads ``input - base`` (mod 2^32), so the block clears counters of any core without the core's
  help. ``CTRL.soft_reset`` is meant to reset the core (its counters restart at 0): it zeroes the
  bases on the same edge. Neither pulse changes CONFIG or SCRATCH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Field", "Register", "RegisterMap", "CSRBlock", "core_register_map", "register_map",
           "MAGIC", "MAP_VERSION", "CORE_CODES", "FORMAT_CODES", "ORTH_POLICY_CODES",
           "RESP_OKAY", "RESP_SLVERR", "BASE_COUNTERS"]

#: ``ID.magic``: ASCII "SMEM"
MAGIC = 0x534D454D
#: register-map version (major, minor): a new register is a minor step, a moved one a major step
MAP_VERSION = (1, 1)
#: ``PARAMS_CORE.core``
CORE_CODES = {"annihilation": 1, "vla": 2, "linear": 3, "deltanet": 4, "gated-deltanet": 5}
#: ``PARAMS_CORE.format``: the presets the RTL implements (``rtl/presets.py``; ``int18``/``int16``/``int8``:
#: the annihilation core v2's, ``rtl/generate.py: V2_PRESETS``)
FORMAT_CODES = {"legacy-int8": 1, "legacy-int16": 2, "legacy-wide": 3, "int18": 4, "int16": 5, "int8": 6}
#: ``CONFIG.orth_policy`` (``golden/annihilation.py``'s policies)
ORTH_POLICY_CODES = {"skip": 0, "evict": 1}
RESP_OKAY, RESP_SLVERR = 0b00, 0b10
ACCESS = ("const", "status", "counter", "rw", "pulse")
#: counters every core's block has (a core without orthogonal inputs ties ``counter_orth_inputs`` to 0)
BASE_COUNTERS = (
    ("tokens", "tokens processed since reset or the last clear (wraps at 2^32)"),
    ("saturations", "saturated elements since reset or the last clear: every narrowing of the fixed-point model"),
    ("orth_inputs", "orthogonal inputs (a = 0 or n^2 = 0) since reset or the last clear; 0 for cores without them"),
)
COUNTER_BASE = 0x40
STATUS_OFFSET = 0x20
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Field:
    """Bits ``[lsb, lsb + width)`` of a register. ``port``: the block's port for ``status``,
    ``counter`` (inputs), ``rw`` and ``pulse`` (outputs) fields; None for constants and for
    storage that drives nothing. ``enum``: ``((name, value), ...)`` for coded fields."""

    name: str
    lsb: int
    width: int
    access: str
    reset: int = 0
    desc: str = ""
    port: str | None = None
    enum: tuple = ()

    def __post_init__(self):
        if not _NAME.match(self.name):
            raise ValueError(f"field name: lower-case identifier expected, got {self.name!r}")
        if self.access not in ACCESS:
            raise ValueError(f"field {self.name}: access must be one of {ACCESS}, got {self.access!r}")
        if self.width < 1 or self.lsb < 0 or self.lsb + self.width > 32:
            raise ValueError(f"field {self.name}: bits [{self.lsb}, {self.lsb + self.width}) outside a 32-bit register")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"field {self.name}: reset {self.reset} does not fit {self.width} bits")
        if self.access == "pulse" and self.width != 1:
            raise ValueError(f"field {self.name}: a pulse field is one bit wide")
        if self.access in ("status", "counter", "pulse") and self.port is None:
            raise ValueError(f"field {self.name}: a {self.access} field needs a port")

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    @property
    def readable(self) -> bool:
        return self.access != "pulse"

    @property
    def writable(self) -> bool:
        return self.access in ("rw", "pulse")

    @property
    def volatile(self) -> bool:
        """The hardware changes what a read returns (status and counters)."""
        return self.access in ("status", "counter")

    @property
    def reset_value(self) -> int:
        """What a read returns after reset (status and counter inputs are 0 after the core's reset)."""
        return self.reset if self.access in ("const", "rw") else 0


@dataclass(frozen=True)
class Register:
    """One 32-bit register at byte ``offset`` (a multiple of 4)."""

    name: str
    offset: int
    desc: str
    fields: tuple

    def __post_init__(self):
        if not re.match(r"^[A-Z][A-Z0-9_]*$", self.name):
            raise ValueError(f"register name: upper-case identifier expected, got {self.name!r}")
        if self.offset % 4 or self.offset < 0:
            raise ValueError(f"register {self.name}: offset {self.offset:#x} is not a multiple of 4")
        used = 0
        for f in self.fields:
            if used & f.mask:
                raise ValueError(f"register {self.name}: field {f.name} overlaps another field")
            used |= f.mask

    @property
    def reset(self) -> int:
        v = 0
        for f in self.fields:
            v |= f.reset_value << f.lsb
        return v

    @property
    def writable(self) -> bool:
        return any(f.writable for f in self.fields)

    @property
    def access(self) -> str:
        """``RO``, ``RW``, ``WO`` (pulses only) for the register as a whole."""
        r = any(f.readable for f in self.fields)
        w = self.writable
        return "RW" if (r and w and any(f.access == "rw" for f in self.fields)) else ("WO" if w else "RO")

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")


@dataclass(frozen=True)
class RegisterMap:
    """Registers of one block; ``addr_width``: bits of the byte address the block decodes."""

    name: str
    desc: str
    registers: tuple
    addr_width: int = 8
    params: dict = field(default_factory=dict, compare=False)

    def __post_init__(self):
        if not 3 <= self.addr_width <= 32:
            raise ValueError(f"addr_width: must be in 3..32, got {self.addr_width}")
        offsets, ports, names = set(), set(), set()
        for r in self.registers:
            if r.offset + 4 > (1 << self.addr_width):
                raise ValueError(f"register {r.name}: offset {r.offset:#x} outside the "
                                 f"{1 << self.addr_width}-byte window (addr_width {self.addr_width})")
            if r.offset in offsets or r.name in names:
                raise ValueError(f"register {r.name}: offset {r.offset:#x} or name used twice")
            offsets.add(r.offset)
            names.add(r.name)
            for f in r.fields:
                if f.port is not None:
                    if f.port in ports:
                        raise ValueError(f"port {f.port}: used by two fields")
                    ports.add(f.port)

    def __getitem__(self, name: str) -> Register:
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"no register {name!r}")

    def __contains__(self, name: str) -> bool:
        return any(r.name == name for r in self.registers)

    @property
    def counters(self) -> list[tuple[Register, Field]]:
        return [(r, f) for r in self.registers for f in r.fields if f.access == "counter"]

    @property
    def size(self) -> int:
        return 1 << self.addr_width

    def to_dict(self) -> dict:
        """The map as JSON-able data (testbench cases, manifests)."""
        return {"name": self.name, "desc": self.desc, "addr_width": self.addr_width, "params": dict(self.params),
                "registers": [{"name": r.name, "offset": r.offset, "desc": r.desc, "reset": r.reset,
                               "fields": [{"name": f.name, "lsb": f.lsb, "width": f.width, "access": f.access,
                                           "reset": f.reset_value, "port": f.port, "enum": [list(e) for e in f.enum]}
                                          for f in r.fields]} for r in self.registers]}


def _check_int(name: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{name}: must be an integer in {lo}..{hi}, got {v!r}")
    return v


def register_map(core: str, d: int, k: int, fmt: str, *, heads: int = 1, status=(), extra_counters=(),
                 orth_policies=(), addr_width: int = 8, name: str = "specmem_csr") -> RegisterMap:
    """The register map of one core's block.

    ``status``: ``((name, width, desc), ...)``, the core's status bits, packed from bit 0 of
    STATUS (input ports ``status_<name>``). ``extra_counters``: ``((name, desc), ...)`` after
    :data:`BASE_COUNTERS` (input ports ``counter_<name>``, 32 bits). ``orth_policies``: the
    policies the core can switch between at run time, default first (CONFIG is present only with
    two or more; output port ``config_orth_policy``)."""
    if core not in CORE_CODES:
        raise ValueError(f"core: one of {', '.join(CORE_CODES)}, got {core!r}")
    if fmt not in FORMAT_CODES:
        raise ValueError(f"format: one of {', '.join(FORMAT_CODES)}, got {fmt!r}")
    _check_int("d", d, 1, 0xFFFF)
    _check_int("k", k, 1, 0xFFFF)
    _check_int("heads", heads, 1, 0xFF)
    counters = list(BASE_COUNTERS) + [tuple(c) for c in extra_counters]
    seen = set()
    for n, _ in counters:
        if n in seen:
            raise ValueError(f"counter {n}: named twice (the base counters are {[c[0] for c in BASE_COUNTERS]})")
        seen.add(n)
    mj, mn = MAP_VERSION
    regs = [
        Register("ID", 0x00, "identification: reads the magic word \"SMEM\"",
                 (Field("magic", 0, 32, "const", MAGIC, "0x534D454D, ASCII \"SMEM\""),)),
        Register("VERSION", 0x04, "register-map version",
                 (Field("minor", 0, 16, "const", mn, "minor version: registers added"),
                  Field("major", 16, 16, "const", mj, "major version: registers moved or changed"))),
        Register("PARAMS_DK", 0x08, "build parameters: vector dimension and memory columns / lanes",
                 (Field("d", 0, 16, "const", d, "vector dimension d"),
                  Field("k", 16, 16, "const", k, "memory columns (annihilation) or dot-product lanes (the others)"))),
        Register("PARAMS_CORE", 0x0C, "build parameters: which core, number format, heads, counters",
                 (Field("core", 0, 8, "const", CORE_CODES[core], "update rule of the core",
                        enum=tuple(CORE_CODES.items())),
                  Field("format", 8, 8, "const", FORMAT_CODES[fmt], "fixed-point preset",
                        enum=tuple(FORMAT_CODES.items())),
                  Field("heads", 16, 8, "const", heads, "heads (independent streams) on the datapath"),
                  Field("counters", 24, 8, "const", len(counters), f"counter registers from {COUNTER_BASE:#04x}"))),
        Register("CTRL", 0x10, "control pulses: write 1 to a bit for a one-cycle pulse; reads 0",
                 (Field("soft_reset", 0, 1, "pulse", 0, "reset the core (its state and counters); "
                        "the register block keeps CONFIG and SCRATCH", port="ctrl_soft_reset"),
                  Field("clear_counters", 1, 1, "pulse", 0, "clear every counter register (the block latches "
                        "the counter inputs as their zero)", port="ctrl_clear_counters"))),
    ]
    if len(orth_policies) >= 2:
        for p in orth_policies:
            if p not in ORTH_POLICY_CODES:
                raise ValueError(f"orth_policies: each one of {', '.join(ORTH_POLICY_CODES)}, got {p!r}")
        enum = tuple((p, ORTH_POLICY_CODES[p]) for p in orth_policies)
        width = max(1, max(v for _, v in enum).bit_length())
        regs.append(Register("CONFIG", 0x14, "run-time configuration",
                             (Field("orth_policy", 0, width, "rw", ORTH_POLICY_CODES[orth_policies[0]],
                                    "what an orthogonal input does", port="config_orth_policy", enum=enum),)))
    regs.append(Register("SCRATCH", 0x18, "read/write scratch word: no effect on the core (bus checks)",
                         (Field("value", 0, 32, "rw", 0, "any value"),)))
    lsb, fields = 0, []
    for sname, width, desc in status:
        fields.append(Field(sname, lsb, width, "status", 0, desc, port=f"status_{sname}"))
        lsb += width
    if fields:
        regs.append(Register("STATUS", STATUS_OFFSET, "core status (read-only, live)", tuple(fields)))
    for i, (cname, desc) in enumerate(counters):
        regs.append(Register(cname.upper(), COUNTER_BASE + 4 * i, f"counter: {desc}",
                             (Field("count", 0, 32, "counter", 0, desc, port=f"counter_{cname}"),)))
    return RegisterMap(name, f"specmem {core} core (d = {d}, k = {k}, {fmt}): control and status registers",
                       tuple(regs), addr_width,
                       params={"core": core, "d": d, "k": k, "format": fmt, "heads": heads})


def core_register_map(algo: str, d: int, k: int, fmt: str = "legacy-int8", **kw) -> RegisterMap:
    """The register map of one of the project's cores, with the status ports its top exposes
    today (``rtl/top.py``: four 32-bit counters, ``orth_flag``, ``count``, ``busy``; the
    annihilation cores v1 and v2 expose the same ports). ``kw``: :func:`register_map`'s
    (``heads`` for core v2's interleaved memories)."""
    framing = ("framing_errors", "input beats whose tlast disagreed with the token's beat count")
    legacy = [f for f in FORMAT_CODES if f.startswith("legacy-")]
    if algo != "annihilation" and algo in CORE_CODES and fmt in FORMAT_CODES and fmt not in legacy:
        from .presets import scaled_core

        why = (f"the scaled {algo} core in {fmt!r} has no register block yet" if scaled_core(algo, fmt)
               else f"{fmt!r} is the annihilation core v2's")
        raise ValueError(f"format: the {algo} RTL with a register block implements {', '.join(legacy)} ({why})")
    if algo == "annihilation":
        status = (("busy", 1, "the sequencer is not idle"),
                  ("orth_flag", 1, "sticky: an orthogonal input was seen since reset"),
                  ("count", max(1, (k).bit_length()), "stored directions (k once warm-up is over; head 0's with heads)"))
        extras = (framing,)
    elif algo == "vla":
        status = (("busy", 1, "a token is being received, processed, written or sent"),)
        extras = (("refreshes", "+eta I refreshes applied (one per refresh_period tokens)"), framing)
    elif algo in ("linear", "deltanet", "gated-deltanet"):
        status = (("busy", 1, "a token is being received, processed, written or sent"),)
        extras = (framing,)
    else:
        raise ValueError(f"algo: one of {', '.join(CORE_CODES)}, got {algo!r}")
    return register_map(algo, d, k, fmt, status=status, extra_counters=extras, **kw)


class CSRBlock(wiring.Component):
    """AXI4-Lite register block of a :class:`RegisterMap` (bus behaviour: see the module doc).

    Ports: ``s_axil_*`` (AXI4-Lite slave, ``addr_width``-bit addresses, 32-bit data, no
    ``prot``), and one per field with a port: ``status_<name>`` / ``counter_<name>`` inputs,
    ``ctrl_<pulse>`` and ``config_<name>`` outputs."""

    def __init__(self, regmap: RegisterMap):
        self.regmap = regmap
        aw = regmap.addr_width
        sig = {
            "s_axil_awaddr": In(aw), "s_axil_awvalid": In(1), "s_axil_awready": Out(1),
            "s_axil_wdata": In(32), "s_axil_wstrb": In(4), "s_axil_wvalid": In(1), "s_axil_wready": Out(1),
            "s_axil_bresp": Out(2), "s_axil_bvalid": Out(1), "s_axil_bready": In(1),
            "s_axil_araddr": In(aw), "s_axil_arvalid": In(1), "s_axil_arready": Out(1),
            "s_axil_rdata": Out(32), "s_axil_rresp": Out(2), "s_axil_rvalid": Out(1), "s_axil_rready": In(1),
        }
        for r in regmap.registers:
            for f in r.fields:
                if f.port is not None:
                    sig[f.port] = (In if f.volatile else Out)(f.width)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        rm = self.regmap
        aw = rm.addr_width

        # ---- write channels: AW and W held independently until both are in, then B
        aw_full, w_full = Signal(), Signal()
        aw_word = Signal(aw - 2)
        w_data, w_strb = Signal(32), Signal(4)
        bvalid, bresp = Signal(), Signal(2)
        m.d.comb += [
            self.s_axil_awready.eq(~aw_full & ~bvalid),
            self.s_axil_wready.eq(~w_full & ~bvalid),
            self.s_axil_bvalid.eq(bvalid),
            self.s_axil_bresp.eq(bresp),
        ]
        with m.If(self.s_axil_awvalid & self.s_axil_awready):
            m.d.sync += [aw_full.eq(1), aw_word.eq(self.s_axil_awaddr[2:])]
        with m.If(self.s_axil_wvalid & self.s_axil_wready):
            m.d.sync += [w_full.eq(1), w_data.eq(self.s_axil_wdata), w_strb.eq(self.s_axil_wstrb)]
        with m.If(bvalid & self.s_axil_bready):
            m.d.sync += bvalid.eq(0)
        do_write = Signal()
        m.d.comb += do_write.eq(aw_full & w_full & ~bvalid)
        with m.If(do_write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bvalid.eq(1), bresp.eq(RESP_SLVERR)]
            with m.Switch(aw_word):
                for r in rm.registers:
                    with m.Case(r.offset >> 2):
                        m.d.sync += bresp.eq(RESP_OKAY)
        byte_mask = Signal(32)
        m.d.comb += byte_mask.eq(Cat(*(w_strb[i].replicate(8) for i in range(4))))

        # ---- storage, pulses, counter bases
        value = {}  # (register name, field name) -> value read back
        pulses = {}
        for r in rm.registers:
            hit = Signal(name=f"wr_{r.name.lower()}")
            m.d.comb += hit.eq(do_write & (aw_word == (r.offset >> 2)))
            for f in r.fields:
                sl = slice(f.lsb, f.msb + 1)
                if f.access == "const":
                    value[r.name, f.name] = Const(f.reset, f.width)
                elif f.access == "status":
                    value[r.name, f.name] = getattr(self, f.port)
                elif f.access == "rw":
                    store = Signal(f.width, init=f.reset, name=f"{r.name.lower()}_{f.name}")
                    with m.If(hit):
                        m.d.sync += store.eq((store & ~byte_mask[sl]) | (w_data[sl] & byte_mask[sl]))
                    value[r.name, f.name] = store
                    if f.port is not None:
                        m.d.comb += getattr(self, f.port).eq(store)
                elif f.access == "pulse":
                    pulse = Signal(name=f"{r.name.lower()}_{f.name}")
                    m.d.sync += pulse.eq(hit & w_data[f.lsb] & byte_mask[f.lsb])
                    m.d.comb += getattr(self, f.port).eq(pulse)
                    pulses[f.name] = pulse
        soft_reset = pulses.get("soft_reset", Const(0))
        clear = pulses.get("clear_counters", Const(0))
        for r, f in rm.counters:
            src = getattr(self, f.port)
            base = Signal(32, name=f"base_{f.port}")
            with m.If(soft_reset):
                m.d.sync += base.eq(0)
            with m.Elif(clear):
                m.d.sync += base.eq(src)
            value[r.name, f.name] = (src - base)[:32]

        # ---- read channel: one outstanding, registered data
        rvalid, rresp, rdata = Signal(), Signal(2), Signal(32)
        m.d.comb += [
            self.s_axil_arready.eq(~rvalid),
            self.s_axil_rvalid.eq(rvalid),
            self.s_axil_rresp.eq(rresp),
            self.s_axil_rdata.eq(rdata),
        ]
        with m.If(rvalid & self.s_axil_rready):
            m.d.sync += rvalid.eq(0)
        words = {}
        for r in rm.registers:
            words[r.name] = word = Signal(32, name=f"rd_{r.name.lower()}")
            for f in r.fields:
                if f.readable:
                    m.d.comb += word[f.lsb:f.msb + 1].eq(value[r.name, f.name])
        with m.If(self.s_axil_arvalid & ~rvalid):
            m.d.sync += [rvalid.eq(1), rresp.eq(RESP_SLVERR), rdata.eq(0)]
            with m.Switch(self.s_axil_araddr[2:]):
                for r in rm.registers:
                    with m.Case(r.offset >> 2):
                        m.d.sync += [rresp.eq(RESP_OKAY), rdata.eq(words[r.name])]
        return m
