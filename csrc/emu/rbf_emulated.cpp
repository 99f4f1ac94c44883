// The CUDA RBF kernels (cuda/rbf_kernels.cuh, cuda/rbf_epilogue_kernels.cuh) compiled by the host compiler and run on the CPU
// through emu/cuda_emulation.h, on host pointers. Slow (a block's threads are fibers run in turn): for
// testing the kernels' logic, not for use.
#include "cuda/rbf_cuda.h"
#include "cuda/rbf_epilogue_kernels.cuh"
#include "cuda/rbf_kernels.cuh"

namespace dlmsvdd::emulated {

template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args) {
  gpu::launch_rbf_gram(problem, args, gpu::Stream{});
}

template <typename T>
void rbf_dots_to_kernel(const RbfDots<T>& dots) {
  gpu::launch_rbf_dots_to_kernel(dots, gpu::Stream{});
}

template <typename T>
void rbf_dots_matvec(const RbfDots<T>& dots, const RbfDotsMatvec<T>& args) {
  gpu::launch_rbf_dots_matvec(dots, args, gpu::Stream{});
}

template void rbf_gram<float>(const RbfProblem<float>&, const GramArgs<float>&);
template void rbf_gram<double>(const RbfProblem<double>&, const GramArgs<double>&);
template void rbf_dots_to_kernel<float>(const RbfDots<float>&);
template void rbf_dots_to_kernel<double>(const RbfDots<double>&);
template void rbf_dots_matvec<float>(const RbfDots<float>&, const RbfDotsMatvec<float>&);
template void rbf_dots_matvec<double>(const RbfDots<double>&, const RbfDotsMatvec<double>&);

}  // namespace dlmsvdd::emulated
