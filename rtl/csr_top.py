"""The annihilation top with its control and status registers: the top's AXI4-Stream ports, and
an AXI4-Lite slave (``s_axil_*``, ``rtl/csr.py``) in place of the bare status ports. The preset
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

__all__ = ["AnnihilationCSRTop"]

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
        sig = {}
        for name in _AXIS:
            member = self.top.signature.members[name]
            sig[name] = (In if member.flow == wiring.In else Out)(member.shape)
        for name, member in self.csr.signature.members.items():
            if name.startswith("s_axil_"):
                sig[name] = (In if member.flow == wiring.In else Out)(member.shape)
        super().__init__(sig)

    def manifest(self) -> dict:
        return {**self.top.manifest(), "registers": self.regmap.to_dict()}

    def elaborate(self, platform):
        m = Module()
        csr, top = self.csr, self.top
        m.submodules.csr = csr
        m.submodules.top = ResetInserter(csr.ctrl_soft_reset)(top)
        for name in _AXIS:
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
