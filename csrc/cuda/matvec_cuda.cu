// nvcc entry points of the float64 matrix-vector kernels (cuda/matvec_kernels.cuh).
// Compiled only when the build has CUDA (DLMSVDD_WITH_CUDA).
#include <cuda_runtime.h>

#include "cuda/matvec_cuda.h"
#include "cuda/matvec_kernels.cuh"

namespace dlmsvdd::cuda {

template <typename T>
void matvec64(const Matvec64Args<T>& args, void* stream) {
  gpu::launch_matvec64(args, static_cast<cudaStream_t>(stream));
}

template <typename T>
void rmatvec64(const Matvec64Args<T>& args, void* workspace, void* stream) {
  gpu::launch_rmatvec64(args, static_cast<double*>(workspace), static_cast<cudaStream_t>(stream));
}

template void matvec64<float>(const Matvec64Args<float>&, void*);
template void matvec64<double>(const Matvec64Args<double>&, void*);
template void rmatvec64<float>(const Matvec64Args<float>&, void*, void*);
template void rmatvec64<double>(const Matvec64Args<double>&, void*, void*);

}  // namespace dlmsvdd::cuda
