// APG's O(N) CUDA kernels (cuda/dual_apg_kernels.cuh) compiled by the host
// compiler and run on the CPU through emu/cuda_emulation.h, on host pointers.
// Slow (a block's threads are fibers run in turn): for testing the kernels' logic.
#include "cuda/dual_apg_cuda.h"
#include "cuda/dual_apg_kernels.cuh"

namespace dlmsvdd::emulated {

int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta,
                    void* workspace) {
  return gpu::simplex_project(v, t, n, m, out, theta, workspace, gpu::Stream{});
}

int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta, void* workspace) {
  return gpu::apg_step(x, x_prev, kx, kx_prev, t, n, c, out, theta, workspace, gpu::Stream{});
}

ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c,
                         void* workspace) {
  return gpu::apg_check(x, x_prev, kx, kx_prev, x_new, kx_new, t, n, c, workspace, gpu::Stream{});
}

}  // namespace dlmsvdd::emulated
