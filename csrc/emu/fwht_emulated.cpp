// The CUDA FWHT kernels (cuda/fwht_kernels.cuh) compiled by the host compiler
// and run on the CPU through emu/cuda_emulation.h, on host pointers. Slow (a
// block's threads are fibers run in turn): for testing the kernels' logic, not for use.
#include "cuda/fwht_cuda.h"
#include "cuda/fwht_kernels.cuh"

namespace dlmsvdd::emulated {

template <typename T>
void fwht(const FwhtArgs<T>& args) {
  gpu::launch_fwht(args, gpu::Stream{});
}

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);

}  // namespace dlmsvdd::emulated
