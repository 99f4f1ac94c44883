// Entry points of the CUDA structured feature maps (built on the FWHT's
// kernels), and of the same kernel bodies run on the CPU through the emulation
// layer (csrc/emu), which is how the kernels' logic is tested on machines
// without a GPU. They throw std::invalid_argument for sizes the maps'
// description does not fit or d_pad above 2^kCudaFeatureMapMaxLog2.
#pragma once
#include "common/feature_map_params.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t).
template <typename T>
void structured_features(const FeatureMapArgs<T>& args, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void structured_features(const FeatureMapArgs<T>& args);

}  // namespace dlmsvdd::emulated
