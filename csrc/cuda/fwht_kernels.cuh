// CUDA kernels of the fast Walsh-Hadamard transform, written once for nvcc
// (cuda/fwht_cuda.cu) and for the CPU emulation (emu/fwht_emulated.cpp), which
// is how their logic is tested without a GPU. Keep them to what
// emu/cuda_emulation.h can run.
//
// The batch is seen as one flat array of rows * L elements (L = 2^n), and a
// block transforms tiles of kTile = 4096 consecutive flat elements: a tile is
// part of one row (L > 4096) or holds whole rows (L <= 4096), so its levels
// are those of the tile-index bits below min(n, 12). Thread t = lane + 32 warp
// holds the tile's elements t + 256 k (k < 16) in registers, which makes every
// global load and store coalesced and puts the tile-index bits where they are
// cheap to combine:
//   bits 0-4  (lane)     warp shuffles;
//   bits 5-7  (warp)     a trip through shared memory that swaps them with
//                        register bits, then butterflies in registers;
//   bits 8-11 (register) butterflies in registers.
// Rows longer than a tile take a second kernel for the levels above bit 11
// (strides 4096 to L/2; at most 3 levels for L = 2^15): one thread per column
// of a row's tiles, up to 8 elements in registers, in place on out. Shared
// memory is one tile (16 KB float, 32 KB double) whatever L: long rows never
// have to fit in it.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/fwht_params.h"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

inline constexpr int kFwhtThreads = 256;  // threads of every block: 8 warps
inline constexpr int kFwhtLaneBits = 5, kFwhtWarpBits = 3, kFwhtRegBits = 4;
inline constexpr int kFwhtPerThread = 1 << kFwhtRegBits;                          // 16 registers
inline constexpr int kFwhtTileBits = kFwhtLaneBits + kFwhtWarpBits + kFwhtRegBits;  // 12
inline constexpr int64_t kFwhtTile = int64_t(1) << kFwhtTileBits;
// Levels above the tile: a thread of the second kernel holds 2^kFwhtHighBits elements.
inline constexpr int kFwhtHighBits = kFwhtMaxLog2 - kFwhtTileBits;
// Blocks per SM the register allocation must allow (ptxas for sm_80: 80
// registers for float, 127 for double, no spills); the transform is memory
// bound, so resident warps matter more than the compiler's spare registers.
template <typename T>
inline constexpr int kFwhtMinBlocksPerSm = sizeof(T) == 8 ? 2 : 3;
static_assert(kFwhtThreads == 1 << (kFwhtLaneBits + kFwhtWarpBits), "a thread per lane and warp index");
static_assert(kFwhtLaneBits == 5, "lane bits are a warp's 32 lanes");
static_assert(kFwhtWarpBits <= kFwhtRegBits, "the shared-memory trip swaps warp bits with register bits");

template <typename T>
__device__ __forceinline__ void butterfly(T& a, T& b) {
  const T sum = a + b;
  b = a - b;
  a = sum;
}

// The levels of register-index bits b < min(kBits, levels) of v: v[k] with
// v[k + 2^b] for every k with bit b clear.
template <int kBits, int N, typename T>
__device__ __forceinline__ void register_levels(T (&v)[N], int levels) {
  DLMSVDD_UNROLL
  for (int b = 0; b < kBits; ++b) {
    if (b >= levels) break;
    DLMSVDD_UNROLL
    for (int k = 0; k < N; ++k)
      if (!(k & (1 << b))) butterfly(v[k], v[k | (1 << b)]);
  }
}

// The tile index of register k of thread (lane, warp) during the trip through
// shared memory: the lane bits stay, bits 5-7 come from register bits 0-2 and
// the thread's warp index moves up to bits 8-10 (register bit 3 to bit 11).
__device__ __forceinline__ int swapped_slot(int lane, int warp, int k) {
  constexpr int low = (1 << kFwhtWarpBits) - 1;
  return lane | (k & low) << kFwhtLaneBits | warp << (kFwhtLaneBits + kFwhtWarpBits) |
         (k >> kFwhtWarpBits) << (kFwhtLaneBits + 2 * kFwhtWarpBits);
}

// The levels of tile-index bits below `levels` of one tile in registers:
// thread t = lane + 32 warp holds the tile's elements t + 256 k in v[k].
// `staged` is the block's shared tile; every thread of the block calls this
// with the same `levels` (it syncs). Also the feature maps' transform
// (cuda/feature_map_kernels.cuh).
template <typename T>
__device__ __forceinline__ void tile_levels(T (&v)[kFwhtPerThread], int levels, T* staged) {
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  // Bits 8-11: register k is bits 8-11 of the tile index.
  register_levels<kFwhtRegBits>(v, levels - (kFwhtLaneBits + kFwhtWarpBits));
  // Bits 0-4: the partner is lane ^ 2^b; the first of a pair keeps the sum.
  DLMSVDD_UNROLL
  for (int b = 0; b < kFwhtLaneBits; ++b) {
    if (b >= levels) break;
    const bool second = lane & (1 << b);
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) {
      const T other = __shfl_xor_sync(0xffffffffu, v[k], 1 << b);
      v[k] = second ? other - v[k] : v[k] + other;
    }
  }
  // Bits 5-7.
  if (levels > kFwhtLaneBits) {
    // Lanes touch consecutive words in both layouts: no bank conflicts.
    __syncthreads();  // earlier reads of `staged` (a previous tile's) are done
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) staged[t + k * kFwhtThreads] = v[k];
    __syncthreads();
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) v[k] = staged[swapped_slot(lane, warp, k)];
    register_levels<kFwhtWarpBits>(v, levels - kFwhtLaneBits);
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) staged[swapped_slot(lane, warp, k)] = v[k];
    __syncthreads();
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) v[k] = staged[t + k * kFwhtThreads];
  }
}

// The levels of tile-index bits below `levels` (= min(n, 12)) of every tile;
// out = x on the elements, times `scale` (the normalisation, or 1 when a second
// kernel follows). In place when out is x: a thread writes only what it read.
template <typename T>
__global__ void __launch_bounds__(kFwhtThreads, kFwhtMinBlocksPerSm<T>)
    fwht_tile_kernel(FwhtArgs<T> a, int row_bits, int levels, T scale) {
  __shared__ T staged[kFwhtTile];
  const int t = threadIdx.x;
  const int64_t total = a.rows << row_bits, col_mask = (int64_t(1) << row_bits) - 1;
  const int64_t tiles = (total + kFwhtTile - 1) >> kFwhtTileBits;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t first = tile << kFwhtTileBits;
    T v[kFwhtPerThread];
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) {
      const int64_t f = first + t + k * kFwhtThreads;  // flat index: row f >> n, column f & (L - 1)
      v[k] = f < total ? a.x[(f >> row_bits) * a.ldx + (f & col_mask)] : T(0);
    }
    tile_levels(v, levels, staged);
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) {
      const int64_t f = first + t + k * kFwhtThreads;
      if (f < total) a.out[(f >> row_bits) * a.ldo + (f & col_mask)] = v[k] * scale;
    }
  }
}

// The levels of row bits 12 .. n-1 of rows longer than a tile, in place on out,
// times `scale`. Thread c holds column c & 4095 of row c >> 12's tiles.
template <typename T>
__global__ void __launch_bounds__(kFwhtThreads) fwht_high_kernel(T* out, int64_t ldo, int64_t rows, int row_bits,
                                                                 T scale) {
  const int high = row_bits - kFwhtTileBits, count = 1 << high;
  const int64_t columns = rows << kFwhtTileBits;
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    T* p = out + (c >> kFwhtTileBits) * ldo + (c & (kFwhtTile - 1));
    T v[1 << kFwhtHighBits];
    DLMSVDD_UNROLL
    for (int k = 0; k < (1 << kFwhtHighBits); ++k) v[k] = k < count ? p[k * kFwhtTile] : T(0);
    register_levels<kFwhtHighBits>(v, high);
    DLMSVDD_UNROLL
    for (int k = 0; k < (1 << kFwhtHighBits); ++k)
      if (k < count) p[k * kFwhtTile] = v[k] * scale;
  }
}

template <typename T>
void launch_fwht(const FwhtArgs<T>& a, Stream stream) {
  const int row_bits = fwht_log2_length(a);
  if (a.rows == 0) return;
  const T scale = a.normalized ? T(1.0 / std::sqrt(double(a.length))) : T(1);
  const bool two_kernels = row_bits > kFwhtTileBits;
  const int64_t tiles = ((a.rows << row_bits) + kFwhtTile - 1) >> kFwhtTileBits;
  launch(fwht_tile_kernel<T>, dim3(grid_blocks(tiles, 1)), dim3(kFwhtThreads), 0, stream, a, row_bits,
         two_kernels ? kFwhtTileBits : row_bits, two_kernels ? T(1) : scale);
  if (two_kernels)
    launch(fwht_high_kernel<T>, dim3(grid_blocks(a.rows << kFwhtTileBits, kFwhtThreads)), dim3(kFwhtThreads), 0,
           stream, a.out, a.ldo, a.rows, row_bits, scale);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
