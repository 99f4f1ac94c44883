// Entry points of the CUDA fast Walsh-Hadamard transform and of the structured
// feature maps built on it, and of the same kernel bodies run on the CPU
// through the emulation layer (csrc/emu), which is how the kernels' logic is
// tested on machines without a GPU. The transform throws std::invalid_argument
// for a length that is not a power of two from 2 to 2^15, the maps for sizes
// their description does not fit or d_pad above 2^kCudaFeatureMapMaxLog2.
#pragma once
#include "common/feature_map_params.h"
#include "common/fwht_params.h"

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t).
template <typename T>
void fwht(const FwhtArgs<T>& args, void* stream);
template <typename T>
void structured_features(const FeatureMapArgs<T>& args, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void fwht(const FwhtArgs<T>& args);
template <typename T>
void structured_features(const FeatureMapArgs<T>& args);

}  // namespace dlmsvdd::emulated
