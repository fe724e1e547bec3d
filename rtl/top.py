"""Top level of the annihilation memory: AXI4-Stream in and out, status counters.

Ports of the generated Verilog (``clk``, synchronous active-high ``rst``):

* ``s_axis_tdata`` (``k * x.width``), ``s_axis_tvalid``, ``s_axis_tready``, ``s_axis_tlast``:
  input tokens, ``d/k`` beats each; element ``i`` of a token is lane ``i % k`` of beat ``i // k``,
  lane ``l`` at bits ``[l*w, (l+1)*w)``, two's complement, the ``x`` format of the preset.
  ``tlast`` is expected on the last beat of each token; a mismatch is counted in
  ``status_framing_errors`` (the core frames tokens by beat count, not by ``tlast``).
* ``m_axis_tdata`` (``k * y.width``), ``m_axis_tvalid``, ``m_axis_tready``, ``m_axis_tlast``: one
  output token ``y`` per input token, same packing, ``tlast`` on its last beat.
* ``status_tokens``, ``status_saturations``, ``status_orth_count``, ``status_framing_errors``
  (32-bit counters), ``status_orth_flag`` (sticky), ``status_count`` (stored directions),
  ``status_busy``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .annihilation import AnnihilationCore
from .generate import stream_packing

__all__ = ["AnnihilationTop"]


class AnnihilationTop(wiring.Component):
    """AXI4-Stream wrapper around :class:`~specmem.rtl.annihilation.AnnihilationCore`."""

    def __init__(self, d: int, k: int, preset: str = "int8", *, in_range: float | None = None):
        self.core = AnnihilationCore(d, k, preset, in_range=in_range)
        self.d, self.k, self.preset, self.in_range = d, k, preset, in_range
        xw = self.core.fmt["x"].width
        yw = self.core.fmt["y"].width
        super().__init__({
            "s_axis_tdata": In(k * xw),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "s_axis_tlast": In(1),
            "m_axis_tdata": Out(k * yw),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
            "m_axis_tlast": Out(1),
            "status_tokens": Out(32),
            "status_saturations": Out(32),
            "status_orth_count": Out(32),
            "status_framing_errors": Out(32),
            "status_orth_flag": Out(1),
            "status_count": Out(range(k + 1)),
            "status_busy": Out(1),
        })

    def manifest(self) -> dict:
        """Parameters, formats, packing and timing for ``rtl/generate.py``'s JSON manifest."""
        c = self.core
        F = c.fmt
        return {
            "parameters": {"d": self.d, "k": self.k, "preset": self.preset,
                           "in_range": c.fmt.preset.in_range if self.in_range is None else self.in_range,
                           "orthogonal_input_policy": "skip and flag"},
            "formats": F.to_dict(),
            "streams": {
                "s_axis": stream_packing(self.d, self.k, F["x"], "x"),
                "m_axis": stream_packing(self.d, self.k, F["y"], "y"),
            },
            "status": {
                "status_tokens": "tokens processed since reset (32-bit, wraps)",
                "status_saturations": "saturated elements since reset, every narrowing of the "
                                      "fixed-point model except the host-side input quantisation",
                "status_orth_count": "orthogonal inputs (a = 0 or n^2 = 0) skipped since reset",
                "status_orth_flag": "sticky: an orthogonal input was seen since reset",
                "status_framing_errors": "input beats whose tlast disagreed with the d/k beat count",
                "status_count": "stored directions (k once warm-up is over)",
                "status_busy": "the sequencer is not idle",
            },
            "engines": {"e1": {"latency": c.e1.latency, "acc_width": c.e1.acc_width},
                        "e2": {"latency": c.e2.latency, "lane_width": c.e2.lane_width},
                        "scalar_unit": {"latency": {op.name.lower(): v for op, v in c.su.latency.items()},
                                        **c.su_config.to_json()}},
            "reset": "synchronous; after reset the core zeroes U (d cycles) before the first token",
            "cycles_per_token": {
                "full_steady_state": c.cycles_full,
                "budget": c.cycle_budget(),
                "floor_d": self.d,
                "two_pass_floor_2d": 2 * self.d,
                "warm_up_or_zero": self.d + 8,
                "note": "full token with the next token already buffered (its A pass fused into this "
                        "token's row pass), output drained; orthogonal tokens run a G pass and a row pass",
            },
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        k = self.k
        beats = self.d // k
        m.d.comb += [
            core.x_in.payload.as_value().eq(self.s_axis_tdata),
            core.x_in.valid.eq(self.s_axis_tvalid),
            self.s_axis_tready.eq(core.x_in.ready),
            self.m_axis_tdata.eq(core.y_out.payload.y.as_value()),
            self.m_axis_tlast.eq(core.y_out.payload.last),
            self.m_axis_tvalid.eq(core.y_out.valid),
            core.y_out.ready.eq(self.m_axis_tready),
            self.status_tokens.eq(core.tokens),
            self.status_saturations.eq(core.saturations),
            self.status_orth_count.eq(core.orth_count),
            self.status_orth_flag.eq(core.orth_flag),
            self.status_count.eq(core.count),
            self.status_busy.eq(core.busy),
        ]
        # framing check: tlast must sit on beat d/k - 1 of every token
        beat = Signal(range(beats))
        errors = Signal(32)
        m.d.comb += self.status_framing_errors.eq(errors)
        with m.If(self.s_axis_tvalid & core.x_in.ready):
            m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
            with m.If(self.s_axis_tlast != (beat == beats - 1)):
                m.d.sync += errors.eq(errors + 1)
        return m
