"""The tops with their control and status registers: the top's AXI4-Stream ports, and an
AXI4-Lite slave (``s_axil_*``, ``rtl/csr.py``) in place of the bare status ports.

:class:`RuleCSRTop` does it for VLA, linear attention, DeltaNet and Gated DeltaNet
(``VLATop``/``BaselineTop``; ``orth_inputs`` reads 0, VLA's ``refreshes`` is an extra counter);
:class:`AnnihilationCSRTop` for the annihilation. For the annihilation the preset
picks the top: ``AnnihilationTop`` (core v1) for the legacy presets, ``AnnihilationTopV2`` (core
v2, with ``heads``, ``chains``, ``dsp``, ``bram``) for ``int18``/``int16``/``int8``;
``PARAMS_CORE`` carries the format and the heads.

``CTRL.soft_reset`` resets the top (core and framing counter) through a ``ResetInserter`` for the
one cycle of its pulse; ``CTRL.clear_counters`` is handled inside the register block. The map is
:func:`~specmem.rtl.csr.core_register_map` for ``annihilation`` (``docs/registers.md`` at d = 64,
k = 8). ``orth_inputs`` is the core's ``orth_count``.
"""

from __future__ import annotations

from amaranth.hdl import Module, ResetInserter
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .csr import CSRBlock, core_register_map
from .top import AnnihilationTop, AnnihilationTopV2

__all__ = ["AnnihilationCSRTop", "RuleCSRTop", "CSR_RULES"]

#: the rules :class:`RuleCSRTop` wraps (the annihilation has :class:`AnnihilationCSRTop`)
CSR_RULES = ("vla", "linear", "deltanet", "gated-deltanet")

_AXIS = ("s_axis_tdata", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
         "m_axis_tdata", "m_axis_tvalid", "m_axis_tready", "m_axis_tlast")


class AnnihilationCSRTop(wiring.Component):
    """:class:`~specmem.rtl.top.AnnihilationTop` (legacy presets) or
    :class:`~specmem.rtl.top.AnnihilationTopV2` (``int18``/``int16``/``int8``) +
    :class:`~specmem.rtl.csr.CSRBlock`. ``in_range`` is core v1's; ``heads``, ``chains``, ``dsp``,
    ``bram``, ``norm_lanes`` are core v2's (an option the chosen core does not take is an error, not ignored)."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, in_range: float | None = None,
                 addr_width: int = 8, heads: int = 1, chains: int = 1, dsp: str | None = None,
                 bram: str | None = None, norm_lanes: int | None = None):
        from .generate import annihilation_core_for

        self.core_version = annihilation_core_for(preset)
        if self.core_version == "v2":
            if in_range is not None:
                raise ValueError("in_range: core v2 takes the preset's input range (its x format), not in_range")
            self.top = AnnihilationTopV2(d, k, preset, dsp=dsp or "registered", bram=bram or "behavioural",
                                         heads=heads, chains=chains, norm_lanes=norm_lanes)
        else:
            extra = [n for n, v, dv in (("heads", heads, 1), ("chains", chains, 1), ("dsp", dsp, None),
                                        ("bram", bram, None), ("norm_lanes", norm_lanes, None)) if v != dv]
            if extra:
                raise ValueError(f"{', '.join(extra)}: only the annihilation core v2 (int18/int16/int8) takes "
                                 f"{'it' if len(extra) == 1 else 'them'}, not core v1 ({preset!r})")
            self.top = AnnihilationTop(d, k, preset, in_range=in_range)
        self.regmap = core_register_map("annihilation", d, k, preset, addr_width=addr_width, heads=heads)
        self.csr = CSRBlock(self.regmap)
        super().__init__(_signature(self.top, self.csr, _AXIS))

    def manifest(self) -> dict:
        return {**self.top.manifest(), "registers": self.regmap.to_dict()}

    def elaborate(self, platform):
        m = _wire(self, _AXIS)
        csr, top = self.csr, self.top
        m.d.comb += [
            csr.counter_tokens.eq(top.status_tokens),
            csr.counter_saturations.eq(top.status_saturations),
            csr.counter_orth_inputs.eq(top.status_orth_count),
            csr.counter_framing_errors.eq(top.status_framing_errors),
            csr.status_busy.eq(top.status_busy),
            csr.status_orth_flag.eq(top.status_orth_flag),
            csr.status_count.eq(top.status_count),
        ]
        return m


def _signature(top, csr, stream_ports):
    """The wrapper's ports: the top's stream ports and the block's ``s_axil_*``, same directions."""
    sig = {}
    for name in stream_ports:
        member = top.signature.members[name]
        sig[name] = (In if member.flow == wiring.In else Out)(member.shape)
    for name, member in csr.signature.members.items():
        if name.startswith("s_axil_"):
            sig[name] = (In if member.flow == wiring.In else Out)(member.shape)
    return sig


def _wire(self, stream_ports):
    """A module with the register block and the top (reset by ``CTRL.soft_reset``), both wired to
    the wrapper's ports."""
    m = Module()
    csr, top = self.csr, self.top
    m.submodules.csr = csr
    m.submodules.top = ResetInserter(csr.ctrl_soft_reset)(top)
    for name in stream_ports:
        if self.signature.members[name].flow == wiring.In:
            m.d.comb += getattr(top, name).eq(getattr(self, name))
        else:
            m.d.comb += getattr(self, name).eq(getattr(top, name))
    for name, member in csr.signature.members.items():
        if name.startswith("s_axil_"):
            if member.flow == wiring.In:
                m.d.comb += getattr(csr, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(csr, name))
    return m


class RuleCSRTop(wiring.Component):
    """:class:`~specmem.rtl.top.VLATop` (``algo="vla"``) or :class:`~specmem.rtl.top.BaselineTop`
    (linear attention, DeltaNet, Gated DeltaNet) + :class:`~specmem.rtl.csr.CSRBlock`: the top's
    stream ports (VLA's ``m_axis_tuser`` included) and ``s_axil_*``. Counters: ``tokens``,
    ``saturations``, ``orth_inputs`` (always 0: these rules have no orthogonal-input case),
    ``framing_errors``, and VLA's ``refreshes``; STATUS: ``busy``. ``params`` go to the top."""

    def __init__(self, algo: str, d: int, k: int, preset: str = "legacy-int8", *, addr_width: int = 8, **params):
        if algo not in CSR_RULES:
            raise ValueError(f"algo: one of {', '.join(CSR_RULES)} (the annihilation's is AnnihilationCSRTop), "
                             f"got {algo!r}")
        from .top import BaselineTop, VLATop

        # the map first: it names a preset the RTL of these rules does not implement
        self.regmap = core_register_map(algo, d, k, preset, addr_width=addr_width)
        self.algo = algo
        self.top = VLATop(d, k, preset, **params) if algo == "vla" else BaselineTop(algo, d, k, preset, **params)
        self.csr = CSRBlock(self.regmap)
        self.stream_ports = tuple(n for n in self.top.signature.members if not n.startswith("status_"))
        super().__init__(_signature(self.top, self.csr, self.stream_ports))

    def manifest(self) -> dict:
        return {**self.top.manifest(), "registers": self.regmap.to_dict()}

    def elaborate(self, platform):
        m = _wire(self, self.stream_ports)
        csr, top = self.csr, self.top
        m.d.comb += [
            csr.counter_tokens.eq(top.status_tokens),
            csr.counter_saturations.eq(top.status_saturations),
            csr.counter_orth_inputs.eq(0),
            csr.counter_framing_errors.eq(top.status_framing_errors),
            csr.status_busy.eq(top.status_busy),
        ]
        if self.algo == "vla":
            m.d.comb += csr.counter_refreshes.eq(top.status_refreshes)
        return m
