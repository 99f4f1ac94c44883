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

template void rbf_matvec<float>(const RbfProblem<float>&, const MatvecArgs<float>&);
template void rbf_matvec<double>(const RbfProblem<double>&, const MatvecArgs<double>&);
template void rbf_gram<float>(const RbfProblem<float>&, const GramArgs<float>&);
template void rbf_gram<double>(const RbfProblem<double>&, const GramArgs<double>&);
template std::unique_ptr<FeatureGram<float>> feature_gram<float>(const RbfProblem<float>&);
template std::unique_ptr<FeatureGram<double>> feature_gram<double>(const RbfProblem<double>&);

}  // namespace dlmsvdd::cpu
