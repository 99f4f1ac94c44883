// Entry points of the CUDA RBF kernels: the fused Gram kernel the package's device loops use
// (cuda/rbf_kernels.cuh), and the epilogues that make cuBLAS's dot products kernel values
// (cuda/rbf_epilogue_kernels.cuh; the products are called by dlmsvdd_ext/rbf_gemm.py); and of
// the same kernel bodies run on the CPU through the emulation layer (csrc/emu), which is how
// their logic is tested on machines without a GPU.
#pragma once
#include "common/rbf_params.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t). out is overwritten.
template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args, void* stream);
template <typename T>
void rbf_dots_to_kernel(const RbfDots<T>& dots, void* stream);
template <typename T>
void rbf_dots_matvec(const RbfDots<T>& dots, const RbfDotsMatvec<T>& args, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args);
template <typename T>
void rbf_dots_to_kernel(const RbfDots<T>& dots);
template <typename T>
void rbf_dots_matvec(const RbfDots<T>& dots, const RbfDotsMatvec<T>& args);

}  // namespace dlmsvdd::emulated
