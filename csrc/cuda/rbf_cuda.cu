// nvcc entry points of the RBF kernels (cuda/rbf_kernels.cuh, cuda/rbf_epilogue_kernels.cuh). Compiled only
// when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/rbf_cuda.h"
#include "cuda/rbf_epilogue_kernels.cuh"
#include "cuda/rbf_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args, void* stream) {
  gpu::launch_rbf_gram(problem, args, static_cast<cudaStream_t>(stream));
}

template <typename T>
void rbf_dots_to_kernel(const RbfDots<T>& dots, void* stream) {
  gpu::launch_rbf_dots_to_kernel(dots, static_cast<cudaStream_t>(stream));
}

template <typename T>
void rbf_dots_matvec(const RbfDots<T>& dots, const RbfDotsMatvec<T>& args, void* stream) {
  gpu::launch_rbf_dots_matvec(dots, args, static_cast<cudaStream_t>(stream));
}

template void rbf_gram<float>(const RbfProblem<float>&, const GramArgs<float>&, void*);
template void rbf_gram<double>(const RbfProblem<double>&, const GramArgs<double>&, void*);
template void rbf_dots_to_kernel<float>(const RbfDots<float>&, void*);
template void rbf_dots_to_kernel<double>(const RbfDots<double>&, void*);
template void rbf_dots_matvec<float>(const RbfDots<float>&, const RbfDotsMatvec<float>&, void*);
template void rbf_dots_matvec<double>(const RbfDots<double>&, const RbfDotsMatvec<double>&, void*);

}  // namespace dlmsvdd::cuda
