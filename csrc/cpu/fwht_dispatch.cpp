// The CPU FWHT and structured feature maps: check the arguments and forward
// to the instruction set cpu::active_isa() names (the same choice as the RBF
// kernels').
#include <sys/mman.h>

#include <cstdint>

#include "common/feature_map_params.h"
#include "common/fwht_params.h"
#include "cpu/isa_dispatch.h"

// Defined by isa/fwht_<name>.cpp (cpu/fwht_impl.h, cpu/feature_map_impl.h).
#define DLMSVDD_DECLARE_FWHT_ISA(ns)                        \
  namespace dlmsvdd::cpu::ns {                              \
  template <typename T>                                     \
  void fwht(const FwhtArgs<T>& args);                       \
  template <typename T>                                     \
  void structured_features(const FeatureMapArgs<T>& args);  \
  template <typename T>                                     \
  void vector_cos(const T* x, T* out, int64_t n);           \
  }
DLMSVDD_DECLARE_FWHT_ISA(isa_generic)
DLMSVDD_DECLARE_FWHT_ISA(isa_avx2)
DLMSVDD_DECLARE_FWHT_ISA(isa_avx512)
#undef DLMSVDD_DECLARE_FWHT_ISA

namespace dlmsvdd::cpu {

template <typename T>
void fwht(const FwhtArgs<T>& args) {
  fwht_log2_length(args);  // throws std::invalid_argument for a bad length
  if (args.rows == 0) return;
  DLMSVDD_ISA_DISPATCH(fwht<T>, args)
}

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

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);
template void structured_features<float>(const FeatureMapArgs<float>&);
template void structured_features<double>(const FeatureMapArgs<double>&);
template void vector_cos<float>(const float*, float*, int64_t);
template void vector_cos<double>(const double*, double*, int64_t);

}  // namespace dlmsvdd::cpu
