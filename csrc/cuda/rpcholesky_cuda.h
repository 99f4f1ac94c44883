// Entry points of RPCholesky on CUDA (cuda/rpcholesky_kernels.cuh), and of the
// same code run on the CPU through the emulation layer (csrc/emu), which is how
// its kernels are tested without a GPU. The algorithm and its host-side driver:
// common/rpcholesky_driver.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/rpcholesky_params.h"

namespace dlmsvdd {

// Bytes of device scratch rpcholesky needs (the residual diagonal and one
// round's gathered rows and blocks), the same for both back ends; elem_size is
// sizeof(T). Suitably aligned for double.
size_t rpcholesky_workspace_bytes(int64_t n, int64_t d, int64_t rank, int64_t block_size, size_t elem_size);

}  // namespace dlmsvdd

namespace dlmsvdd::cuda {

// Device pointers for X and L, a host array for the pivots; work is queued on
// `stream` (a cudaStream_t), and each round reads the residual diagonal back to
// the host for the sampling. Returns the rank reached.
template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& problem, void* workspace, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// The same on host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& problem, void* workspace);

}  // namespace dlmsvdd::emulated
