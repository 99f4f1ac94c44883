// The fast Walsh-Hadamard transform of one row on the CPU (transform_row),
// which the FWHT (cpu/fwht_impl.h) and the structured feature maps
// (cpu/feature_map_impl.h) run. Included by those, once per translation unit,
// with DLMSVDD_ISA_NS and DLMSVDD_VEC_BYTES defined; the including file's
// compiler flags pick the instructions.
//
// A row of L = 2^n elements goes through n butterfly levels; the level of
// stride h maps each pair (a, b) = (x[j], x[j + h]) to (a + b, a - b). The
// arithmetic is one addition per element and level, so the cost is memory
// passes, and each pass does several levels:
//  * the first pass over a chunk loads 2^K consecutive vectors, does the
//    log2(W) levels within each vector (lane permutations) and the K levels
//    between them in registers, then stores to the destination (so an
//    out-of-place transform costs no copy);
//  * later passes load 2^K vectors at stride h and do the levels h .. 2^(K-1) h.
// Chunks of kChunkBytes stay in L1 through all their levels; the levels of
// strides beyond a chunk then pass over the whole row (at most 2^15 elements,
// which fits L2). The levels commute, so their order is free.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

#include "cpu/simd.h"

namespace {

// Levels per pass: 2^K vectors are held in registers at once (AVX-512 has 32
// vector registers, AVX2 and SSE 16; 16 live vectors would spill there).
constexpr int kMaxLevelsPerPass = DLMSVDD_VEC_BYTES == 64 ? 4 : 3;

// A chunk of a row that stays in L1 (32-48 KB) while all its levels are done.
constexpr int64_t kChunkBytes = 16384;

int log2_of(int64_t n) { return std::countr_zero(static_cast<uint64_t>(n)); }

// Lane i of the result is lane i ^ H of v.
template <typename T, int H, size_t... L>
__attribute__((always_inline)) inline VecOf<T> swap_lanes(VecOf<T> v, std::index_sequence<L...>) {
#if defined(__clang__)
  return __builtin_shufflevector(v, v, (L ^ H)...);
#else
  using I = typename Simd<T>::I;
  using Int = typename Simd<T>::Int;
  return __builtin_shuffle(v, I{static_cast<Int>(L ^ H)...});
#endif
}

// +1 in the lanes with bit H clear (the first of a pair), -1 in the others.
template <typename T, int H, size_t... L>
__attribute__((always_inline)) inline VecOf<T> pair_signs(std::index_sequence<L...>) {
  return VecOf<T>{((L & H) ? T(-1) : T(1))...};
}

// The levels of strides H, 2H, ..., up to W/2 and below `below`, within one
// vector. At stride H the first lane of a pair gets v[i + H] + v[i], the second
// v[i] - v[i + H]: the partner's value plus its own times +-1 (exact, so a
// fused multiply-add rounds as the plain sum would).
template <typename T, int H = 1>
__attribute__((always_inline)) inline VecOf<T> in_vector_levels(VecOf<T> v, int64_t below = Simd<T>::W) {
  if constexpr (H < Simd<T>::W) {
    if (H < below) {
      constexpr auto lanes = std::make_index_sequence<Simd<T>::W>{};
      return in_vector_levels<T, 2 * H>(swap_lanes<T, H>(v, lanes) + v * pair_signs<T, H>(lanes), below);
    }
  }
  return v;
}

// The K levels among 2^K vectors: v[i] and v[i + s] for s = 1, 2, ..., 2^(K-1).
template <int K, typename Vec>
__attribute__((always_inline)) inline void butterflies(Vec (&v)[1 << K]) {
#pragma GCC unroll 16
  for (int s = 1; s < (1 << K); s *= 2)
#pragma GCC unroll 16
    for (int i = 0; i < (1 << K); ++i)
      if (!(i & s)) {
        const Vec a = v[i], b = v[i + s];
        v[i] = a + b;
        v[i + s] = a - b;
      }
}

// One pass over [0, len) of a chunk or row doing the levels of strides h, 2h,
// ..., 2^(K-1) h (h a multiple of W): for each group, the vectors at j, j + h,
// ..., j + (2^K - 1) h are loaded from src, combined and stored to dst (which
// may be src). The first pass of a chunk (InVector, h = W, so the vectors are
// consecutive) also does the levels within each vector, after multiplying
// src by mul elementwise when mul is not null (a diagonal before H).
template <typename T, int K, bool InVector>
void pass(const T* src, T* dst, int64_t len, int64_t h, const T* mul = nullptr) {
  constexpr int W = Simd<T>::W, N = 1 << K;
  for (int64_t g = 0; g < len; g += h * N)
    for (int64_t j = g; j < g + h; j += W) {
      VecOf<T> v[N];
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) {
        v[i] = vload(src + j + i * h);
        if constexpr (InVector) {
          if (mul) v[i] *= vload(mul + j + i * h);
          v[i] = in_vector_levels<T>(v[i]);
        }
      }
      butterflies<K>(v);
#pragma GCC unroll 16
      for (int i = 0; i < N; ++i) vstore(dst + j + i * h, v[i]);
    }
}

// Calls f(std::integral_constant<int, k>()) for a run-time 0 <= k <=
// kMaxLevelsPerPass: passes take their level count as a template argument so
// that their vectors are registers.
template <typename F, int... K>
void with_levels_impl(int k, F& f, std::integer_sequence<int, K...>) {
  (void)((k == K ? (f(std::integral_constant<int, K>()), true) : false) || ...);
}
template <typename F>
void with_levels(int k, F&& f) {
  with_levels_impl(k, f, std::make_integer_sequence<int, kMaxLevelsPerPass + 1>());
}

// The levels of strides h, 2h, ..., len/2 of data (h >= W), in place.
template <typename T>
void strided_levels(T* data, int64_t len, int64_t h) {
  while (h < len) {
    const int k = std::min(kMaxLevelsPerPass, log2_of(len / h));
    with_levels(k, [&](auto levels) { pass<T, decltype(levels)::value, false>(data, data, len, h); });
    h <<= k;
  }
}

// A row shorter than a vector (L < W): plain scalar butterflies.
template <typename T>
void short_row(const T* src, T* dst, int64_t len) {
  if (src != dst) std::copy_n(src, len, dst);
  for (int64_t h = 1; h < len; h *= 2)
    for (int64_t g = 0; g < len; g += 2 * h)
      for (int64_t j = g; j < g + h; ++j) {
        const T a = dst[j], b = dst[j + h];
        dst[j] = a + b;
        dst[j + h] = a - b;
      }
}

template <typename T>
void scale_row(T* data, int64_t len, T scale) {
  constexpr int W = Simd<T>::W;
  int64_t j = 0;
  for (; j + W <= len; j += W) vstore(data + j, vload(data + j) * scale);
  for (; j < len; ++j) data[j] *= scale;
}

// dst = scale H diag(mul) src (mul may be null: the identity).
template <typename T>
void transform_row(const T* src, T* dst, int64_t len, T scale, const T* mul = nullptr) {
  constexpr int64_t W = Simd<T>::W;
  if (len < W) {
    if (mul) {
      for (int64_t j = 0; j < len; ++j) dst[j] = src[j] * mul[j];
      src = dst;
    }
    short_row(src, dst, len);
  } else {
    const int64_t chunk = std::min<int64_t>(len, kChunkBytes / int64_t(sizeof(T)));
    const int first = std::min(kMaxLevelsPerPass, log2_of(chunk / W));
    for (int64_t c = 0; c < len; c += chunk) {
      with_levels(first, [&](auto levels) {
        pass<T, decltype(levels)::value, true>(src + c, dst + c, chunk, W, mul ? mul + c : nullptr);
      });
      strided_levels(dst + c, chunk, W << first);
    }
    strided_levels(dst, len, chunk);
  }
  // While the row is still in cache. One multiplication at the end rather than
  // 1/sqrt(2) per level: one rounding, and exact when L is a power of four.
  if (scale != T(1)) scale_row(dst, len, scale);
}

}  // namespace

}  // namespace dlmsvdd::cpu::DLMSVDD_ISA_NS
