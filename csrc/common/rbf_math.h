// Per-element formulas used by both the CPU and the CUDA kernels, so that the
// CPU path tests the same arithmetic the GPU path runs.
#pragma once
#include <math.h>

#include <cmath>

#if defined(__CUDACC__)
#define DLMSVDD_HD __host__ __device__ __forceinline__
#else
// Always inlined on the host: each CPU instruction set compiles these with its
// own flags, and one out-of-line copy would be shared by all of them.
#define DLMSVDD_HD inline __attribute__((always_inline))
#endif

namespace dlmsvdd {

// Non-finite input: a kernel value or distance that involves a row holding a
// NaN or an infinity is NaN, never a number that could pass for a real one.
// Two rules, shared by every back end (CPU tiles and streaming, CUDA and its
// emulation), for a scalar T or a GCC vector of them:
//
// 1. A row's squared norm goes through finite_or_nan: NaN unless finite. With
//    an infinite norm the expansion below could meet an infinite dot product
//    of the opposite sign and give +inf, i.e. a kernel value of 0 (an
//    overflowing squared norm counts as infinite too).
template <typename T>
DLMSVDD_HD T finite_or_nan(T sq_norm) {
  return sq_norm + (sq_norm - sq_norm);  // + 0 when finite; inf - inf and NaN - NaN are NaN
}

// 2. The clamp at 0 (rounding can push the difference of nearly equal points
//    slightly below zero) keeps NaN: `d > 0 ? d : 0` would turn a NaN into 0,
//    a perfect match. Written as a comparison (compare and blend), not a max
//    instruction, whose NaN handling depends on the operand order.
template <typename T>
DLMSVDD_HD T clamp_sq_distance(T d, T zero) {
  return d < zero ? zero : d;
}

// Squared distance from norms (through finite_or_nan) and a dot product.
template <typename T>
DLMSVDD_HD T sq_distance_from_dot(T x_norm2, T y_norm2, T dot) {
  return clamp_sq_distance(x_norm2 + y_norm2 - T(2) * dot, T(0));
}

// exp in the precision of its argument. Spelled out because with a host compiler
// an unqualified exp(float) resolves to ::exp(double) and silently computes in
// double; expf is the float function on the host and on the device alike.
DLMSVDD_HD float exp_of(float x) { return ::expf(x); }
DLMSVDD_HD double exp_of(double x) { return ::exp(x); }

// exp(-gamma d): NaN for a NaN distance.
template <typename T>
DLMSVDD_HD T rbf_from_sq_distance(T sq_dist, T gamma) {
  return exp_of(-gamma * sq_dist);
}

}  // namespace dlmsvdd
