// nvcc entry points of the FWHT kernels (cuda/fwht_kernels.cuh). Compiled only
// when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/fwht_cuda.h"
#include "cuda/fwht_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
void fwht(const FwhtArgs<T>& args, void* stream) {
  gpu::launch_fwht(args, static_cast<cudaStream_t>(stream));
}

template void fwht<float>(const FwhtArgs<float>&, void*);
template void fwht<double>(const FwhtArgs<double>&, void*);

}  // namespace dlmsvdd::cuda
