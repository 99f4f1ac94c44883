// The float64 matrix-vector products' parameters, shared by the CPU, CUDA and
// emulated entry points: a float32 or float64 matrix, float64 vectors, every
// sum in float64 ("float32 storage, float64 accumulation").
#pragma once
#include <cstdint>

namespace dlmsvdd {

// A (rows x cols, row stride lda, unit column stride) with the float64 vector
// x and the float64 result out, both contiguous:
//   matvec64:  out[i] = sum_j double(A[i, j]) * x[j]   (x: cols entries, out: rows)
//   rmatvec64: out[j] = sum_i double(A[i, j]) * x[i]   (x: rows entries, out: cols)
// A sum that is not finite (a NaN or an infinity in what it reads, or an
// overflow) is stored as NaN (common/rbf_math.h's finite_or_nan).
template <typename T>
struct Matvec64Args {
  const T* a = nullptr;
  int64_t lda = 0;  // elements between consecutive rows of A
  int64_t rows = 0;
  int64_t cols = 0;
  const double* x = nullptr;
  double* out = nullptr;
};

}  // namespace dlmsvdd
