# amaranth: UnusedElaboratable=no
"""The area-by-name estimate (``specmem.area_names``): its cell costs, and on the VLA core the
front end's blocks scaling with ``fe_lanes`` (Yosys's coarse passes: a few seconds a design)."""

from __future__ import annotations

import pytest

from specmem.area_names import cell_cost, estimate, main, run


def _cell(t, **params):
    return {"type": t, "parameters": {k: format(v, "b") for k, v in params.items()}}


@pytest.mark.parametrize("cell,cost", [
    (_cell("$alu", Y_WIDTH=20, A_WIDTH=19, B_WIDTH=19), 20),
    (_cell("$shl", Y_WIDTH=30, A_WIDTH=24, B_WIDTH=5), 90),      # three 4:1 levels for 5 shift bits
    (_cell("$mux", WIDTH=12), 12),
    (_cell("$pmux", WIDTH=8, S_WIDTH=5), 24),
    (_cell("$macc_v2", Y_WIDTH=44, NPRODUCTS=1, NADDENDS=0), 0),  # the product is a DSP's
    (_cell("$macc_v2", Y_WIDTH=44, NPRODUCTS=1, NADDENDS=1), 44),
    (_cell("$eq", Y_WIDTH=1, A_WIDTH=9, B_WIDTH=9), 5),
    (_cell("$dff", WIDTH=32), 0),
])
def test_cell_costs(cell, cost):
    assert cell_cost(cell) == cost


def test_cells_are_charged_to_the_named_signal_they_drive():
    """An unnamed adder feeding a named mux is charged to the mux's name; lane digits fold."""
    net = {"modules": {"top": {
        "netnames": {"core.$1": {"bits": [2], "hide_name": 0}, "core.acc3": {"bits": [3], "hide_name": 0},
                     "core.acc4": {"bits": [4], "hide_name": 0}},
        "cells": {
            "add": {"type": "$alu", "parameters": {"Y_WIDTH": "1000"}, "port_directions": {"A": "input", "Y": "output"},
                    "connections": {"A": [9], "Y": [2]}},
            "mux": {"type": "$mux", "parameters": {"WIDTH": "10"}, "port_directions": {"A": "input", "Y": "output"},
                    "connections": {"A": [2], "Y": [3]}},
            "mux2": {"type": "$mux", "parameters": {"WIDTH": "11"}, "port_directions": {"A": "input", "Y": "output"},
                     "connections": {"A": [2], "Y": [4]}},
            "mul": {"type": "$mul", "parameters": {"Y_WIDTH": "10000"}, "port_directions": {"Y": "output"},
                    "connections": {"Y": [5]}},
        }}}}
    r = estimate(net)
    assert r["stems"] == {"acc#": 8 + 2 + 3} and r["luts"] == 13 and r["multipliers"] == 1


def test_vla_front_end_blocks_scale_with_its_lanes():
    """VLA at d = 8, k = 4 with the front end on 1 and on 4 lanes: the ELU+1 and zk blocks grow
    about 4x, the multipliers by 3 lanes' worth (the ELU+1's two, the front end's one in 17-bit
    pieces), and the rest of the core is the same design."""
    from specmem.rtl.dsp import PipelinedMultiplier
    from specmem.rtl.vla import VLACore

    one, four = run("vla", 8, 4, fe_lanes=1), run("vla", 8, 4, fe_lanes=4)
    for block in ("elu", "zk"):
        assert 3.5 <= four["blocks"][block] / one["blocks"][block] <= 4.5, (block, one["blocks"], four["blocks"])
    wa, wb = VLACore(8, 4).fe_mul_widths
    per_lane = 2 + len(PipelinedMultiplier.limbs(wa)) * len(PipelinedMultiplier.limbs(wb))
    assert four["multipliers"] - one["multipliers"] == 3 * per_lane
    assert four["blocks"]["su"] == one["blocks"]["su"]  # the scalar units do not depend on the lanes
    assert sum(four["stems"].values()) == four["luts"]


def test_main_rejects_bad_parameters_in_one_line(capsys):
    assert main(["--algo", "vla", "--d", "8", "--k", "4", "--fe-lanes", "3"]) == 2
    assert "fe_lanes: must be a divisor of k (4), got 3" in capsys.readouterr().err
