"""The built module: no dynamic CUDA dependency, imports without a GPU."""

import shutil
import subprocess

import pytest

import dlmsvdd_ext
from dlmsvdd_ext import _C


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_module_needs_no_cuda_driver_or_shared_runtime():
    dynamic = subprocess.run(["readelf", "-d", _C.__file__], check=True, capture_output=True, text=True).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed, "readelf found no NEEDED entries; is this the extension module?"
    for line in needed:
        assert "libcuda" not in line, line
        assert "libcudart" not in line, line


def test_cpu_isa_is_reported():
    assert dlmsvdd_ext.ops.cpu_isa() in dlmsvdd_ext.ops.supported_cpu_isas()


def test_cuda_build_when_requested():
    """CI builds with DLMSVDD_CUDA=ON: the CUDA kernels must then be in the module."""
    import os

    if os.environ.get("DLMSVDD_CUDA", "").upper() == "ON":
        assert dlmsvdd_ext.built_with_cuda()
