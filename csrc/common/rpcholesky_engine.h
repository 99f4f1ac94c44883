// What the engines of RPCholesky's driver (common/rpcholesky_driver.h) on the
// CPU and on CUDA share: the RBF problem of a block of gathered rows, and the
// fused column pass (step 4 of the driver) with its per-row math, usable from
// host and device code.
#pragma once
#include <cstdint>

#include "common/rbf_math.h"
#include "common/rbf_params.h"
#include "common/rpcholesky_params.h"

namespace dlmsvdd {

// The helpers below are RPCholesky's alone: their own namespace keeps generic
// names (ColumnPass, ...) clear of other headers'.
namespace rpchol {

// K(rows of x, the first ny rows of y) for the Gram kernels, y being a
// block of gathered feature rows (d apart).
template <typename T>
RbfProblem<T> gathered_gram(const RpcholeskyProblem<T>& p, const T* x, int64_t ldx, int64_t nx, const T* y,
                            int64_t ny) {
  RbfProblem<T> q;
  q.x = x;
  q.ldx = ldx;
  q.nx = nx;
  q.y = y;
  q.ldy = p.d;
  q.ny = ny;
  q.d = p.d;
  q.gamma = p.gamma;
  return q;
}

// One fused pass adding a columns to the factor. On entry L[i, k:k+a] holds
// K(x_i, pivot_j); on exit the new factor columns, and resid[i] is downdated.
template <typename T>
struct ColumnPass {
  T* l = nullptr;
  int64_t ldl = 0;
  int64_t n = 0;
  int64_t k = 0;            // columns already in the factor
  int a = 0;                // columns added
  const T* lpt = nullptr;   // the pivots' previous factor rows, transposed: lpt[e * ldlpt + j] = L[pivot_j, e]
  int64_t ldlpt = 0;        // >= a (the CPU pads whole vector panels, zero past a)
  const T* rt = nullptr;    // R^T, a x a upper triangular, row-major (ld a): H(pivots) = R R^T
  double* resid = nullptr;  // residual diagonal, n entries
};

// Finishes one row: g holds the row's residual kernel entries at the a new
// pivots; solves f R^T = g in place and returns |f|^2, what the row's residual
// diagonal loses. Column-oriented forward substitution (rt = R^T, row-major):
// each solved entry is subtracted from the rest as a vector, with no chain of
// dependent additions. The CUDA kernel's per-row solve; the CPU pass runs the
// same operations in the same order on several rows at once (solve_rows).
template <typename T>
DLMSVDD_HD double solve_block_row(T* __restrict__ g, int a, const T* __restrict__ rt) {
  double norm2 = 0;
  for (int q = 0; q < a; ++q) {
    const T f = g[q] / rt[q * a + q];
    g[q] = f;
    norm2 += double(f) * double(f);
    for (int j = q + 1; j < a; ++j) g[j] -= f * rt[q * a + j];
  }
  return norm2;
}

// The residual after losing norm2, clamped at 0: rounding must not make it
// negative (it is a sampling weight). NaN (a non-finite row of X) stays NaN,
// for the driver to refuse (common/rpcholesky_driver.h).
DLMSVDD_HD double downdated_residual(double resid, double norm2) {
  const double r = resid - norm2;
  return r < 0 ? 0 : r;
}

}  // namespace rpchol
}  // namespace dlmsvdd
