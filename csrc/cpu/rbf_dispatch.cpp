// The CPU RBF kernels: forward to the instruction set cpu::active_isa() names.
#include "cpu/isa_dispatch.h"
#include "cpu/rbf_cpu.h"

namespace dlmsvdd::cpu {

template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args) {
  DLMSVDD_ISA_DISPATCH(rbf_matvec<T>, problem, args)
}

template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args) {
  DLMSVDD_ISA_DISPATCH(rbf_gram<T>, problem, args)
}

template <typename T>
std::unique_ptr<FeatureGram<T>> feature_gram(const RbfProblem<T>& x) {
  DLMSVDD_ISA_DISPATCH(feature_gram<T>, x)
}

DLMSVDD_INSTANTIATE_RBF_CPU

}  // namespace dlmsvdd::cpu
