// The CPU RBF engine: a register-blocked GEMM micro-kernel computes an
// MR x NR tile of dot products x_i . y_j over the whole depth d (both packed
// panels stay in L2), and the epilogue turns it into kernel values in
// registers and consumes them at once: a fused product with V, or a store
// for the Gram matrix. No N x N block is ever held.
//
// Included once per instruction set, inside that set's namespace, after simd.h.
// No include guard for the same reason.

template <typename T>
struct TileShape {
  static constexpr int W = Simd<T>::W;
  // Accumulators MR * NV plus NV loads and a broadcast fit the register file:
  // 32 registers with AVX-512, 16 otherwise.
  static constexpr int MR = DLMSVDD_VEC_BYTES == 64 ? 14 : 6;
  static constexpr int NV = 2;
  static constexpr int NR = NV * W;
};

// V columns up to this count are consumed in registers; wider V goes through
// a small tile buffer and row updates.
constexpr int64_t kFusedColumns = 8;

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// Rows [row0, row0 + P) of src as one panel: dst[p][r], zero for rows >= n.
// norms[r] = ||src_row||^2 (0 for padding; NaN for a non-finite row: finite_or_nan). The depth loop is outermost so the
// panel is written in order (writing it row by row strides every store).
template <typename T, int P>
void pack_panel(const T* src, int64_t ld, int64_t row0, int64_t n, int64_t d, T* dst, T* norms) {
  using V = VecOf<T>;
  constexpr int W = Simd<T>::W;
  const int valid = static_cast<int>(std::clamp<int64_t>(n - row0, 0, P));
  const T* rows[P];
  for (int r = 0; r < valid; ++r) rows[r] = src + (row0 + r) * ld;
  for (int64_t p = 0; p < d; ++p) {
    T* out = dst + p * P;
    for (int r = 0; r < valid; ++r) out[r] = rows[r][p];
    for (int r = valid; r < P; ++r) out[r] = 0;
  }
  for (int r = 0; r < P; ++r) {
    T norm = 0;
    if (r < valid) {
      V acc = {};
      int64_t p = 0;
      for (; p + W <= d; p += W) {
        const V v = vload(rows[r] + p);
        acc += v * v;
      }
      norm = vsum<T>(acc);
      for (; p < d; ++p) norm += rows[r][p] * rows[r][p];
    }
    norms[r] = finite_or_nan(norm);  // common/rbf_math.h: rows with a NaN or inf give NaN
  }
}

// Depth chunk: a KC x NR column micro-panel (32 KB) stays in L1 while the
// row micro-panels of a block stream past it.
constexpr int64_t kDepthChunk = 256;

// How far ahead (in depth steps) the micro-kernel prefetches a row panel that
// streams from memory (X packed once for many products, RPCholesky's pivot
// columns): the hardware prefetcher alone leaves the broadcasts waiting. In a
// chunk's last steps it runs on into the next row panel's chunk. It took 128
// pivot columns of a 6000 x 2048 X from 253 to 285 GFLOP/s on 2 cores, and
// to 350 with the run-on (torch's sgemm: 340-370); a row block packed by its
// own thread sits in L2, and there the prefetch only costs (3-5% at d = 64),
// so it is off.
constexpr int64_t kRowPrefetch = 64;

template <typename T>
using Tile = VecOf<T>[TileShape<T>::MR][TileShape<T>::NV];

template <typename T>
__attribute__((always_inline)) inline void tile_zero(Tile<T>& acc) {
#pragma GCC unroll 16
  for (int r = 0; r < TileShape<T>::MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < TileShape<T>::NV; ++v) acc[r][v] = VecOf<T>{};
}

// Spill or reload a partial tile between depth chunks.
template <typename T>
__attribute__((always_inline)) inline void tile_copy(Tile<T>& dst, const Tile<T>& src) {
  __builtin_memcpy(&dst, &src, sizeof(Tile<T>));
}

// acc[r][v] += sum_{p < len} a[p][r] * b[p][v*W + lane]; a, b packed panels.
// PrefetchRows: a streams from memory (see kRowPrefetch); a_next is the row
// micro-panel the caller takes next, at the same depth (or a itself).
template <typename T, bool PrefetchRows>
__attribute__((always_inline)) inline void dot_tile_accumulate(const T* __restrict a, const T* __restrict b,
                                                               int64_t len, Tile<T>& acc, const T* a_next) {
  constexpr int MR = TileShape<T>::MR, NV = TileShape<T>::NV, NR = TileShape<T>::NR;
  constexpr int W = Simd<T>::W;
  // A local copy: GCC keeps it in registers, while the caller's tile, whose
  // address escapes into the epilogue, was once kept on the stack (every FMA
  // a load and a store: the plain kernel-vector product ran at half speed).
  Tile<T> r_acc;
  tile_copy<T>(r_acc, acc);
  for (int64_t p = 0; p < len; ++p) {
    if constexpr (PrefetchRows) {
      const int64_t ahead = p + kRowPrefetch;
      __builtin_prefetch(ahead < len ? a + ahead * MR : a_next + std::min(ahead - len, len - 1) * MR);
    }
    VecOf<T> bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = vload(b + p * NR + v * W);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const VecOf<T> ar = vbroadcast(a[p * MR + r]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) r_acc[r][v] += ar * bv[v];
    }
  }
  tile_copy<T>(acc, r_acc);
}

// The same, as a function of its own: with 16 vector registers (AVX2, SSE)
// GCC spills part of the tile when the loop is inlined into the matvec's
// epilogues. Taken for depth chunks of 128 or more, where the call costs
// nothing; at d = 64 outlining cost 20%, and the inlined loop there also ran
// 1.3-1.8x faster once this path existed (GCC allocates the two differently):
// code generation, measured under set_cpu_isa("avx2"), not a design guarantee.
template <typename T, bool PrefetchRows>
__attribute__((noinline)) void dot_tile_accumulate_outlined(const T* __restrict a, const T* __restrict b,
                                                            int64_t len, Tile<T>& acc, const T* a_next) {
  dot_tile_accumulate<T, PrefetchRows>(a, b, len, acc, a_next);
}

// With 16 vector registers, depth chunks from this long on take the outlined loop.
constexpr bool kOutlineDotLoop = DLMSVDD_VEC_BYTES < 64;
constexpr int64_t kOutlinedDepth = 128;

// dot_tile_accumulate in the variant for this chunk: prefetching when the row
// panel streams from memory, outlined for long chunks with 16 registers.
template <typename T>
__attribute__((always_inline)) inline void dot_tile(bool streamed, const T* a, const T* b, int64_t len, Tile<T>& acc,
                                                    const T* a_next) {
  const bool outlined = kOutlineDotLoop && len >= kOutlinedDepth;
  if (outlined && streamed)
    dot_tile_accumulate_outlined<T, true>(a, b, len, acc, a_next);
  else if (outlined)
    dot_tile_accumulate_outlined<T, false>(a, b, len, acc, a_next);
  else if (streamed)
    dot_tile_accumulate<T, true>(a, b, len, acc, a_next);
  else
    dot_tile_accumulate<T, false>(a, b, len, acc, a_next);
}

// In place: dot products -> squared distances -> kernel values (unless distances_only).
template <typename T>
__attribute__((always_inline)) inline void tile_to_kernel(Tile<T>& acc, const T* xn, const T* yn, T gamma,
    bool distances_only) {
  constexpr int MR = TileShape<T>::MR, NV = TileShape<T>::NV, W = Simd<T>::W;
  const VecOf<T> zero = {};
  VecOf<T> ynv[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) ynv[v] = vload(yn + v * W);
  const T neg_gamma = -gamma;
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      VecOf<T> dist = (ynv[v] + xn[r]) - acc[r][v] * T(2);
      dist = clamp_sq_distance(dist, zero);  // NaN stays NaN (common/rbf_math.h)
      acc[r][v] = distances_only ? dist : vexp(dist * neg_gamma);
    }
  }
}

// Work split: rows in blocks of mc (a multiple of MR) whose depth chunk
// (mc x kDepthChunk) fits half of L2, and at least one block per thread.
template <typename T>
int64_t row_block(int64_t nx, int64_t d, int threads) {
  constexpr int MR = TileShape<T>::MR;
  const int64_t chunk = std::min<int64_t>(std::max<int64_t>(d, 1), kDepthChunk);
  int64_t mc = std::min<int64_t>((512 * 1024) / (int64_t(sizeof(T)) * chunk), 512);
  mc = std::min(mc, round_up((nx + threads - 1) / threads, MR));
  return std::max<int64_t>(mc / MR * MR, MR);
}
