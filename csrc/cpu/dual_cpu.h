// The large-margin lp-SVDD dual on the CPU: the fused oracle pass, and the
// Frank-Wolfe loops (vanilla and pairwise) that run without Python per iteration.
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "common/dual_math.h"

namespace dlmsvdd::cpu {

// One pass: objective, linear oracle, away atoms and <alpha, g>.
template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c);

// Kernel columns K[:, i] for the Frank-Wolfe methods.
template <typename T>
class ColumnSource {
 public:
  virtual ~ColumnSource() = default;
  // Columns i and j (j may equal i); the pointers stay valid until the next call.
  virtual void get(int64_t i, int64_t j, const T** col_i, const T** col_j) = 0;
};

// A materialised symmetric K: column i is row i.
template <typename T>
class DenseColumns final : public ColumnSource<T> {
 public:
  DenseColumns(const T* k, int64_t ld) : k_(k), ld_(ld) {}
  void get(int64_t i, int64_t j, const T** col_i, const T** col_j) override {
    *col_i = k_ + i * ld_;
    *col_j = k_ + j * ld_;
  }

 private:
  const T* k_;
  int64_t ld_;
};

// Columns computed on demand and kept in a least-recently-used cache of
// `slots` columns (at least 2), as libsvm does.
template <typename T>
class CachedColumns : public ColumnSource<T> {
 public:
  CachedColumns(int64_t n, int64_t slots);
  void get(int64_t i, int64_t j, const T** col_i, const T** col_j) override;
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 protected:
  // Writes the columns idx[0..count) to dst[0..count) (count is 1 or 2).
  virtual void compute(const int64_t* idx, int count, T* const* dst) = 0;
  int64_t n_;

 private:
  T* slot_for(int64_t idx, int64_t pinned, bool* fresh);
  std::vector<T> storage_;
  std::list<int64_t> recency_;  // most recent first
  std::unordered_map<int64_t, std::pair<int64_t, std::list<int64_t>::iterator>> where_;  // idx -> slot
  std::vector<int64_t> free_slots_;
  int64_t hits_ = 0, misses_ = 0;
};

// Exact RBF columns from the features X (n x d).
template <typename T>
class FeatureColumns final : public CachedColumns<T> {
 public:
  FeatureColumns(const T* x, int64_t ldx, int64_t n, int64_t d, T gamma, int64_t slots)
      : CachedColumns<T>(n, slots), x_(x), ldx_(ldx), d_(d), gamma_(gamma) {}

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
  FactorColumns(const T* z, int64_t ldz, int64_t n, int64_t m, int64_t slots)
      : CachedColumns<T>(n, slots), z_(z), ldz_(ldz), m_(m) {}

 protected:
  void compute(const int64_t* idx, int count, T* const* dst) override;

 private:
  const T* z_;
  int64_t ldz_, m_;
};

enum class FwMethod { vanilla = 0, pairwise = 1 };

struct FwOptions {
  FwMethod method = FwMethod::vanilla;
  int64_t max_iter = 1000;
  double tol = 1e-6;  // stop when gap <= tol * objective
  // Vanilla steps are 2 / (tau + 2 + step_offset): 0 as published; a warm
  // start can skip the first, large steps.
  int64_t step_offset = 0;
};

struct FwReport {
  int64_t n_iter = 0;
  bool converged = false;
};

// Runs the loop in place on alpha and ka = K (alpha * t). history_* hold
// max_iter + 1 entries: the objective and gap before each step and at the end.
template <typename T>
FwReport fw_solve(ColumnSource<T>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap);

}  // namespace dlmsvdd::cpu
