// The structured random-feature maps (SORF, Fastfood) fused into one pass per
// row: parameters shared by the CPU, CUDA and emulated entry points, their one
// argument check, and the per-feature formula both back ends evaluate.
#pragma once
#include <math.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/fwht_params.h"
#include "common/rbf_math.h"

namespace dlmsvdd {

enum class StructuredMap { sorf, fastfood };

// The CUDA kernel keeps a block of the map in one FWHT tile (4096 elements).
inline constexpr int kCudaFeatureMapMaxLog2 = 12;

// Feature c = b * d_pad + j (< m) of a row x: block b of the map, with
// x_pad = x zero-padded to d_pad, H the unnormalised Sylvester Hadamard
// matrix (FwhtArgs) and D_s = diag(diag_s[b]):
//   sorf:      y = H D_2 H D_1 H D_0 x_pad,  out[c] = out_scale cos(scale y_j + offset[c])
//   fastfood:  y = H D_1 P H D_0 x_pad,      out[c] = out_scale cos(scale y_j D_2[b][j] + offset[c])
// with (P u)_j = u_{perm[b][j]}. Row-major, unit column stride.
template <typename T>
struct FeatureMapArgs {
  StructuredMap kind = StructuredMap::sorf;
  const T* x = nullptr;  // rows x d
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t d = 0;
  int64_t d_pad = 0;    // a power of two >= d
  int64_t blocks = 0;   // (blocks - 1) d_pad < m <= blocks d_pad
  // diag_0, diag_1, diag_2, each (blocks, d_pad), back to back:
  // diag_s[b][j] = diag[(s * blocks + b) * d_pad + j].
  const T* diag = nullptr;
  // Fastfood: (blocks, d_pad) of whole numbers in [0, d_pad), as T (exact:
  // d_pad <= 2^15), so that every parameter is one floating-point array.
  const T* perm = nullptr;
  const T* offset = nullptr;  // m
  T scale = 1;
  T out_scale = 1;
  T* out = nullptr;  // rows x m
  int64_t ldo = 0;
  int64_t m = 0;
};

// log2(d_pad); throws std::invalid_argument (ValueError in Python) for sizes
// the description above does not fit, or d_pad above 2^max_log2.
template <typename T>
int feature_map_log2_pad(const FeatureMapArgs<T>& a, int max_log2 = kFwhtMaxLog2) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("structured feature map: " + what); };
  const int64_t dp = a.d_pad;
  if (dp < 2 || dp > (int64_t(1) << max_log2) || (dp & (dp - 1)) != 0)
    fail("d_pad must be a power of two from 2 to " + std::to_string(int64_t(1) << max_log2) + " here, got " +
         std::to_string(dp));
  if (a.d < 1 || a.d > dp) fail("d must be from 1 to d_pad = " + std::to_string(dp) + ", got " + std::to_string(a.d));
  if (a.blocks < 1 || a.m <= (a.blocks - 1) * dp || a.m > a.blocks * dp)
    fail("m = " + std::to_string(a.m) + " does not fill " + std::to_string(a.blocks) + " blocks of " +
         std::to_string(dp));
  if (a.rows < 0 || (a.rows > 1 && (a.ldx < a.d || a.ldo < a.m))) fail("a row stride is shorter than a row");
  if (a.kind == StructuredMap::fastfood && a.perm == nullptr) fail("fastfood needs a permutation");
  int log2 = 0;
  while ((int64_t(1) << log2) < dp) ++log2;
  return log2;
}

// Fastfood's permutation read on the host (blocks x d_pad entries, row-major):
// std::invalid_argument unless every entry is a whole number in [0, d_pad),
// which is what keeps the kernels' reads within a block.
template <typename T>
void check_feature_map_permutation(const T* perm, int64_t blocks, int64_t d_pad) {
  for (int64_t e = 0; e < blocks * d_pad; ++e) {
    const T v = perm[e];
    if (!(v >= T(0) && v < T(d_pad) && v == T(int64_t(v))))
      throw std::invalid_argument("structured feature map: perm[" + std::to_string(e / d_pad) + ", " +
                                  std::to_string(e % d_pad) + "] = " + std::to_string(double(v)) +
                                  " is not a whole number in [0, d_pad = " + std::to_string(d_pad) + ")");
  }
}

// cos in the precision of its argument (see exp_of).
DLMSVDD_HD float cos_of(float x) { return ::cosf(x); }
DLMSVDD_HD double cos_of(double x) { return ::cos(x); }

// One feature from its projection y and the row scale s (1 for SORF).
template <typename T>
DLMSVDD_HD T structured_feature(T y, T s, T offset, T scale, T out_scale) {
  return out_scale * cos_of(scale * y * s + offset);
}

namespace cpu {
// The CPU map (cpu/feature_map_dispatch.cpp): OpenMP threads over rows, the
// instruction set of cpu::active_isa().
template <typename T>
void structured_features(const FeatureMapArgs<T>& args);
// out[i] = cos(x[i]) by the vectorised cosine the map uses (for its tests).
template <typename T>
void vector_cos(const T* x, T* out, int64_t n);
}  // namespace cpu

}  // namespace dlmsvdd
