// The fast Walsh-Hadamard transform on the CPU (common/fwht_params.h): the
// rows through cpu/fwht_transform.h's transform_row, OpenMP threads over rows.
// Included by isa/fwht_<name>.cpp with DLMSVDD_ISA_NS and DLMSVDD_VEC_BYTES
// defined; the file's compiler flags pick the instructions.
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "common/fwht_params.h"
#include "cpu/fwht_transform.h"

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

namespace {

// Fewer elements than this run on the calling thread: waking the team costs more.
constexpr int64_t kParallelElements = int64_t(1) << 15;

// A contiguous batch of rows no longer than a vector (rows * L elements, L <= W):
// each vector holds W / L whole rows, whose levels are its lane levels below L,
// so there is no per-row work. The tail of fewer than W elements is whole rows.
template <typename T>
void short_rows_flat(const T* src, T* dst, int64_t total, int64_t len, T scale, bool parallel) {
  constexpr int W = Simd<T>::W;
  const int64_t vectors = total / W;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t i = 0; i < vectors; ++i) vstore(dst + i * W, in_vector_levels<T>(vload(src + i * W), len) * scale);
  for (int64_t j = vectors * W; j < total; j += len) {
    short_row(src + j, dst + j, len);
    for (int64_t k = j; k < j + len; ++k) dst[k] *= scale;
  }
}

}  // namespace

template <typename T>
void fwht(const FwhtArgs<T>& a) {
  const T scale = a.normalized ? T(1.0 / std::sqrt(double(a.length))) : T(1);
  const bool parallel = a.rows > 1 && a.rows * a.length >= kParallelElements;
  if (a.length <= Simd<T>::W && a.ldx == a.length && a.ldo == a.length)
    return short_rows_flat(a.x, a.out, a.rows * a.length, a.length, scale, parallel);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < a.rows; ++r) transform_row(a.x + r * a.ldx, a.out + r * a.ldo, a.length, scale);
}

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);

}  // namespace dlmsvdd::cpu::DLMSVDD_ISA_NS
