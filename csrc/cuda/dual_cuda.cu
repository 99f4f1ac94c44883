// nvcc entry points of the dual's kernels (cuda/dual_kernels.cuh). Compiled
// only when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/dual_cuda.h"
#include "cuda/dual_kernels.cuh"

namespace dlmsvdd::cuda {

namespace {
cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
}  // namespace

template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                            void* workspace, void* stream) {
  return gpu::oracle_pass(alpha, ka, t, n, c, workspace, as_stream(stream));
}

template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap, void* workspace,
                  void* stream) {
  return gpu::fw_solve(columns, alpha, ka, t, n, c, options, history_objective, history_gap, workspace,
                       as_stream(stream));
}

template <typename T>
std::unique_ptr<CachedColumns<T>> feature_columns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n,
                                                  int64_t d, T gamma, void* stream) {
  return std::make_unique<gpu::FeatureColumns<T>>(storage, slots, x, ldx, n, d, gamma, as_stream(stream));
}

template <typename T>
std::unique_ptr<CachedColumns<T>> factor_columns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n,
                                                 int64_t m, void* stream) {
  return std::make_unique<gpu::FactorColumns<T>>(storage, slots, z, ldz, n, m, as_stream(stream));
}

#define DLMSVDD_INSTANTIATE(T)                                                                                 \
  template OracleResult<T> dual_oracle<T>(const T*, const T*, const T*, int64_t, const DualCoefs<T>&, void*,  \
                                          void*);                                                              \
  template std::unique_ptr<CachedColumns<T>> feature_columns<T>(T*, int64_t, const T*, int64_t, int64_t,      \
                                                                int64_t, T, void*);                           \
  template std::unique_ptr<CachedColumns<T>> factor_columns<T>(T*, int64_t, const T*, int64_t, int64_t,       \
                                                               int64_t, void*);
DLMSVDD_INSTANTIATE(float)
DLMSVDD_INSTANTIATE(double)
#undef DLMSVDD_INSTANTIATE

#define DLMSVDD_INSTANTIATE_FW(T, C)                                                                  \
  template FwReport fw_solve<T, C>(ColumnSource<C>&, T*, T*, const T*, int64_t, const DualCoefs<T>&, \
                                   const FwOptions&, double*, double*, void*, void*);

// The (state, column) pairs: one dtype, or a double state over float columns.
DLMSVDD_INSTANTIATE_FW(float, float)
DLMSVDD_INSTANTIATE_FW(double, double)
DLMSVDD_INSTANTIATE_FW(double, float)
#undef DLMSVDD_INSTANTIATE_FW

}  // namespace dlmsvdd::cuda
