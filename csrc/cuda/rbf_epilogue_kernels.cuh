// The GPU's RBF products as a matrix product and an epilogue (issue 48). The dot products of a
// tile of rows of X and of Y come from cuBLAS (torch.mm, called by dlmsvdd_ext/rbf_gemm.py,
// in IEEE float32, float64, or on TF32 tensor cores with error compensation); these kernels
// then make them kernel values (or squared distances) in place, or the tile's part of
// K(X, Y) @ V for a few columns of V. The sums run in a fixed order (a lane's strided
// elements, then the 32 lanes in order, then a row's segments in order, in double): the same
// result at every call, where the earlier fused tile kernel added tiles with atomics (issue 47:
// a saved and loaded model scored 1e-15 apart on the GPU).
// Written once for nvcc (cuda/rbf_cuda.cu) and for the CPU emulation (emu/rbf_emulated.cpp).
#pragma once
#include <cstdint>

#include "common/rbf_math.h"
#include "common/rbf_params.h"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

inline constexpr int kEpilogueThreads = 256;
inline constexpr int kEpilogueWarps = kEpilogueThreads / 32;

template <typename T>
__device__ __forceinline__ T kernel_of_dot(const RbfDots<T>& p, T x_norm, T y_norm, T dot) {
  const T dist = sq_distance_from_dot(x_norm, finite_or_nan(y_norm), dot);
  return p.distances_only ? dist : rbf_from_sq_distance(dist, p.gamma);
}

// Elements a thread reads before it computes any: independent loads in flight, where one element
// at a time waited for each load in turn (the writes to the tile may alias the norms for the compiler).
inline constexpr int kInFlight = 4;

// out (or dots itself) := the kernel values (or squared distances) of dots, row by row: coalesced
// reads and writes.
template <typename T>
__global__ void __launch_bounds__(kEpilogueThreads) rbf_dots_to_kernel(RbfDots<T> p) {
  constexpr int64_t kStride = int64_t(kEpilogueThreads) * kInFlight;
  for (int64_t i = blockIdx.x; i < p.rows; i += gridDim.x) {
    const T x_norm = finite_or_nan(p.x_norm[i]);
    const T* row = p.dots + i * p.ldd;
    T* dst = p.out == nullptr ? p.dots + i * p.ldd : p.out + i * p.ldo;
    for (int64_t j0 = threadIdx.x; j0 < p.cols; j0 += kStride) {
      T dot[kInFlight], y_norm[kInFlight];
      DLMSVDD_UNROLL
      for (int u = 0; u < kInFlight; ++u) {
        const int64_t j = j0 + int64_t(u) * kEpilogueThreads;
        dot[u] = j < p.cols ? row[j] : T(0);
        y_norm[u] = j < p.cols ? p.y_norm[j] : T(0);
      }
      DLMSVDD_UNROLL
      for (int u = 0; u < kInFlight; ++u) {
        const int64_t j = j0 + int64_t(u) * kEpilogueThreads;
        if (j < p.cols) dst[j] = kernel_of_dot(p, x_norm, y_norm[u], dot[u]);
      }
    }
  }
}

// partial[s, i, c] = sum over segment s's columns j of k(x_i, y_j) v[j, c], c < m.k <= kRbfDotsMaxColumns.
// A block takes kMatvecRows rows of one segment (blockIdx.y) at a time, a warp per row: the lanes walk
// the segment (coalesced), leave their partial sums in shared memory, and after one barrier a thread per
// (row, column) adds the 32 lanes' in order, in double. Two barriers per chunk of rows, none per row.
inline constexpr int kMatvecRows = 16;

template <typename T>
__global__ void __launch_bounds__(kEpilogueThreads) rbf_dots_matvec_kernel(RbfDots<T> p, RbfDotsMatvec<T> m) {
  __shared__ T lane_sums[kMatvecRows][kRbfDotsMaxColumns][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t segment = blockIdx.y, begin = segment * kRbfDotsSegment;
  const int64_t end = begin + kRbfDotsSegment < p.cols ? begin + kRbfDotsSegment : p.cols;
  for (int64_t r0 = int64_t(blockIdx.x) * kMatvecRows; r0 < p.rows; r0 += int64_t(gridDim.x) * kMatvecRows) {
    for (int r = warp; r < kMatvecRows; r += kEpilogueWarps) {
      const int64_t i = r0 + r;
      T part[kRbfDotsMaxColumns];
      DLMSVDD_UNROLL
      for (int c = 0; c < kRbfDotsMaxColumns; ++c) part[c] = T(0);
      if (i < p.rows) {
        const T x_norm = finite_or_nan(p.x_norm[i]);
        const T* row = p.dots + i * p.ldd;
        for (int64_t j0 = begin + lane; j0 < end; j0 += 32 * kInFlight) {
          T kij[kInFlight];
          DLMSVDD_UNROLL
          for (int u = 0; u < kInFlight; ++u) {  // the loads of kInFlight elements, then their sums
            const int64_t j = j0 + 32 * u;
            kij[u] = j < end ? kernel_of_dot(p, x_norm, p.y_norm[j], row[j]) : T(0);
          }
          DLMSVDD_UNROLL
          for (int u = 0; u < kInFlight; ++u) {
            const int64_t j = j0 + 32 * u;
            if (j >= end) break;
            const T* vj = m.v + j * m.ldv;
            DLMSVDD_UNROLL
            for (int c = 0; c < kRbfDotsMaxColumns; ++c)
              if (c < m.k) part[c] += kij[u] * vj[c];
          }
        }
      }
      DLMSVDD_UNROLL
      for (int c = 0; c < kRbfDotsMaxColumns; ++c) lane_sums[r][c][lane] = part[c];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kMatvecRows * m.k; e += blockDim.x) {
      const int r = e / int(m.k), c = e % int(m.k);
      const int64_t i = r0 + r;
      if (i >= p.rows) continue;
      double total = 0;
      for (int l = 0; l < 32; ++l) total += double(lane_sums[r][c][l]);
      m.partial[(segment * p.rows + i) * m.k + c] = total;
    }
    __syncthreads();  // the chunk's sums are read before the next chunk writes them
  }
}

// acc[i, c] (+)= the segments' partial sums, added in order.
template <typename T>
__global__ void __launch_bounds__(kEpilogueThreads) rbf_dots_segments_kernel(int64_t rows, int64_t segments,
                                                                            RbfDotsMatvec<T> m) {
  const int64_t n = rows * m.k, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride) {
    const int64_t i = e / m.k, c = e % m.k;
    double total = 0;
    for (int64_t s = 0; s < segments; ++s) total += m.partial[(s * rows + i) * m.k + c];
    double* out = m.acc + i * m.lda + c;
    *out = m.accumulate ? *out + total : total;
  }
}

template <typename T>
void launch_rbf_dots_to_kernel(const RbfDots<T>& p, Stream stream) {
  if (p.rows <= 0 || p.cols <= 0) return;
  launch(rbf_dots_to_kernel<T>, dim3(grid_blocks(p.rows, 1)), dim3(kEpilogueThreads), 0, stream, p);
}

template <typename T>
void launch_rbf_dots_matvec(const RbfDots<T>& p, const RbfDotsMatvec<T>& m, Stream stream) {
  if (p.rows <= 0 || m.k <= 0) return;
  const int64_t segments = rbf_dots_segments(p.cols);
  launch(rbf_dots_matvec_kernel<T>, dim3(grid_blocks(p.rows, kMatvecRows), unsigned(segments)), dim3(kEpilogueThreads),
         0, stream, p, m);
  launch(rbf_dots_segments_kernel<T>, dim3(grid_blocks(p.rows * m.k, kEpilogueThreads)), dim3(kEpilogueThreads), 0,
         stream, p.rows, segments, m);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
