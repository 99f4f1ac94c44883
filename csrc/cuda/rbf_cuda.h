// Entry points of the CUDA RBF kernels, and of the same kernel bodies run on
// the CPU through the emulation layer (csrc/emu), which is how the kernels'
// logic is tested on machines without a GPU.
#pragma once
#include "common/rbf_params.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t). out is overwritten.
template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args, void* stream);
template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args);
template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args);

}  // namespace dlmsvdd::emulated
