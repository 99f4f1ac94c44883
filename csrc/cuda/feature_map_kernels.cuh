// CUDA kernel of the structured feature maps (common/feature_map_params.h),
// written once for nvcc (cuda/feature_map_cuda.cu) and for the CPU emulation
// (emu/feature_map_emulated.cpp).
//
// The padded features of all rows form one flat array of rows * blocks * d_pad
// elements, cut into tiles of 4096 as in the FWHT's tile kernel: with d_pad
// <= 4096 a tile holds whole blocks of whole rows, so a block's transforms
// are the tile's levels below log2(d_pad) (tile_levels, in registers, warp
// shuffles and one shared tile). Each element is loaded (times D_0) from x,
// goes through the map's diagonals, transforms and permutation in registers
// and shared memory, and its feature is stored once. d_pad above 4096 is
// refused (the Python side falls back to the separate FWHT kernels).
#pragma once
#include "common/feature_map_params.h"
#include "cuda/fwht_kernels.cuh"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

static_assert(kCudaFeatureMapMaxLog2 == kFwhtTileBits, "a block of the map is one tile");

template <typename T>
__global__ void __launch_bounds__(kFwhtThreads, kFwhtMinBlocksPerSm<T>)
    structured_features_kernel(FeatureMapArgs<T> a, int log2_pad) {
  __shared__ T staged[kFwhtTile];
  const int t = threadIdx.x;
  const int64_t dp = int64_t(1) << log2_pad, width = a.blocks << log2_pad, total = a.rows * width;
  const int64_t tiles = (total + kFwhtTile - 1) >> kFwhtTileBits;
  const bool fastfood = a.kind == StructuredMap::fastfood;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t first = tile << kFwhtTileBits;
    T v[kFwhtPerThread];
    int64_t col[kFwhtPerThread];  // the padded feature column, -1 past the end
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) {
      const int64_t f = first + t + k * kFwhtThreads, row = f / width, j = f & (dp - 1);
      col[k] = f < total ? f - row * width : -1;
      v[k] = f < total && j < a.d ? a.x[row * a.ldx + j] * a.diag[col[k]] : T(0);
    }
    tile_levels(v, log2_pad, staged);
    if (!fastfood) {
      for (int s = 1; s < 3; ++s) {
        DLMSVDD_UNROLL
        for (int k = 0; k < kFwhtPerThread; ++k)
          if (col[k] >= 0) v[k] *= a.diag[s * width + col[k]];
        tile_levels(v, log2_pad, staged);
      }
    } else {
      // The permutation within each block: a block starts at tile index
      // (t + 256 k) - j, since blocks are d_pad-aligned in the flat array.
      __syncthreads();  // earlier reads of `staged` are done
      DLMSVDD_UNROLL
      for (int k = 0; k < kFwhtPerThread; ++k) staged[t + k * kFwhtThreads] = v[k];
      __syncthreads();
      DLMSVDD_UNROLL
      for (int k = 0; k < kFwhtPerThread; ++k) {
        if (col[k] < 0) continue;
        const int64_t start = t + k * kFwhtThreads - (col[k] & (dp - 1));
        v[k] = staged[start + int64_t(a.perm[col[k]])] * a.diag[width + col[k]];
      }
      tile_levels(v, log2_pad, staged);
    }
    DLMSVDD_UNROLL
    for (int k = 0; k < kFwhtPerThread; ++k) {
      if (col[k] < 0 || col[k] >= a.m) continue;
      const int64_t row = (first + t + k * kFwhtThreads) / width;
      const T s = fastfood ? a.diag[2 * width + col[k]] : T(1);
      a.out[row * a.ldo + col[k]] = structured_feature(v[k], s, a.offset[col[k]], a.scale, a.out_scale);
    }
  }
}

template <typename T>
void launch_structured_features(const FeatureMapArgs<T>& a, Stream stream) {
  const int log2_pad = feature_map_log2_pad(a, kCudaFeatureMapMaxLog2);
  if (a.rows == 0) return;
  const int64_t tiles = ((a.rows * a.blocks << log2_pad) + kFwhtTile - 1) >> kFwhtTileBits;
  launch(structured_features_kernel<T>, dim3(grid_blocks(tiles, 1)), dim3(kFwhtThreads), 0, stream, a, log2_pad);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
