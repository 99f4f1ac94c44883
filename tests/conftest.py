import os

# Under pytest-xdist (the README's `pytest -n auto`) each worker process is given its share of the
# cores, so that the workers' thread pools (torch's, the extension's OpenMP) do not oversubscribe them;
# set before either starts its pool.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1)
                                                     // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

import numpy as np
import pytest

from dlmsvdd_ext import ops

# Every path that runs kernel code on this machine: each CPU instruction set
# the processor supports, and the CUDA kernels' code under the CPU emulation.
BACKENDS = [f"cpu-{isa}" for isa in ops.supported_cpu_isas()] + ["cuda-emulated"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Yields the keyword arguments for ops calls, with the CPU ISA selected."""
    before = ops.cpu_isa()
    name = request.param
    if name.startswith("cpu-"):
        ops.set_cpu_isa(name[4:])
        yield {}
    else:
        yield {"cuda_emulation": True}
    ops.set_cpu_isa(before)


@pytest.fixture(params=ops.supported_cpu_isas())
def cpu_isa(request):
    """Selects each CPU instruction set in turn (for CPU-only routines)."""
    before = ops.cpu_isa()
    ops.set_cpu_isa(request.param)
    yield request.param
    ops.set_cpu_isa(before)


def rbf_reference(X, Y, gamma):
    """float64 K(X, Y) from explicit differences (no norm expansion)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    D = ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
    return np.exp(-gamma * D)


def rel_err(out, ref):
    out = np.asarray(out, dtype=np.float64)
    return float(np.max(np.abs(out - ref)) / max(np.max(np.abs(ref)), 1e-300))


TOL = {np.float32: 1e-5, np.float64: 1e-12}


def sample_points(rng, n, d, dtype, duplicate_from=None):
    """Standard normal rows; optionally the first row repeats a row of another set
    (a zero distance, where rounding can make the norm expansion negative)."""
    X = rng.standard_normal((n, d))
    if duplicate_from is not None and n > 0:
        X[0] = duplicate_from[0]
    return X.astype(dtype)
