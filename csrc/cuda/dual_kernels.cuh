// CUDA kernels for the lp-SVDD dual and the device engine that runs the
// Frank-Wolfe loop of common/dual_fw_loop.h over them, written once for nvcc
// (cuda/dual_cuda.cu) and for the CPU emulation (emu/dual_emulated.cpp). Keep
// them to what emu/cuda_emulation.h can run.
//
// The oracle is one pass over (alpha, K a, t): each thread walks its elements
// in a grid-stride loop (so its indices increase), keeping a partial record;
// a block merges its threads' records in shared memory into one per block, and
// a one-block kernel merges those into the final record, which is copied to
// the host. The records' merge breaks ties to the lower index, so the atoms
// are the CPU's whatever the grid. The per-block records live in a workspace
// the caller allocates (torch): there is no cudaMalloc here.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/column_cache.h"
#include "common/dual_fw_loop.h"
#include "common/dual_math.h"
#include "common/rbf_params.h"
#include "cuda/dual_reduce.cuh"
#include "cuda/launch.h"
#include "cuda/rbf_cuda.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

template <typename T>
__global__ void __launch_bounds__(kDualThreads) oracle_kernel(const T* alpha, const T* ka, const T* t, int64_t n,
                                                              DualCoefs<T> c, OraclePart<T>* block_parts) {
  OraclePart<T> r;
  clear(r);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    accumulate(r, i, alpha[i], ka[i], t[i], c);
  reduce_block(r, block_parts + blockIdx.x);
}

// alpha <- (1 - lambda) alpha + wn e_i + wa e_l (l < 0: no anomaly atom),
// K a <- (1 - lambda) K a + wn col_i - wa col_l, with the CPU's arithmetic
// (columns in C, widened to the state's T). The atoms' weights are added by
// the threads that own them.
template <typename T, typename C>
__global__ void __launch_bounds__(kDualThreads) vanilla_update_kernel(T* alpha, T* ka, int64_t n, T lambda, int64_t i,
                                                                      int64_t l, T wn, T wa, const C* col_i,
                                                                      const C* col_l) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    T a = alpha[k] * (1 - lambda);
    if (k == i) a += wn;
    if (k == l) a += wa;
    alpha[k] = a;
    ka[k] = (1 - lambda) * ka[k] + wn * T(col_i[k]) - wa * T(col_l[k]);
  }
}

// alpha_s += gamma, alpha_a -= gamma (exactly 0 for a drop step), K a += tg (col_s - col_a).
template <typename T, typename C>
__global__ void __launch_bounds__(kDualThreads) pairwise_update_kernel(T* alpha, T* ka, int64_t n, T tg, int64_t s,
                                                                       int64_t a, T gamma, const C* col_s,
                                                                       const C* col_a) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    ka[k] += tg * (T(col_s[k]) - T(col_a[k]));
    if (k == s) alpha[k] += gamma;
    if (k == a) alpha[k] = gamma == alpha[k] ? T(0) : alpha[k] - gamma;
  }
}

// out[k] = <Z[k], Z[j]>: column j of K = Z Z^T, one output per thread.
template <typename T>
__global__ void __launch_bounds__(kDualThreads) factor_column_kernel(const T* z, int64_t ldz, int64_t n, int64_t m,
                                                                     int64_t j, T* out) {
  const T* zj = z + j * ldz;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const T* zk = z + k * ldz;
    T s = T(0);
    for (int64_t e = 0; e < m; ++e) s += zk[e] * zj[e];
    out[k] = s;
  }
}

// ---- what differs between the back ends: the RBF entry point (copies: cuda/dual_reduce.cuh)

#if defined(__CUDACC__)
template <typename T>
void rbf_gram_on_device(const RbfProblem<T>& p, const GramArgs<T>& g, Stream stream) {
  cuda::rbf_gram<T>(p, g, stream);
}
#else
template <typename T>
void rbf_gram_on_device(const RbfProblem<T>& p, const GramArgs<T>& g, Stream) {
  emulated::rbf_gram<T>(p, g);
}
#endif

// ---- host side

template <typename T>
OracleResult<T> oracle_pass(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                            void* workspace, Stream stream) {
  if (n <= 0) return {};
  return to_result(reduce_pass<OraclePart<T>>(n, workspace, stream, oracle_kernel<T>, alpha, ka, t, n, c));
}

// Exact RBF columns of the features X (n x d): one Gram launch per missing
// column (Y = that row of X), written straight into its cache slot.
template <typename T>
class FeatureColumns final : public CachedColumns<T> {
 public:
  FeatureColumns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n, int64_t d, T gamma, Stream stream)
      : CachedColumns<T>(storage, n, slots), x_(x), ldx_(ldx), d_(d), gamma_(gamma), stream_(stream) {}

 protected:
  void compute(const int64_t* idx, int count, T* const* dst) override {
    for (int c = 0; c < count; ++c) {
      RbfProblem<T> p;
      p.x = x_;
      p.ldx = ldx_;
      p.nx = this->n_;
      p.y = x_ + idx[c] * ldx_;
      p.ldy = ldx_;
      p.ny = 1;
      p.d = d_;
      p.gamma = gamma_;
      GramArgs<T> g;
      g.out = dst[c];
      g.ldo = 1;
      rbf_gram_on_device(p, g, stream_);
    }
  }

 private:
  const T* x_;
  int64_t ldx_, d_;
  T gamma_;
  Stream stream_;
};

// Low-rank columns K[:, i] = Z Z[i]^T from a factor Z (n x m).
template <typename T>
class FactorColumns final : public CachedColumns<T> {
 public:
  FactorColumns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n, int64_t m, Stream stream)
      : CachedColumns<T>(storage, n, slots), z_(z), ldz_(ldz), m_(m), stream_(stream) {}

 protected:
  void compute(const int64_t* idx, int count, T* const* dst) override {
    const int64_t n = this->n_;
    for (int c = 0; c < count; ++c)
      launch(factor_column_kernel<T>, dim3(elementwise_blocks(n)), dim3(kDualThreads), 0, stream_, z_, ldz_, n, m_,
             idx[c], dst[c]);
  }

 private:
  const T* z_;
  int64_t ldz_, m_;
  Stream stream_;
};

// The engine of fw_loop (common/dual_fw_loop.h) over device arrays: kernels for the
// passes, single-element copies for the scalars the loop reads. State in T,
// columns in C.
template <typename T, typename C>
class DeviceEngine {
 public:
  using Column = C;
  DeviceEngine(const FwState<T, C>& s, void* workspace, Stream stream) : s_(s), workspace_(workspace), stream_(stream) {}

  OracleResult<T> oracle() { return oracle_pass(s_.alpha, s_.ka, s_.t, s_.n, s_.c, workspace_, stream_); }
  void columns(int64_t i, int64_t j, const C** ci, const C** cj) { s_.columns.get(i, j, ci, cj); }
  T entry(const C* col, int64_t k) { return T(read_element(col + k, stream_)); }
  T alpha(int64_t i) { return read_element(s_.alpha + i, stream_); }

  void vanilla_update(T lambda, int64_t i, int64_t l, T wn, T wa, const C* col_i, const C* col_l) {
    launch(vanilla_update_kernel<T, C>, dim3(elementwise_blocks(s_.n)), dim3(kDualThreads), 0, stream_, s_.alpha,
           s_.ka, s_.n, lambda, i, l, wn, wa, col_i, col_l);
  }
  void pairwise_update(T tg, int64_t s, int64_t a, T gamma, const C* col_s, const C* col_a) {
    launch(pairwise_update_kernel<T, C>, dim3(elementwise_blocks(s_.n)), dim3(kDualThreads), 0, stream_, s_.alpha,
           s_.ka, s_.n, tg, s, a, gamma, col_s, col_a);
  }

 private:
  FwState<T, C> s_;
  void* workspace_;
  Stream stream_;
};

template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap, void* workspace,
                  Stream stream) {
  DeviceEngine<T, C> engine({columns, alpha, ka, t, n, c}, workspace, stream);
  return fw_loop<T>(engine, c, options, history_objective, history_gap);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
