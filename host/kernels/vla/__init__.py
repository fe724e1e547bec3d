"""Variational Linear Attention (spec §2): naive torch reference, fused recurrent and chunked kernels."""

from .chunk import chunk_vla
from .fused_recurrent import fused_recurrent_vla
from .naive import vla_chunkwise, vla_recurrence

__all__ = ["fused_recurrent_vla", "chunk_vla", "vla_recurrence", "vla_chunkwise"]
