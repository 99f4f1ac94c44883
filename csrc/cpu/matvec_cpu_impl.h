// The float64 matrix-vector products on the CPU (common/matvec_params.h): A's
// elements widened to double as they are loaded (W of them per vector,
// W = DLMSVDD_VEC_BYTES / 8), every product and sum in double, in explicit
// GCC vectors (cpu/simd.h) so that each sum has one order per instruction set.
// Memory bound: A is read once, the vectors stay in cache.
// Included by isa/matvec_<name>.cpp with DLMSVDD_ISA_NS and DLMSVDD_VEC_BYTES
// defined; the file's compiler flags pick the instructions.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "common/matvec_params.h"
#include "common/rbf_math.h"
#include "cpu/aligned_buffer.h"
#include "cpu/matvec_cpu.h"

namespace dlmsvdd::cpu::DLMSVDD_ISA_NS {

#include "cpu/simd.h"

namespace {

using VD = VecOf<double>;
constexpr int W = Simd<double>::W;  // doubles per vector: 2, 4 or 8

// Fewer elements of A than this run on the calling thread: waking the team costs more.
constexpr int64_t kParallelElements = int64_t(1) << 15;
// Rows of A per step: their products share each load of x (A x) or each
// load and store of the running sums (A^T x).
constexpr int kRows = 4;
// Rows ahead that the loops prefetch (the hardware prefetcher alone left a
// thread at about half the memory bandwidth, with 4 or more rows in flight).
constexpr int64_t kPrefetchRows = 8;
// A x: threads take rows in chunks of about this many elements of A.
constexpr int64_t kChunkElements = int64_t(1) << 16;
// A^T x: a slice of rows has at least kSliceRows rows and there are at most
// kMaxSlices (their vectors cost at most 1/128 of a float32 A's memory); a column block
// keeps an item's running sums in L1 (16 KB).
constexpr int64_t kSliceRows = 256, kMaxSlices = 64, kColumnBlock = 2048;
// A^T x's slice vectors start a cache line apart (8 doubles): no false sharing.
constexpr int64_t kLine = 64 / sizeof(double);

// A hint to load p[offset]'s cache line; never faults (past A's end included),
// computed on integers: no out-of-bounds pointer is formed.
template <typename T>
__attribute__((always_inline)) inline void prefetch(const T* p, int64_t offset) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + offset * int64_t(sizeof(T))));
}

// W consecutive elements from p, as doubles.
__attribute__((always_inline)) inline VD load_wide(const double* p) { return vload(p); }

__attribute__((always_inline)) inline VD load_wide(const float* p) {
  typedef float Half __attribute__((vector_size(DLMSVDD_VEC_BYTES / 2)));
  Half h;
  __builtin_memcpy(&h, p, sizeof h);
  return __builtin_convertvector(h, VD);
}

// out[r] = A[r] x for the R rows from a: two vectors of sums per row (2R
// independent chains), their lanes added in lane order, then the < W columns left.
template <int R, typename T>
__attribute__((always_inline)) inline void rows_times_x(const T* a, int64_t lda, int64_t k, const double* x,
                                                        double* out) {
  VD acc[R][2] = {};
  int64_t j = 0;
  for (; j + 2 * W <= k; j += 2 * W) {
    const VD x0 = vload(x + j), x1 = vload(x + j + W);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      prefetch(a, (r + kPrefetchRows) * lda + j);
      if constexpr (sizeof(T) == 8) prefetch(a, (r + kPrefetchRows) * lda + j + W);  // W doubles: a second line
      acc[r][0] += load_wide(a + r * lda + j) * x0;
      acc[r][1] += load_wide(a + r * lda + j + W) * x1;
    }
  }
  if (j + W <= k) {
    const VD x0 = vload(x + j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r][0] += load_wide(a + r * lda + j) * x0;
    j += W;
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    double s = vsum<double>(acc[r][0] + acc[r][1]);
    for (int64_t jj = j; jj < k; ++jj) s += double(a[r * lda + jj]) * x[jj];
    out[r] = finite_or_nan(s);
  }
}

// sums[j] += sum over rows r0 <= r < r1 of A[r, j] x[r], the rows in order.
template <typename T>
void add_rows(const T* a, int64_t lda, int64_t k, const double* x, int64_t r0, int64_t r1, double* sums) {
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    const T* p[kRows];
    VD xr[kRows];
#pragma GCC unroll 8
    for (int q = 0; q < kRows; ++q) {
      p[q] = a + (r + q) * lda;
      xr[q] = vbroadcast(x[r + q]);
    }
    int64_t j = 0;
    for (; j + W <= k; j += W) {
      VD s = vload(sums + j);
#pragma GCC unroll 8
      for (int q = 0; q < kRows; ++q) {
        prefetch(p[q], kPrefetchRows * lda + j);
        s += load_wide(p[q] + j) * xr[q];
      }
      vstore(sums + j, s);
    }
    for (; j < k; ++j) {
      double s = sums[j];
#pragma GCC unroll 8
      for (int q = 0; q < kRows; ++q) s += double(p[q][j]) * x[r + q];
      sums[j] = s;
    }
  }
  for (; r < r1; ++r) {
    const T* p = a + r * lda;
    const VD xr = vbroadcast(x[r]);
    int64_t j = 0;
    for (; j + W <= k; j += W) vstore(sums + j, vload(sums + j) + load_wide(p + j) * xr);
    for (; j < k; ++j) sums[j] += double(p[j]) * x[r];
  }
}

}  // namespace

template <typename T>
void matvec64(const Matvec64Args<T>& a) {
  const int64_t n = a.rows, k = a.cols, blocks = (n + kRows - 1) / kRows;
  const bool parallel = blocks > 1 && n * k >= kParallelElements;
  // Each row's sum is the same whichever thread takes it: threads take chunks
  // of about kChunkElements as they come free (another process on a core
  // slows one thread, not the whole call).
  const int64_t chunk = std::max<int64_t>(1, kChunkElements / (kRows * std::max<int64_t>(k, 1)));
#pragma omp parallel for schedule(dynamic, chunk) if (parallel)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * kRows;
    if (r0 + kRows <= n) {
      rows_times_x<kRows>(a.a + r0 * a.lda, a.lda, k, a.x, a.out + r0);
    } else {
      for (int64_t r = r0; r < n; ++r) rows_times_x<1>(a.a + r * a.lda, a.lda, k, a.x, a.out + r);
    }
  }
}

// A^T x: the rows in `slices` contiguous slices (a number fixed by n, not by
// the threads), the columns in blocks of kColumnBlock; each (slice, block)
// item sums its rows in order into the slice's own vector (slice 0's is out),
// and the slices' vectors are added in slice order. Threads take items as
// they come free; the result depends on n and k only, not on the threads.
template <typename T>
void rmatvec64(const Matvec64Args<T>& a) {
  const int64_t n = a.rows, k = a.cols;
  const int64_t slices = std::clamp<int64_t>(n / kSliceRows, 1, kMaxSlices);
  const int64_t column_blocks = (k + kColumnBlock - 1) / kColumnBlock, items = slices * column_blocks;
  const int64_t stride = (k + kLine - 1) / kLine * kLine;
  AlignedBuffer<double> more(size_t(slices - 1) * size_t(stride), AlignedBuffer<double>::uninitialized);
  auto sums_of = [&](int64_t slice) { return slice == 0 ? a.out : more.data() + (slice - 1) * stride; };
  const bool parallel = items > 1 && n * k >= kParallelElements;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t item = 0; item < items; ++item) {
    const int64_t slice = item / column_blocks, j0 = item % column_blocks * kColumnBlock;
    const int64_t width = std::min(kColumnBlock, k - j0);
    double* sums = sums_of(slice) + j0;
    std::fill(sums, sums + width, 0.0);
    add_rows(a.a + j0, a.lda, width, a.x, n * slice / slices, n * (slice + 1) / slices, sums);
  }
  const int64_t vectors = (k + W - 1) / W;
  const bool parallel_merge = k * slices >= kParallelElements;
#pragma omp parallel for schedule(static) if (parallel_merge)
  for (int64_t q = 0; q < vectors; ++q) {
    const int64_t j = q * W;
    if (j + W <= k) {
      VD total = vload(a.out + j);
      for (int64_t s = 1; s < slices; ++s) total += vload(sums_of(s) + j);
      vstore(a.out + j, finite_or_nan(total));
    } else {
      for (int64_t jj = j; jj < k; ++jj) {
        double total = a.out[jj];
        for (int64_t s = 1; s < slices; ++s) total += sums_of(s)[jj];
        a.out[jj] = finite_or_nan(total);
      }
    }
  }
}

DLMSVDD_INSTANTIATE_MATVEC_CPU

}  // namespace dlmsvdd::cpu::DLMSVDD_ISA_NS
