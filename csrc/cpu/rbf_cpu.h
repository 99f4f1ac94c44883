// CPU RBF kernels, compiled once per instruction set and chosen at run time
// (cpu/isa_dispatch.h).
#pragma once
#include <memory>
#include <string>

#include "common/rbf_params.h"

namespace dlmsvdd::cpu {

// out = K(X, Y) @ V.
template <typename T>
void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args);

// out = K(X, Y) (or squared distances). Few columns take a row-streaming path.
template <typename T>
void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args);

// K(X, Y) for one X and many small Y (RPCholesky's pivot columns): X is
// packed for the tiled kernel once, not on every call.
template <typename T>
class FeatureGram {
 public:
  virtual ~FeatureGram() = default;
  // out (nx x ny, row stride ldo) = K(X, Y), Y (ny x d, row stride ldy).
  virtual void gram(const T* y, int64_t ldy, int64_t ny, T* out, int64_t ldo) = 0;
};

// x gives X (x, ldx, nx, d) and gamma; its y fields are ignored. X must
// outlive the result.
template <typename T>
std::unique_ptr<FeatureGram<T>> feature_gram(const RbfProblem<T>& x);

}  // namespace dlmsvdd::cpu

// Declarations of the per-instruction-set entry points.
#define DLMSVDD_DECLARE_ISA(ns)                                                       \
  namespace dlmsvdd::cpu::ns {                                                        \
  template <typename T>                                                               \
  void rbf_matvec(const RbfProblem<T>& problem, const MatvecArgs<T>& args);          \
  template <typename T>                                                               \
  void rbf_gram(const RbfProblem<T>& problem, const GramArgs<T>& args);              \
  template <typename T>                                                               \
  std::unique_ptr<FeatureGram<T>> feature_gram(const RbfProblem<T>& x);              \
  }
DLMSVDD_DECLARE_ISA(isa_generic)
DLMSVDD_DECLARE_ISA(isa_avx2)
DLMSVDD_DECLARE_ISA(isa_avx512)
#undef DLMSVDD_DECLARE_ISA
