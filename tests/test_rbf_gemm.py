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
def test_tiles_add_up_to_the_whole_product_and_repeat_bit_for_bit(k):
    X, Y = _points(70, 9, 0), _points(150, 9, 1)
    V = torch.randn(150, k, generator=torch.Generator().manual_seed(2))
    ref = rbf_reference(X.numpy(), Y.numpy(), 0.7) @ V.double().numpy()
    whole = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, whole, 0.7, False, emulation=True)
    tiled = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, tiled, 0.7, False, emulation=True, tile_bytes=40 * 64 * 4)  # tiles of 40 x 64
    assert rel_err(whole, ref) < 1e-5 and rel_err(tiled, ref) < 1e-5
    again = torch.empty(70, k)
    rbf_gemm.matvec(X, Y, V, again, 0.7, False, emulation=True, tile_bytes=40 * 64 * 4)
    assert torch.equal(tiled, again)  # no atomics: the same order of sums at every call


def test_tile_shapes_stay_within_the_budget():
    for n, m, budget in [(6000, 6000, 256 << 20), (200000, 200000, 256 << 20), (50000, 50000, 32 << 20), (5, 3, 16)]:
        rows, cols = rbf_gemm._tiles(n, m, 4, budget)
        assert 1 <= rows <= n and 1 <= cols <= m
        assert rows * cols * 4 <= max(budget, 256 * 4)


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
    A, B = rbf_gemm._operands(X, Y, False, "3xtf32")
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
