// The RBF kernels' plain parameter structs, shared by the C++ and CUDA kernels.
// Kernels see only these: raw pointers, sizes, leading dimensions, a stream.
#pragma once
#include <cstdint>

namespace dlmsvdd {

// K(X, Y) with K_ij = exp(-gamma ||x_i - y_j||^2). Row-major, unit column stride.
template <typename T>
struct RbfProblem {
  const T* x = nullptr;
  int64_t ldx = 0;  // row stride of X in elements
  int64_t nx = 0;
  const T* y = nullptr;
  int64_t ldy = 0;
  int64_t ny = 0;
  int64_t d = 0;
  T gamma = 0;
  // Y is X: each symmetric tile is computed once.
  bool symmetric = false;
};

// out (nx, k) = K(X, Y) @ V with V (ny, k). out is overwritten.
template <typename T>
struct MatvecArgs {
  const T* v = nullptr;
  int64_t ldv = 0;
  int64_t k = 0;
  T* out = nullptr;
  int64_t ldo = 0;
};

// out (nx, ny) = K(X, Y), or the squared distances when distances_only.
template <typename T>
struct GramArgs {
  T* out = nullptr;
  int64_t ldo = 0;
  bool distances_only = false;
};

}  // namespace dlmsvdd

namespace dlmsvdd {

// A tile of dot products x_i . y_j (from a matrix product, cuBLAS on the GPU) and the squared
// norms of its rows and columns: what the GPU's RBF epilogues turn into kernel values.
// Row-major, unit column stride; the norms go through finite_or_nan in the kernels.
template <typename T>
struct RbfDots {
  T* dots = nullptr;  // (rows, cols); overwritten in place by rbf_dots_to_kernel
  int64_t ldd = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  const T* x_norm = nullptr;  // (rows,)
  const T* y_norm = nullptr;  // (cols,)
  T gamma = 0;
  bool distances_only = false;  // squared distances instead of kernel values
  T* out = nullptr;  // rbf_dots_to_kernel's destination (rows, cols), row stride ldo; nullptr: dots itself
  int64_t ldo = 0;
};

// acc (rows, k) (+)= K_tile @ V_tile for k <= kRbfDotsMaxColumns columns of V (cols, k), in double.
// A row's columns are summed kRbfDotsSegment at a time (one warp each, so that a block of few rows
// still keeps the GPU busy), into partial (segments, rows, k), then the segments in order.
inline constexpr int kRbfDotsMaxColumns = 8;
inline constexpr int kRbfDotsSegment = 512;

inline int64_t rbf_dots_segments(int64_t cols) { return cols <= 0 ? 1 : (cols + kRbfDotsSegment - 1) / kRbfDotsSegment; }

template <typename T>
struct RbfDotsMatvec {
  const T* v = nullptr;
  int64_t ldv = 0;
  int64_t k = 0;
  double* partial = nullptr;  // workspace of rbf_dots_segments(cols) * rows * k doubles
  double* acc = nullptr;
  int64_t lda = 0;
  bool accumulate = false;  // add to acc (the tiles of a row after the first) instead of overwriting it
};

}  // namespace dlmsvdd
