// nvcc entry points of APG's O(N) kernels (cuda/dual_apg_kernels.cuh). Compiled
// only when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/dual_apg_cuda.h"
#include "cuda/dual_apg_kernels.cuh"

namespace dlmsvdd::cuda {

namespace {
cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }
}  // namespace

int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta,
                    void* workspace, void* stream) {
  return gpu::simplex_project(v, t, n, m, out, theta, workspace, as_stream(stream));
}

int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta, void* workspace, void* stream) {
  return gpu::apg_step(x, x_prev, kx, kx_prev, t, n, c, out, theta, workspace, as_stream(stream));
}

ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c,
                         void* workspace, void* stream) {
  return gpu::apg_check(x, x_prev, kx, kx_prev, x_new, kx_new, t, n, c, workspace, as_stream(stream));
}

}  // namespace dlmsvdd::cuda
