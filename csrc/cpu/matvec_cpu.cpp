// The CPU float64 matrix-vector products: forward to the instruction set
// cpu::active_isa() names (the same choice as every op's kernels').
#include "cpu/matvec_cpu.h"

#include "cpu/isa_dispatch.h"

namespace dlmsvdd::cpu {

template <typename T>
void matvec64(const Matvec64Args<T>& args) {
  if (args.rows == 0) return;
  DLMSVDD_ISA_DISPATCH(matvec64<T>, args)
}

template <typename T>
void rmatvec64(const Matvec64Args<T>& args) {
  if (args.cols == 0) return;
  DLMSVDD_ISA_DISPATCH(rmatvec64<T>, args)
}

DLMSVDD_INSTANTIATE_MATVEC_CPU

}  // namespace dlmsvdd::cpu
