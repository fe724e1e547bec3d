"""Block RAM read through its output register: an ECP5 ``DP16KD`` with ``REGMODE_B = "OUTREG"``,
or the same behaviour as portable Amaranth (``lib.memory`` plus a register).

Timing discipline (``../shared/spec/hardware.md``): a block RAM read without its output register
puts the RAM's clock-to-out (~4–5 ns on ECP5) in front of whatever logic follows; with it, the
read costs one more cycle and the path after it starts at a flip-flop.

Ports: one write port (``wr_addr``, ``wr_data``, ``wr_en``) and one read port. A read is two
register stages, each with its own enable, as in the primitive:

* cycle ``t``, ``rd_en`` high: the address is taken (``CEB``); the array word is latched at the
  end of ``t``;
* the first later cycle with ``rd_oce`` high (``OCEB``): the latch moves to ``rd_data`` at its end.

With ``rd_en = rd_oce = 1`` every cycle, ``rd_data`` in cycle ``t + 2`` is the word at the address
given in cycle ``t``. A read and a write of the same address in the same cycle is a collision the
primitive does not define: the cores never issue one, the behavioural style returns the old word,
and the ``DP16KD`` simulation model (``rtl/vendor/DP16KD.v``) stops the simulation.

Words wider than 18 bits use several ``DP16KD`` side by side; ``depth`` <= 1024 (one primitive in
its 18-bit mode). Neither the contents nor the two read registers are reset (the primitive's
``RSTB`` is tied low); the behavioural style takes ``init`` for tests only.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisteredRAM", "BRAM_STYLES", "DP16KD_WIDTH", "DP16KD_DEPTH", "BRAM_READ_LATENCY"]

BRAM_STYLES = ("behavioural", "ecp5")
#: one DP16KD in its 18-bit mode: 1024 words of 18 bits
DP16KD_WIDTH, DP16KD_DEPTH = 18, 1024
#: cycles from an address (with both enables high) to its word on ``rd_data``
BRAM_READ_LATENCY = 2


class RegisteredRAM(wiring.Component):
    """``depth`` words of ``width`` bits, one write and one registered read port (see module doc).

    Members: ``wr_addr: In(aw)``, ``wr_data: In(width)``, ``wr_en: In(1)``, ``rd_addr: In(aw)``,
    ``rd_en: In(1)``, ``rd_oce: In(1)``, ``rd_data: Out(width)`` with ``aw = ceil(log2(depth))``.
    """

    def __init__(self, depth: int, width: int, style: str = "behavioural", *, init=None):
        for name, v, lo in (("depth", depth, 2), ("width", width, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name}: must be an integer >= {lo}, got {v!r}")
        if style not in BRAM_STYLES:
            raise ValueError(f"style: must be one of {', '.join(BRAM_STYLES)}, got {style!r}")
        if style == "ecp5" and depth > DP16KD_DEPTH:
            raise ValueError(f"depth: one DP16KD column holds {DP16KD_DEPTH} words of 18 bits, got {depth}")
        if init is not None and style != "behavioural":
            raise ValueError("init: only the behavioural style takes initial contents (tests); the cores clear "
                             "their RAM after reset")
        self.depth, self.width, self.style = depth, width, style
        self.init = list(init) if init is not None else None
        if self.init is not None and (len(self.init) != depth or
                                      any(not 0 <= int(x) < (1 << width) for x in self.init)):
            raise ValueError(f"init: must be {depth} unsigned {width}-bit words")
        self.addr_width = max(1, (depth - 1).bit_length())
        self.latency = BRAM_READ_LATENCY
        super().__init__({
            "wr_addr": In(self.addr_width), "wr_data": In(width), "wr_en": In(1),
            "rd_addr": In(self.addr_width), "rd_en": In(1), "rd_oce": In(1),
            "rd_data": Out(width),
        })

    @property
    def primitives(self) -> int:
        """``DP16KD`` instances of the ``ecp5`` style (0 for the behavioural one)."""
        return -(-self.width // DP16KD_WIDTH) if self.style == "ecp5" else 0

    def elaborate(self, platform):
        m = Module()
        if self.style == "behavioural":
            mem = memory.Memory(shape=unsigned(self.width), depth=self.depth, init=self.init or [])
            m.submodules.mem = mem
            wr = mem.write_port()
            rd = mem.read_port(domain="sync")   # not transparent: a same-cycle write is not seen
            m.d.comb += [wr.addr.eq(self.wr_addr), wr.data.eq(self.wr_data), wr.en.eq(self.wr_en),
                         rd.addr.eq(self.rd_addr), rd.en.eq(self.rd_en)]
            out = Signal(self.width, reset_less=True)   # like the primitive's: RSTB is tied low
            with m.If(self.rd_oce):
                m.d.sync += out.eq(rd.data)
            m.d.comb += self.rd_data.eq(out)
            return m
        for i in range(self.primitives):
            lo = i * DP16KD_WIDTH
            n = min(DP16KD_WIDTH, self.width - lo)
            di = Signal(DP16KD_WIDTH, name=f"di{i}")
            do = Signal(DP16KD_WIDTH, name=f"do{i}")
            m.d.comb += [di.eq(self.wr_data[lo:lo + n]), self.rd_data[lo:lo + n].eq(do[:n])]
            # 18-bit mode: AD[13:4] is the word address, AD[1:0] the two byte-write enables.
            ada = Signal(14, name=f"ada{i}")
            adb = Signal(14, name=f"adb{i}")
            m.d.comb += [ada.eq((self.wr_addr << 4) | 0b11), adb.eq(self.rd_addr << 4)]
            ports = {f"i_DIA{b}": di[b] for b in range(18)}
            ports.update({f"i_ADA{b}": ada[b] for b in range(14)})
            ports.update({f"i_ADB{b}": adb[b] for b in range(14)})
            ports.update({f"i_DIB{b}": Const(0, 1) for b in range(18)})
            ports.update({f"o_DOB{b}": do[b] for b in range(18)})
            m.submodules[f"ram{i}"] = Instance(
                "DP16KD",
                p_DATA_WIDTH_A=18, p_DATA_WIDTH_B=18, p_REGMODE_A="NOREG", p_REGMODE_B="OUTREG",
                p_WRITEMODE_A="NORMAL", p_WRITEMODE_B="NORMAL", p_RESETMODE="SYNC",
                p_ASYNC_RESET_RELEASE="SYNC", p_CSDECODE_A="0b000", p_CSDECODE_B="0b000", p_GSR="DISABLED",
                i_CLKA=ClockSignal(), i_CEA=Const(1, 1), i_OCEA=Const(0, 1), i_WEA=self.wr_en, i_RSTA=Const(0, 1),
                i_CSA0=Const(0, 1), i_CSA1=Const(0, 1), i_CSA2=Const(0, 1),
                i_CLKB=ClockSignal(), i_CEB=self.rd_en, i_OCEB=self.rd_oce, i_WEB=Const(0, 1), i_RSTB=Const(0, 1),
                i_CSB0=Const(0, 1), i_CSB1=Const(0, 1), i_CSB2=Const(0, 1),
                **ports)
        return m


class RegisteredRAMPair(wiring.Component):
    """Both styles side by side on the same inputs (``rd_data_behavioural``, ``rd_data_ecp5``):
    the design the agreement test simulates in Verilator with ``rtl/vendor/DP16KD.v``."""

    def __init__(self, depth: int, width: int):
        self.depth, self.width = depth, width
        self.ram = {s: RegisteredRAM(depth, width, s) for s in BRAM_STYLES}
        aw = self.ram["ecp5"].addr_width
        super().__init__({
            "wr_addr": In(aw), "wr_data": In(width), "wr_en": In(1),
            "rd_addr": In(aw), "rd_en": In(1), "rd_oce": In(1),
            **{f"rd_data_{s}": Out(width) for s in BRAM_STYLES},
        })

    def manifest(self) -> dict:
        return {"parameters": {"depth": self.depth, "width": self.width, "read_latency": BRAM_READ_LATENCY,
                               "primitives": self.ram["ecp5"].primitives},
                "sim_models": ["DP16KD"]}

    def elaborate(self, platform):
        m = Module()
        for s, ram in self.ram.items():
            m.submodules[s] = ram
            for name in ("wr_addr", "wr_data", "wr_en", "rd_addr", "rd_en", "rd_oce"):
                m.d.comb += getattr(ram, name).eq(getattr(self, name))
            m.d.comb += getattr(self, f"rd_data_{s}").eq(ram.rd_data)
        return m
