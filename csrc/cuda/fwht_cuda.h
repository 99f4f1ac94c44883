// Entry points of the CUDA fast Walsh-Hadamard transform, and of the same
// kernel bodies run on the CPU through the emulation layer (csrc/emu), which is
// how the kernels' logic is tested on machines without a GPU. They throw
// std::invalid_argument for a length that is not a power of two from 2 to 2^15.
#pragma once
#include "common/fwht_params.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t).
template <typename T>
void fwht(const FwhtArgs<T>& args, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void fwht(const FwhtArgs<T>& args);

}  // namespace dlmsvdd::emulated
