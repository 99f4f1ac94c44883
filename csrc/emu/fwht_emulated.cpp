// The CUDA FWHT and feature-map kernels (cuda/fwht_kernels.cuh,
// cuda/feature_map_kernels.cuh) compiled by the host compiler and run on the
// CPU through emu/cuda_emulation.h, on host pointers. Slow (a block's threads
// are std::threads): for testing the kernels' logic, not for use.
#include "cuda/fwht_cuda.h"
#include "cuda/feature_map_kernels.cuh"
#include "cuda/fwht_kernels.cuh"

namespace dlmsvdd::emulated {

template <typename T>
void fwht(const FwhtArgs<T>& args) {
  gpu::launch_fwht(args, gpu::Stream{});
}

template <typename T>
void structured_features(const FeatureMapArgs<T>& args) {
  gpu::launch_structured_features(args, gpu::Stream{});
}

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);
template void structured_features<float>(const FeatureMapArgs<float>&);
template void structured_features<double>(const FeatureMapArgs<double>&);

}  // namespace dlmsvdd::emulated
