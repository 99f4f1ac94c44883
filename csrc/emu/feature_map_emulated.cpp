// The CUDA feature-map kernel (cuda/feature_map_kernels.cuh) compiled by the
// host compiler and run on the CPU through emu/cuda_emulation.h, on host
// pointers. Slow (a block's threads are fibers run in turn): for testing the
// kernel's logic, not for use.
#include "cuda/feature_map_cuda.h"
#include "cuda/feature_map_kernels.cuh"

namespace dlmsvdd::emulated {

template <typename T>
void structured_features(const FeatureMapArgs<T>& args) {
  gpu::launch_structured_features(args, gpu::Stream{});
}

template void structured_features<float>(const FeatureMapArgs<float>&);
template void structured_features<double>(const FeatureMapArgs<double>&);

}  // namespace dlmsvdd::emulated
