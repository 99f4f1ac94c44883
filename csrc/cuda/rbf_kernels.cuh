// The fused CUDA kernel for Gram matrices of the RBF kernel computed on the device
// by the package's own loops (the Frank-Wolfe column cache, RPCholesky's blocks), written
// once for nvcc (cuda/rbf_cuda.cu) and for the CPU emulation (emu/rbf_emulated.cpp),
// which is how its logic is tested without a GPU. Keep it to what
// emu/cuda_emulation.h can run. The public products on CUDA tensors (ops.rbf_matvec,
// ops.rbf_gram) are cuBLAS's products and the epilogues of cuda/rbf_epilogue_kernels.cuh.
//
// The kernel walks 64 x 64 tiles of K in a grid-stride loop. A block of
// 16 x 16 threads owns a tile, thread (tx, ty) holding rows ty + 16a and columns
// tx + 16b (a, b < 4) in registers. With that strided ownership a warp's
// shared-memory reads are conflict free or broadcasts and its global stores are
// contiguous per half-warp. Nothing but the inputs and `out` is touched: there is no
// workspace (all device memory comes from torch's allocator).
#pragma once
#include <cstdint>

#include "common/rbf_math.h"
#include "common/rbf_params.h"
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {

inline constexpr int TX = 16, TY = 16, THREADS = TX * TY;  // threads of a block
inline constexpr int R = 4;                                 // a thread's sub-tile is R x R
inline constexpr int TILE = TX * R;                         // a block's tile is TILE x TILE
inline constexpr int BK = 16;  // features per shared-memory chunk of the dot products
static_assert(TX == TY, "square tiles: a mirrored tile is transposed in place");
static_assert(TX == 16, "a row of the tile is spread over the lanes of one half-warp");
static_assert(BK == 16, "kPad below assumes 16-thread runs down a column, as TX");

// Shared arrays below are written down their columns by 16 consecutive threads
// (the rest of the warp writing the next rows). Shared memory has 32 four-byte
// banks, and serves 8-byte accesses per half-warp, i.e. as 16 eight-byte banks;
// padding a row of TILE (a multiple of the bank count) by banks / 16 puts each
// such thread on its own bank.
template <typename T>
inline constexpr int kPad = (sizeof(T) == 8 ? 16 : 32) / 16;

// Blocks per SM the register allocation must allow: 4 x 256 threads x 64
// registers fill an SM's register file; doubles need more, and get 3 (<= 80).
template <typename T>
inline constexpr int kMinBlocksPerSm = sizeof(T) == 8 ? 3 : 4;

template <typename T>
struct TileShared {
  struct Chunk {
    T x[BK][TILE + kPad<T>];  // features k0 + kk of the tile's X rows, k-major
    T y[BK][TILE + kPad<T>];  // and of its Y rows
  };
  // The phases of a tile use this storage in turn; each writer first syncs.
  union {
    Chunk chunk;
    T staged[TILE][TILE + kPad<T>];  // a tile being transposed
  };
  T x_norm[TILE], y_norm[TILE];
};

struct TileCoords {
  int64_t i0, j0;  // first row (of X) and column (row of Y)
  bool mirrored;   // symmetric and above the diagonal: stands for its transpose too
};

// The tiles of a launch: every row x column tile, or for a symmetric problem
// those on or above the diagonal. Numbered so that consecutive blocks mostly add
// into different rows of out.
struct TileGrid {
  int64_t row_tiles = 0, col_tiles = 0;
  bool upper = false;

  DLMSVDD_HD int64_t count() const {
    return upper ? row_tiles * (row_tiles + 1) / 2 : row_tiles * col_tiles;
  }
  __device__ TileCoords operator[](int64_t t) const {
    if (!upper) return {t % row_tiles * TILE, t / row_tiles * TILE, false};
    // Column tj of the upper triangle holds tiles 0..tj and starts at tj (tj + 1) / 2.
    int64_t tj = int64_t((sqrt(8.0 * double(t) + 1.0) - 1.0) / 2.0);
    while (tj * (tj + 1) / 2 > t) --tj;  // correct the rounding of sqrt
    while ((tj + 1) * (tj + 2) / 2 <= t) ++tj;
    const int64_t ti = t - tj * (tj + 1) / 2;
    return {ti * TILE, tj * TILE, ti != tj};
  }
};

template <typename T>
TileGrid tile_grid(const RbfProblem<T>& p) {
  return {(p.nx + TILE - 1) / TILE, (p.ny + TILE - 1) / TILE, p.symmetric};
}

// dst[kk][r] = a[r0 + r][k0 + kk], zero outside the n x d matrix a.
template <typename T>
__device__ __forceinline__ void load_chunk(const T* a, int64_t lda, int64_t n, int64_t d, int64_t r0,
                                           int64_t k0, T (&dst)[BK][TILE + kPad<T>]) {
  const int tid = threadIdx.y * TX + threadIdx.x;
  // Consecutive threads read consecutive features of a row.
  for (int e = tid; e < TILE * BK; e += THREADS) {
    const int r = e / BK, kk = e % BK;
    dst[kk][r] = r0 + r < n && k0 + kk < d ? a[(r0 + r) * lda + k0 + kk] : T(0);
  }
}

// tile[a][b] = squared distance, or kernel value, of X row i0 + ty + 16a and
// Y row j0 + tx + 16b. Entries outside X or Y are garbage: finite, or NaN
// beside a non-finite row, and either way multiplied by 0 or never stored.
template <typename T>
__device__ void kernel_tile(const RbfProblem<T>& p, int64_t i0, int64_t j0, bool distances_only,
                            TileShared<T>& s, T (&tile)[R][R]) {
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TX + tx;
  DLMSVDD_UNROLL
  for (int a = 0; a < R; ++a)
    DLMSVDD_UNROLL
    for (int b = 0; b < R; ++b) tile[a][b] = T(0);
  // The squared norms come from the same chunks: thread r < TILE sums X row r,
  // thread TILE + r sums Y row r (whole warps, so no divergence).
  T norm = T(0);
  for (int64_t k0 = 0; k0 < p.d; k0 += BK) {
    __syncthreads();
    load_chunk(p.x, p.ldx, p.nx, p.d, i0, k0, s.chunk.x);
    load_chunk(p.y, p.ldy, p.ny, p.d, j0, k0, s.chunk.y);
    __syncthreads();
    if (tid < 2 * TILE) {
      const auto& rows = tid < TILE ? s.chunk.x : s.chunk.y;
      DLMSVDD_UNROLL
      for (int kk = 0; kk < BK; ++kk) norm += rows[kk][tid % TILE] * rows[kk][tid % TILE];
    }
    DLMSVDD_UNROLL
    for (int kk = 0; kk < BK; ++kk) {
      T xa[R], yb[R];
      DLMSVDD_UNROLL
      for (int a = 0; a < R; ++a) xa[a] = s.chunk.x[kk][ty + TY * a];
      DLMSVDD_UNROLL
      for (int b = 0; b < R; ++b) yb[b] = s.chunk.y[kk][tx + TX * b];
      DLMSVDD_UNROLL
      for (int a = 0; a < R; ++a)
        DLMSVDD_UNROLL
        for (int b = 0; b < R; ++b) tile[a][b] += xa[a] * yb[b];
    }
  }
  __syncthreads();  // the previous tile's readers of the norms are done (also when d == 0)
  norm = finite_or_nan(norm);  // common/rbf_math.h: rows with a NaN or inf give NaN
  if (tid < TILE)
    s.x_norm[tid] = norm;
  else if (tid < 2 * TILE)
    s.y_norm[tid - TILE] = norm;
  __syncthreads();
  DLMSVDD_UNROLL
  for (int a = 0; a < R; ++a)
    DLMSVDD_UNROLL
    for (int b = 0; b < R; ++b) {
      const T dist = sq_distance_from_dot(s.x_norm[ty + TY * a], s.y_norm[tx + TX * b], tile[a][b]);
      tile[a][b] = distances_only ? dist : rbf_from_sq_distance(dist, p.gamma);
    }
}

// tile := its transpose, through shared memory: thread (tx, ty) ends up holding
// rows ty + 16a, columns tx + 16b of the transpose.
template <typename T>
__device__ void transpose_tile(T (&tile)[R][R], TileShared<T>& s) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  __syncthreads();
  DLMSVDD_UNROLL
  for (int a = 0; a < R; ++a)
    DLMSVDD_UNROLL
    for (int b = 0; b < R; ++b) s.staged[tx + TX * b][ty + TY * a] = tile[a][b];
  __syncthreads();
  DLMSVDD_UNROLL
  for (int a = 0; a < R; ++a)
    DLMSVDD_UNROLL
    for (int b = 0; b < R; ++b) tile[a][b] = s.staged[ty + TY * a][tx + TX * b];
}

// out[i0 + r][j0 + c] = tile[r][c] within n_rows x n_cols.
template <typename T>
__device__ void store_tile(const GramArgs<T>& g, const T (&tile)[R][R], int64_t i0, int64_t n_rows, int64_t j0,
                           int64_t n_cols) {
  const int tx = threadIdx.x, ty = threadIdx.y;
  DLMSVDD_UNROLL
  for (int a = 0; a < R; ++a) {
    const int64_t i = i0 + ty + TY * a;
    if (i >= n_rows) continue;
    DLMSVDD_UNROLL
    for (int b = 0; b < R; ++b) {
      const int64_t j = j0 + tx + TX * b;
      if (j < n_cols) g.out[i * g.ldo + j] = tile[a][b];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(THREADS, kMinBlocksPerSm<T>) rbf_gram_kernel(RbfProblem<T> p, GramArgs<T> g, TileGrid tiles) {
  __shared__ TileShared<T> s;
  for (int64_t t = blockIdx.x; t < tiles.count(); t += gridDim.x) {
    const TileCoords c = tiles[t];
    T tile[R][R];
    kernel_tile(p, c.i0, c.j0, g.distances_only, s, tile);
    store_tile(g, tile, c.i0, p.nx, c.j0, p.ny);
    if (c.mirrored) {
      transpose_tile(tile, s);  // so that the mirrored stores are contiguous too
      store_tile(g, tile, c.j0, p.ny, c.i0, p.nx);
    }
  }
}

// out = K(X, Y), or the squared distances, queued on `stream`.
template <typename T>
void launch_rbf_gram(const RbfProblem<T>& p, const GramArgs<T>& g, Stream stream) {
  if (p.nx <= 0 || p.ny <= 0) return;
  const TileGrid tiles = tile_grid(p);
  launch(rbf_gram_kernel<T>, dim3(grid_blocks(tiles.count(), 1)), dim3(TX, TY), 0, stream, p, g, tiles);
}

}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
