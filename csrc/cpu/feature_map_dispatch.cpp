// The CPU structured feature maps: check the arguments and forward to the
// instruction set cpu::active_isa() names (the same choice as every op's
// kernels').
#include <sys/mman.h>

#include <cstdint>

#include "common/feature_map_params.h"
#include "cpu/isa_dispatch.h"

// Defined by isa/feature_map_<name>.cpp (cpu/feature_map_impl.h).
#define DLMSVDD_DECLARE_FEATURE_MAP_ISA(ns)                 \
  namespace dlmsvdd::cpu::ns {                              \
  template <typename T>                                     \
  void structured_features(const FeatureMapArgs<T>& args);  \
  template <typename T>                                     \
  void vector_cos(const T* x, T* out, int64_t n);           \
  }
DLMSVDD_DECLARE_FEATURE_MAP_ISA(isa_generic)
DLMSVDD_DECLARE_FEATURE_MAP_ISA(isa_avx2)
DLMSVDD_DECLARE_FEATURE_MAP_ISA(isa_avx512)
#undef DLMSVDD_DECLARE_FEATURE_MAP_ISA

namespace dlmsvdd::cpu {

namespace {

// The features usually go to fresh memory (torch allocates large arrays with
// mmap), and faulting it in 4 KB pages costs more than computing them: about
// 25 ms of a 100 MB output here, where 2 MB pages cost about 4. Advice only
// (the kernel may ignore it); pages already mapped keep their size.
void advise_huge_pages(const void* begin, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  if (bytes < 4 * kHuge) return;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) & ~(kHuge - 1);
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)begin, (void)bytes;
#endif
}

}  // namespace

template <typename T>
void structured_features(const FeatureMapArgs<T>& args) {
  feature_map_log2_pad(args);  // throws std::invalid_argument for bad sizes
  if (args.rows == 0) return;
  advise_huge_pages(args.out, size_t((args.rows - 1) * args.ldo + args.m) * sizeof(T));
  DLMSVDD_ISA_DISPATCH(structured_features<T>, args)
}

template <typename T>
void vector_cos(const T* x, T* out, int64_t n) {
  DLMSVDD_ISA_DISPATCH(vector_cos<T>, x, out, n)
}

template void structured_features<float>(const FeatureMapArgs<float>&);
template void structured_features<double>(const FeatureMapArgs<double>&);
template void vector_cos<float>(const float*, float*, int64_t);
template void vector_cos<double>(const double*, double*, int64_t);

}  // namespace dlmsvdd::cpu
