// The CUDA device query (cuda/device.h). Compiled only when the build has CUDA
// (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

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

void copy_to_host(void* dst, const void* src, size_t bytes, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s);
  if (err != cudaSuccess) throw std::runtime_error(std::string("dlmsvdd: CUDA copy to host failed: ") + cudaGetErrorString(err));
}

}  // namespace dlmsvdd::cuda
