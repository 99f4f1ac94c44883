"""The precision of cuBLAS products and cuDNN convolutions on float32 tensors: IEEE float32 or
TF32 tensor cores. One switch for the package (the RBF products here, the trainer's
``dlmsvdd.training.precision``), spelled in the API torch has: ``fp32_precision`` since torch
2.9, whose mix with the legacy ``allow_tf32`` flags torch refuses to read, else those flags.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


def new_api() -> bool:
    """Whether this torch sets TF32 per backend with ``fp32_precision``."""
    return hasattr(torch.backends.cuda.matmul, "fp32_precision") and hasattr(torch.backends.cudnn, "conv")


@contextmanager
def float32_products(mode: str):
    """cuBLAS products and cuDNN convolutions on float32 tensors in ``mode``, "ieee" or "tf32",
    within the block; the flags as they were after it.

    Parameters
    ----------
    mode : str
        "ieee" (float32 arithmetic) or "tf32" (TF32 tensor cores, 10-bit mantissas).
    """
    if mode not in ("ieee", "tf32"):
        raise ValueError(f"mode must be 'ieee' or 'tf32', got {mode!r}")
    if new_api():
        flags = (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn)
        saved = [flag.fp32_precision for flag in flags]
        for flag in flags:
            flag.fp32_precision = mode
        try:
            yield
        finally:
            for flag, value in zip(flags, saved):
                flag.fp32_precision = value
    else:
        saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
