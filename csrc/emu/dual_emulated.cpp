// The dual's CUDA kernels (cuda/dual_kernels.cuh) compiled by the host compiler
// and run on the CPU through emu/cuda_emulation.h, on host pointers. Slow (a
// block's threads are fibers run in turn): for testing the kernels' logic, not for use.
#include "cuda/dual_cuda.h"
#include "cuda/dual_kernels.cuh"

namespace dlmsvdd {

// Here because this file is always built; the formula does not depend on the back end.
size_t dual_oracle_workspace_bytes(int64_t n) { return gpu::oracle_workspace_bytes(n); }

}  // namespace dlmsvdd

namespace dlmsvdd::emulated {

template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                            void* workspace) {
  return gpu::oracle_pass(alpha, ka, t, n, c, workspace, gpu::Stream{});
}

template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap, void* workspace) {
  return gpu::fw_solve(columns, alpha, ka, t, n, c, options, history_objective, history_gap, workspace,
                       gpu::Stream{});
}

template <typename T>
std::unique_ptr<CachedColumns<T>> feature_columns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n,
                                                  int64_t d, T gamma) {
  return std::make_unique<gpu::FeatureColumns<T>>(storage, slots, x, ldx, n, d, gamma, gpu::Stream{});
}

template <typename T>
std::unique_ptr<CachedColumns<T>> factor_columns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n,
                                                 int64_t m) {
  return std::make_unique<gpu::FactorColumns<T>>(storage, slots, z, ldz, n, m, gpu::Stream{});
}

#define DLMSVDD_INSTANTIATE(T)                                                                                 \
  template OracleResult<T> dual_oracle<T>(const T*, const T*, const T*, int64_t, const DualCoefs<T>&, void*); \
  template std::unique_ptr<CachedColumns<T>> feature_columns<T>(T*, int64_t, const T*, int64_t, int64_t,      \
                                                                int64_t, T);                                  \
  template std::unique_ptr<CachedColumns<T>> factor_columns<T>(T*, int64_t, const T*, int64_t, int64_t,       \
                                                               int64_t);
DLMSVDD_INSTANTIATE(float)
DLMSVDD_INSTANTIATE(double)
#undef DLMSVDD_INSTANTIATE

#define DLMSVDD_INSTANTIATE_FW(T, C)                                                                  \
  template FwReport fw_solve<T, C>(ColumnSource<C>&, T*, T*, const T*, int64_t, const DualCoefs<T>&, \
                                   const FwOptions&, double*, double*, void*);

// The (state, column) pairs: one dtype, or a double state over float columns.
DLMSVDD_INSTANTIATE_FW(float, float)
DLMSVDD_INSTANTIATE_FW(double, double)
DLMSVDD_INSTANTIATE_FW(double, float)
#undef DLMSVDD_INSTANTIATE_FW

}  // namespace dlmsvdd::emulated
