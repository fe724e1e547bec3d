"""Scaled fixed-point formats (issue 12): per-vector power-of-two scales, exact integer
accumulation, block-floating-point states with one exponent per row.

:mod:`.bfp` (the number primitives), :mod:`.elu` (ELU+1 of a block vector), :mod:`.formats`
(the tensor table), one module per rule: :mod:`.deltanet` (DeltaNet and Gated DeltaNet),
:mod:`.linear_attention`, :mod:`.vla`. ``specmem.golden.fixed.run_fixed`` dispatches here for
presets whose ``scheme`` is ``"scaled"``.
"""
