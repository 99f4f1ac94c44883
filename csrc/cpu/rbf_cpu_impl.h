// RBF kernel-vector products and Gram matrices on the CPU. Included by
// isa/rbf_<name>.cpp with DLMSVDD_ISA_NS and DLMSVDD_VEC_BYTES defined; the file's
// compiler flags pick the instructions. OpenMP threads over row blocks.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include "common/rbf_math.h"
#include "common/rbf_params.h"
#include "cpu/aligned_buffer.h"
#include "cpu/rbf_cpu.h"

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

#include "cpu/simd.h"
#include "cpu/rbf_tiles.h"

namespace {

// Y (or X, when symmetric) packed once in NR-wide panels.
template <typename T>
struct PackedColumns {
  int64_t n_pad;
  AlignedBuffer<T> panels, norms;
  PackedColumns(const T* y, int64_t ldy, int64_t ny, int64_t d)
      : n_pad(round_up(ny, TileShape<T>::NR)),
        panels(n_pad * d, AlignedBuffer<T>::uninitialized),
        norms(n_pad, AlignedBuffer<T>::uninitialized) {
    constexpr int NR = TileShape<T>::NR;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < n_pad / NR; ++q)
      pack_panel<T, NR>(y, ldy, q * NR, ny, d, panels.data() + q * d * NR, norms.data() + q * NR);
  }
  const T* panel(int64_t j0, int64_t d) const { return panels.data() + j0 * d; }
};

// All rows of X packed in MR-high panels at once, for repeated products with
// changing Y (FeatureGramImpl): row blocks then view it instead of packing.
template <typename T>
struct PackedRows {
  AlignedBuffer<T> panels, norms;
  PackedRows(const T* x, int64_t ldx, int64_t n, int64_t d)
      : panels(round_up(n, TileShape<T>::MR) * d, AlignedBuffer<T>::uninitialized),
        norms(round_up(n, TileShape<T>::MR), AlignedBuffer<T>::uninitialized) {
    constexpr int MR = TileShape<T>::MR;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < round_up(n, MR) / MR; ++q)
      pack_panel<T, MR>(x, ldx, q * MR, n, d, panels.data() + q * d * MR, norms.data() + q * MR);
  }
};

// One thread's block of X rows in MR-high panels: packed by the block itself,
// or a view of PackedRows.
template <typename T>
struct RowBlock {
  // Column panels whose partial tiles a block keeps between depth chunks.
  static constexpr int64_t kBlockPanels = 8;
  AlignedBuffer<T> own_panels, own_norms, partial;
  const T* panels = nullptr;
  const T* norms = nullptr;
  bool streamed = false;  // panels view PackedRows (in memory), not this thread's own block (in L2)
  int64_t mc, max_panels, begin = 0, rows = 0, n_panels = 0;
  explicit RowBlock(int64_t mc_)
      : partial(kBlockPanels * mc_ * TileShape<T>::NR, AlignedBuffer<T>::uninitialized),
        mc(mc_),
        max_panels(mc_ / TileShape<T>::MR) {}
  void locate(const RbfProblem<T>& pb, int64_t block_begin) {
    begin = block_begin;
    rows = std::min(mc, pb.nx - begin);
    n_panels = (rows + TileShape<T>::MR - 1) / TileShape<T>::MR;
  }
  void pack(const RbfProblem<T>& pb, int64_t block_begin) {
    constexpr int MR = TileShape<T>::MR;
    locate(pb, block_begin);
    if (own_panels.size() == 0) {
      own_panels = AlignedBuffer<T>(mc * pb.d, AlignedBuffer<T>::uninitialized);
      own_norms = AlignedBuffer<T>(mc, AlignedBuffer<T>::uninitialized);
    }
    for (int64_t q = 0; q < n_panels; ++q)
      pack_panel<T, MR>(pb.x, pb.ldx, begin + q * MR, pb.nx, pb.d, own_panels.data() + q * pb.d * MR,
                        own_norms.data() + q * MR);
    panels = own_panels.data();
    norms = own_norms.data();
    streamed = false;
  }
  void view(const PackedRows<T>& all, const RbfProblem<T>& pb, int64_t block_begin) {
    locate(pb, block_begin);  // begin is a multiple of mc, so of MR: whole panels
    panels = all.panels.data() + begin * pb.d;
    norms = all.norms.data() + begin;
    streamed = true;
  }
  // Calls fn(q, j0, tile) for every column panel j0 in [j_begin, j_end) and
  // row panel q < q_end(j0), with their kernel (or distance) tile. Loop
  // order (GotoBLAS-like): column blocks of kBlockPanels panels; within one,
  // depth chunks; within a chunk, each column micro-panel (L1) meets every
  // row micro-panel (L2). Partial tiles wait in `partial` between chunks;
  // the last chunk's tile goes to fn from registers. A column chunk thus
  // serves the whole row block, which keeps L3 traffic low at large d.
  template <typename QEnd, typename Fn>
  void for_each_tile(const PackedColumns<T>& cols, int64_t j_begin, int64_t j_end, QEnd&& q_end, int64_t d,
                     T gamma, bool distances_only, Fn&& fn) {
    constexpr int MR = TileShape<T>::MR, NR = TileShape<T>::NR;
    Tile<T>* spill = reinterpret_cast<Tile<T>*>(partial.data());
    for (int64_t jb = j_begin; jb < j_end; jb += kBlockPanels * NR) {
      const int64_t jb_end = std::min(j_end, jb + kBlockPanels * NR);
      for (int64_t p0 = 0; p0 < d; p0 += kDepthChunk) {
        const int64_t len = std::min(kDepthChunk, d - p0);
        const bool first = p0 == 0, last = p0 + len == d;
        for (int64_t j0 = jb; j0 < jb_end; j0 += NR) {
          const T* b = cols.panel(j0, d) + p0 * NR;
          const int64_t qe = q_end(j0);
          Tile<T>* spill_j = spill + (j0 - jb) / NR * max_panels;
          for (int64_t q = 0; q < qe; ++q) {
            Tile<T> acc;
            if (first) tile_zero<T>(acc); else tile_copy<T>(acc, spill_j[q]);
            const T* a = panels + q * d * MR + p0 * MR;
            dot_tile<T>(streamed, a, b, len, acc, q + 1 < qe ? a + d * MR : a);
            if (!last) {
              tile_copy<T>(spill_j[q], acc);
              continue;
            }
            tile_to_kernel<T>(acc, norms + q * MR, cols.norms.data() + j0, gamma, distances_only);
            fn(q, j0, acc);
          }
        }
      }
    }
  }
};

// Row panels from this one on lie wholly below the diagonal for the column
// panel at j0 (every column j < every row i): symmetric products skip them.
template <typename T>
int64_t below_diagonal(const RowBlock<T>& block, int64_t j0) {
  constexpr int MR = TileShape<T>::MR, NR = TileShape<T>::NR;
  const int64_t first_skipped = (j0 + NR - block.begin + MR - 1) / MR;  // i0 >= j0 + NR
  return std::clamp<int64_t>(first_skipped, 0, block.n_panels);
}

// rowacc[r][c] += sum over the tile's columns of K[r][j] * vt[c][j] (vector partial sums).
template <typename T>
inline void accumulate_rows(const Tile<T>& kt, const T* vt, int64_t ldvt, int64_t k, T* rowacc) {
  constexpr int MR = TileShape<T>::MR, NV = TileShape<T>::NV, W = Simd<T>::W;
  for (int64_t c = 0; c < k; ++c) {
    VecOf<T> vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = vload(vt + c * ldvt + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      VecOf<T> s = kt[r][0] * vv[0];
      for (int v = 1; v < NV; ++v) s += kt[r][v] * vv[v];
      T* ra = rowacc + (r * k + c) * W;
      vstore(ra, vload(ra) + s);
    }
  }
}

// colacc[c][j] += sum over the tile's rows of K[r][j] * vt[c][i0 + r]: the
// transposed contribution of a tile above the diagonal.
template <typename T>
inline void accumulate_columns(const Tile<T>& kt, const T* vt_rows, int64_t ldvt, int64_t k,
                               T* colacc) {
  constexpr int MR = TileShape<T>::MR, NV = TileShape<T>::NV, W = Simd<T>::W;
  for (int64_t c = 0; c < k; ++c) {
    VecOf<T> cv[NV] = {};
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const VecOf<T> vi = vbroadcast(vt_rows[c * ldvt + r]);
      for (int v = 0; v < NV; ++v) cv[v] += kt[r][v] * vi;
    }
    for (int v = 0; v < NV; ++v) {
      T* ca = colacc + c * ldvt + v * W;
      vstore(ca, vload(ca) + cv[v]);
    }
  }
}

// Keeps entries with column j > row i (strict) or j >= i, zeroes the rest.
template <typename T>
inline void mask_triangle(Tile<T>& kt, int64_t i0, int64_t j0, bool strict) {
  constexpr int MR = TileShape<T>::MR, NV = TileShape<T>::NV, W = Simd<T>::W;
  using I = typename Simd<T>::I;
  using Int = typename Simd<T>::Int;
  I iota;
  for (int l = 0; l < W; ++l) iota[l] = l;
  const VecOf<T> zero = {};
  for (int r = 0; r < MR; ++r) {
    const Int i = static_cast<Int>(i0 + r);
    for (int v = 0; v < NV; ++v) {
      const I j = iota + static_cast<Int>(j0 + v * W);
      kt[r][v] = (strict ? (j > i) : (j >= i)) ? kt[r][v] : zero;
    }
  }
}

// Horizontal sums of a block's vector row accumulators into dst[i * ld_i + c * ld_c].
template <typename T>
void flush_rows(const T* rowacc, int64_t rows, int64_t k, T* dst, int64_t ld_i, int64_t ld_c,
                bool add) {
  constexpr int W = Simd<T>::W;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const T s = vsum<T>(vload(rowacc + (r * k + c) * W));
      T& o = dst[r * ld_i + c * ld_c];
      o = add ? o + s : s;
    }
}

// V transposed to vt[c][j] and zero padded to n_pad columns.
template <typename T>
AlignedBuffer<T> transpose_v(const MatvecArgs<T>& mv, int64_t ny, int64_t n_pad) {
  AlignedBuffer<T> vt(mv.k * n_pad);
  for (int64_t j = 0; j < ny; ++j)
    for (int64_t c = 0; c < mv.k; ++c) vt[c * n_pad + j] = mv.v[j * mv.ldv + c];
  return vt;
}

// out += K row updates for a tile, for V wider than kFusedColumns.
template <typename T>
void tile_row_updates(const Tile<T>& kt, int64_t i0, int64_t j0, const RbfProblem<T>& pb,
                      const MatvecArgs<T>& mv) {
  constexpr int MR = TileShape<T>::MR, NR = TileShape<T>::NR, W = Simd<T>::W;
  alignas(64) T buf[MR * NR];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < TileShape<T>::NV; ++v) vstore(buf + r * NR + v * W, kt[r][v]);
  const int64_t k = mv.k;
  for (int r = 0; r < MR && i0 + r < pb.nx; ++r) {
    T* o = mv.out + (i0 + r) * mv.ldo;
    for (int jj = 0; jj < NR && j0 + jj < pb.ny; ++jj) {
      const VecOf<T> kv = vbroadcast(buf[r * NR + jj]);
      const T* vrow = mv.v + (j0 + jj) * mv.ldv;
      int64_t c = 0;
      for (; c + W <= k; c += W) vstore(o + c, vload(o + c) + kv * vload(vrow + c));
      for (; c < k; ++c) o[c] += buf[r * NR + jj] * vrow[c];
    }
  }
}

// Every tile of K(X, Y); each thread owns whole row blocks of out. Each
// output row is summed by one block in a fixed order, so the dynamic
// schedule (balance on a loaded machine) leaves the result the same bits.
template <typename T>
void matvec_all_tiles(const RbfProblem<T>& pb, const MatvecArgs<T>& mv) {
  constexpr int MR = TileShape<T>::MR, W = Simd<T>::W;
  const PackedColumns<T> cols(pb.y, pb.ldy, pb.ny, pb.d);
  const bool fused = mv.k <= kFusedColumns;
  const AlignedBuffer<T> vt = fused ? transpose_v(mv, pb.ny, cols.n_pad) : AlignedBuffer<T>();
  const int64_t mc = row_block<T>(pb.nx, pb.d, omp_get_max_threads());
  const int64_t n_blocks = (pb.nx + mc - 1) / mc;
#pragma omp parallel
  {
    RowBlock<T> block(mc);
    AlignedBuffer<T> rowacc(fused ? mc * mv.k * W : 0);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < n_blocks; ++b) {
      block.pack(pb, b * mc);
      if (fused) {
        std::fill(rowacc.data(), rowacc.data() + rowacc.size(), T(0));
      } else {
        for (int64_t r = 0; r < block.rows; ++r)
          std::fill(mv.out + (block.begin + r) * mv.ldo, mv.out + (block.begin + r) * mv.ldo + mv.k, T(0));
      }
      const int64_t all_panels = block.n_panels;
      block.for_each_tile(cols, 0, cols.n_pad, [&](int64_t) { return all_panels; }, pb.d, pb.gamma, false,
                          [&](int64_t q, int64_t j0, Tile<T>& kt) {
                            if (fused)
                              accumulate_rows<T>(kt, vt.data() + j0, cols.n_pad, mv.k, rowacc.data() + q * MR * mv.k * W);
                            else
                              tile_row_updates<T>(kt, block.begin + q * MR, j0, pb, mv);
                          });
      if (fused)
        flush_rows<T>(rowacc.data(), block.rows, mv.k, mv.out + block.begin * mv.ldo, mv.ldo, 1, false);
    }
  }
}

// The block at position s of a static schedule over `threads` threads
// (thread t takes positions t, t + threads, ...), or -1 past the last block.
// The blocks go in rounds of `threads`, every other round reversed, so each
// thread pairs a block near the top (long rows of the upper triangle) with
// one near the bottom (short ones): balanced without a dynamic schedule.
inline int64_t zigzag_block(int64_t s, int64_t threads, int64_t n_blocks) {
  const int64_t round = s / threads, pos = s % threads;
  const int64_t b = round * threads + (round % 2 ? threads - 1 - pos : pos);
  return b < n_blocks ? b : -1;
}

// Y is X: only tiles on or above the diagonal; each off-diagonal tile also
// gives the transposed contribution. Per-thread accumulators, summed at the
// end in thread order. Deterministic at a fixed thread count: the blocks go to
// the threads by a static schedule (zigzag_block), so each accumulator sums
// the same tiles in the same order on every run (a dynamic schedule let the
// transposed contributions land in different accumulators run to run: the
// sums differed by up to 1e-5 in float32).
template <typename T>
void matvec_symmetric(const RbfProblem<T>& pb, const MatvecArgs<T>& mv) {
  constexpr int MR = TileShape<T>::MR, NR = TileShape<T>::NR, W = Simd<T>::W;
  const int64_t n = pb.nx, k = mv.k;
  const PackedColumns<T> cols(pb.x, pb.ldx, n, pb.d);
  const int64_t ld = round_up(std::max(cols.n_pad, round_up(n, MR)), W);
  const AlignedBuffer<T> vt = transpose_v(mv, n, ld);
  const int threads = omp_get_max_threads();
  // Smaller blocks than the plain case: the work per block shrinks along the diagonal.
  const int64_t mc = row_block<T>(n, pb.d, 4 * threads);
  const int64_t n_blocks = (n + mc - 1) / mc;
  AlignedBuffer<T> partial(int64_t(threads) * k * ld);
#pragma omp parallel
  {
    T* mine = partial.data() + int64_t(omp_get_thread_num()) * k * ld;
    RowBlock<T> block(mc);
    AlignedBuffer<T> rowacc(mc * k * W);
    const int64_t team = omp_get_num_threads();
#pragma omp for schedule(static, 1)
    for (int64_t s = 0; s < round_up(n_blocks, team); ++s) {
      const int64_t b = zigzag_block(s, team, n_blocks);
      if (b < 0) continue;
      block.pack(pb, b * mc);
      std::fill(rowacc.data(), rowacc.data() + rowacc.size(), T(0));
      block.for_each_tile(
          cols, block.begin / NR * NR, cols.n_pad, [&](int64_t j0) { return below_diagonal(block, j0); }, pb.d,
          pb.gamma, false, [&](int64_t q, int64_t j0, Tile<T>& kt) {
          const int64_t i0 = block.begin + q * MR;
          T* rows_q = rowacc.data() + q * MR * k * W;
          if (j0 >= i0 + MR) {
            accumulate_rows<T>(kt, vt.data() + j0, ld, k, rows_q);
            accumulate_columns<T>(kt, vt.data() + i0, ld, k, mine + j0);
          } else {  // the tile crosses the diagonal: rows take j >= i, columns j > i
            Tile<T> masked;
            tile_copy<T>(masked, kt);
            mask_triangle<T>(masked, i0, j0, false);
            accumulate_rows<T>(masked, vt.data() + j0, ld, k, rows_q);
            mask_triangle<T>(kt, i0, j0, true);
            accumulate_columns<T>(kt, vt.data() + i0, ld, k, mine + j0);
          }
        });
      flush_rows<T>(rowacc.data(), block.rows, k, mine + block.begin, 1, ld, true);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < k; ++c) {
        T s = 0;
        for (int t = 0; t < threads; ++t) s += partial[(int64_t(t) * k + c) * ld + i];
        mv.out[i * mv.ldo + c] = s;
      }
  }
}

// Lower triangle from the upper one, in cache-sized squares (copies: any
// schedule gives the same bits, as in gram_tiles, where each entry is one tile's).
template <typename T>
void mirror_lower(T* out, int64_t n, int64_t ldo) {
  constexpr int64_t B = 64;
  const int64_t nb = (n + B - 1) / B;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t bj = 0; bj <= bi; ++bj)
      for (int64_t i = bi * B; i < std::min(n, (bi + 1) * B); ++i)
        for (int64_t j = bj * B; j < std::min(i, (bj + 1) * B); ++j) out[i * ldo + j] = out[j * ldo + i];
}

// Columns of the Gram matrix a block's tiles are gathered over before they go
// out as whole rows: storing 14 x 32 tiles straight into an N x N matrix
// writes partial cache lines across many rows, which the L2 evicts half done.
constexpr int64_t kGramColumnBlock = 512;

// rows: X packed already (or null: each block packs its rows).
template <typename T>
void gram_tiles(const RbfProblem<T>& pb, const GramArgs<T>& ga, const PackedRows<T>* rows = nullptr) {
  constexpr int MR = TileShape<T>::MR, NR = TileShape<T>::NR, NV = TileShape<T>::NV, W = Simd<T>::W;
  static_assert(kGramColumnBlock % NR == 0, "column blocks hold whole panels");
  const PackedColumns<T> cols(pb.y, pb.ldy, pb.ny, pb.d);
  const int threads = omp_get_max_threads();
  const int64_t mc = row_block<T>(pb.nx, pb.d, pb.symmetric ? 4 * threads : threads);
  const int64_t n_blocks = (pb.nx + mc - 1) / mc;
#pragma omp parallel
  {
    RowBlock<T> block(mc);
    AlignedBuffer<T> staged(round_up(mc, MR) * kGramColumnBlock);
#pragma omp for schedule(dynamic, 1)
    for (int64_t b = 0; b < n_blocks; ++b) {
      if (rows) block.view(*rows, pb, b * mc); else block.pack(pb, b * mc);
      const int64_t j_start = pb.symmetric ? block.begin / NR * NR : 0;
      for (int64_t jb = j_start; jb < cols.n_pad; jb += kGramColumnBlock) {
        const int64_t jb_end = std::min(cols.n_pad, jb + kGramColumnBlock);
        // Symmetric: panels wholly below the diagonal are skipped; their
        // staged entries are stale, and the mirror pass overwrites them.
        block.for_each_tile(
            cols, jb, jb_end,
            [&](int64_t j0) { return pb.symmetric ? below_diagonal(block, j0) : block.n_panels; }, pb.d, pb.gamma,
            ga.distances_only, [&](int64_t q, int64_t j0, Tile<T>& kt) {
              T* dst = staged.data() + q * MR * kGramColumnBlock + (j0 - jb);
              for (int r = 0; r < MR; ++r)
                for (int v = 0; v < NV; ++v) vstore(dst + r * kGramColumnBlock + v * W, kt[r][v]);
            });
        const int64_t width = std::min(pb.ny, jb_end) - jb;
        for (int64_t r = 0; r < block.rows; ++r)
          std::copy_n(staged.data() + r * kGramColumnBlock, width, ga.out + (block.begin + r) * ga.ldo + jb);
      }
    }
  }
  if (pb.symmetric) mirror_lower(ga.out, pb.nx, ga.ldo);
}

// A handful of columns (the Frank-Wolfe case): stream X once, all columns at a time.
constexpr int64_t kMaxStreamedColumns = 8;

template <typename T>
void gram_few_columns(const RbfProblem<T>& pb, const GramArgs<T>& ga) {
  constexpr int W = Simd<T>::W;
  const int64_t d = pb.d, ny = pb.ny;
  T y_norm[kMaxStreamedColumns];
  for (int64_t j = 0; j < ny; ++j) {
    const T* y = pb.y + j * pb.ldy;
    VecOf<T> acc = {};
    int64_t p = 0;
    for (; p + W <= d; p += W) acc += vload(y + p) * vload(y + p);
    T s = vsum<T>(acc);
    for (; p < d; ++p) s += y[p] * y[p];
    y_norm[j] = finite_or_nan(s);
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < pb.nx; ++i) {
    const T* x = pb.x + i * pb.ldx;
    VecOf<T> acc[kMaxStreamedColumns] = {};
    VecOf<T> xx = {};
    int64_t p = 0;
    for (; p + W <= d; p += W) {
      const VecOf<T> xv = vload(x + p);
      xx += xv * xv;
      for (int64_t j = 0; j < ny; ++j) acc[j] += xv * vload(pb.y + j * pb.ldy + p);
    }
    T x_norm = vsum<T>(xx);
    T dot[kMaxStreamedColumns];
    for (int64_t j = 0; j < ny; ++j) dot[j] = vsum<T>(acc[j]);
    for (; p < d; ++p) {
      x_norm += x[p] * x[p];
      for (int64_t j = 0; j < ny; ++j) dot[j] += x[p] * pb.y[j * pb.ldy + p];
    }
    x_norm = finite_or_nan(x_norm);
    for (int64_t j = 0; j < ny; ++j) {
      const T dist = sq_distance_from_dot(x_norm, y_norm[j], dot[j]);
      ga.out[i * ga.ldo + j] = ga.distances_only ? dist : rbf_from_sq_distance(dist, pb.gamma);
    }
  }
}

// A packed copy of X larger than this is not kept between calls (each call
// packs its row blocks as it goes): at N = 1e6, d = 512 the copy was 2 GB,
// twice RPCholesky's whole factor at m = 256.
constexpr int64_t kMaxPackedRowsBytes = int64_t(256) << 20;

// K(X, Y) for one X and many small Y: X is packed the first time Y has more
// rows than the streaming path takes, and reused after, when the packed copy
// is at most kMaxPackedRowsBytes.
template <typename T>
class FeatureGramImpl final : public FeatureGram<T> {
 public:
  explicit FeatureGramImpl(const RbfProblem<T>& x) : pb_(x) {}
  void gram(const T* y, int64_t ldy, int64_t ny, T* out, int64_t ldo) override {
    RbfProblem<T> p = pb_;
    p.y = y;
    p.ldy = ldy;
    p.ny = ny;
    const GramArgs<T> ga{out, ldo};
    if (ny <= kMaxStreamedColumns) return gram_few_columns(p, ga);  // reads X in place
    if (!rows_ && p.nx * p.d * int64_t(sizeof(T)) <= kMaxPackedRowsBytes)
      rows_ = std::make_unique<PackedRows<T>>(p.x, p.ldx, p.nx, p.d);
    gram_tiles(p, ga, rows_.get());
  }

 private:
  RbfProblem<T> pb_;
  std::unique_ptr<PackedRows<T>> rows_;
};

}  // namespace

template <typename T>
std::unique_ptr<FeatureGram<T>> feature_gram(const RbfProblem<T>& x) {
  return std::make_unique<FeatureGramImpl<T>>(x);
}

template <typename T>
void rbf_matvec(const RbfProblem<T>& pb, const MatvecArgs<T>& mv) {
  if (pb.symmetric && mv.k <= kFusedColumns)
    matvec_symmetric(pb, mv);
  else
    matvec_all_tiles(pb, mv);
}

template <typename T>
void rbf_gram(const RbfProblem<T>& pb, const GramArgs<T>& ga) {
  if (!pb.symmetric && pb.ny <= kMaxStreamedColumns)
    gram_few_columns(pb, ga);
  else
    gram_tiles(pb, ga);
}

DLMSVDD_INSTANTIATE_RBF_CPU

}  // namespace dlmsvdd::cpu::DLMSVDD_ISA_NS
