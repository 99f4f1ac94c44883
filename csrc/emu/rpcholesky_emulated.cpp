// RPCholesky's CUDA code (cuda/rpcholesky_kernels.cuh) compiled by the host
// compiler and run on the CPU through emu/cuda_emulation.h, on host pointers.
// Slow (a block's threads are fibers run in turn): for testing the kernels' logic.
#include "cuda/rpcholesky_cuda.h"
#include "cuda/rpcholesky_kernels.cuh"

namespace dlmsvdd {

// Here because this file is always built; the layout does not depend on the back end.
size_t rpcholesky_workspace_bytes(int64_t n, int64_t d, int64_t rank, int64_t block_size, size_t elem_size) {
  return gpu::rpchol::WorkspaceLayout(n, d, rank, block_size, elem_size).bytes;
}

}  // namespace dlmsvdd

namespace dlmsvdd::emulated {

template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& problem, void* workspace) {
  return gpu::rpchol::rpcholesky_on_device(problem, workspace, gpu::Stream{});
}

template int64_t rpcholesky<float>(const RpcholeskyProblem<float>&, void*);
template int64_t rpcholesky<double>(const RpcholeskyProblem<double>&, void*);

}  // namespace dlmsvdd::emulated
