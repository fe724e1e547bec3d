"""specmem: bounded-memory sequence-model updates from paper to silicon.

Package map (one namespace over the repository's top-level folders):
``specmem.golden`` (golden/) float64 and fixed-point reference models,
``specmem.rtl`` (rtl/) Amaranth hardware, ``specmem.sim`` (sim/) Verilator
testbenches, and this package root (host/) the CLI and the run interface.
"""

__version__ = "0.1.0"
