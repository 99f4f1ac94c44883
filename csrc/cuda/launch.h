// The one way kernels are launched, for both builds of the kernel sources:
// kernel<<<grid, block, smem, stream>>> under nvcc, the CPU emulation
// (emu/cuda_emulation.h) under a host compiler.
//
// Everything built on this header lives in dlmsvdd::gpu inside an inline
// namespace named after the back end, so the nvcc and the emulated
// instantiations of the same templates never share a symbol when both objects
// are linked into one library.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#define DLMSVDD_GPU_BACKEND cuda_backend
#define DLMSVDD_UNROLL _Pragma("unroll")
#else
#include "emu/cuda_emulation.h"
#define DLMSVDD_GPU_BACKEND emulated_backend
#define DLMSVDD_UNROLL
#endif

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

#if defined(__CUDACC__)

using Stream = cudaStream_t;
// gridDim.x's limit; kernels walk their work in grid-stride loops.
inline constexpr int64_t kMaxGridBlocks = 2147483647;

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Stream stream,
            const Args&... args) {
  kernel<<<grid, block, smem, stream>>>(args...);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("dlmsvdd: CUDA kernel launch failed: ") + cudaGetErrorString(err));
}

#else

using Stream = emu::Stream;
// The emulation runs blocks one after another, so more blocks buy nothing; two
// also make the tests go through the kernels' grid-stride loops.
inline constexpr int64_t kMaxGridBlocks = 2;

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, Stream,
            const Args&... args) {
  emu::launch(grid, block, smem, [&] { kernel(args...); });
}

#endif

// Blocks for `items` work items, `per_block` to a block, within the grid limit.
inline unsigned grid_blocks(int64_t items, int64_t per_block) {
  const int64_t blocks = (items + per_block - 1) / per_block;
  return unsigned(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
