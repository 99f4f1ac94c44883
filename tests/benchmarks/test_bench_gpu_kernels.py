"""The GPU's RBF products and CUDA ops against their floors (issue 48): ``gpu_kernels.run()`` on one
GPU in one run, its table printed and written to ``$GPU_BENCH_OUT/gpu_kernels.md`` (and .json).

Run on a GPU machine: pytest tests/benchmarks/test_bench_gpu_kernels.py -o addopts="" -s
"""

import os

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_kernels_against_their_floors():
    from benchmarks.gpu_kernels import report, run

    sections = os.environ.get("GPU_BENCH_SECTIONS", "matvec,float64,gram,tiles,memory,imagenet_lt").split(",")
    rows = run(sections)
    report("gpu_kernels", rows)
    for row in rows:  # every product is finite and within float32's reach of float64
        for key in [k for k in row if k.startswith("err_") and k != "err_torch"]:
            assert row[key] < (1e-4 if row.get("dtype") != "float64" else 1e-10), (row["op"], key, row[key])
