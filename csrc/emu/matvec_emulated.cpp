// The CUDA float64 matrix-vector kernels (cuda/matvec_kernels.cuh) compiled by
// the host compiler and run on the CPU through emu/cuda_emulation.h, on host
// pointers. Slow (a block's threads are fibers run in turn): for testing the kernels'
// logic, not for use.
#include "cuda/matvec_cuda.h"
#include "cuda/matvec_kernels.cuh"

namespace dlmsvdd {

// Here because this file is always built; the formula does not depend on the back end.
size_t rmatvec64_workspace_bytes(int64_t n, int64_t k) { return gpu::rmatvec_workspace_bytes(n, k); }

}  // namespace dlmsvdd

namespace dlmsvdd::emulated {

template <typename T>
void matvec64(const Matvec64Args<T>& args) {
  gpu::launch_matvec64(args, gpu::Stream{});
}

template <typename T>
void rmatvec64(const Matvec64Args<T>& args, void* workspace) {
  gpu::launch_rmatvec64(args, static_cast<double*>(workspace), gpu::Stream{});
}

template void matvec64<float>(const Matvec64Args<float>&);
template void matvec64<double>(const Matvec64Args<double>&);
template void rmatvec64<float>(const Matvec64Args<float>&, void*);
template void rmatvec64<double>(const Matvec64Args<double>&, void*);

}  // namespace dlmsvdd::emulated
