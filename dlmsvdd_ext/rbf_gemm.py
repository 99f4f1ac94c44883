"""The RBF products on CUDA tensors: cuBLAS's matrix product, then this package's epilogue.

Why (issue 48): the fused tile kernel reached 17-19 TFLOP/s on an H100 where cuBLAS's SGEMM
of the same shape reaches 47-49, so at the paper's shape it was slower than unfused torch. A
kernel value is a function of one dot product and two norms, so the work is a matrix product
plus a pass over its result: ``K(X, Y) @ V`` and ``K(X, Y)`` are computed a block of rows of X
at a time, ``S = X_r Y_c^T`` by ``torch.mm`` (cuBLAS), then an epilogue kernel of this package
(csrc/cuda/rbf_epilogue_kernels.cuh) turns ``S`` into kernel values, or sums the block's part
of ``K V`` for up to ``MAX_EPILOGUE_COLUMNS`` columns of V in float64 (more columns: kernel
values, then cuBLAS's product with V). No atomics: the same numbers at every call.

A row's value does not depend on the rows it comes with: cuBLAS picks its kernel (tiles,
split-K) by the product's shape and the operands' alignment, and a kernel of another shape sums
in another order. So every product has ``BLOCK_ROWS`` rows, from one buffer: a block of X (the
last one padded with zeros) is copied into it, its norms are taken there, and the columns come
in tiles whose widths depend on Y alone. Scoring a row alone, in a batch or in the training set
gives the same bits, as on the CPU.

``products`` chooses the dot products' arithmetic:

* ``"float32"``: IEEE float32 (or float64 for float64 inputs): cuBLAS's SGEMM / DGEMM.
* ``"3xtf32"``: the TF32 tensor cores with error compensation, float32 inputs only. Each
  operand is split into a TF32 part and its remainder (``split_tf32``), and one product of
  depth 3d sums ``big_x big_y + big_x small_y + small_x big_y`` (the ``small small`` term is
  below float32's rounding): three TF32 products at the tensor cores' rate, with float32's
  accuracy; its error against float64 is measured in ``tests/benchmarks/gpu_kernels.py``.

With ``cuda_emulation`` the same blocks run on the CPU (torch.mm on the CPU, the epilogue
kernels through the CUDA emulation): how this path is tested without a GPU.
"""

from __future__ import annotations

import torch

from . import _C
from .tf32 import float32_products

PRODUCTS = ("float32", "3xtf32")
MAX_EPILOGUE_COLUMNS = 8  # csrc/common/rbf_params.h: kRbfDotsMaxColumns
SEGMENT_COLUMNS = 512  # csrc/common/rbf_params.h: kRbfDotsSegment (a warp sums this many columns of a row)
BLOCK_ROWS = 1024  # the rows of every product (a GPU epilogue runs a warp per row)
TILE_BYTES = 256 << 20  # the largest block of S a product holds
MIN_TILE_COLUMNS = 256  # a narrower product is all launch


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


def _operand(X: torch.Tensor, products: str, side: str) -> torch.Tensor:
    """What enters the product for rows X: X itself, or for "3xtf32" [big, big, small] (side "x")
    and [big, small, big] (side "y"), whose product sums the three terms."""
    if products == "float32":
        return X
    big, small = split_tf32(X)
    return torch.cat([big, big, small] if side == "x" else [big, small, big], dim=1)


def _norms(X: torch.Tensor) -> torch.Tensor:
    """Squared row norms, in X's dtype (the epilogue makes a non-finite one NaN)."""
    return X.square().sum(1)


def _stream(X: torch.Tensor) -> int:
    return torch.cuda.current_stream(X.device).cuda_stream if X.is_cuda else 0


def _column_tiles(m: int, item: int, budget: int) -> list[tuple[int, int]]:
    """The column ranges of Y a product takes at a time: as wide as ``budget`` allows for
    ``BLOCK_ROWS`` rows (one tile up to 65,536 columns in float32), from Y's size alone."""
    width = max(MIN_TILE_COLUMNS, budget // (BLOCK_ROWS * item))
    return [(c0, min(m, c0 + width)) for c0 in range(0, m, width)]


class _Blocks:
    """The blocks of rows of X, each in the same buffer (``BLOCK_ROWS`` rows, zero padding),
    against Y's operand and norms: ``dots(r0, c0, c1)`` is the block's S for columns c0:c1."""

    def __init__(self, X: torch.Tensor, Y: torch.Tensor, products: str, tile_bytes: int):
        self.X, self.products = X, products
        self.B, self.y_norm = _operand(Y, products, "y"), _norms(Y)
        self.rows = torch.zeros((BLOCK_ROWS, X.shape[1]), dtype=X.dtype, device=X.device)
        self.tiles = _column_tiles(Y.shape[0], X.element_size(), tile_bytes)
        widest = max(c1 - c0 for c0, c1 in self.tiles)
        self.work = torch.empty(BLOCK_ROWS * widest, dtype=X.dtype, device=X.device)

    def load(self, r0: int) -> tuple[int, torch.Tensor]:
        """Rows r0:r0 + BLOCK_ROWS of X into the buffer: how many there are, and their norms."""
        count = min(BLOCK_ROWS, self.X.shape[0] - r0)
        self.rows[:count] = self.X[r0:r0 + count]
        if count < BLOCK_ROWS:
            self.rows[count:] = 0
        self.A = _operand(self.rows, self.products, "x")
        return count, _norms(self.rows)

    def dots(self, c0: int, c1: int) -> torch.Tensor:
        S = self.work[:BLOCK_ROWS * (c1 - c0)].view(BLOCK_ROWS, c1 - c0)
        with float32_products("tf32" if self.products == "3xtf32" else "ieee"):
            return torch.mm(self.A, self.B[c0:c1].T, out=S)


def matvec(X: torch.Tensor, Y: torch.Tensor, V: torch.Tensor, out: torch.Tensor, gamma: float, same: bool,
           products: str = "float32", emulation: bool = False, tile_bytes: int | None = None) -> torch.Tensor:
    """``out = K(X, Y) @ V`` (V (m,) or (m, k)), arguments already checked (``ops.rbf_matvec``).
    ``same``: Y is X (nothing changes here: every product takes blocks of X's rows)."""
    n, m = X.shape[0], Y.shape[0]
    V2 = V.reshape(m, -1)
    out2 = out.view(n, -1)
    k = V2.shape[1]
    if n == 0 or k == 0:
        return out
    if m == 0:
        return out.zero_()
    blocks = _Blocks(X, Y, products, TILE_BYTES if tile_bytes is None else tile_bytes)
    stream = _stream(X)
    few = k <= MAX_EPILOGUE_COLUMNS
    acc = torch.empty((BLOCK_ROWS, k), dtype=torch.float64 if few else X.dtype, device=X.device)
    widest = max(c1 - c0 for c0, c1 in blocks.tiles)
    partial = torch.empty(-(-widest // SEGMENT_COLUMNS) * BLOCK_ROWS * k if few else 0, dtype=torch.float64,
                          device=X.device)  # the epilogue's sums of each row's column segments
    for r0 in range(0, n, BLOCK_ROWS):
        count, x_norm = blocks.load(r0)
        for c0, c1 in blocks.tiles:
            S = blocks.dots(c0, c1)
            if few:  # the epilogue on the block's rows alone (the padding is never summed)
                _C.rbf_dots_matvec(S[:count], x_norm[:count], blocks.y_norm[c0:c1], V2[c0:c1], acc[:count], partial,
                                   float(gamma), c0 > 0, stream, emulation)
                continue
            _C.rbf_dots_to_kernel(S, x_norm, blocks.y_norm[c0:c1], float(gamma), False, stream, emulation)
            with float32_products("ieee"):
                if c0 == 0:
                    torch.mm(S, V2[c0:c1], out=acc)
                else:
                    acc.addmm_(S, V2[c0:c1])
        out2[r0:r0 + count] = acc[:count]
    return out


def gram(X: torch.Tensor, Y: torch.Tensor, out: torch.Tensor, gamma: float, same: bool, distances_only: bool,
         products: str = "float32", emulation: bool = False) -> torch.Tensor:
    """``out = K(X, Y)`` (or the squared distances), arguments already checked (``ops.rbf_gram``)."""
    n, m = X.shape[0], Y.shape[0]
    if n == 0 or m == 0:
        return out
    blocks = _Blocks(X, Y, products, TILE_BYTES)
    stream = _stream(X)
    for r0 in range(0, n, BLOCK_ROWS):
        count, x_norm = blocks.load(r0)
        for c0, c1 in blocks.tiles:
            S = blocks.dots(c0, c1)
            _C.rbf_dots_to_kernel(S[:count], x_norm[:count], blocks.y_norm[c0:c1], float(gamma), distances_only,
                                  stream, emulation, out[r0:r0 + count, c0:c1])
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
