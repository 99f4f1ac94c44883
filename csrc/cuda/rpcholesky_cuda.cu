// nvcc entry points of RPCholesky (cuda/rpcholesky_kernels.cuh). Compiled only
// when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/rpcholesky_cuda.h"
#include "cuda/rpcholesky_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& problem, void* workspace, void* stream) {
  return gpu::rpchol::rpcholesky_on_device(problem, workspace, static_cast<cudaStream_t>(stream));
}

template int64_t rpcholesky<float>(const RpcholeskyProblem<float>&, void*, void*);
template int64_t rpcholesky<double>(const RpcholeskyProblem<double>&, void*, void*);

}  // namespace dlmsvdd::cuda
