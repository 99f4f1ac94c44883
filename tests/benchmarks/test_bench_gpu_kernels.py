"""The GPU's RBF products and CUDA ops against their floors (issue 48): ``gpu_kernels.run()`` on one
GPU in one run, its table printed and written to ``$GPU_BENCH_OUT/gpu_kernels.md`` (and .json).

Run on a GPU machine: pytest tests/benchmarks/test_bench_gpu_kernels.py -o addopts="" -s
"""

import json
import os
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_gpu_kernels_against_their_floors():
    from benchmarks.gpu_kernels import markdown, run

    sections = os.environ.get("GPU_BENCH_SECTIONS", "matvec,float64,gram,tiles,memory,imagenet_lt").split(",")
    rows = run(sections)
    table = markdown(rows)
    print(f"\n{torch.cuda.get_device_name(0)}, torch {torch.__version__}\n{table}")
    out = Path(os.environ.get("GPU_BENCH_OUT", ".benchmarks"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_kernels.md").write_text(f"{torch.cuda.get_device_name(0)}\n\n{table}\n")
    if os.environ.get("GPU_BENCH_JSON"):
        (out / "gpu_kernels.json").write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows}))
    for row in rows:  # every product is finite and within float32's reach of float64
        for key in [k for k in row if k.startswith("err_") and k != "err_torch"]:
            assert row[key] < (1e-4 if row.get("dtype") != "float64" else 1e-10), (row["op"], key, row[key])
