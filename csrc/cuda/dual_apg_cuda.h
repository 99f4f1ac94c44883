// Entry points of APG's O(N) kernels on the lp-SVDD dual (cuda/dual_apg_kernels.cuh),
// on the GPU and through the CPU emulation (csrc/emu). n > 0; `workspace` holds
// dual_oracle_workspace_bytes(n) (cuda/dual_cuda.h). Semantics: cpu/dual_apg_cpu.h.
#pragma once
#include <cstdint>

#include "common/dual_apg_math.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t); results come back to the host.
int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta,
                    void* workspace, void* stream);
int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta, void* workspace, void* stream);
ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c,
                         void* workspace, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// The same on host pointers; the CUDA kernels run block by block on the CPU.
int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta,
                    void* workspace);
int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta, void* workspace);
ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c,
                         void* workspace);

}  // namespace dlmsvdd::emulated
