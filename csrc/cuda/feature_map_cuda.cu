// nvcc entry points of the feature-map kernel (cuda/feature_map_kernels.cuh).
// Compiled only when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/feature_map_cuda.h"
#include "cuda/feature_map_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
void structured_features(const FeatureMapArgs<T>& args, void* stream) {
  gpu::launch_structured_features(args, static_cast<cudaStream_t>(stream));
}

template void structured_features<float>(const FeatureMapArgs<float>&, void*);
template void structured_features<double>(const FeatureMapArgs<double>&, void*);

}  // namespace dlmsvdd::cuda
