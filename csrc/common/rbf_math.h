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

// Squared distance from norms and a dot product, clamped at 0 because rounding
// can push the difference of nearly equal points slightly below zero.
template <typename T>
DLMSVDD_HD T sq_distance_from_dot(T x_norm2, T y_norm2, T dot) {
  T d = x_norm2 + y_norm2 - T(2) * dot;
  return d > T(0) ? d : T(0);
}

// exp in the precision of its argument. Spelled out because with a host compiler
// an unqualified exp(float) resolves to ::exp(double) and silently computes in
// double; expf is the float function on the host and on the device alike.
DLMSVDD_HD float exp_of(float x) { return ::expf(x); }
DLMSVDD_HD double exp_of(double x) { return ::exp(x); }

template <typename T>
DLMSVDD_HD T rbf_from_sq_distance(T sq_dist, T gamma) {
  return exp_of(-gamma * sq_dist);
}

}  // namespace dlmsvdd
