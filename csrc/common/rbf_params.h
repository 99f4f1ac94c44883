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
