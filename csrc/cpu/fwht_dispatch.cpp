// The CPU FWHT: check the arguments and forward to the instruction set
// cpu::active_isa() names (the same choice as every op's kernels').
#include "common/fwht_params.h"
#include "cpu/isa_dispatch.h"

// Defined by isa/fwht_<name>.cpp (cpu/fwht_impl.h).
#define DLMSVDD_DECLARE_FWHT_ISA(ns)  \
  namespace dlmsvdd::cpu::ns {        \
  template <typename T>               \
  void fwht(const FwhtArgs<T>& args); \
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

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);

}  // namespace dlmsvdd::cpu
