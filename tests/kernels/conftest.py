"""Kernel tests run on the CPU through Triton's interpreter unless a CUDA GPU is present.

Triton 3.9 reads ``TRITON_INTERPRET`` through ``triton.knobs.runtime.interpret``, which looks at
``os.environ`` each time it is asked; the decisive moment is ``@triton.jit`` at import of a
kernel module (it returns an ``InterpretedFunction`` instead of a ``JITFunction``). So it is set
here, before any test module imports triton or the kernels. ``TRITON_INTERPRET=0`` in the
environment forces compiled kernels.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

    # Tiny tensors: torch's intra-op thread pool only adds synchronisation (a [2, 2, 24, 24]
    # float64 batched matvec measured 7 ms with 2 threads, 30 us with 1, on the 2-core runner).
    torch.set_num_threads(1)
