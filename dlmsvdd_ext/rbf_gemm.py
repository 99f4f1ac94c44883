"""The RBF products on CUDA tensors: cuBLAS's matrix product, then this package's epilogue.

Why (issue 48): the fused tile kernel reached 17-19 TFLOP/s on an H100 where cuBLAS's SGEMM
of the same shape reaches 47-49, so at the paper's shape it was slower than unfused torch. A
kernel value is a function of one dot product and two norms, so the work is a matrix product
plus a pass over its result: ``K(X, Y) @ V`` and ``K(X, Y)`` are computed a tile at a time,
``S = X_r Y_c^T`` by ``torch.mm`` (cuBLAS), then an epilogue kernel of this package
(csrc/cuda/rbf_epilogue_kernels.cuh) turns ``S`` into kernel values in place, or sums the
tile's part of ``K V`` for up to ``MAX_EPILOGUE_COLUMNS`` columns of V in float64 (more
columns: kernel values, then cuBLAS's product with V). No atomics: the same numbers at every
call.

``products`` chooses the dot products' arithmetic:

* ``"float32"``: IEEE float32 (or float64 for float64 inputs): cuBLAS's SGEMM / DGEMM.
* ``"3xtf32"``: the TF32 tensor cores with error compensation, float32 inputs only. Each
  operand is split into a TF32 part and its remainder (``split_tf32``), and one product of
  depth 3d sums ``big_x big_y + big_x small_y + small_x big_y`` (the ``small small`` term is
  below float32's rounding): three TF32 products at the tensor cores' rate, with float32's
  accuracy; its error against float64 is measured in ``tests/benchmarks``.

With ``cuda_emulation`` the same tiles run on the CPU (torch.mm on the CPU, the epilogue
kernels through the CUDA emulation): how this path is tested without a GPU.
"""

from __future__ import annotations

import torch

from . import _C
from .tf32 import float32_products

PRODUCTS = ("float32", "3xtf32")
MAX_EPILOGUE_COLUMNS = 8  # csrc/common/rbf_params.h: kRbfDotsMaxColumns
TILE_BYTES = 256 << 20  # the largest tile of S a product holds (K @ V); the Gram matrix is its own


def check_products(products: str, dtype: torch.dtype) -> None:
    """``products`` is one of ``PRODUCTS``, and "3xtf32" meets float32 inputs."""
    if products not in PRODUCTS:
        raise ValueError(f"products must be one of {PRODUCTS}, got {products!r}")
    if products == "3xtf32" and dtype != torch.float32:
        raise ValueError(f"products '3xtf32' computes float32 products; got {dtype} inputs: use products='float32'")


def split_tf32(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``A = big + small`` with ``big`` rounded to TF32 (10 mantissa bits, to nearest) and
    ``small`` the exact float32 remainder (|small| <= 2^-11 |A|)."""
    bits = A.contiguous().view(torch.int32)
    big = ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return big, A - big


def _operands(X: torch.Tensor, Y: torch.Tensor, same: bool, products: str):
    """The matrices whose product gives the dot products: X and Y, or for "3xtf32" the
    concatenations [big_x, big_x, small_x] and [big_y, small_y, big_y]."""
    if products == "float32":
        return X, Y
    big_x, small_x = split_tf32(X)
    A = torch.cat([big_x, big_x, small_x], dim=1)
    if same:
        big_y, small_y = big_x, small_x
    else:
        big_y, small_y = split_tf32(Y)
    return A, torch.cat([big_y, small_y, big_y], dim=1)


def _norms(X: torch.Tensor) -> torch.Tensor:
    """Squared row norms, in X's dtype (the epilogue makes a non-finite one NaN)."""
    return X.square().sum(1)


def _dots(A: torch.Tensor, B: torch.Tensor, out: torch.Tensor, products: str) -> torch.Tensor:
    with float32_products("tf32" if products == "3xtf32" else "ieee"):
        return torch.mm(A, B.T, out=out)


def _tiles(n: int, m: int, item: int, budget: int) -> tuple[int, int]:
    """(rows, columns) of a tile of S within ``budget`` bytes: whole rows when they fit, else
    up to 16384 rows and as many columns as fit. Many rows: the epilogue runs a warp per row, and
    at 2048 rows it kept 8 warps per SM of an H100 busy, a sixth of its memory bandwidth (issue 48)."""
    if n * m * item <= budget:
        return max(n, 1), max(m, 1)
    rows = min(n, 16384)
    cols = min(m, max(256, budget // (rows * item)))
    return min(n, max(1, budget // (cols * item))), cols


def _stream(X: torch.Tensor) -> int:
    return torch.cuda.current_stream(X.device).cuda_stream if X.is_cuda else 0


def matvec(X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, out: torch.Tensor, gamma: float, same: bool,
           products: str = "float32", emulation: bool = False, tile_bytes: int | None = None) -> torch.Tensor:
    """``out = K(X, Y) @ V`` (V (m,) or (m, k)), arguments already checked (``ops.rbf_matvec``)."""
    n, m = X.shape[0], Y.shape[0]
    V2 = V.reshape(m, -1)
    out2 = out.view(n, -1)
    k = V2.shape[1]
    if n == 0 or k == 0:
        return out
    if m == 0:
        return out.zero_()
    A, B = _operands(X, Y, same, products)
    x_norm, y_norm = _norms(X), (None if same else _norms(Y))
    y_norm = x_norm if same else y_norm
    rows, cols = _tiles(n, m, X.element_size(), TILE_BYTES if tile_bytes is None else tile_bytes)
    work = torch.empty(rows * cols, dtype=X.dtype, device=X.device)
    stream = _stream(X)
    acc = torch.empty((n, k), dtype=torch.float64, device=X.device) if k <= MAX_EPILOGUE_COLUMNS else None
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        for c0 in range(0, m, cols):
            c1 = min(m, c0 + cols)
            S = _dots(A[r0:r1], B[c0:c1], work[:(r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0), products)
            if acc is not None:
                _C.rbf_dots_matvec(S, x_norm[r0:r1], y_norm[c0:c1], V2[c0:c1], acc[r0:r1], float(gamma),
                                   c0 > 0, stream, emulation)
                continue
            _C.rbf_dots_to_kernel(S, x_norm[r0:r1], y_norm[c0:c1], float(gamma), False, stream, emulation)
            with float32_products("ieee"):
                if c0 == 0:
                    torch.mm(S, V2[c0:c1], out=out2[r0:r1])
                else:
                    out2[r0:r1].addmm_(S, V2[c0:c1])
    if acc is not None:
        out2.copy_(acc)
    return out


def gram(X: torch.Tensor, Y: torch.Tensor, out: torch.Tensor, gamma: float, same: bool, distances_only: bool,
         products: str = "float32", emulation: bool = False) -> torch.Tensor:
    """``out = K(X, Y)`` (or the squared distances), arguments already checked (``ops.rbf_gram``)."""
    if X.shape[0] == 0 or Y.shape[0] == 0:
        return out
    A, B = _operands(X, Y, same, products)
    x_norm = _norms(X)
    y_norm = x_norm if same else _norms(Y)
    S = _dots(A, B, out, products)
    _C.rbf_dots_to_kernel(S, x_norm, y_norm, float(gamma), distances_only, _stream(X), emulation)
    if same:
        _mirror_upper(out)
    return out


def _mirror_upper(K: torch.Tensor, block: int = 1024) -> None:
    """K's lower triangle := its upper triangle's transpose, so that K(X, X) is exactly
    symmetric (a product's (i, j) and (j, i) entries are summed in different orders)."""
    n = K.shape[0]
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        K[r0:r1, :r0] = K[:r0, r0:r1].T
        diagonal = K[r0:r1, r0:r1]
        diagonal.copy_(torch.triu(diagonal) + torch.triu(diagonal, 1).T)
