// The CPU FWHT: checks the arguments and forwards to the instruction set
// cpu::active_isa() names (the same choice as the RBF kernels').
#include "common/fwht_params.h"
#include "cpu/rbf_cpu.h"

// Defined by isa/fwht_<name>.cpp (cpu/fwht_impl.h).
#define DLMSVDD_DECLARE_FWHT_ISA(ns)                \
  namespace dlmsvdd::cpu::ns {                      \
  template <typename T>                             \
  void fwht(const FwhtArgs<T>& args);               \
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
  switch (active_isa()) {
    case Isa::avx512: return isa_avx512::fwht<T>(args);
    case Isa::avx2: return isa_avx2::fwht<T>(args);
    default: return isa_generic::fwht<T>(args);
  }
}

template void fwht<float>(const FwhtArgs<float>&);
template void fwht<double>(const FwhtArgs<double>&);

}  // namespace dlmsvdd::cpu
