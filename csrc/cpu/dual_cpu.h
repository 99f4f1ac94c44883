// The large-margin lp-SVDD dual on the CPU: the fused oracle pass, column
// sources, and the Frank-Wolfe loops run without Python per iteration.
#pragma once
#include <cstdint>

#include "common/column_cache.h"
#include "common/dual_fw_loop.h"
#include "common/dual_math.h"

namespace dlmsvdd::cpu {

// One pass: objective, linear oracle, away atoms and <alpha, g>.
template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c);

// Exact RBF columns from the features X (n x d).
template <typename T>
class FeatureColumns final : public CachedColumns<T> {
 public:
  FeatureColumns(T* storage, int64_t slots, const T* x, int64_t ldx, int64_t n, int64_t d, T gamma)
      : CachedColumns<T>(storage, n, slots), x_(x), ldx_(ldx), d_(d), gamma_(gamma) {}

 protected:
  void compute(const int64_t* idx, int count, T* const* dst) override;

 private:
  const T* x_;
  int64_t ldx_, d_;
  T gamma_;
};

// Low-rank columns K[:, i] = Z Z[i]^T from a factor Z (n x m).
template <typename T>
class FactorColumns final : public CachedColumns<T> {
 public:
  FactorColumns(T* storage, int64_t slots, const T* z, int64_t ldz, int64_t n, int64_t m)
      : CachedColumns<T>(storage, n, slots), z_(z), ldz_(ldz), m_(m) {}

 protected:
  void compute(const int64_t* idx, int count, T* const* dst) override;

 private:
  const T* z_;
  int64_t ldz_, m_;
};

// Runs fw_loop in place on alpha and ka = K (alpha * t), host arrays: a state
// in T over columns in C (C = T, or float under a double state).
template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap);

}  // namespace dlmsvdd::cpu
