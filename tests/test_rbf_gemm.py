"""The GPU's RBF products as a matrix product and the package's epilogue (dlmsvdd_ext.rbf_gemm), run
here through the CUDA emulation: tiles summed in a fixed order (the same bits at every call, whatever
the tiling up to rounding), the 3xTF32 split exact and its products within float32's reach of float64
even when every operand is cut to TF32 as the tensor cores do, and bad arguments refused."""

import numpy as np
import pytest
import torch

from dlmsvdd_ext import ops, rbf_gemm

from conftest import rbf_reference, rel_err


def _points(n, d, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1).to(dtype)


@pytest.mark.parametrize("k", [1, 3, 12])
def test_blocks_and_tiles_add_up_to_the_whole_product_and_repeat_bit_for_bit(k, monkeypatch):
    X, Y = _points(70, 9, 0), _points(150, 9, 1)
    V = torch.randn(150, k, generator=torch.Generator().manual_seed(2))
    ref = rbf_reference(X.numpy(), Y.numpy(), 0.7) @ V.double().numpy()
    whole = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, whole, 0.7, False, emulation=True)
    monkeypatch.setattr(rbf_gemm, "BLOCK_ROWS", 16)  # five blocks of rows, the last one padded
    monkeypatch.setattr(rbf_gemm, "MIN_TILE_COLUMNS", 64)
    tiled = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, tiled, 0.7, False, emulation=True, tile_bytes=16 * 64 * 4)  # columns 64 at a time
    assert len(rbf_gemm._column_tiles(150, 4, 16 * 64 * 4)) == 3
    assert rel_err(whole, ref) < 1e-5 and rel_err(tiled, ref) < 1e-5
    again = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, again, 0.7, False, emulation=True, tile_bytes=16 * 64 * 4)
    assert torch.equal(tiled, again)  # no atomics: the same order of sums at every call


def test_column_tiles_cover_y_within_the_budget():
    for m, budget in [(6000, 256 << 20), (200000, 256 << 20), (50000, 32 << 20), (3, 16)]:
        tiles = rbf_gemm._column_tiles(m, 4, budget)
        assert tiles[0][0] == 0 and tiles[-1][1] == m and all(a[1] == b[0] for a, b in zip(tiles, tiles[1:]))
        assert all(rbf_gemm.BLOCK_ROWS * (c1 - c0) * 4 <= max(budget, rbf_gemm.BLOCK_ROWS * rbf_gemm.MIN_TILE_COLUMNS * 4)
                   for c0, c1 in tiles)


@pytest.mark.parametrize("products", ["float32", "3xtf32"])
def test_a_row_scores_the_same_bits_alone_in_a_batch_or_among_many(products, monkeypatch):
    """Every product has BLOCK_ROWS rows from one buffer, so a row's value does not depend on the
    rows it comes with (cuBLAS's kernel, hence its order of sums, follows the product's shape)."""
    monkeypatch.setattr(rbf_gemm, "BLOCK_ROWS", 16)
    X, Y = _points(40, 7, 8), _points(30, 7, 9)
    V = torch.randn(30, 2, generator=torch.Generator().manual_seed(3))
    many = ops.rbf_matvec(X, Y, V, 0.5, products=products, cuda_emulation=True)
    gram = ops.rbf_gram(X, Y, 0.5, products=products, cuda_emulation=True)
    for rows in (slice(5, 6), slice(3, 20), slice(17, 40)):
        assert torch.equal(ops.rbf_matvec(X[rows], Y, V, 0.5, products=products, cuda_emulation=True), many[rows])
        assert torch.equal(ops.rbf_gram(X[rows], Y, 0.5, products=products, cuda_emulation=True), gram[rows])


def test_split_tf32_is_exact_and_its_big_part_has_ten_mantissa_bits():
    A = torch.randn(1000, dtype=torch.float32) * torch.logspace(-20, 20, 1000)
    big, small = rbf_gemm.split_tf32(A)
    assert torch.equal(big + small, A)
    assert ((big.view(torch.int32) & 0x1FFF) == 0).all()
    assert (small.abs() <= 2.0 ** -11 * A.abs()).all()


def _as_tf32(A):
    """What a TF32 tensor core reads of a float32: the low 13 mantissa bits dropped."""
    return (A.view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_three_tf32_products_keep_float32_accuracy():
    """The split's three products, each operand cut to TF32 and summed in float32 (a tensor core's
    arithmetic), against float64: as close as a float32 product; one TF32 product is far off."""
    X, Y = _points(200, 256, 3), _points(300, 256, 4)
    exact = X.double() @ Y.double().T
    A, B = rbf_gemm._operand(X, "3xtf32", "x"), rbf_gemm._operand(Y, "3xtf32", "y")
    three = _as_tf32(A) @ _as_tf32(B).T
    float32 = X @ Y.T
    one = _as_tf32(X) @ _as_tf32(Y).T
    error = lambda S: float((S.double() - exact).abs().max())  # noqa: E731
    assert error(three) < 2 * error(float32) + 1e-7
    assert error(one) > 20 * error(three)


@pytest.mark.parametrize("products", ["float32", "3xtf32"])
def test_emulated_products_of_both_modes_match_the_cpu(products):
    X, Y = _points(40, 33, 5), _points(57, 33, 6)
    V = torch.randn(57, 2, generator=torch.Generator().manual_seed(7))
    np.testing.assert_allclose(ops.rbf_matvec(X, Y, V, 0.5, products=products, cuda_emulation=True),
                               ops.rbf_matvec(X, Y, V, 0.5), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.rbf_gram(X, Y, 0.5, products=products, cuda_emulation=True),
                               ops.rbf_gram(X, Y, 0.5), rtol=1e-5, atol=1e-6)
    K = ops.rbf_gram(X, None, 0.5, products=products, cuda_emulation=True)
    assert torch.equal(K, K.T)


def test_bad_products_are_refused():
    X = _points(4, 3, 0)
    with pytest.raises(ValueError, match="products must be one of"):
        ops.rbf_matvec(X, X, torch.ones(4), 1.0, products="tf32", cuda_emulation=True)
    with pytest.raises(ValueError, match="products '3xtf32' computes float32 products"):
        ops.rbf_gram(X.double(), None, 1.0, products="3xtf32", cuda_emulation=True)


def test_rows_wider_than_a_segment_add_their_segments_in_order():
    """Rows of 1100 columns: three segments of 512, summed by different warps, then added in order."""
    X, Y = _points(20, 5, 10), _points(1100, 5, 11)
    V = torch.randn(1100, 2, generator=torch.Generator().manual_seed(12))
    out = ops.rbf_matvec(X, Y, V, 0.9, cuda_emulation=True)
    assert rel_err(out, rbf_reference(X.numpy(), Y.numpy(), 0.9) @ V.double().numpy()) < 1e-5
    assert torch.equal(out, ops.rbf_matvec(X, Y, V, 0.9, cuda_emulation=True))
