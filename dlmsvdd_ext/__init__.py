"""dlmsvdd_ext: compiled RBF kernels (C++ and CUDA) and the large-margin lp-SVDD solver.

* ``dlmsvdd_ext.ops``: the array operations (kernel products, Gram, columns, the dual's oracle).
* ``dlmsvdd_ext.solver``: the certified dual solvers and boundary recovery.
* ``dlmsvdd_ext.LpSVDD``: the scikit-learn outlier estimator on fixed features.
"""

from ._version import __version__


def _import_compiled():
    """The compiled module, or one line that says why it cannot be had and what to do."""
    import importlib
    import importlib.machinery
    from pathlib import Path

    try:
        return importlib.import_module("._C", __name__)
    except ImportError as err:
        here = Path(__file__).parent
        built = [p.name for p in here.iterdir() if p.name.startswith("_C.")
                 and p.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
        if not built:  # a source checkout first on the path: nothing is built in it
            message = (f"dlmsvdd_ext's compiled module _C is not built in {here} (a source checkout?): install the "
                       "package (pip install .) and import it from outside the checkout, or build _C into that "
                       "folder (see README.md, Build options)")
        else:
            message = (f"dlmsvdd_ext's compiled module {built[0]} in {here} does not load ({err}): it was built "
                       f"for another Python or platform; rebuild it (pip install .)")
        raise ImportError(message) from None


_C = _import_compiled()
from . import ops  # noqa: E402
from .ops import build_info  # noqa: E402
from .svdd import LpSVDD  # noqa: E402


def built_with_cuda() -> bool:
    """Whether this build contains the CUDA kernels.

    Returns
    -------
    bool
        True when the build found nvcc (or ``DLMSVDD_CUDA=ON``).
    """
    return bool(_C.built_with_cuda())


def cuda_available() -> bool:
    """Whether the CUDA kernels can run here.

    Returns
    -------
    bool
        True when the build holds them and a GPU is present.
    """
    return bool(_C.cuda_available())


__all__ = ["ops", "LpSVDD", "build_info", "built_with_cuda", "cuda_available", "__version__"]
