// CUDA kernels of the float64 matrix-vector products (common/matvec_params.h),
// written once for nvcc (cuda/matvec_cuda.cu) and for the CPU emulation
// (emu/matvec_emulated.cpp), which is how their logic is tested without a GPU.
// Keep them to what emu/cuda_emulation.h can run.
//
// Both are memory bound: A is read once, in coalesced rows, and widened to
// double as it is loaded; every product and sum is in double. No atomics:
// each sum has one order, whatever the grid, so results repeat exactly.
//
//  * A x: a segment of `width` lanes of a warp (a power of two from 1 to 32,
//    the smallest >= cols up to 32) per row; lane l sums columns l, l + width,
//    ... (four running sums, for loads in flight), then the segment adds its
//    lanes with shuffles.
//  * A^T x: the rows are cut into `slices` contiguous slices and the columns
//    into tiles of 32. A block takes (tile, slice) items: lane l holds column
//    tile * 32 + l, warp w sums rows w, w + 8, ... of the slice (a warp reads
//    32 consecutive elements of a row), the 8 warps' sums are added in warp
//    order through shared memory and written to the workspace (slices x cols
//    doubles, the caller's); a second kernel adds each column's slices in
//    slice order into out.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/matvec_params.h"
#include "common/rbf_math.h"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

inline constexpr int kMatvecThreads = 256;  // threads of every block: 8 warps
inline constexpr int kMatvecWarps = kMatvecThreads / 32;
inline constexpr int kMatvecTile = 32;  // A^T x: columns of a tile, one per lane
// A^T x: a slice has at least this many rows (each slice costs a partial vector),
// and there are at most about this many (tile, slice) items: a few waves of
// blocks on the largest GPUs.
inline constexpr int64_t kRmatvecMinSliceRows = 256;
inline constexpr int64_t kRmatvecTargetItems = 2048;

// The number of row slices of A^T x for A (n x k); the same for both back ends.
inline int64_t rmatvec_slices(int64_t n, int64_t k) {
  const int64_t tiles = std::max<int64_t>((k + kMatvecTile - 1) / kMatvecTile, 1);
  const int64_t by_rows = (n + kRmatvecMinSliceRows - 1) / kRmatvecMinSliceRows;
  const int64_t by_items = std::max<int64_t>(kRmatvecTargetItems / tiles, 1);
  return std::max<int64_t>(std::min(by_rows, by_items), 1);
}

// Bytes of the workspace of A^T x (the slices' partial vectors), at least one double.
inline size_t rmatvec_workspace_bytes(int64_t n, int64_t k) {
  return size_t(std::max<int64_t>(rmatvec_slices(n, k) * k, 1)) * sizeof(double);
}

// The smallest power of two >= cols, from 1 to 32: the lanes of A x's row segment.
inline int matvec_segment_width(int64_t cols) {
  int width = 1;
  while (width < kMatvecTile && width < cols) width *= 2;
  return width;
}

template <typename T>
__global__ void __launch_bounds__(kMatvecThreads) matvec64_kernel(Matvec64Args<T> a, int width) {
  const int lane = threadIdx.x % 32, segment = lane / width, sub = lane % width;
  const int rows_per_warp = 32 / width;
  const int64_t warp = int64_t(blockIdx.x) * kMatvecWarps + threadIdx.x / 32;
  const int64_t step = int64_t(gridDim.x) * kMatvecWarps * rows_per_warp;
  // The whole warp runs every round (its shuffles need every lane), rows past the end included.
  for (int64_t first = warp * rows_per_warp; first < a.rows; first += step) {
    const int64_t r = first + segment;
    double s = 0;
    if (r < a.rows) {
      const T* row = a.a + r * a.lda;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t j = sub;
      for (; j + 3 * width < a.cols; j += 4 * width) {
        s0 += double(row[j]) * a.x[j];
        s1 += double(row[j + width]) * a.x[j + width];
        s2 += double(row[j + 2 * width]) * a.x[j + 2 * width];
        s3 += double(row[j + 3 * width]) * a.x[j + 3 * width];
      }
      for (; j < a.cols; j += width) s0 += double(row[j]) * a.x[j];
      s = (s0 + s1) + (s2 + s3);
    }
    for (int offset = width / 2; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset, width);
    if (r < a.rows && sub == 0) a.out[r] = finite_or_nan(s);
  }
}

// partial[slice * cols + j] = sum over the slice's rows r of A[r, j] x[r].
template <typename T>
__global__ void __launch_bounds__(kMatvecThreads) rmatvec64_slices_kernel(Matvec64Args<T> a, int64_t slices,
                                                                          double* partial) {
  __shared__ double warp_sums[kMatvecWarps][kMatvecTile];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t tiles = (a.cols + kMatvecTile - 1) / kMatvecTile;
  for (int64_t item = blockIdx.x; item < tiles * slices; item += gridDim.x) {
    // Consecutive blocks take neighbouring tiles of one slice: the same rows.
    const int64_t tile = item % tiles, slice = item / tiles;
    const int64_t j = tile * kMatvecTile + lane;
    const int64_t r0 = a.rows * slice / slices, r1 = a.rows * (slice + 1) / slices;
    double s = 0;
    if (j < a.cols) {
      const T* column = a.a + j;
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t r = r0 + warp;
      for (; r + 3 * kMatvecWarps < r1; r += 4 * kMatvecWarps) {
        s0 += double(column[r * a.lda]) * a.x[r];
        s1 += double(column[(r + kMatvecWarps) * a.lda]) * a.x[r + kMatvecWarps];
        s2 += double(column[(r + 2 * kMatvecWarps) * a.lda]) * a.x[r + 2 * kMatvecWarps];
        s3 += double(column[(r + 3 * kMatvecWarps) * a.lda]) * a.x[r + 3 * kMatvecWarps];
      }
      for (; r < r1; r += kMatvecWarps) s0 += double(column[r * a.lda]) * a.x[r];
      s = (s0 + s1) + (s2 + s3);
    }
    warp_sums[warp][lane] = s;
    __syncthreads();
    if (warp == 0) {
      double total = warp_sums[0][lane];
      for (int w = 1; w < kMatvecWarps; ++w) total += warp_sums[w][lane];
      if (j < a.cols) partial[slice * a.cols + j] = total;
    }
    __syncthreads();  // warp 0 has read warp_sums before the next item overwrites it
  }
}

// out[j] = the slices' partial sums of column j, added in slice order. A
// template (on the partials' type, double) like every kernel in a header.
template <typename Acc>
__global__ void __launch_bounds__(kMatvecThreads) rmatvec64_merge_kernel(const Acc* partial, int64_t slices,
                                                                         int64_t cols, double* out) {
  for (int64_t j = int64_t(blockIdx.x) * kMatvecThreads + threadIdx.x; j < cols;
       j += int64_t(gridDim.x) * kMatvecThreads) {
    Acc total = partial[j];
    for (int64_t s = 1; s < slices; ++s) total += partial[s * cols + j];
    out[j] = finite_or_nan(total);
  }
}

template <typename T>
void launch_matvec64(const Matvec64Args<T>& a, Stream stream) {
  if (a.rows == 0) return;
  const int width = matvec_segment_width(a.cols);
  const int64_t warps = (a.rows + 32 / width - 1) / (32 / width);
  launch(matvec64_kernel<T>, dim3(grid_blocks(warps, kMatvecWarps)), dim3(kMatvecThreads), 0, stream, a, width);
}

// `workspace` holds rmatvec_workspace_bytes(a.rows, a.cols).
template <typename T>
void launch_rmatvec64(const Matvec64Args<T>& a, double* workspace, Stream stream) {
  if (a.cols == 0) return;
  const int64_t slices = rmatvec_slices(a.rows, a.cols);
  const int64_t tiles = (a.cols + kMatvecTile - 1) / kMatvecTile;
  launch(rmatvec64_slices_kernel<T>, dim3(grid_blocks(tiles * slices, 1)), dim3(kMatvecThreads), 0, stream, a,
         slices, workspace);
  launch(rmatvec64_merge_kernel<double>, dim3(grid_blocks(a.cols, kMatvecThreads)), dim3(kMatvecThreads), 0,
         stream, static_cast<const double*>(workspace), slices, a.cols, a.out);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
