// nvcc entry points of the RBF kernels (cuda/rbf_kernels.cuh). Compiled only
// when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/rbf_cuda.h"
#include "cuda/rbf_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args, void* stream) {
  gpu::launch_rbf_matvec(problem, args, static_cast<cudaStream_t>(stream));
}

template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args, void* stream) {
  gpu::launch_rbf_gram(problem, args, static_cast<cudaStream_t>(stream));
}

template void rbf_matvec<float>(const RbfProblem<float>&, const MatvecArgs<float>&, void*);
template void rbf_matvec<double>(const RbfProblem<double>&, const MatvecArgs<double>&, void*);
template void rbf_gram<float>(const RbfProblem<float>&, const GramArgs<float>&, void*);
template void rbf_gram<double>(const RbfProblem<double>&, const GramArgs<double>&, void*);

}  // namespace dlmsvdd::cuda
