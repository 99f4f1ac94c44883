// The CUDA RBF kernels (cuda/rbf_kernels.cuh) compiled by the host compiler and
// run on the CPU through emu/cuda_emulation.h, on host pointers. Slow (a block's
// threads are std::threads): for testing the kernels' logic, not for use.
#include "cuda/rbf_cuda.h"
#include "cuda/rbf_kernels.cuh"

namespace dlmsvdd::emulated {

template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args) {
  gpu::launch_rbf_matvec(problem, args, gpu::Stream{});
}

template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args) {
  gpu::launch_rbf_gram(problem, args, gpu::Stream{});
}

template void rbf_matvec<float>(const RbfProblem<float>&, const MatvecArgs<float>&);
template void rbf_matvec<double>(const RbfProblem<double>&, const MatvecArgs<double>&);
template void rbf_gram<float>(const RbfProblem<float>&, const GramArgs<float>&);
template void rbf_gram<double>(const RbfProblem<double>&, const GramArgs<double>&);

}  // namespace dlmsvdd::emulated
