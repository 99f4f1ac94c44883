"""dlmsvdd_ext: compiled RBF kernels (C++ and CUDA) and the large-margin lp-SVDD solver.

* ``dlmsvdd_ext.ops``: the array operations (kernel products, Gram, columns, the dual's oracle).
* ``dlmsvdd_ext.solver``: the certified dual solvers and boundary recovery.
* ``dlmsvdd_ext.LpSVDD``: the scikit-learn outlier estimator on fixed features.
"""

from ._version import __version__
from . import _C, ops  # noqa: E402
from .svdd import LpSVDD  # noqa: E402


def built_with_cuda() -> bool:
    """True when this build contains the CUDA kernels."""
    return bool(_C.built_with_cuda())


def cuda_available() -> bool:
    """True when the CUDA kernels can run here (built with CUDA and a GPU is present)."""
    return bool(_C.cuda_available())


__all__ = ["ops", "LpSVDD", "built_with_cuda", "cuda_available", "__version__"]
