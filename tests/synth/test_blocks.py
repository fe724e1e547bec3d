# amaranth: UnusedElaboratable=no
"""``specmem.synth_block`` places and routes a building block on its own (real yosys + nextpnr, a
few seconds for the block RAM). Checks the record's structure and the mapping, not the fmax."""

import pytest

from specmem.rtl.bram import RegisteredRAM
from specmem.synth_block import synth_block


@pytest.mark.parametrize("style", ["ecp5", "behavioural"])
def test_bram_block_places_and_routes(tmp_path, style):
    res = synth_block(RegisteredRAM(128, 18, style), f"bram_{style}", tmp_path)
    assert res["ebr"] == 1 and res["dsp"] == 0 and res["fmax_mhz"] > 0
    assert res["critical_path"]["start"] and (tmp_path / f"bram_{style}" / "result.json").is_file()
    # The ECP5 style's output register is the primitive's own: no fabric flip-flop for the read data.
    assert (res["ffs"] == 0) == (style == "ecp5")


def test_delay_line_block_maps_to_block_ram_and_pointers(tmp_path):
    """A 36-bit, 24-stage ring buffer: two DP16KD, the fabric output register and two 5-bit pointers
    (a register chain would be 864 flip-flops)."""
    from specmem.synth_block import BLOCKS

    comp, name = BLOCKS["delay_line"](36, 24, "ecp5")
    res = synth_block(comp, name, tmp_path)
    assert res["ebr"] == 2 and res["dsp"] == 0 and res["ffs"] == 36 + 2 * 5, res


def test_core_v2_and_chain_blocks_are_registered():
    """The v2 core and its chain are selectable blocks (their place-and-route runs by command)."""
    from specmem.synth_block import BLOCKS

    chain, name = BLOCKS["token_chain"](16, 4, "int18", "ecp5")
    assert name == "token_chain_d16_k4_int18_ecp5" and chain.k == 4 and chain.dsp == "ecp5"
    core, name = BLOCKS["core_v2"](16, 4, "int18", "ecp5", "behavioural")
    assert name == "core_v2_d16_k4_int18_ecp5_behavioural" and core.rows.dsp == "ecp5" and core.bram == "behavioural"
    assert all(unit.dsp == "ecp5" for unit in core.chain_units)  # the chain's pieces are MULT18X18D too


def test_router_choice_reaches_nextpnr_and_is_checked():
    from specmem.synth import nextpnr_ecp5_args

    args = nextpnr_ecp5_args(200, 3, "router2")
    assert args[args.index("--router") + 1] == "router2" and args[args.index("--seed") + 1] == "3"
    assert "router1" in nextpnr_ecp5_args(200, 1)
    with pytest.raises(ValueError, match="^router"):
        nextpnr_ecp5_args(200, 1, "router3")


def test_scaled_format_blocks_are_registered():
    """The scaled formats' streaming normaliser, row-BFP write and alignment are selectable blocks."""
    from specmem.synth_block import BLOCKS

    norm, name = BLOCKS["block_norm_stream"](8, 4, 21, 8)
    assert name == "block_norm_stream_l8_b4_w21_m8" and (norm.lanes, norm.beats, norm.in_width, norm.M) == (8, 4, 21, 8)
    write, name = BLOCKS["row_bfp"](4, 16, 8)
    assert name == "row_bfp_write_k4_ws16_m8" and (write.lanes, write.Ws, write.M) == (4, 16, 8)
    align, name = BLOCKS["align"](4, 2, 8, 22, "ecp5")
    assert name == "align_l4_b2_m8_w22_ecp5" and (align.lanes, align.beats, align.terms) == (4, 2, ((8, False), (22, True)))
    assert align.delay_style == "ecp5"
    unit, name = BLOCKS["unit_norm"](4, 2)
    assert name == "unit_norm_l4_b2_int8" and (unit.lanes, unit.beats, unit.M, unit.P) == (4, 2, 8, 12)
    core, name = BLOCKS["deltanet_scaled"](8, 4, "int8", "ecp5")
    assert name == "deltanet_scaled_d8_k4_int8_ecp5" and (core.d, core.k, core.pass_.ram) == (8, 4, "ecp5")
    assert not core.gated
    core, name = BLOCKS["gated_deltanet_scaled"](8, 4, "int8", "ecp5")
    assert name == "gated_deltanet_scaled_d8_k4_int8_ecp5" and core.gated and core.pass_.rescale
    decay, name = BLOCKS["decay"]("int8")
    assert name == "decay_int8" and decay.P == 12


def test_vla_chain_lanes_reach_the_core_and_are_refused_elsewhere(capsys):
    """``--chain-lanes`` builds the scaled VLA core with its chain on fewer lanes (named ``_c<c>``);
    on another block it is an error, not silently ignored."""
    from specmem.synth_block import BLOCKS, main

    core, name = BLOCKS["vla_scaled"](8, 4, "int8", "ecp5", "registered", 2)
    assert name == "vla_scaled_d8_k4_int8_ecp5_c2" and (core.k, core.c, core.Bc) == (4, 2, 4)
    assert core.align_a.lanes == 2 and core.pass_s.k == 4
    with pytest.raises(SystemExit) as exc:
        main(["deltanet_scaled", "--d", "8", "--k", "4", "--chain-lanes", "2"])
    assert exc.value.code != 0 and "chain-lanes: only vla_scaled" in capsys.readouterr().err


def test_scaled_linear_attention_block_takes_the_dsp_style():
    """``synth_block linear_scaled --dsp ecp5`` builds the core with its products on MULT18X18D
    registers (the option was ignored before stop 48) and says so in the block's name."""
    from specmem.synth_block import BLOCKS

    core, name = BLOCKS["linear_scaled"](8, 4, "int8", "ecp5", "ecp5")
    assert name == "linear_scaled_d8_k4_int8_ecp5_dsp_ecp5" and core.dsp == "ecp5"
    core, name = BLOCKS["linear_scaled"](8, 4, "int8", "ecp5")
    assert name == "linear_scaled_d8_k4_int8_ecp5" and core.dsp == "registered"
