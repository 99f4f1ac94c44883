#include "cpu/dual_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/rbf_params.h"
#include "cpu/rbf_cpu.h"

namespace dlmsvdd::cpu {

namespace {

// Below this size one thread is faster than waking the others.
constexpr int64_t kParallelFrom = 16384;

}  // namespace

template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c) {
  const int threads = n >= kParallelFrom ? omp_get_max_threads() : 1;
  std::vector<OraclePart<T>> parts(threads);
#pragma omp parallel num_threads(threads)
  {
    OraclePart<T> r;
    clear(r);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) accumulate(r, i, alpha[i], ka[i], t[i], c);
    parts[omp_get_thread_num()] = r;
  }
  for (int p = 1; p < threads; ++p) merge(parts[0], parts[p]);
  return to_result(parts[0]);
}

template <typename T>
void FeatureColumns<T>::compute(const int64_t* idx, int count, T* const* dst) {
  const int64_t n = this->n_;
  std::vector<T> y(static_cast<size_t>(count * d_));
  for (int c = 0; c < count; ++c) std::copy(x_ + idx[c] * ldx_, x_ + idx[c] * ldx_ + d_, y.begin() + c * d_);
  RbfProblem<T> p;
  p.x = x_;
  p.ldx = ldx_;
  p.nx = n;
  p.y = y.data();
  p.ldy = d_;
  p.ny = count;
  p.d = d_;
  p.gamma = gamma_;
  GramArgs<T> g;
  if (count == 1) {
    g.out = dst[0];
    g.ldo = 1;
    rbf_gram<T>(p, g);
    return;
  }
  std::vector<T> both(static_cast<size_t>(n * count));
  g.out = both.data();
  g.ldo = count;
  rbf_gram<T>(p, g);
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < count; ++c) dst[c][i] = both[i * count + c];
}

template <typename T>
void FactorColumns<T>::compute(const int64_t* idx, int count, T* const* dst) {
  const int64_t n = this->n_;
  const T* z0 = z_ + idx[0] * ldz_;
  const T* z1 = z_ + idx[count - 1] * ldz_;
#pragma omp parallel for schedule(static) if (n * m_ >= 4 * kParallelFrom)
  for (int64_t i = 0; i < n; ++i) {
    const T* zi = z_ + i * ldz_;
    T s0 = 0, s1 = 0;
#pragma omp simd reduction(+ : s0, s1)
    for (int64_t k = 0; k < m_; ++k) {
      s0 += zi[k] * z0[k];
      s1 += zi[k] * z1[k];
    }
    dst[0][i] = s0;
    if (count == 2) dst[1][i] = s1;
  }
}

// ---- Frank-Wolfe on host arrays

namespace {

// State in T, columns in C: each column entry is widened to T as it is read.
template <typename T, typename C>
class HostEngine {
 public:
  using Column = C;
  HostEngine(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c)
      : columns_(columns), alpha_(alpha), ka_(ka), t_(t), n_(n), c_(c) {}

  OracleResult<T> oracle() { return dual_oracle(alpha_, ka_, t_, n_, c_); }
  void columns(int64_t i, int64_t j, const C** ci, const C** cj) { columns_.get(i, j, ci, cj); }
  T entry(const C* col, int64_t k) { return T(col[k]); }
  T alpha(int64_t i) { return alpha_[i]; }

  void vanilla_update(T lambda, int64_t i, int64_t l, T wn, T wa, const C* col_i, const C* col_l) {
    const int64_t n = n_;
    T* alpha = alpha_;
    T* ka = ka_;
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
    for (int64_t k = 0; k < n; ++k) {
      alpha[k] *= (1 - lambda);
      ka[k] = (1 - lambda) * ka[k] + wn * T(col_i[k]) - wa * T(col_l[k]);
    }
    alpha[i] += wn;
    if (l >= 0) alpha[l] += wa;
  }

  void pairwise_update(T tg, int64_t s, int64_t a, T gamma, const C* col_s, const C* col_a) {
    const int64_t n = n_;
    T* ka = ka_;
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
    for (int64_t k = 0; k < n; ++k) ka[k] += tg * (T(col_s[k]) - T(col_a[k]));
    alpha_[s] += gamma;
    alpha_[a] = gamma == alpha_[a] ? T(0) : alpha_[a] - gamma;  // a drop step empties the atom exactly
  }

 private:
  ColumnSource<C>& columns_;
  T* alpha_;
  T* ka_;
  const T* t_;
  int64_t n_;
  DualCoefs<T> c_;
};

}  // namespace

template <typename T, typename C>
FwReport fw_solve(ColumnSource<C>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap) {
  HostEngine<T, C> engine(columns, alpha, ka, t, n, c);
  return fw_loop<T>(engine, c, options, history_objective, history_gap);
}

#define DLMSVDD_INSTANTIATE(T)                                                                          \
  template OracleResult<T> dual_oracle<T>(const T*, const T*, const T*, int64_t, const DualCoefs<T>&); \
  template class FeatureColumns<T>;                                                                     \
  template class FactorColumns<T>;
DLMSVDD_INSTANTIATE(float)
DLMSVDD_INSTANTIATE(double)
#undef DLMSVDD_INSTANTIATE

// The (state, column) pairs: one dtype, or a double state over float columns.
#define DLMSVDD_INSTANTIATE_FW(T, C)                                                                    \
  template FwReport fw_solve<T, C>(ColumnSource<C>&, T*, T*, const T*, int64_t, const DualCoefs<T>&,   \
                                   const FwOptions&, double*, double*);
DLMSVDD_INSTANTIATE_FW(float, float)
DLMSVDD_INSTANTIATE_FW(double, double)
DLMSVDD_INSTANTIATE_FW(double, float)
#undef DLMSVDD_INSTANTIATE_FW

}  // namespace dlmsvdd::cpu
