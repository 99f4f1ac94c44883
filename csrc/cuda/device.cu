// The CUDA device query (cuda/device.h). Compiled only when the build has CUDA
// (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/device.h"

namespace dlmsvdd::cuda {

bool device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  // Without a driver this fails (e.g. cudaErrorInsufficientDriver); clear it so
  // that a later unrelated error check does not pick it up.
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

}  // namespace dlmsvdd::cuda
