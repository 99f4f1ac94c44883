// What the dual's kernels share: the block size, device-to-host copies, and
// reductions of a record over n elements (the oracle's, the simplex
// projection's, APG's). A reduction kernel gives each thread a record over its
// grid-stride elements (so its indices increase), merges a block's records in
// shared memory into one per block, and a one-block kernel merges those into
// the final record, copied to the host. Records merge ties to the lower index,
// so the result is the CPU's whatever the grid. The per-block records live in
// a workspace the caller allocates (torch): there is no cudaMalloc here.
// Written once for nvcc and for the CPU emulation (emu/cuda_emulation.h).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/dual_apg_math.h"
#include "common/dual_math.h"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

inline constexpr int kDualThreads = 256;          // threads of every block of the dual's kernels
inline constexpr int64_t kOracleMaxBlocks = 1024;  // enough to fill a GPU; more threads just stride

// Workspace for n elements: the final record, then one per block, for the
// largest record. Independent of the back end (the emulation launches fewer blocks).
inline size_t oracle_workspace_bytes(int64_t n) {
  const int64_t blocks = std::min<int64_t>((std::max<int64_t>(n, 1) + kDualThreads - 1) / kDualThreads, kOracleMaxBlocks);
  const size_t record = std::max({sizeof(OraclePart<double>), sizeof(ApgCheckPart), sizeof(ProjectPart)});
  return size_t(blocks + 1) * record;
}

#if defined(__CUDACC__)
inline void copy_to_host(void* dst, const void* src, size_t bytes, Stream stream) {
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) throw std::runtime_error(std::string("dlmsvdd: CUDA copy to host failed: ") + cudaGetErrorString(err));
}
#else
// Emulated launches have finished when they return, on host memory.
inline void copy_to_host(void* dst, const void* src, size_t bytes, Stream) { std::memcpy(dst, src, bytes); }
#endif

template <typename T>
T read_element(const T* p, Stream stream) {
  T v;
  copy_to_host(&v, p, sizeof v, stream);
  return v;
}

inline unsigned elementwise_blocks(int64_t n) { return grid_blocks(n, kDualThreads); }

// Thread 0 writes the merge of the block's records to *out. A tree in shared
// memory: log2(256) = 8 barriers for the whole record, where warp shuffles
// would need one per field per step (records are 40-120 bytes).
template <typename R>
__device__ void reduce_block(const R& mine, R* out) {
  __shared__ R parts[kDualThreads];
  const int tid = threadIdx.x;
  parts[tid] = mine;
  __syncthreads();
  for (int half = kDualThreads / 2; half > 0; half /= 2) {
    if (tid < half) merge(parts[tid], parts[tid + half]);
    __syncthreads();
  }
  if (tid == 0) *out = parts[0];
}

// One block: merges the `count` per-block records into *out.
template <typename R>
__global__ void __launch_bounds__(kDualThreads) merge_parts_kernel(const R* block_parts, int count, R* out) {
  R r;
  clear(r);
  for (int b = threadIdx.x; b < count; b += blockDim.x) merge(r, block_parts[b]);
  reduce_block(r, out);
}

// Runs `kernel(args..., block_parts)` over n > 0 elements (each block writing
// its record to block_parts[blockIdx.x]) and returns the merged record.
template <typename R, typename... Params, typename... Args>
R reduce_pass(int64_t n, void* workspace, Stream stream, void (*kernel)(Params...), const Args&... args) {
  auto* final_part = static_cast<R*>(workspace);
  R* block_parts = final_part + 1;
  const unsigned blocks = unsigned(std::min<int64_t>(grid_blocks(n, kDualThreads), kOracleMaxBlocks));
  launch(kernel, dim3(blocks), dim3(kDualThreads), 0, stream, args..., block_parts);
  if (blocks > 1)  // one block's record is already final
    launch(merge_parts_kernel<R>, dim3(1), dim3(kDualThreads), 0, stream, static_cast<const R*>(block_parts),
           int(blocks), final_part);
  R p;
  copy_to_host(&p, blocks > 1 ? final_part : block_parts, sizeof p, stream);
  return p;
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
