// The structured feature maps (common/feature_map_params.h) on the CPU, fused:
// per row, per block, the diagonals, the permutation and the unnormalised
// transforms run on a d_pad-long buffer that stays in L1 (the FWHT's
// transform_row), then the cosine is taken in vector registers and the
// features are written once. OpenMP threads over rows.
//
// Included by isa/fwht_<name>.cpp after cpu/fwht_impl.h, in the same
// instruction-set namespace (it uses that file's transform_row and simd.h).
#include <cstring>
#include <vector>

#include "common/feature_map_params.h"
#include "cpu/aligned_buffer.h"

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

namespace {

// dst = a * b elementwise (dst may be a).
template <typename T>
void multiply(const T* a, const T* b, T* dst, int64_t len) {
  constexpr int W = Simd<T>::W;
  int64_t j = 0;
  for (; j + W <= len; j += W) vstore(dst + j, vload(a + j) * vload(b + j));
  for (; j < len; ++j) dst[j] = a[j] * b[j];
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
        multiply(x, diag[0] + c0, y.data(), dp);
        transform_row(y.data(), y.data(), dp, T(1));
        if (!fastfood) {
          for (int s = 1; s < 3; ++s) {
            multiply(y.data(), diag[s] + c0, y.data(), dp);
            transform_row(y.data(), y.data(), dp, T(1));
          }
          cos_features<T>(y.data(), nullptr, a.offset + c0, len, a.scale, a.out_scale, out);
        } else {
          const int32_t* p = perm.data() + c0;
          const T* g = diag[1] + c0;
          for (int64_t j = 0; j < dp; ++j) u[j] = y[p[j]] * g[j];
          transform_row(u.data(), u.data(), dp, T(1));
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
