"""Float precision on a GPU: what the model keeps or reports is computed in IEEE float32,
the omega-step's gradient steps at the configured precision.

Why: on NVIDIA GPUs since Ampere, torch lets cuDNN convolutions (and, when asked, cuBLAS
products) use TF32 tensor cores, which keep 10 bits of mantissa. Scores of a GPU model then
differed from its CPU export by up to 5e-4 relative (issue 47). So every pass whose numbers
are kept or compared (the features the boundary is fitted on, validation, scores, ``explain``)
runs under ``scoring()``: TF32 off, the float32 of the CPU up to summation order. The
omega-step's steps only move the weights, and run at ``TrainConfig.precision``:

* ``"tf32"`` (default): float32 tensors, convolutions and products on TF32 tensor cores
  (torch's own default for convolutions);
* ``"float32"``: IEEE float32 throughout (slower on a GPU; the same on a CPU);
* ``"bf16"``: the network under bfloat16 autocast (``torch.autocast``), its features cast
  back to float32 before the boundary, which always computes in float32.

On a CPU the TF32 flags change nothing; bf16 autocast runs there too (slowly).
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext

import torch

from dlmsvdd_ext.tf32 import float32_products, new_api  # noqa: F401 - the package's one TF32 switch

PRECISIONS = ("tf32", "float32", "bf16")


def scoring():
    """IEEE float32: for every number the model keeps, reports or exports."""
    return float32_products("ieee")


@contextmanager
def omega_step(precision: str, device: torch.device):
    """The network's forward and backward passes of a gradient step at ``precision`` (see the
    module docstring); the boundary's score is computed outside ``network_autocast``."""
    with float32_products("ieee" if precision == "float32" else "tf32"):
        yield


def network_autocast(precision: str, device: torch.device):
    """bfloat16 autocast for the network's forward pass under ``"bf16"``, else nothing."""
    if precision != "bf16":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@contextmanager
def reproducible(deterministic: bool):
    """cuDNN's deterministic algorithms for a fit (``TrainConfig.deterministic``): the same seed then
    gives the same model bit for bit on a GPU too, as on the CPU (some of cuDNN's fastest backward
    convolutions add with atomics, in any order); the flags as they were after it."""
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    if deterministic:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        yield
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


def memory_format(network: torch.nn.Module) -> torch.memory_format:
    """The memory format of a network's convolution weights: channels-last when every 4-d parameter
    is stored so (and one is not also plain contiguous, as a 1x1 kernel is both), else contiguous."""
    weights = [p for p in network.parameters() if p.dim() == 4]
    if weights and all(p.is_contiguous(memory_format=torch.channels_last) for p in weights) \
            and not all(p.is_contiguous() for p in weights):
        return torch.channels_last
    return torch.contiguous_format
