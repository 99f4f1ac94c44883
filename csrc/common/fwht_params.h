// The fast Walsh-Hadamard transform's parameters, shared by the CPU, CUDA and
// emulated entry points, and its one argument check.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dlmsvdd {

// out[r] = H x[r] for each of `rows` rows of `length` elements, with H the
// Sylvester-order Hadamard matrix (entries +-1, H_ij = (-1)^popcount(i & j)),
// divided by sqrt(length) when normalized. Row-major with unit column stride;
// out may be x itself (same pointer and ld) for an in-place transform.
template <typename T>
struct FwhtArgs {
  const T* x = nullptr;
  int64_t ldx = 0;  // row stride of x in elements
  T* out = nullptr;
  int64_t ldo = 0;
  int64_t rows = 0;
  int64_t length = 0;
  bool normalized = false;
};

inline constexpr int kFwhtMaxLog2 = 15;  // rows up to 2^15 elements

// log2(length); throws std::invalid_argument (ValueError in Python) unless the
// length is a power of two from 2 to 2^15 and the strides hold a row.
template <typename T>
int fwht_log2_length(const FwhtArgs<T>& a) {
  const int64_t n = a.length;
  if (n < 2 || n > (int64_t(1) << kFwhtMaxLog2) || (n & (n - 1)) != 0)
    throw std::invalid_argument("fwht: the length of a row must be a power of two from 2 to " +
                                std::to_string(int64_t(1) << kFwhtMaxLog2) + ", got " + std::to_string(n));
  if (a.rows < 0) throw std::invalid_argument("fwht: negative number of rows");
  if (a.rows > 1 && (a.ldx < n || a.ldo < n))
    throw std::invalid_argument("fwht: a row stride is shorter than a row");
  int log2 = 0;
  while ((int64_t(1) << log2) < n) ++log2;
  return log2;
}

namespace cpu {
// The CPU transform (cpu/fwht_dispatch.cpp): OpenMP threads over rows, the
// instruction set of cpu::active_isa().
template <typename T>
void fwht(const FwhtArgs<T>& args);
}  // namespace cpu

}  // namespace dlmsvdd
