"""Top levels: AXI4-Stream in and out, status counters (the annihilation memory; VLA, see
:class:`VLATop`; linear attention and DeltaNet, see :class:`BaselineTop`).

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
from .skid import SkidBuffer

__all__ = ["AnnihilationTop", "AnnihilationTopV2", "VLATop", "BaselineTop", "V2_MEASURED_CYCLES"]


class AnnihilationTop(wiring.Component):
    """AXI4-Stream wrapper around :class:`~specmem.rtl.annihilation.AnnihilationCore`."""

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", *, in_range: float | None = None):
        self.core = self._make_core(d, k, preset, in_range)
        self.d, self.k, self.preset, self.in_range = d, k, preset, in_range
        self._ports(k)

    def _make_core(self, d, k, preset, in_range):
        return AnnihilationCore(d, k, preset, in_range=in_range)

    def _ports(self, k: int) -> None:
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
            "latency": {
                **c.latency(),
                "note": "cycles from the clock edge accepting a token's last input beat to the edge "
                        "transferring its first output beat, the core idle and the sink ready; 'full' "
                        "includes the standalone A pass (no previous row pass to fuse it into)",
            },
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


#: Cycles per token (per head) of core v2 in the steady state (full tokens back to back, the
#: next token buffered, the sink ready), *measured* in simulation: passes over ``U`` and the token
#: chain, whose length is counted, not derived (``rtl/token_chain.py``). Keys ``(d, k, preset,
#: heads, chain units, the chain's lanes: normalisers, bank, rounding shift)`` (lanes = k: all wide);
#: heads > 1: the H heads' tokens interleaved. Measured after the chain's
#: re-timing (pipelined roundings, multipliers and scalar units: ~125 cycles longer than before),
#: then re-measured with the scalar units' multiplier at the model's operand bound (33-bit
#: operands, 2 x 2 DSP pieces: 12 cycles fewer per rsqrt, 8 per reciprocal) and again with the
#: chain's bank on 1 x 2 pieces (2 cycles fewer per bank step), and with one scalar unit in the
#: chain instead of two (~23-29 cycles more), by ``specmem.synth.measure_cycles_v2`` (Amaranth, Gaussian tokens at full rate);
#: ``tests/sim/test_core_v2.py`` checks the d=16 k=4 one-head entry in Verilator.
V2_MEASURED_CYCLES = {(16, 4, "int18", 1, 1, 4): 265,
                      (64, 8, "int18", 1, 1, 8): 317,
                      (16, 4, "int18", 2, 1, 4): 209,
                      (16, 4, "int18", 3, 2, 4): 104.5,
                      (16, 4, "int18", 3, 1, 4): 209,
                      (64, 8, "int18", 2, 1, 8): 212,
                      (64, 8, "int18", 3, 1, 8): 212,
                      (64, 8, "int18", 3, 2, 8): 106.0,
                      # the default: the chain's lane units (normalisers, bank, rounding shift) on two lanes
                      (16, 4, "int18", 1, 1, 2): 269, (64, 8, "int18", 1, 1, 2): 330,
                      (16, 4, "int18", 2, 1, 2): 213, (16, 4, "int18", 3, 2, 2): 106.5,
                      (16, 4, "int18", 3, 1, 2): 213,
                      (64, 8, "int18", 2, 1, 2): 225, (64, 8, "int18", 3, 1, 2): 225, (64, 8, "int18", 3, 2, 2): 112.5,
                      # one lane
                      (16, 4, "int18", 1, 1, 1): 281, (64, 8, "int18", 1, 1, 1): 403}


class AnnihilationTopV2(AnnihilationTop):
    """AXI4-Stream wrapper around the annihilation core v2
    (:class:`~specmem.rtl.annihilation_v2.AnnihilationCoreV2`: ``int18``, ``int16``, ``int8``,
    the co-accumulated Gram, orthogonal inputs evicted). The same ports as
    :class:`AnnihilationTop` (the module docstring), the same module name in the Verilog; the
    manifest says ``"core": "v2"``. ``dsp``: the row unit's multipliers (``registered`` portable
    registers, ``ecp5`` ``MULT18X18D``); ``bram``: the state RAM (``behavioural`` or ``ecp5``
    ``DP16KD``)."""

    def __init__(self, d: int, k: int, preset: str = "int18", *, dsp: str = "registered",
                 bram: str = "behavioural", heads: int = 1, chains: int = 1, norm_lanes: int | None = None):
        from .annihilation_v2 import AnnihilationCoreV2

        self.core = AnnihilationCoreV2(d, k, preset, dsp=dsp, bram=bram, heads=heads, chains=chains,
                                       norm_lanes=norm_lanes)
        self.d, self.k, self.preset, self.in_range = d, k, preset, None
        self.dsp, self.bram = dsp, bram
        self._ports(k)

    def manifest(self) -> dict:
        c = self.core
        F = c.fmt
        measured = V2_MEASURED_CYCLES.get((self.d, self.k, self.preset, c.heads, len(c.chain_units),
                                           c.chain.norm_lanes))
        return {
            "core": "v2",
            "parameters": {"d": self.d, "k": self.k, "preset": self.preset, "in_range": F.preset.in_range,
                           "orthogonal_input_policy": "evict (round-robin column), count and flag",
                           "gram": "coaccumulate", "dsp": self.dsp, "bram": self.bram,
                           "heads": c.heads, "chains": len(c.chain_units),
                           "norm_lanes": c.chain.norm_lanes,
                           "token_order": "n = t*heads + h: each time step's token of head 0, then head 1, ..."},
            "golden_model": "annihilation_fixed(x, k, preset, gram='coaccumulate', orth_policy='evict')",
            # vendor primitives the simulator needs beside the generated file
            "sim_models": (["MULT18X18D"] if self.dsp == "ecp5" else []) + (["DP16KD"] if self.bram == "ecp5" else []),
            "formats": F.to_dict(),
            "streams": {
                "s_axis": stream_packing(self.d, self.k, F["x"], "x"),
                "m_axis": stream_packing(self.d, self.k, F["y"], "y"),
            },
            "status": {
                "status_tokens": "tokens processed since reset (32-bit, wraps)",
                "status_saturations": "saturated elements since reset of the model's tensors u, u_mul, r, ahat, q, "
                                      "t and y (not the host-side input quantisation)",
                "status_saturation_tensors": ["u", "u_mul", "r", "ahat", "q", "t", "y"],
                "status_orth_count": "orthogonal inputs (a = 0 or n^2 = 0) since reset, each written over the "
                                     "round-robin column (evict)",
                "status_orth_flag": "sticky: an orthogonal input was seen since reset",
                "status_framing_errors": "input beats whose tlast disagreed with the d/k beat count",
                "status_count": "stored directions (k once warm-up is over)",
                "status_busy": "a token is buffered or the sequencer is not idle",
            },
            "blocks": {"row_unit": {"acc_latency": c.rows.acc_latency, "acc_width": c.rows.acc_width,
                                    "dsp": self.dsp},
                       "token_chain": {"scalar_unit": c.chain.su_config.to_json()}},
            "reset": "synchronous; after reset the core zeroes U (d cycles) before the first token",
            "cycles_per_token": {
                "full_steady_state": measured,
                "full_steady_state_source": (
                    "measured in simulation (Amaranth and Verilator), full tokens back to back" if measured else
                    "not measured for this configuration; a full token costs pass_cycles plus the token "
                    "chain (~240 cycles at k = 4..8 since its re-timing), see docs/annihilation.md"),
                "measured": {f"d={d},k={k},{p},heads={h},chains={n},norm_lanes={nl}": v
                             for (d, k, p, h, n, nl), v in V2_MEASURED_CYCLES.items()},
                "pass_cycles": c.pass_cycles(),
                "pass_cycles_note": "the row issue of one pass over U, from the design "
                                    "(AnnihilationCoreV2.pass_cycles(): dispatch, d rows, the block-RAM read); a "
                                    "full token adds the wait for the accumulators and the token chain",
                "floor_d": self.d,
                "note": "full token: the token chain on the previous pass's accumulators, then one pass (its "
                        "rank-two update fused with the next token's co-accumulation); warm-up, zero and "
                        "evicting tokens run one pass without the update (evicting ones after the chain)",
            },
        }


class VLATop(wiring.Component):
    """AXI4-Stream wrapper around :class:`~specmem.rtl.vla.VLACore`.

    Ports of the generated Verilog (``clk``, synchronous active-high ``rst``):

    * ``s_axis_tdata`` (``k * M``), ``s_axis_tvalid``, ``s_axis_tready``, ``s_axis_tlast``: one token
      is ``4 d/k`` beats: ``d/k`` beats of ``k``, then of ``v``, ``q``, ``u``; element ``i`` of a
      tensor is lane ``i % k`` of that tensor's beat ``i // k``, lane ``l`` at bits
      ``[l*M, (l+1)*M)``, two's complement, the preset's input format (legacy-int8: Q2.5). ``tlast`` is
      expected on the last (``u``) beat of each token; a mismatch counts in
      ``status_framing_errors`` (the core frames tokens by beat count).
    * ``m_axis_tdata`` (``k * Wo``), ``m_axis_tuser`` (the token's block exponent ``o_frac``,
      signed), ``m_axis_tvalid``, ``m_axis_tready``, ``m_axis_tlast``: one output token per input
      token, ``d/k`` beats, same lane packing; ``o = tdata_lane * 2^-tuser``; ``tuser`` is the same
      on every beat of a token; ``tlast`` on its last beat.
    * ``status_tokens``, ``status_saturations``, ``status_refreshes``, ``status_framing_errors``
      (32-bit counters), ``status_busy``.
    """

    def __init__(self, d: int, k: int, preset: str = "legacy-int8", **params):
        from .vla import VLACore  # the VLA core pulls in the VLA golden model's parameter checks

        self.core = VLACore(d, k, preset, **params)
        self.d, self.k, self.preset = d, k, preset
        F = self.core.fmt
        self.x_width = F["k"].width
        self.o_width = F["o"].width
        self.o_frac_width = self.core.o_frac_width
        super().__init__({
            "s_axis_tdata": In(k * self.x_width),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "s_axis_tlast": In(1),
            "m_axis_tdata": Out(k * self.o_width),
            "m_axis_tuser": Out(self.o_frac_width),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
            "m_axis_tlast": Out(1),
            "status_tokens": Out(32),
            "status_saturations": Out(32),
            "status_refreshes": Out(32),
            "status_framing_errors": Out(32),
            "status_busy": Out(1),
        })

    def manifest(self) -> dict:
        """Parameters, formats, packing and timing for ``rtl/generate.py``'s JSON manifest."""
        c = self.core
        F = c.fmt
        dk = self.d // self.k
        s_axis = stream_packing(self.d, self.k, F["k"], "k, v, q, u")
        s_axis.update({
            "tensors": ["k", "v", "q", "u"],
            "beats_per_token": 4 * dk,
            "element_to_beat": "tensor n (k, v, q, u = 0, 1, 2, 3), element i -> beat n d/k + i // k, lane i % k",
            "tlast": "on the last beat of each token (the last u beat)",
        })
        m_axis = stream_packing(self.d, self.k, F["o"], "o")
        m_axis["tuser"] = {"name": "o_frac", "width": self.o_frac_width, "signed": True,
                           "meaning": "the token's block exponent: o = lane * 2^-o_frac (o_raw, o_frac of the model)"}
        budget = c.cycle_budget()
        return {
            "parameters": {"d": self.d, "k": self.k, "preset": self.preset,
                           **{n: v for n, v in c.params.items() if n != "in_range"},
                           "in_range": F.preset.in_range if c.params["in_range"] is None else c.params["in_range"]},
            "formats": F.to_dict(),
            "streams": {"s_axis": s_axis, "m_axis": m_axis},
            "status": {
                "status_tokens": "tokens whose output is complete (32-bit, wraps)",
                "status_saturations": "saturated elements since reset, every narrowing of the fixed-point model "
                                      "except the host-side input quantisation (starts at the model's count for "
                                      "the constants 1/lambda0 and eta, normally 0)",
                "status_refreshes": "+eta I refreshes applied (one per refresh_period tokens)",
                "status_framing_errors": "input beats whose tlast disagreed with the 4 d/k beat count",
                "status_busy": "a token is being received, processed, written or sent",
            },
            "engines": {
                "pass": {"count": 4, "products": ["A un", "A kh", "S kh", "S qf"], "latency": c.e_au.latency,
                         "acc_widths": [e.acc_width for e in c.pass_engines]},
                "vector": {"latency": c.ev.latency, "acc_width": c.ev.acc_width},
                "scalar_unit": {"count": 2, "latency": {op.name.lower(): v for op, v in c.su.latency.items()},
                                **c.su_config.to_json()},
                "widths": c.ranges(),
                "front_end": {"lanes": c.fe_lanes, "bound_cycles_per_token": c.fe_bound(),
                              "note": "ELU+1, the norms and the scale passes on fe_lanes lanes (each input beat "
                                      "in k/fe_lanes sub-beats); bound_cycles_per_token adds up all its work per "
                                      "token as if nothing overlapped; within the core's cycles per token the "
                                      "front end never sets the token rate (above it, with fe_lanes given, it "
                                      "may: tokens then take at most that many cycles)"},
            },
            "reset": "synchronous; after reset the core writes A = I/lambda0, S = 0 (d^2/k cycles) and zeroes zk",
            "latency": {
                **c.latency(),
                "note": "cycles from the clock edge accepting a token's last input beat (its last u beat) to the "
                        "edge transferring its first output beat, the core idle (status_busy low) when the token "
                        "arrives and the sink ready; the same for every token (refresh tokens included): front end "
                        "(three scalar-unit operations, the scale pass), a read-only pass and the vector chain "
                        "(cycles_per_token.budget total), VP6 and the output block exponent",
            },
            "cycles_per_token": {
                "full_steady_state": budget["total"],
                "budget": budget,
                "floor_d2_over_k": budget["floor"],
                "note": "next token already in its slot, output sink ready: one fused pass (token t's rank-one "
                        "writes, token t+1's reads) plus token t+1's vector chain; the output stage and VP6 "
                        "run beside the next pass",
            },
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        beats = 4 * (self.d // self.k)
        m.d.comb += [
            core.x_in.payload.as_value().eq(self.s_axis_tdata),
            core.x_in.valid.eq(self.s_axis_tvalid),
            self.s_axis_tready.eq(core.x_in.ready),
            self.m_axis_tdata.eq(core.o_out.payload.o.as_value()),
            self.m_axis_tuser.eq(core.o_out.payload.o_frac),
            self.m_axis_tlast.eq(core.o_out.payload.last),
            self.m_axis_tvalid.eq(core.o_out.valid),
            core.o_out.ready.eq(self.m_axis_tready),
            self.status_tokens.eq(core.tokens),
            self.status_saturations.eq(core.saturations),
            self.status_refreshes.eq(core.refreshes),
            self.status_busy.eq(core.busy),
        ]
        beat = Signal(range(beats))
        errors = Signal(32)
        m.d.comb += self.status_framing_errors.eq(errors)
        with m.If(self.s_axis_tvalid & core.x_in.ready):
            m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
            with m.If(self.s_axis_tlast != (beat == beats - 1)):
                m.d.sync += errors.eq(errors + 1)
        return m


class BaselineTop(wiring.Component):
    """AXI4-Stream wrapper around :class:`~specmem.rtl.baselines.BaselineCore` (linear attention,
    DeltaNet or Gated DeltaNet).

    Ports: ``s_axis_*`` (``k * M`` bits; a token is ``d/k`` beats of ``k``, then of ``v``, ``q``,
    and for DeltaNet one more beat whose lane 0 is ``beta``, for Gated DeltaNet also ``g``'s
    unsigned bits in lane 1 (at ``k = 1`` a second scalar beat); ``tlast`` on the token's last beat,
    mismatches counted in ``status_framing_errors``), ``m_axis_*`` (``k * Wo`` bits, ``d/k`` beats
    of ``o`` per token in the fixed ``o`` format, ``tlast`` on the last), ``status_tokens``,
    ``status_saturations``, ``status_framing_errors`` (32-bit), ``status_busy``.
    """

    def __init__(self, algo: str, d: int, k: int, preset: str = "legacy-int8", **params):
        from .baselines import BaselineCore

        self.core = BaselineCore(algo, d, k, preset, **params)
        self.algo, self.d, self.k, self.preset = algo, d, k, preset
        F = self.core.fmt
        self.x_width = F["k"].width
        self.o_width = F["o"].width
        super().__init__({
            "s_axis_tdata": In(k * self.x_width),
            "s_axis_tvalid": In(1),
            "s_axis_tready": Out(1),
            "s_axis_tlast": In(1),
            "m_axis_tdata": Out(k * self.o_width),
            "m_axis_tvalid": Out(1),
            "m_axis_tready": In(1),
            "m_axis_tlast": Out(1),
            "status_tokens": Out(32),
            "status_saturations": Out(32),
            "status_framing_errors": Out(32),
            "status_busy": Out(1),
        })

    def manifest(self) -> dict:
        c = self.core
        F = c.fmt
        lin = self.algo == "linear"
        tensors = ["k", "v", "q", *c.scalars]
        s_axis = stream_packing(self.d, self.k, F["k"], ", ".join(tensors))
        if c.gated:  # two scalars: beta in lane 0, g's unsigned bits in lane 1 (k = 1: two beats)
            scalars = ("; then the scalars (beta, g), scalar j -> beat 3 d/k + j // k, lane j % k (formats 'beta' and "
                       "'g'; g's lane holds its unsigned bits, UQ1.(M-1)), other lanes ignored")
        else:
            scalars = "" if lin else "; beta: one more beat, lane 0 (format 'beta'), other lanes ignored"
        s_axis.update({
            "tensors": tensors,
            "beats_per_token": c.beats_per_token,
            "element_to_beat": "tensor n (k, v, q = 0, 1, 2), element i -> beat n d/k + i // k, lane i % k" + scalars,
            "tlast": "on the last beat of each token",
        })
        budget = c.cycle_budget()
        return {
            "parameters": {"d": self.d, "k": self.k, "preset": self.preset, "eps": c.params["eps"],
                           "in_range": F.preset.in_range if c.params["in_range"] is None else c.params["in_range"],
                           "dsp": c.dsp, "bram": c.bram},
            "sim_models": (["MULT18X18D"] if c.dsp == "ecp5" else []) + (["DP16KD"] if c.bram == "ecp5" else []),
            "formats": F.to_dict(),
            "streams": {"s_axis": s_axis, "m_axis": stream_packing(self.d, self.k, F["o"], "o")},
            "status": {
                "status_tokens": "tokens whose output is complete (32-bit, wraps)",
                "status_saturations": "saturated elements since reset, every narrowing of the fixed-point model "
                                      "except the host-side input quantisation",
                "status_framing_errors": f"input beats whose tlast disagreed with the {c.beats_per_token}-beat count",
                "status_busy": "a token is being received, processed, written or sent",
            },
            "engines": {
                "pass": {"count": len(c.pass_engines), "latency": c.e_sq.latency,
                         "acc_widths": [e.acc_width for e in c.pass_engines]},
                "scalar_unit": {"count": len(c.scalar_units),
                                "latency": {op.name.lower(): v for op, v in c.scalar_units[0].latency.items()},
                                **c.su_config.to_json()},
            },
            "reset": "synchronous; after reset the core writes S = 0 (d^2/k cycles)",
            "cycles_per_token": {
                "full_steady_state": budget["total"],
                "budget": budget,
                "floor_d2_over_k": budget["floor"],
                "note": "next token already in its slot, output sink ready: one fused pass (token t's rank-one "
                        "write, token t+1's reads and outputs) per token",
            },
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        beats = core.beats_per_token
        # s_axis_tready is a register (a skid buffer in front of the core)
        m.submodules.skid = skid = SkidBuffer(core.x_layout)
        wiring.connect(m, skid.o, core.x_in)
        m.d.comb += [
            skid.i.payload.as_value().eq(self.s_axis_tdata),
            skid.i.valid.eq(self.s_axis_tvalid),
            self.s_axis_tready.eq(skid.i.ready),
            self.m_axis_tdata.eq(core.o_out.payload.o.as_value()),
            self.m_axis_tlast.eq(core.o_out.payload.last),
            self.m_axis_tvalid.eq(core.o_out.valid),
            core.o_out.ready.eq(self.m_axis_tready),
            self.status_tokens.eq(core.tokens),
            self.status_saturations.eq(core.saturations),
            self.status_busy.eq(core.busy),
        ]
        beat = Signal(range(max(beats, 2)))
        errors = Signal(32)
        m.d.comb += self.status_framing_errors.eq(errors)
        with m.If(self.s_axis_tvalid & skid.i.ready):
            m.d.sync += beat.eq(Mux(beat == beats - 1, 0, beat + 1))
            with m.If(self.s_axis_tlast != (beat == beats - 1)):
                m.d.sync += errors.eq(errors + 1)
        return m
