"""dlmsvdd_ext: compiled RBF kernels (C++ and CUDA) for DLM-SVDD.

``dlmsvdd_ext.ops`` holds the array operations; see its docstrings.
"""

from . import _C, ops

__version__ = "0.1.0"


def built_with_cuda() -> bool:
    """True when this build contains the CUDA kernels."""
    return bool(_C.built_with_cuda())


def cuda_available() -> bool:
    """True when the CUDA kernels can run here (built with CUDA and a GPU is present)."""
    return bool(_C.cuda_available())


__all__ = ["ops", "built_with_cuda", "cuda_available", "__version__"]
