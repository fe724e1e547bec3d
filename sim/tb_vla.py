"""cocotb testbench of the VLA top (``specmem_vla``): the attention-rule testbench
:mod:`specmem.sim.tb_rules`, which it shares with linear attention and DeltaNet, under the name
the VLA's runs have always used (``VLA_TB``; cocotb collects the tests this module imports)."""

from specmem.sim.tb_rules import (VLAEnv, framing_errors, latency, random_stream, reset_mid_stream,  # noqa: F401
                                  saturating, steady_state, stream, streams)

__all__ = ["VLAEnv", "random_stream", "stream", "steady_state", "latency", "saturating", "reset_mid_stream",
           "framing_errors", "streams"]
