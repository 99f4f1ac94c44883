// CUDA kernels of APG's O(N) work on the lp-SVDD dual (common/dual_apg_math.h)
// and their host drivers, written once for nvcc (cuda/dual_apg_cuda.cu) and for
// the CPU emulation (emu/dual_apg_emulated.cpp). The simplex projection's
// passes are reductions (cuda/dual_reduce.cuh) whose two-class records come
// back to the host, which updates the thresholds (simplex_thresholds) and
// launches the next pass: a handful of passes over N doubles per projection.
#pragma once
#include <cstdint>

#include "common/dual_apg_math.h"
#include "cuda/dual_reduce.cuh"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

// The kernels take T = double only (the solver state is float64); templates, as
// every kernel here.

// theta: the two classes' thresholds by value (kernel arguments); `all` counts every entry.
struct Thresholds {
  double theta[2];
};

template <typename T>
__global__ void __launch_bounds__(kDualThreads) project_pass_kernel(const T* v, const T* t, int64_t n, Thresholds th,
                                                                    bool all, ProjectPart* block_parts) {
  ProjectPart r;
  clear(r);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    accumulate(r, v[i], t[i], th.theta, all);
  reduce_block(r, block_parts + blockIdx.x);
}

template <typename T>
__global__ void __launch_bounds__(kDualThreads) clip_kernel(const T* v, const T* t, int64_t n, Thresholds th,
                                                            T* out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = clip_to_simplex(v[i], th.theta[t[i] > 0.0 ? 0 : 1]);
}

// out = the gradient step, and its all-entries record.
template <typename T>
__global__ void __launch_bounds__(kDualThreads) apg_step_kernel(const T* x, const T* x_prev, const T* kx,
                                                                const T* kx_prev, const T* t, int64_t n,
                                                                ApgCoefs c, T* out, ProjectPart* block_parts) {
  ProjectPart r;
  clear(r);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T v = apg_gradient_step(x[i], x_prev[i], kx[i], kx_prev[i], t[i], c);
    out[i] = v;
    accumulate(r, v, t[i], nullptr, true);
  }
  reduce_block(r, block_parts + blockIdx.x);
}

template <typename T>
__global__ void __launch_bounds__(kDualThreads) apg_check_kernel(const T* x, const T* x_prev, const T* kx,
                                                                 const T* kx_prev, const T* x_new,
                                                                 const T* kx_new, const T* t, int64_t n,
                                                                 ApgCoefs c, ApgCheckPart* block_parts) {
  ApgCheckPart r;
  clear(r);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    accumulate(r, i, x[i], x_prev[i], kx[i], kx_prev[i], x_new[i], kx_new[i], t[i], c);
  reduce_block(r, block_parts + blockIdx.x);
}

// ---- host side: n > 0 (the bindings answer n = 0 themselves)


// Thresholds of v from its all-entries record, then out = the projection (out may be v).
inline int project_from(const ProjectPart& first, const double* v, const double* t, int64_t n, const SimplexMass& m,
                        double* out, double* theta, void* workspace, Stream stream) {
  const int passes = simplex_thresholds(
      first, m,
      [&](const double* th) {
        return reduce_pass<ProjectPart>(n, workspace, stream, project_pass_kernel<double>, v, t, n,
                                        Thresholds{{th[0], th[1]}}, false);
      },
      theta);
  launch(clip_kernel<double>, dim3(elementwise_blocks(n)), dim3(kDualThreads), 0, stream, v, t, n,
         Thresholds{{theta[0], theta[1]}}, out);
  return passes;
}

inline int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out,
                           double* theta, void* workspace, Stream stream) {
  const ProjectPart first =
      reduce_pass<ProjectPart>(n, workspace, stream, project_pass_kernel<double>, v, t, n, Thresholds{{0.0, 0.0}}, true);
  return project_from(first, v, t, n, m, out, theta, workspace, stream);
}

inline int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
                    int64_t n, const ApgCoefs& c, double* out, double* theta, void* workspace, Stream stream) {
  const SimplexMass m{{c.dual.mu_normal, c.dual.mu_anomaly}};
  const ProjectPart first =
      reduce_pass<ProjectPart>(n, workspace, stream, apg_step_kernel<double>, x, x_prev, kx, kx_prev, t, n, c, out);
  return project_from(first, out, t, n, m, out, theta, workspace, stream);
}

inline ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                                const double* x_new, const double* kx_new, const double* t, int64_t n,
                                const ApgCoefs& c, void* workspace, Stream stream) {
  return to_result(reduce_pass<ApgCheckPart>(n, workspace, stream, apg_check_kernel<double>, x, x_prev, kx, kx_prev, x_new,
                                              kx_new, t, n, c));
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
