"""Spectral-annihilation memory (spec §1, Gram form): naive torch reference and fused recurrent kernel."""

from .fused_recurrent import fused_recurrent_annihilation
from .naive import annihilation_recurrence

__all__ = ["fused_recurrent_annihilation", "annihilation_recurrence"]
