// The structured feature maps (common/feature_map_params.h) on the CPU, fused:
// per row, per block, the diagonals (in the first pass of each transform), the
// permutation and the unnormalised transforms run on a d_pad-long buffer that
// stays in L1 (the FWHT's transform_row), then the cosine is taken in vector registers and the
// features are written once. OpenMP threads over rows.
//
// Included by isa/feature_map_<name>.cpp with DLMSVDD_ISA_NS and
// DLMSVDD_VEC_BYTES defined; the file's compiler flags pick the instructions
// (of cpu/fwht_transform.h's transform_row and simd.h too).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "common/feature_map_params.h"
#include "cpu/aligned_buffer.h"
#include "cpu/fwht_transform.h"

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

namespace {

// u[j] = y[p[j]]: gather instructions where the instruction set has them
// (the compiler's own vectorisation of this loop moves every index through a
// vector register and back, slower than scalar loads).
template <typename T>
void permute(const T* __restrict y, const int32_t* __restrict p, T* __restrict u, int64_t len) {
  int64_t j = 0;
  // The masked forms with a zero source: the plain ones start from an
  // "undefined" register, which GCC 12 warns about.
#if DLMSVDD_VEC_BYTES == 64
  if constexpr (sizeof(T) == 4)
    for (; j + 16 <= len; j += 16)
      _mm512_storeu_ps(u + j, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, _mm512_loadu_si512(p + j), y, 4));
  else
    for (; j + 8 <= len; j += 8)
      _mm512_storeu_pd(u + j, _mm512_mask_i32gather_pd(_mm512_setzero_pd(), 0xff,
                                                       _mm256_loadu_si256((const __m256i*)(p + j)), y, 8));
#elif DLMSVDD_VEC_BYTES == 32
  if constexpr (sizeof(T) == 4)
    for (; j + 8 <= len; j += 8)
      _mm256_storeu_ps(u + j, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), y, _mm256_loadu_si256((const __m256i*)(p + j)),
                                                       _mm256_castsi256_ps(_mm256_set1_epi32(-1)), 4));
  else
    for (; j + 4 <= len; j += 4)
      _mm256_storeu_pd(u + j, _mm256_mask_i32gather_pd(_mm256_setzero_pd(), y, _mm_loadu_si128((const __m128i*)(p + j)),
                                                       _mm256_castsi256_pd(_mm256_set1_epi64x(-1)), 8));
#endif
  for (; j < len; ++j) u[j] = y[p[j]];
}

// out[j] = structured_feature(y[j], s[j], offset[j]) for j < len; s may be
// null (SORF: 1). Vector cosine while the arguments are in its range, which
// is checked once at the end: the rare row beyond it is redone with cos_of.
template <typename T>
void cos_features(const T* y, const T* s, const T* offset, int64_t len, T scale, T out_scale, T* out) {
  using V = VecOf<T>;
  constexpr int W = Simd<T>::W;
  V largest = {};
  int64_t j = 0;
  for (; j + W <= len; j += W) {
    V arg = vload(y + j) * scale;
    if (s) arg *= vload(s + j);
    arg += vload(offset + j);
    const V magnitude = arg < V{} ? -arg : arg;
    largest = magnitude > largest ? magnitude : largest;
    vstore(out + j, vcos(arg) * out_scale);
  }
  bool in_range = true;
  for (int l = 0; l < W; ++l) in_range = in_range && largest[l] <= kVcosMaxArg<T>;
  for (int64_t i = in_range ? j : 0; i < len; ++i)
    out[i] = structured_feature(y[i], s ? s[i] : T(1), offset[i], scale, out_scale);
}

// Fewer elements than this run on the calling thread.
constexpr int64_t kParallelFeatures = int64_t(1) << 15;

}  // namespace

template <typename T>
void structured_features(const FeatureMapArgs<T>& a) {
  const int64_t dp = a.d_pad, width = a.blocks * dp;
  const bool fastfood = a.kind == StructuredMap::fastfood;
  const T* diag[3] = {a.diag, a.diag + width, a.diag + 2 * width};
  std::vector<int32_t> perm(fastfood ? width : 0);
  for (int64_t i = 0; i < int64_t(perm.size()); ++i) perm[i] = int32_t(a.perm[i]);
#pragma omp parallel if (a.rows > 1 && a.rows * a.m >= kParallelFeatures)
  {
    AlignedBuffer<T> padded(dp), y(dp), u(dp);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < a.rows; ++r) {
      const T* x = a.x + r * a.ldx;
      if (a.d < dp) {  // the padded row serves every block
        std::copy_n(x, a.d, padded.data());
        std::fill(padded.data() + a.d, padded.data() + dp, T(0));
        x = padded.data();
      }
      for (int64_t b = 0; b < a.blocks; ++b) {
        const int64_t c0 = b * dp, len = std::min(dp, a.m - c0);
        T* out = a.out + r * a.ldo + c0;
        transform_row(x, y.data(), dp, T(1), diag[0] + c0);  // H D_0 x
        if (!fastfood) {
          for (int s = 1; s < 3; ++s) transform_row(y.data(), y.data(), dp, T(1), diag[s] + c0);
          cos_features<T>(y.data(), nullptr, a.offset + c0, len, a.scale, a.out_scale, out);
        } else {
          permute(y.data(), perm.data() + c0, u.data(), dp);
          transform_row(u.data(), u.data(), dp, T(1), diag[1] + c0);
          cos_features<T>(u.data(), diag[2] + c0, a.offset + c0, len, a.scale, a.out_scale, out);
        }
      }
    }
  }
}

template <typename T>
void vector_cos(const T* x, T* out, int64_t n) {
  const T zero[Simd<T>::W] = {};
  // Vector by vector so that the offsets (zero) need no array of n.
  constexpr int W = Simd<T>::W;
#pragma omp parallel for schedule(static) if (n >= kParallelFeatures)
  for (int64_t i = 0; i < n; i += W) cos_features<T>(x + i, nullptr, zero, std::min<int64_t>(W, n - i), T(1), T(1), out + i);
}

template void structured_features<float>(const FeatureMapArgs<float>&);
template void structured_features<double>(const FeatureMapArgs<double>&);
template void vector_cos<float>(const float*, float*, int64_t);
template void vector_cos<double>(const double*, double*, int64_t);

}  // namespace dlmsvdd::cpu::DLMSVDD_ISA_NS
