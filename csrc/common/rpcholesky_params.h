// Randomly pivoted Cholesky of the RBF kernel: the parameters, shared by the
// CPU, CUDA and emulated entry points (the algorithm: common/rpcholesky_driver.h).
#pragma once
#include <cstdint>

namespace dlmsvdd {

// K ~ L L^T for K_ij = exp(-gamma ||x_i - x_j||^2). Row-major, unit column stride.
template <typename T>
struct RpcholeskyProblem {
  const T* x = nullptr;  // features, n x d
  int64_t ldx = 0;
  int64_t n = 0;
  int64_t d = 0;
  T gamma = 0;
  T* l = nullptr;  // the factor, n x rank, written in place; columns past the returned rank are garbage
  int64_t ldl = 0;
  int64_t rank = 0;                // columns wanted, 1..n
  int64_t* pivots = nullptr;       // host array of `rank` entries (the sampling runs on the host)
  uint64_t seed = 0;
  int64_t block_size = 1;          // candidates per round; 1 = one pivot at a time
  double stop_tol = 1e-12;         // stop when the residual trace is below stop_tol * the initial trace
};

}  // namespace dlmsvdd
