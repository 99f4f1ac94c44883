// Entry points of the CUDA float64 matrix-vector products, and of the same
// kernel bodies run on the CPU through the emulation layer (csrc/emu), which
// is how the kernels' logic is tested on machines without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common/matvec_params.h"

namespace dlmsvdd {

// Bytes of scratch the device A^T x needs for A (n x k): the partial sums of
// its row slices, the same for both back ends; suitably aligned for double.
size_t rmatvec64_workspace_bytes(int64_t n, int64_t k);

}  // namespace dlmsvdd

namespace dlmsvdd::cuda {

// Device pointers; work is queued on `stream` (a cudaStream_t). out is overwritten.
template <typename T>
void matvec64(const Matvec64Args<T>& args, void* stream);
// `workspace` holds rmatvec64_workspace_bytes(args.rows, args.cols).
template <typename T>
void rmatvec64(const Matvec64Args<T>& args, void* workspace, void* stream);

}  // namespace dlmsvdd::cuda

namespace dlmsvdd::emulated {

// Host pointers; the CUDA kernels run block by block on the CPU.
template <typename T>
void matvec64(const Matvec64Args<T>& args);
template <typename T>
void rmatvec64(const Matvec64Args<T>& args, void* workspace);

}  // namespace dlmsvdd::emulated
