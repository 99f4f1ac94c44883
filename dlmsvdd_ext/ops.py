"""Validated entry points to the compiled kernels; the only Python code that calls ``_C``.

Arrays may be torch tensors (CPU or CUDA) or numpy arrays, float32 or float64.
They reach the kernels through DLPack without a copy; rows may be strided
(a slice of a larger matrix) but each row must be contiguous. Results are
allocated here (by torch for tensors, so GPU memory goes through torch's caching
allocator) and come back as the same kind of array as ``X``. CUDA work runs on
``torch.cuda.current_stream()``.

Non-finite input (a NaN, an infinity, or a row whose squared norm overflows its
dtype: ``validation.overflowing_rows``) is not refused here (that would cost a
pass over every input): every output it reaches is NaN, never a number that
could pass for a real one. The ops that cannot answer so (``median_sq_distance``,
``rpcholesky``) refuse it, as does every layer that validates its input
(``validation.check_features``: the kernel backends, LpSVDD).
"""

from __future__ import annotations

import functools
from typing import Union

import numpy as np
import torch

from . import _C, rbf_gemm
from .validation import all_finite, check_gamma, overflowing_rows

Array = Union[torch.Tensor, np.ndarray]

__all__ = [
    "rbf_matvec",
    "rbf_columns",
    "rbf_gram",
    "sq_distances",
    "median_sq_distance",
    "median_rows",
    "rpcholesky",
    "matvec64",
    "rmatvec64",
    "fwht",
    "sorf_features",
    "fastfood_features",
    "vector_cos",
    "cpu_isa",
    "supported_cpu_isas",
    "set_cpu_isa",
    "build_info",
    "runs_on",
]


def _check_array(a, name: str) -> None:
    if not isinstance(a, (torch.Tensor, np.ndarray)):
        raise TypeError(f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(a).__name__}")
    if isinstance(a, torch.Tensor) and a.requires_grad:
        raise ValueError(f"{name}: requires grad; these kernels are not differentiable, pass {name}.detach()")


def _same_array(a: Array, b: Array) -> bool:
    """True when b views exactly the memory and layout of a (Y is X)."""
    if a is b:
        return True
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return (a.device == b.device and a.data_ptr() == b.data_ptr() and a.shape == b.shape
                and a.stride() == b.stride() and a.dtype == b.dtype)
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
                and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)
    return False


def _empty(like: Array, shape: tuple) -> Array:
    if isinstance(like, torch.Tensor):
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    return np.empty(shape, dtype=like.dtype)


def _stream(a: Array) -> int:
    """The CUDA stream for an op on a's device (0 on the CPU); every op passes
    its first array here, so a GPU this build has no code for is refused here."""
    if isinstance(a, torch.Tensor) and a.device.type == "cuda":
        _check_gpu(a.device.index if a.device.index is not None else torch.cuda.current_device())
        return torch.cuda.current_stream(a.device).cuda_stream
    return 0


# ---- the build: what it holds, and whether a GPU can run it

@functools.lru_cache(maxsize=None)
def _compiled() -> dict:
    info = dict(_C.build_info())
    info["cuda_architectures"] = [a for a in info["cuda_architectures"].split(",") if a]
    return info


def build_info() -> dict:
    """What this build of the extension holds, and what this CPU runs.

    Returns
    -------
    dict
        ``cuda_version`` (nvcc's, None without CUDA), ``cuda_architectures``
        (CMake's list, e.g. ["75-real", ..., "90"]: "-real" is machine code
        only, a bare number adds PTX that newer GPUs compile at load),
        ``cpu_instruction_sets`` (compiled), ``cpu_supported`` (those this CPU
        runs), ``cpu_active`` (the one in use) and ``compiler``.
    """
    return {**_compiled(), "cpu_supported": supported_cpu_isas(), "cpu_active": cpu_isa()}


def _architecture(entry: str) -> tuple[int, int, str, bool, bool] | None:
    """(major, minor, suffix, machine code, PTX) of a CMake CUDA architecture
    such as "75-real", "90", "90a-real", "80-virtual"; None for "native", "all"."""
    number, _, kind = entry.partition("-")
    digits = number.rstrip("af")
    if not digits.isdigit() or kind not in ("", "real", "virtual"):
        return None
    return int(digits) // 10, int(digits) % 10, number[len(digits):], kind != "virtual", kind != "real"


def runs_on(architectures: list[str], capability: tuple[int, int]) -> bool | None:
    """Whether code built for these CMake architectures runs on a GPU of a compute capability.

    Machine code for X.y runs on X.z with z >= y (arch-specific "a" code on
    X.y alone); PTX for X.y on anything from X.y up.

    Parameters
    ----------
    architectures : list of str
        CMake CUDA architectures, such as ``["75-real", "90"]``.
    capability : tuple of int
        The GPU's compute capability (major, minor).

    Returns
    -------
    bool or None
        Whether it runs; None when the list holds entries it cannot read
        ("native", "all").
    """
    parsed = [_architecture(a) for a in architectures]
    if not parsed or None in parsed:
        return None
    major, minor = capability
    for a_major, a_minor, suffix, sass, ptx in parsed:
        if suffix == "a":
            if (a_major, a_minor) == (major, minor):
                return True
        elif sass and a_major == major and a_minor <= minor:
            return True
        elif ptx and (a_major, a_minor) <= (major, minor):
            return True
    return False


def gpu_refusal(architectures: list[str], capability: tuple[int, int], name: str) -> str | None:
    """The error message for a GPU the build has no code for (None when it has)."""
    if runs_on(architectures, capability) is not False:
        return None
    major, minor = capability
    return (f"dlmsvdd_ext has no CUDA code for {name} (compute capability {major}.{minor}, sm_{major}{minor}): this "
            f"build holds {';'.join(architectures)}; rebuild it with DLMSVDD_CUDA_ARCHITECTURES including "
            f"{major}{minor}-real (pip install . with that variable set)")


@functools.lru_cache(maxsize=None)
def _check_gpu(index: int) -> None:
    """ValueError naming the GPU and the build's architectures when this build cannot run on GPU ``index``."""
    architectures = _compiled()["cuda_architectures"]
    if not architectures:  # no CUDA in this build: the bindings say so
        return
    refusal = gpu_refusal(architectures, torch.cuda.get_device_capability(index), torch.cuda.get_device_name(index))
    if refusal is not None:
        raise ValueError(refusal)


def _gamma_for(gamma, X: Array) -> float:
    """gamma checked in the dtype the kernel computes in (X's; floating
    dtypes only, the bindings refuse the others with their own message)."""
    floating = X.dtype in (torch.float32, torch.float64) if isinstance(X, torch.Tensor) else X.dtype.kind == "f"
    return check_gamma(gamma, X.dtype if floating else None)


def _prepare(X: Array, Y: Array | None) -> tuple[Array, bool]:
    _check_array(X, "X")
    if Y is None:
        return X, True
    _check_array(Y, "Y")
    return Y, _same_array(X, Y)


def _gpu_products(X: Array, cuda_emulation: bool) -> bool:
    """Whether the RBF products run as cuBLAS's product and the CUDA epilogue (``rbf_gemm``):
    on CUDA tensors, and under the emulation (where the same tiles run on the CPU)."""
    return cuda_emulation or (isinstance(X, torch.Tensor) and X.device.type == "cuda")


def _as_torch(*arrays):
    """numpy arrays as torch tensors sharing their memory (the emulated GPU path takes torch)."""
    return [a if a is None or isinstance(a, torch.Tensor) else torch.from_numpy(a) for a in arrays]


def rbf_matvec(X: Array, Y: Array | None, V: Array, gamma: float, *, products: str = "float32",
               cuda_emulation: bool = False) -> Array:
    """``K(X, Y) @ V`` with ``K_ij = exp(-gamma ||x_i - y_j||^2)``, never holding an N x N block.

    On the CPU fused: register-blocked dot products, ``exp`` and the product
    with ``V`` in one pass. On CUDA tensors a tile at a time: cuBLAS's product
    of X and Y, then the package's epilogue (``dlmsvdd_ext.rbf_gemm``). A
    column of ``V`` holding a NaN or an infinity gives NaN in every output of
    that column.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (n_x, d), float32 or float64.
    Y : numpy.ndarray, torch.Tensor or None
        (n_y, d), or None for ``Y = X`` (then each symmetric tile is computed once).
    V : numpy.ndarray or torch.Tensor
        (n_y,) or (n_y, k).
    gamma : float
        The RBF bandwidth.
    products : str
        The dot products' arithmetic on CUDA tensors: "float32" (IEEE, cuBLAS's
        SGEMM or DGEMM) or "3xtf32" (TF32 tensor cores with error compensation,
        float32 inputs; ``dlmsvdd_ext.rbf_gemm``). The CPU computes in IEEE
        arithmetic whatever it says.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for testing the GPU
        logic on machines without a GPU).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        (n_x,) or (n_x, k), the same kind of array as ``X``.
    """
    Y, symmetric = _prepare(X, Y)
    _check_array(V, "V")
    gamma = _gamma_for(gamma, X)
    shape = (X.shape[0],) + tuple(V.shape[1:]) if V.ndim >= 1 else (X.shape[0],)
    out = _empty(X, shape)
    gpu = _gpu_products(X, cuda_emulation)
    _C.rbf_matvec(X, Y, V, out, float(gamma), symmetric, _stream(X), bool(cuda_emulation), gpu)
    if gpu:
        Xt, Yt, Vt, out_t = _as_torch(X, Y, V, out)
        rbf_gemm.check_products(products, Xt.dtype)
        rbf_gemm.matvec(Xt, Yt, Vt, out_t, gamma, symmetric, products, bool(cuda_emulation))
    _nan_columns_of_nonfinite(V, out)
    return out


def _nan_columns_of_nonfinite(V: Array, out: Array) -> None:
    """A column of V holding a NaN or an infinity reaches every output of that
    column; the kernels' sums gave inf or NaN depending on the path (symmetric
    tiles or not, the signs met): NaN, as for every non-finite input."""
    finite = torch.isfinite(torch.as_tensor(V))
    bad = ~finite.all(0) if V.ndim > 1 else ~finite.all()
    if bool(bad.any()):
        if not isinstance(out, torch.Tensor):
            bad = bad.cpu().numpy()
        out[..., bad] = np.nan


def rbf_gram(X: Array, Y: Array | None = None, gamma: float = 1.0, *, products: str = "float32",
             cuda_emulation: bool = False) -> Array:
    """The materialised kernel matrix ``K(X, Y)`` (n_x, n_y), in the dtype of ``X``.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (n_x, d).
    Y : numpy.ndarray, torch.Tensor or None
        (n_y, d); None (or ``X`` itself): only the upper triangle is computed and mirrored.
    gamma : float
        The RBF bandwidth.
    products : str
        The dot products' arithmetic on CUDA tensors, as in ``rbf_matvec``.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        K (n_x, n_y), the same kind of array as ``X``.
    """
    return _gram(X, Y, gamma, distances_only=False, cuda_emulation=cuda_emulation, products=products)


def rbf_columns(X: Array, Y: Array, gamma: float, *, cuda_emulation: bool = False) -> Array:
    """``K(X, Y)`` for a handful of columns ``Y`` (m, d): the Frank-Wolfe primitive.

    Up to 8 columns stream ``X`` once; more fall back to the tiled Gram kernel.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (n, d).
    Y : numpy.ndarray or torch.Tensor
        The column points (m, d).
    gamma : float
        The RBF bandwidth.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        (n, m), the same kind of array as ``X``.
    """
    if Y is None:
        raise ValueError("Y: rbf_columns needs the column points Y")
    return _gram(X, Y, gamma, distances_only=False, cuda_emulation=cuda_emulation)


def sq_distances(X: Array, Y: Array | None = None, *, cuda_emulation: bool = False) -> Array:
    """Squared Euclidean distances ``||x_i - y_j||^2``, clamped at 0.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (n_x, d).
    Y : numpy.ndarray, torch.Tensor or None
        (n_y, d), or None for ``Y = X``.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        (n_x, n_y), the same kind of array as ``X``.
    """
    return _gram(X, Y, 1.0, distances_only=True, cuda_emulation=cuda_emulation)


def _gram(X, Y, gamma, *, distances_only: bool, cuda_emulation: bool, products: str = "float32") -> Array:
    Y, symmetric = _prepare(X, Y)
    if X.ndim != 2 or Y.ndim != 2:
        raise ValueError(f"X and Y must be 2-D (n, d), got {X.ndim}-D and {Y.ndim}-D")
    gamma = 1.0 if distances_only else _gamma_for(gamma, X)
    out = _empty(X, (X.shape[0], Y.shape[0]))
    gpu = _gpu_products(X, cuda_emulation)
    _C.rbf_gram(X, Y, out, float(gamma), symmetric, distances_only, _stream(X), bool(cuda_emulation), gpu)
    if gpu:
        Xt, Yt, out_t = _as_torch(X, Y, out)
        rbf_gemm.check_products(products, Xt.dtype)
        rbf_gemm.gram(Xt, Yt, out_t, gamma, symmetric, distances_only, products, bool(cuda_emulation))
    return out


def median_rows(n: int, max_samples: int = 2000, seed: int | None = 0) -> np.ndarray:
    """The rows ``median_sq_distance`` uses among n (shared with the sharded version).

    Parameters
    ----------
    n : int
        The number of rows.
    max_samples : int
        At most this many rows.
    seed : int or None
        Seeds the subset.

    Returns
    -------
    numpy.ndarray
        All n row indices, or a seeded sorted subset of ``max_samples``.
    """
    m = min(n, int(max_samples))
    return np.arange(n) if m == n else np.sort(np.random.default_rng(seed).choice(n, size=m, replace=False))


def _first_nonfinite_row(X: Array) -> int | None:
    """The first row of X with a NaN or an infinity, or None. A tensor is checked by
    ``all_finite`` first: the n x d mask of isfinite(X) cost more than the rest of a 100k-row
    median estimate (issue 25)."""
    if isinstance(X, torch.Tensor):
        if all_finite(X):
            return None
        return int((~torch.isfinite(X).all(dim=1)).nonzero()[0][0])
    finite = np.isfinite(X).all(axis=1)
    return None if finite.all() else int(np.flatnonzero(~finite)[0])


def median_sq_distance(X: Array, max_samples: int = 2000, seed: int | None = 0) -> float:
    """Median of the squared pairwise distances between rows of ``X``.

    The bandwidth heuristic is ``gamma = 1 / median``.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (n, d), at least 2 rows.
    max_samples : int
        Use a seeded random subset of at most this many rows (all pairs i < j within it).
    seed : int or None
        Seeds the subset.

    Returns
    -------
    float
        The median squared distance.

    Raises
    ------
    ValueError
        A NaN or infinity anywhere in ``X`` (a median that skips them would be
        a bandwidth for other data), or distances that overflow.
    """
    _check_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got {X.ndim}-D")
    row = _first_nonfinite_row(X)
    if row is not None:
        raise ValueError(f"X: row {row} holds a NaN or an infinity; the median distance needs finite features")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 rows for pairwise distances, got {n}")
    if int(max_samples) < 2:
        raise ValueError(f"max_samples must be at least 2, got {max_samples}")
    rows = median_rows(n, max_samples, seed)
    m = len(rows)
    if m < n:
        if isinstance(X, torch.Tensor):
            X = X[torch.as_tensor(rows, device=X.device)]
        else:
            X = X[rows]
    D = sq_distances(X)
    iu = np.triu_indices(m, k=1)
    if isinstance(D, torch.Tensor):
        D = D.cpu().numpy()
    D = D[iu]
    if not np.isfinite(D).all():
        raise ValueError("X: squared distances overflow its dtype; scale the features or use float64")
    return float(np.median(D))


# ---- float64 products of a float32 or float64 matrix

def _float64_vector(a: Array, name: str, length: int, length_of: str) -> Array:
    """A 1-D vector of ``length`` entries, made contiguous (a copy only if it is
    strided); its dtype (float64) and device are the bindings' to check."""
    _check_array(a, name)
    if a.ndim != 1 or a.shape[0] != length:
        raise ValueError(f"{name}: expected shape ({length},) ({length_of}), got {tuple(a.shape)}")
    return a.contiguous() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)


def _float64_out(A: Array, out: Array | None, length: int, length_of: str) -> Array:
    """``out`` checked for shape, or a new float64 vector of the kind and device of ``A``."""
    if out is None:
        if isinstance(A, torch.Tensor):
            return torch.empty(length, dtype=torch.float64, device=A.device)
        return np.empty(length, dtype=np.float64)
    _check_array(out, "out")
    if tuple(out.shape) != (length,):
        raise ValueError(f"out: expected shape ({length},) ({length_of}), got {tuple(out.shape)}")
    return out


def _matrix(A: Array) -> None:
    _check_array(A, "A")
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D (n, k), got {A.ndim}-D")


def matvec64(A: Array, v: Array, *, out: Array | None = None, cuda_emulation: bool = False) -> Array:
    """``A @ v`` in float64 for a float32 or float64 ``A``: float32 storage, float64 accumulation.

    ``out[i] = sum_j float64(A[i, j]) * v[j]``, every product and sum in
    float64, reading ``A`` once (no float64 copy of it). ``A``'s rows may be
    strided (a column slice of a larger matrix) but each must be contiguous.
    A sum that meets a NaN or an infinity is NaN. Each entry's sum has one
    order (per CPU instruction set, and on the GPU), so results repeat exactly.

    Parameters
    ----------
    A : numpy.ndarray or torch.Tensor
        (n, k), float32 or float64.
    v : numpy.ndarray or torch.Tensor
        (k,), float64, on ``A``'s device.
    out : numpy.ndarray, torch.Tensor or None
        (n,), float64, contiguous, on ``A``'s device and sharing no memory with
        ``A`` or ``v``; None: a new array like ``A``.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``A @ v``, (n,) float64: ``out`` when given, else the same kind of array as ``A``.
    """
    _matrix(A)
    n, k = A.shape
    v = _float64_vector(v, "v", k, "A's columns")
    out = _float64_out(A, out, n, "A's rows")
    _C.matvec64(A, v, out, _stream(A), bool(cuda_emulation))
    return out


def rmatvec64(A: Array, u: Array, *, out: Array | None = None, cuda_emulation: bool = False) -> Array:
    """``A.T @ u`` in float64 for a float32 or float64 ``A``: float32 storage, float64 accumulation.

    ``out[j] = sum_i float64(A[i, j]) * u[i]``, every product and sum in
    float64, reading ``A`` once by rows. The rows are cut into slices (how
    many depends on the shape only), each slice's sums are taken in row order
    and the slices' added in slice order, without atomics: results repeat
    exactly, on the CPU whatever the number of threads (per instruction set).
    A sum that meets a NaN or an infinity is NaN.

    Parameters
    ----------
    A : numpy.ndarray or torch.Tensor
        (n, k), float32 or float64; rows may be strided, each contiguous.
    u : numpy.ndarray or torch.Tensor
        (n,), float64, on ``A``'s device.
    out : numpy.ndarray, torch.Tensor or None
        (k,), float64, contiguous, on ``A``'s device and sharing no memory with
        ``A`` or ``u``; None: a new array like ``A``.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``A.T @ u``, (k,) float64: ``out`` when given, else the same kind of array as ``A``.
    """
    _matrix(A)
    n, k = A.shape
    u = _float64_vector(u, "u", n, "A's rows")
    out = _float64_out(A, out, k, "A's columns")
    _C.rmatvec64(A, u, out, _matvec_workspace(A, cuda_emulation), _stream(A), bool(cuda_emulation))
    return out


def _matvec_workspace(A: Array, cuda_emulation: bool):
    """Scratch of the CUDA (or emulated) ``A.T @ u`` (its row slices' sums), by
    torch on A's device; the CPU routine needs none."""
    on_cuda = isinstance(A, torch.Tensor) and A.device.type == "cuda"
    if not (on_cuda or cuda_emulation):
        return None
    nbytes = _C.rmatvec64_workspace_bytes(A.shape[0], A.shape[1])
    return torch.empty((nbytes + 7) // 8, dtype=torch.float64, device=A.device if on_cuda else "cpu")


def fwht(x: Array, normalized: bool = False, out: Array | None = None, cuda_emulation: bool = False) -> Array:
    """The fast Walsh-Hadamard transform of each row of ``x`` (L,) or (rows, L).

    ``H x`` with the Sylvester-order Hadamard matrix (entries +-1, as
    ``scipy.linalg.hadamard(L) @ x``), divided by ``sqrt(L)`` when ``normalized``
    (then orthogonal and its own inverse). L must be a power of two from 2 to
    2^15.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        (L,) or (rows, L).
    normalized : bool
        Divide by ``sqrt(L)``.
    out : numpy.ndarray, torch.Tensor or None
        Where the result goes (same shape, dtype and device; may be ``x``
        itself, for an in-place transform); None: a new array.
    cuda_emulation : bool
        Run the CUDA kernels' code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The transform, ``out`` when given.
    """
    _check_array(x, "x")
    if x.ndim not in (1, 2):
        raise ValueError(f"x must be 1-D (L,) or 2-D (rows, L), got {x.ndim}-D")
    if out is None:
        out = _empty(x, tuple(x.shape))
    else:
        _check_array(out, "out")
        if tuple(out.shape) != tuple(x.shape):
            raise ValueError(f"out: shape {tuple(out.shape)} differs from x's {tuple(x.shape)}")
    x_rows, out_rows = (x[None], out[None]) if x.ndim == 1 else (x, out)  # one row: a (1, L) view
    _C.fwht(x_rows, out_rows, bool(normalized), _stream(x), bool(cuda_emulation))
    return out


# d_pad above this takes the separate FWHT kernels on CUDA (the fused kernel
# holds a block of the map in one tile).
CUDA_FEATURE_MAP_MAX_PAD = _C.cuda_feature_map_max_pad


def _parameter(a: Array, name: str, shape: tuple, like: Array) -> Array:
    """A parameter array of the feature maps: ``shape``, and the kind (torch or
    numpy), dtype and device of ``like``; C-contiguous (copied only if needed)."""
    _check_array(a, name)
    if tuple(a.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(a.shape)}")
    if isinstance(a, torch.Tensor) != isinstance(like, torch.Tensor):
        raise TypeError(f"{name}: must be the same kind of array as x ({type(like).__name__})")
    if a.dtype != like.dtype:
        raise ValueError(f"{name}: dtype {a.dtype} differs from x's {like.dtype}")
    if isinstance(a, torch.Tensor):
        if a.device != like.device:
            raise ValueError(f"{name}: on {a.device}, x on {like.device}")
        return a.contiguous()
    return np.ascontiguousarray(a)


def _stack(arrays: list, like: Array) -> Array:
    return torch.stack(arrays) if isinstance(like, torch.Tensor) else np.stack(arrays)


def _structured(kind: str, x: Array, diagonals: list, names: list, perm, offset: Array, scale: float,
                out: Array | None, cuda_emulation: bool) -> Array:
    """Checks the arguments and runs the fused map."""
    _check_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (rows, d), got {x.ndim}-D")
    first = diagonals[0]
    _check_array(first, names[0])
    if first.ndim != 2:
        raise ValueError(f"the diagonals must be (blocks, d_pad) arrays, got shape {tuple(first.shape)}")
    blocks, d_pad = first.shape
    if d_pad < 2 or d_pad & (d_pad - 1) or d_pad < x.shape[1]:
        raise ValueError(f"d_pad = {d_pad} must be a power of two >= 2 and >= d = {x.shape[1]}")
    _check_array(offset, "offset")
    m = offset.shape[0] if offset.ndim == 1 else -1
    if not (blocks - 1) * d_pad < m <= blocks * d_pad:
        raise ValueError(f"offset must be 1-D with m entries, (blocks - 1) * d_pad < m <= blocks * d_pad "
                         f"= {blocks * d_pad}, got shape {tuple(offset.shape)}")
    if not np.isfinite(float(scale)):
        raise ValueError(f"scale must be finite, got {scale}")
    diag = _stack([_parameter(g, name, (blocks, d_pad), x) for g, name in zip(diagonals, names)], x)
    diag = diag.reshape(3 * blocks, d_pad)
    if perm is not None:
        _check_array(perm, "perm")
        p = np.asarray(perm.cpu() if isinstance(perm, torch.Tensor) else perm)
        if p.shape != (blocks, d_pad) or not np.issubdtype(p.dtype, np.integer):
            raise ValueError(f"perm must be an integer (blocks, d_pad) = {(blocks, d_pad)} array")
        if not (np.sort(p, axis=1) == np.arange(d_pad)).all():
            raise ValueError("perm: each row must be a permutation of 0 .. d_pad - 1")
        # To x's dtype (whole numbers below 2^15: exact), so _C sees floating-point arrays only.
        perm = (torch.as_tensor(p, dtype=x.dtype, device=x.device) if isinstance(x, torch.Tensor)
                else p.astype(x.dtype))
    offset = _parameter(offset, "offset", (m,), x)
    if out is None:
        out = _empty(x, (x.shape[0], m))
    else:
        _check_array(out, "out")
        if tuple(out.shape) != (x.shape[0], m):
            raise ValueError(f"out: expected shape {(x.shape[0], m)}, got {tuple(out.shape)}")
    _C.structured_features(kind, x, diag, perm, offset, out, float(scale), float(np.sqrt(2.0 / m)), _stream(x),
                           bool(cuda_emulation))
    overflow = overflowing_rows(x)  # not non-finite to the map itself, but to the kernel it approximates
    if overflow is not None and bool(overflow.any()):
        out[overflow if isinstance(out, torch.Tensor) else overflow.cpu().numpy()] = np.nan
    return out


def sorf_features(x: Array, signs: Array, offset: Array, scale: float, *, out: Array | None = None,
                  cuda_emulation: bool = False) -> Array:
    """Structured orthogonal random features of the rows of ``x`` (n, d), in one fused pass.

    ``signs`` (3, blocks, d_pad) are the sign diagonals in the order they are
    applied (``signs`` and ``offset`` in ``x``'s dtype, on its device): with ``x`` zero-padded to ``d_pad`` (a power of two >= d) and the
    unnormalised Hadamard matrix H (as ``fwht``), block b gives
    ``y = H D_2 H D_1 H D_0 x`` (``D_s = diag(signs[s, b])``) and the features
    ``sqrt(2/m) cos(scale * y + offset[b d_pad : (b+1) d_pad])``, m = len(offset),
    the last block cut at m. On CUDA, d_pad is at most
    ``CUDA_FEATURE_MAP_MAX_PAD``; on the CPU, 2^15.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        (n, d).
    signs : numpy.ndarray or torch.Tensor
        (3, blocks, d_pad), entries +-1.
    offset : numpy.ndarray or torch.Tensor
        (m,), the phases.
    scale : float
        Multiplies the transformed rows (the bandwidth's frequency scale).
    out : numpy.ndarray, torch.Tensor or None
        (n, m), same dtype and device as ``x``; None: a new array like ``x``.
    cuda_emulation : bool
        Run the CUDA kernel's code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The features (n, m).
    """
    _check_array(signs, "signs")
    if signs.ndim != 3 or signs.shape[0] != 3:
        raise ValueError(f"signs must be (3, blocks, d_pad), got shape {tuple(signs.shape)}")
    return _structured("sorf", x, [signs[0], signs[1], signs[2]], ["signs"] * 3, None, offset, scale, out,
                       cuda_emulation)


def fastfood_features(x: Array, signs: Array, perm: Array, gauss: Array, row_scale: Array, offset: Array,
                      scale: float, *, out: Array | None = None, cuda_emulation: bool = False) -> Array:
    """Fastfood features (Le, Sarlos, Smola 2013) of the rows of ``x``, in one fused pass.

    All of ``signs`` (B), ``perm`` (integers, each row a permutation of
    0 .. d_pad - 1), ``gauss`` (G) and ``row_scale`` (S) are (blocks, d_pad);
    all but ``perm`` in ``x``'s dtype, on its device.
    Block b gives ``y = H G P H B x`` (x zero-padded, H unnormalised, ``(P u)_j =
    u[perm[b, j]]``) and the features ``sqrt(2/m) cos(scale * S y + offset[...])``,
    laid out as in :func:`sorf_features`.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        (n, d).
    signs : numpy.ndarray or torch.Tensor
        B, (blocks, d_pad), entries +-1.
    perm : numpy.ndarray or torch.Tensor
        P, (blocks, d_pad) integers.
    gauss : numpy.ndarray or torch.Tensor
        G, (blocks, d_pad).
    row_scale : numpy.ndarray or torch.Tensor
        S, (blocks, d_pad).
    offset : numpy.ndarray or torch.Tensor
        (m,), the phases.
    scale : float
        Multiplies ``S y``.
    out : numpy.ndarray, torch.Tensor or None
        (n, m), same dtype and device as ``x``; None: a new array like ``x``.
    cuda_emulation : bool
        Run the CUDA kernel's code on the CPU (slow; for tests).

    Returns
    -------
    numpy.ndarray or torch.Tensor
        The features (n, m).
    """
    return _structured("fastfood", x, [signs, gauss, row_scale], ["signs", "gauss", "row_scale"], perm, offset,
                       scale, out, cuda_emulation)


def vector_cos(x: Array) -> Array:
    """The cosine of a contiguous 1-D CPU array by the feature maps' vectorised cosine.

    The current instruction set's; exposed for its tests.

    Parameters
    ----------
    x : numpy.ndarray or torch.Tensor
        1-D, contiguous, on the CPU.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        ``cos(x)``.
    """
    _check_array(x, "x")
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got {x.ndim}-D")
    out = _empty(x, tuple(x.shape))
    _C.vector_cos(x, out)
    return out


def rpcholesky(X: Array, gamma: float, rank: int, seed: int = 0, block_size: int = 1, *,
               cuda_emulation: bool = False) -> tuple[Array, Array]:
    """Randomly pivoted Cholesky of the RBF kernel of ``X``: ``K ~ L L^T``.

    Pivots are sampled with probability proportional to the residual diagonal
    (Chen, Epperly, Tropp, Webber 2023). ``block_size`` 1 takes one pivot at a
    time; ``b > 1`` draws b candidates per round and keeps them through the
    rejection step of accelerated RPCholesky (Epperly, Tropp, Webber 2024),
    computing the accepted pivots' kernel columns together. Same ``seed``, same
    pivots, on every device. Stops early when the residual trace falls below
    1e-12 of K's trace (or only rounding noise is left), so ``L`` may have fewer
    than ``rank`` columns.

    Parameters
    ----------
    X : numpy.ndarray or torch.Tensor
        (N, d).
    gamma : float
        The RBF bandwidth.
    rank : int
        At most this many pivots, 1 to N.
    seed : int
        Seeds the pivots, in [0, 2^64).
    block_size : int
        Candidates drawn per round.
    cuda_emulation : bool
        Run the CUDA code on the CPU (slow; for testing).

    Returns
    -------
    L : numpy.ndarray or torch.Tensor
        (N, rank reached) in ``X``'s dtype on its device.
    pivots : numpy.ndarray or torch.Tensor
        int64, the same kind of array and device as ``X``.
    """
    _check_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got {X.ndim}-D")
    n = X.shape[0]
    rank, block_size, seed = int(rank), int(block_size), int(seed)
    if not 1 <= rank <= n:
        raise ValueError(f"rank must be between 1 and N = {n}, got {rank}")
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    if not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    gamma = _gamma_for(gamma, X)
    L = _empty(X, (n, rank))
    pivots = np.empty(rank, dtype=np.int64)  # the sampling runs on the host, whatever X's device
    on_cuda = isinstance(X, torch.Tensor) and X.device.type == "cuda"
    workspace = None
    if on_cuda or cuda_emulation:
        nbytes = _C.rpcholesky_workspace_bytes(n, X.shape[1], rank, block_size, X.dtype.itemsize)
        workspace = torch.empty((nbytes + 7) // 8, dtype=torch.float64, device=X.device if on_cuda else "cpu")
    reached = _C.rpcholesky(X, L, pivots, gamma, seed, block_size, workspace, _stream(X), cuda_emulation)
    if reached < rank:
        L = L[:, :reached].clone() if isinstance(L, torch.Tensor) else L[:, :reached].copy()
    pivots = pivots[:reached]
    if isinstance(X, torch.Tensor):
        pivots = torch.from_numpy(pivots).to(X.device)
    return L, pivots


def cpu_isa() -> str:
    """The instruction set the CPU kernels use now.

    Returns
    -------
    str
        "avx512", "avx2" or "generic".
    """
    return _C.cpu_isa()


def supported_cpu_isas() -> list[str]:
    """The instruction sets this CPU can run.

    Returns
    -------
    list of str
        Lowest first.
    """
    return list(_C.supported_cpu_isas())


def set_cpu_isa(name: str) -> None:
    """Use the CPU kernels built for an instruction set (also settable with ``DLMSVDD_CPU_ISA``).

    Parameters
    ----------
    name : str
        "generic", "avx2" or "avx512", one this CPU runs.
    """
    _C.set_cpu_isa(name)


# ---- the large-margin lp-SVDD dual (used by dlmsvdd_ext.solver)

def _dual_workspace(alpha, cuda_emulation: bool):
    """Scratch of the CUDA (or emulated) oracle's reduction, by torch on alpha's
    device; the CPU routines need none. float64 because DLPack views carry
    floating-point arrays only."""
    on_cuda = isinstance(alpha, torch.Tensor) and alpha.device.type == "cuda"
    if not (on_cuda or cuda_emulation):
        return None
    nbytes = _C.dual_oracle_workspace_bytes(alpha.shape[0])
    return torch.empty((nbytes + 7) // 8, dtype=torch.float64, device=alpha.device if on_cuda else "cpu")


def dual_oracle(alpha: torch.Tensor, Ka: torch.Tensor, t: torch.Tensor, coefs: dict, *,
                cuda_emulation: bool = False, shard: bool = False) -> dict:
    """One fused pass over the dual at ``alpha`` with ``Ka = K (alpha * t)``.

    Returns the objective (``quadratic`` + ``penalty``), the Frank-Wolfe gap and
    ``alpha_dot_g``, the linear-oracle atoms (``fw_normal``, ``fw_anomaly``:
    smallest gradient per class, -1 for an empty class) with their gradients,
    and the pairwise away atoms (largest gradient among alpha > 0, likewise).
    Ties go to the lowest index. ``coefs`` holds ``q``, ``pen_normal``,
    ``pen_anomaly``, ``mu_normal``, ``mu_anomaly``. CUDA tensors run the CUDA
    kernels; ``cuda_emulation=True`` runs those kernels' code on CPU tensors
    (slow; for testing the GPU logic without a GPU).

    Labels must be exactly +1 or -1 (ValueError otherwise); the problem needs
    a normal sample, and without anomalies ``mu_anomaly = 0`` (nu = 1).
    ``shard=True``: ``t`` is one shard of the problem's labels (the sharded
    solver's), which may hold no normal sample.
    """
    return _C.dual_oracle(alpha, Ka, t, coefs, _dual_workspace(alpha, cuda_emulation), cuda_emulation,
                          _stream(alpha), bool(shard))


def fw_solve(alpha: torch.Tensor, Ka: torch.Tensor, t: torch.Tensor, coefs: dict, *, method: str,
             max_iter: int, tol: float, source: str, matrix: torch.Tensor, gamma: float = 0.0,
             cache_slots: int = 2, step_offset: int = 0, cuda_emulation: bool = False) -> dict:
    """Frank-Wolfe iterations in compiled code, in place on ``alpha`` and ``Ka``.

    ``method`` is ``"vanilla"`` (step 2/(tau+2+step_offset)) or ``"pairwise"``
    (exact line search). Kernel columns come from ``source``: ``"dense"`` (K
    itself), ``"features"`` (exact RBF columns of ``X`` with ``gamma``, LRU-cached
    in ``cache_slots`` columns) or ``"factor"`` (``Z Z[i]^T``, cached likewise).
    ``matrix`` is in the state's dtype (``alpha``, ``Ka`` and ``t`` share one),
    or float32 under a float64 state: a float32 K, X or Z then gives float32
    columns, each entry widened as it is read, while the weights, ``K a``, the
    oracle and the certificate stay float64 (no float64 copy of K).
    Returns ``n_iter``, ``converged``, ``stop`` (why it stopped: ``"converged"``
    when ``0 <= gap <= tol |objective|``, ``"max_iter"``, ``"no_descent"``,
    ``"not_finite"`` or ``"negative_gap"``, the last three unconverged) and the
    per-iteration ``history_objective`` and ``history_gap`` (float64 CPU
    tensors, ``n_iter + 1`` entries). Labels are checked as in
    :func:`dual_oracle` before anything is written (ValueError). The loop
    runs on the host; with CUDA tensors its passes are CUDA kernels, and
    ``cuda_emulation=True`` runs those kernels' code on CPU tensors.
    """
    hist_obj = torch.empty(max_iter + 1, dtype=torch.float64)
    hist_gap = torch.empty(max_iter + 1, dtype=torch.float64)
    cache = None
    if source != "dense":  # the column cache's memory (the columns' dtype), allocated by torch on alpha's device
        cache = torch.empty(max(2, int(cache_slots)), alpha.shape[0], dtype=matrix.dtype, device=alpha.device)
    info = _C.fw_solve(alpha, Ka, t, coefs, method, max_iter, tol, step_offset, hist_obj, hist_gap,
                       source, matrix, float(gamma), cache, _dual_workspace(alpha, cuda_emulation), cuda_emulation,
                       _stream(alpha))
    n = info["n_iter"] + 1
    info["history_objective"] = hist_obj[:n]
    info["history_gap"] = hist_gap[:n]
    return info


def pairwise_step(g_s: float, g_a: float, alpha_s: float, alpha_a: float, curvature: float, pen: float,
                  q: float) -> float:
    """Pairwise Frank-Wolfe's exact line search, the compiled loop's own: the
    mass in [0, alpha_a] moved from the away atom a to the Frank-Wolfe atom s
    of one class, given their gradients, weights, the curvature
    ``K_ss + K_aa - 2 K_sa`` and the class's penalty ``pen`` with power ``q``."""
    return float(_C.pairwise_step(float(g_s), float(g_a), float(alpha_s), float(alpha_a), float(curvature),
                                  float(pen), float(q)))


def simplex_project(v: torch.Tensor, t: torch.Tensor, mu_normal: float, mu_anomaly: float, *,
                    out: torch.Tensor | None = None, cuda_emulation: bool = False) -> torch.Tensor:
    """Each class of ``v`` projected onto its scaled simplex, in O(N) passes.

    Entries with ``t > 0`` go onto ``{x >= 0, sum(x) = mu_normal}``, the
    others onto ``{x >= 0, sum(x) = mu_anomaly}``: ``max(v - theta_k, 0)``
    with the threshold found by Michelot's algorithm (Newton's method on the
    threshold from the left; the sort-based algorithm's formula on the same
    support, in a few passes over ``v`` instead of a sort). A class with no
    mass gets zeros; NaN in ``v`` gives NaN.

    Parameters
    ----------
    v : torch.Tensor
        The point, float64, 1-D.
    t : torch.Tensor
        The classes, float64, as long as ``v``.
    mu_normal : float
        The normal class's mass (>= 0).
    mu_anomaly : float
        The anomalous class's mass (>= 0).
    out : torch.Tensor or None
        Where to write the projection (may be ``v``); a new tensor when None.
    cuda_emulation : bool
        Run the CUDA kernels' code on CPU tensors (slow; for testing).

    Returns
    -------
    torch.Tensor
        The projection.
    """
    out = torch.empty_like(v) if out is None else out
    _C.simplex_project(v, t, float(mu_normal), float(mu_anomaly), out, _dual_workspace(v, cuda_emulation),
                       cuda_emulation, _stream(v))
    return out


def apg_step(x: torch.Tensor, x_prev: torch.Tensor, Kx: torch.Tensor, Kx_prev: torch.Tensor, t: torch.Tensor,
             coefs: dict, beta: float, steps: tuple[float, float], *, out: torch.Tensor | None = None,
             cuda_emulation: bool = False) -> torch.Tensor:
    """APG's gradient step with its projection, fused in compiled passes.

    ``y = x + beta (x - x_prev)`` and ``K y = Kx + beta (Kx - Kx_prev)``; the
    result is ``P(y - grad F(y) / step_k)``, each class projected onto its
    scaled simplex (:func:`simplex_project`) with ``step_k`` the metric of the
    element's class.

    Parameters
    ----------
    x, x_prev : torch.Tensor
        The current and the previous iterate, float64.
    Kx, Kx_prev : torch.Tensor
        ``K (x * t)`` and ``K (x_prev * t)``.
    t : torch.Tensor
        The labels, +1 normal and -1 anomalous, float64.
    coefs : dict
        The dual's constants (``DualProblem.coefs``).
    beta : float
        The momentum.
    steps : tuple of float
        ``(step_normal, step_anomaly)``, each > 0.
    out : torch.Tensor or None
        Where to write the new iterate (not sharing memory with the inputs).
    cuda_emulation : bool
        Run the CUDA kernels' code on CPU tensors (slow; for testing).

    Returns
    -------
    torch.Tensor
        The new iterate.
    """
    out = torch.empty_like(x) if out is None else out
    _C.apg_step(x, x_prev, Kx, Kx_prev, t, coefs, float(beta), float(steps[0]), float(steps[1]), out,
                _dual_workspace(x, cuda_emulation), cuda_emulation, _stream(x))
    return out


def apg_check(x: torch.Tensor, x_prev: torch.Tensor, Kx: torch.Tensor, Kx_prev: torch.Tensor,
              x_new: torch.Tensor, Kx_new: torch.Tensor, t: torch.Tensor, coefs: dict, beta: float,
              steps: tuple[float, float], *, cuda_emulation: bool = False) -> dict:
    """One pass after APG's kernel product: the oracle at the new iterate and
    what the backtracking and the restart test need.

    Parameters
    ----------
    x, x_prev : torch.Tensor
        The iterates the step started from (as for :func:`apg_step`).
    Kx, Kx_prev : torch.Tensor
        Their kernel products.
    x_new, Kx_new : torch.Tensor
        The new iterate and ``K (x_new * t)``.
    t : torch.Tensor
        The labels, +1 normal and -1 anomalous, float64.
    coefs : dict
        The dual's constants (``DualProblem.coefs``).
    beta : float
        The momentum of the step.
    steps : tuple of float
        ``(step_normal, step_anomaly)`` of the step.
    cuda_emulation : bool
        Run the CUDA kernels' code on CPU tensors (slow; for testing).

    Returns
    -------
    dict
        :func:`dual_oracle`'s keys at ``x_new`` (its ``objective`` is F(x_new)),
        and ``objective_y`` = F(y), ``g_dot_d`` = <grad F(y), x_new - y>,
        ``step_d2`` = sum step_k (x_new - y)^2 and ``restart`` =
        sum step_k (y - x_new)(x_new - x), whose sign restarts the momentum.
    """
    return _C.apg_check(x, x_prev, Kx, Kx_prev, x_new, Kx_new, t, coefs, float(beta), float(steps[0]),
                        float(steps[1]), _dual_workspace(x, cuda_emulation), cuda_emulation, _stream(x))
