"""The built module: no dynamic CUDA or torch dependency, imports without a
GPU; what build_info() reports and which GPUs a build runs on."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import dlmsvdd_ext
from dlmsvdd_ext import _C


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_module_needs_no_cuda_driver_or_shared_runtime():
    dynamic = subprocess.run(["readelf", "-d", _C.__file__], check=True, capture_output=True, text=True).stdout
    needed = [line for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert needed, "readelf found no NEEDED entries; is this the extension module?"
    for line in needed:
        for library in ("libcuda", "libcudart", "libtorch", "libc10"):  # no torch: any torch version works
            assert library not in line, line


def test_cpu_isa_is_reported():
    assert dlmsvdd_ext.ops.cpu_isa() in dlmsvdd_ext.ops.supported_cpu_isas()


def test_cuda_build_when_requested():
    """CI builds with DLMSVDD_CUDA=ON: the CUDA kernels must then be in the module."""
    import os

    if os.environ.get("DLMSVDD_CUDA", "").upper() == "ON":
        assert dlmsvdd_ext.built_with_cuda()


# ---- build_info and the GPU check

ROOT = Path(__file__).resolve().parents[1]


def test_build_info_reports_the_build():
    info = dlmsvdd_ext.build_info()
    assert info["cpu_instruction_sets"] == ["generic", "avx2", "avx512"]
    assert info["cpu_supported"] == dlmsvdd_ext.ops.supported_cpu_isas() and info["cpu_active"] == dlmsvdd_ext.ops.cpu_isa()
    assert info["compiler"]
    if dlmsvdd_ext.built_with_cuda():
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?", info["cuda_version"]) and info["cuda_architectures"]
    else:
        assert info["cuda_version"] is None and info["cuda_architectures"] == []


def test_the_default_architectures_include_turing_in_cmake_and_pyproject():
    cmake = re.search(r'set\(DLMSVDD_CUDA_ARCHITECTURES "([^"]+)"', (ROOT / "CMakeLists.txt").read_text()).group(1)
    pyproject = re.search(r'DLMSVDD_CUDA_ARCHITECTURES = \{[^}]*default = "([^"]+)"',
                          (ROOT / "pyproject.toml").read_text()).group(1)
    assert cmake == pyproject == "75-real;80-real;86-real;89-real;90"


def _cuobjdump():
    """cuobjdump from the CUDA toolkit, or the copy Triton ships."""
    found = shutil.which("cuobjdump") or shutil.which("cuobjdump", path=os.path.join(
        os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin"))
    if found is None:
        try:
            import triton

            candidate = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
            found = str(candidate) if candidate.is_file() else None
        except ImportError:
            pass
    return found


@pytest.mark.skipif(not dlmsvdd_ext.built_with_cuda(), reason="a build without CUDA holds no GPU code")
def test_build_info_lists_the_gpu_code_cuobjdump_finds():
    """The machine code (-real, or a bare number) and PTX (a bare number) that
    build_info names are the module's: cuobjdump --list-elf / --list-ptx agree."""
    tool = _cuobjdump()
    assert tool is not None, "a CUDA build is tested with cuobjdump (CUDA toolkit or Triton's copy)"
    architectures = dlmsvdd_ext.build_info()["cuda_architectures"]
    if "DLMSVDD_CUDA_ARCHITECTURES" not in os.environ:
        assert "75-real" in architectures  # the default: Turing (T4) too

    def listed(flag):  # the files cuobjdump lists are named ..._C.<n>.sm_<arch>.cubin / .ptx
        out = subprocess.run([tool, flag, _C.__file__], check=True, capture_output=True, text=True).stdout
        return set(re.findall(r"\.sm_(\d+[af]?)\.(?:cubin|ptx)", out))

    numbers = {a.split("-")[0]: a.split("-")[1:] for a in architectures}
    assert listed("--list-elf") == {n for n, kind in numbers.items() if kind != ["virtual"]}
    assert listed("--list-ptx") == {n for n, kind in numbers.items() if kind != ["real"]}


@pytest.mark.parametrize("architectures,capability,runs", [
    (["75-real", "80-real", "86-real", "89-real", "90"], (7, 5), True),  # T4
    (["75-real", "80-real", "86-real", "89-real", "90"], (8, 7), True),  # sm_86 machine code on 8.7 (same major)
    (["75-real", "80-real", "86-real", "89-real", "90"], (12, 0), True),  # PTX 90, compiled at load on Blackwell
    (["75-real", "80-real", "86-real", "89-real", "90"], (7, 0), False),  # V100: nothing for 7.0
    (["80-real", "86-real", "89-real", "90"], (7, 5), False),  # the old default on a T4
    (["80-real", "90-real"], (10, 0), False),  # no PTX: nothing for a newer major
    (["80-virtual"], (9, 0), True),  # PTX only
    (["90a-real"], (9, 0), True), (["90a-real"], (10, 0), False),  # arch-specific code: 9.0 alone
    (["native"], (7, 0), None),  # unreadable: not judged
])
def test_which_gpus_a_build_runs_on(architectures, capability, runs):
    """NVIDIA's rules: machine code for X.y runs on X.z, z >= y; PTX for X.y on anything from X.y up."""
    assert dlmsvdd_ext.ops.runs_on(architectures, capability) is runs


def test_a_gpu_without_code_is_refused_naming_its_architecture_and_the_builds(monkeypatch):
    ops = dlmsvdd_ext.ops
    monkeypatch.setattr(ops, "_compiled", lambda: {"cuda_architectures": ["80-real", "86-real", "89-real", "90"]})
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Tesla T4")
    with pytest.raises(ValueError) as refused:
        ops._check_gpu.__wrapped__(0)  # the uncached check a CUDA array's first op runs
    message = str(refused.value)
    assert "Tesla T4 (compute capability 7.5, sm_75)" in message and "80-real;86-real;89-real;90" in message
    assert "DLMSVDD_CUDA_ARCHITECTURES" in message
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (8, 9))
    ops._check_gpu.__wrapped__(0)  # an L4 runs the sm_89 code
