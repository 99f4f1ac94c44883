// CPU float64 matrix-vector products of a float32 or float64 matrix
// (common/matvec_params.h), compiled once per instruction set and chosen at
// run time (cpu/isa_dispatch.h).
#pragma once
#include "common/matvec_params.h"

namespace dlmsvdd::cpu {

// out = A x: OpenMP threads over blocks of rows; each row's sum has one order.
template <typename T>
void matvec64(const Matvec64Args<T>& args);

// out = A^T x: the rows are cut into slices (how many depends on the shape,
// not on the threads), each slice summed in row order into its own float64
// vector by whichever OpenMP thread takes it, and the vectors added in slice
// order: the same result for every number of threads.
template <typename T>
void rmatvec64(const Matvec64Args<T>& args);

}  // namespace dlmsvdd::cpu

// The float and double instances of the entry points, written once for the
// dispatcher and for each instruction set's namespace.
#define DLMSVDD_INSTANTIATE_MATVEC_CPU                                \
  template void matvec64<float>(const Matvec64Args<float>&);          \
  template void matvec64<double>(const Matvec64Args<double>&);        \
  template void rmatvec64<float>(const Matvec64Args<float>&);         \
  template void rmatvec64<double>(const Matvec64Args<double>&);

// Declarations of the per-instruction-set entry points.
#define DLMSVDD_DECLARE_MATVEC_ISA(ns)              \
  namespace dlmsvdd::cpu::ns {                      \
  template <typename T>                             \
  void matvec64(const Matvec64Args<T>& args);       \
  template <typename T>                             \
  void rmatvec64(const Matvec64Args<T>& args);      \
  }
DLMSVDD_DECLARE_MATVEC_ISA(isa_generic)
DLMSVDD_DECLARE_MATVEC_ISA(isa_avx2)
DLMSVDD_DECLARE_MATVEC_ISA(isa_avx512)
#undef DLMSVDD_DECLARE_MATVEC_ISA
