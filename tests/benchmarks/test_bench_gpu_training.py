"""DLM-SVDD training on a GPU (issue 47): the omega-step against a plain torch loop of the same network,
batch size and optimiser at each precision option, the digits demo on the GPU and the CPU, and (with
GPU_DATA naming a folder that holds fashion_mnist.npz) the precision options' AUROC on a real task.
Tables printed and written to $GPU_BENCH_OUT/gpu_training.md (and .json).

Run on a GPU machine: pytest tests/benchmarks/test_bench_gpu_training.py -o addopts="" -s
"""

import os
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_training_against_its_baselines():
    from benchmarks import gpu_training
    from benchmarks.gpu_kernels import report

    sections = os.environ.get("GPU_BENCH_SECTIONS", "omega,demo,auroc").split(",")
    rows = []
    if "omega" in sections:
        rows += gpu_training.omega_rows()
    if "demo" in sections:
        rows += gpu_training.demo_rows()
    data = os.environ.get("GPU_DATA")
    if "auroc" in sections and data and (Path(data) / "fashion_mnist.npz").is_file():
        rows += gpu_training.auroc_rows(data)
    report("gpu_training", rows)
    assert all(row.get("auroc", 1) > 0.9 for row in rows)
