// Entry points of the lp-SVDD dual's CUDA kernels (cuda/dual_kernels.cuh), and
// of the same kernels run on the CPU through the emulation layer (csrc/emu).
// The Frank-Wolfe loop itself is common/dual_fw_loop.h, run on the host over them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/column_cache.h"
#include "common/dual_fw_loop.h"
#include "common/dual_math.h"

namespace dlmsvdd {

// Bytes of scratch the device oracle needs for n elements (per-block partial
// records), the same for both back ends; suitably aligned for double.
size_t dual_oracle_workspace_bytes(int64_t n);

}  // namespace dlmsvdd

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t) and the oracle's
// record comes back to the host. `workspace` holds dual_oracle_workspace_bytes(n).
template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                            void* workspace, void* stream);

// fw_loop in place on alpha and ka = K (alpha * t); the histories are host
// arrays. A state in T over columns in C (C = T, or float under a double state).
template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap, void* workspace,
                  void* stream);

// Cached device columns over `slots` x n device storage: exact RBF columns of
// X (n x d), or K[:, i] = Z Z[i]^T from a factor Z (n x m).
template <typename T>
std::unique_ptr<CachedColumns<T>> feature_columns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n,
                                                  int64_t d, T gamma, void* stream);
template <typename T>
std::unique_ptr<CachedColumns<T>> factor_columns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n,
                                                 int64_t m, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// The same on host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                            void* workspace);
template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap, void* workspace);
template <typename T>
std::unique_ptr<CachedColumns<T>> feature_columns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n,
                                                  int64_t d, T gamma);
template <typename T>
std::unique_ptr<CachedColumns<T>> factor_columns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n,
                                                 int64_t m);

}  // namespace dlmsvdd::emulated
