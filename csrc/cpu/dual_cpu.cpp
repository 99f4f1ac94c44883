#include "cpu/dual_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/params.h"
#include "cpu/rbf_cpu.h"

namespace dlmsvdd::cpu {

namespace {

template <typename T>
void merge(OracleResult<T>& into, const OracleResult<T>& r) {
  auto take_min = [](int64_t& i, T& g, int64_t j, T h) {
    if (j >= 0 && (i < 0 || h < g || (h == g && j < i))) { i = j; g = h; }
  };
  auto take_max = [](int64_t& i, T& g, int64_t j, T h) {
    if (j >= 0 && (i < 0 || h > g || (h == g && j < i))) { i = j; g = h; }
  };
  take_min(into.fw_normal, into.g_fw_normal, r.fw_normal, r.g_fw_normal);
  take_min(into.fw_anomaly, into.g_fw_anomaly, r.fw_anomaly, r.g_fw_anomaly);
  take_max(into.away_normal, into.g_away_normal, r.away_normal, r.g_away_normal);
  take_max(into.away_anomaly, into.g_away_anomaly, r.away_anomaly, r.g_away_anomaly);
  into.alpha_dot_g += r.alpha_dot_g;
  into.quadratic += r.quadratic;
  into.penalty += r.penalty;
}

// Below this size one thread is faster than waking the others.
constexpr int64_t kParallelFrom = 16384;

}  // namespace

template <typename T>
OracleResult<T> dual_oracle(const T* alpha, const T* ka, const T* t, int64_t n, const DualCoefs<T>& c) {
  const int threads = n >= kParallelFrom ? omp_get_max_threads() : 1;
  std::vector<OracleResult<T>> parts(threads);
#pragma omp parallel num_threads(threads)
  {
    OracleResult<T> r;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const bool normal = t[i] > 0;
      const T pen = normal ? c.pen_normal : c.pen_anomaly;
      const T g = dual_gradient(t[i], ka[i], alpha[i], pen, c.q);
      r.alpha_dot_g += double(alpha[i]) * double(g);
      r.quadratic += double(t[i]) * double(alpha[i]) * double(ka[i]);
      r.penalty += double(penalty_value(alpha[i], pen, c.q));
      // Strict comparisons in increasing i: ties go to the lowest index, as in merge().
      int64_t& fw = normal ? r.fw_normal : r.fw_anomaly;
      T& g_fw = normal ? r.g_fw_normal : r.g_fw_anomaly;
      if (fw < 0 || g < g_fw) { fw = i; g_fw = g; }
      if (alpha[i] > 0) {
        int64_t& away = normal ? r.away_normal : r.away_anomaly;
        T& g_away = normal ? r.g_away_normal : r.g_away_anomaly;
        if (away < 0 || g > g_away) { away = i; g_away = g; }
      }
    }
    parts[omp_get_thread_num()] = r;
  }
  OracleResult<T> total = parts[0];
  for (int p = 1; p < threads; ++p) merge(total, parts[p]);
  return total;
}

// ---- column cache

template <typename T>
CachedColumns<T>::CachedColumns(int64_t n, int64_t slots) : n_(n) {
  slots = std::max<int64_t>(slots, 2);
  storage_.resize(static_cast<size_t>(slots * n));
  for (int64_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

template <typename T>
T* CachedColumns<T>::slot_for(int64_t idx, int64_t pinned, bool* fresh) {
  auto it = where_.find(idx);
  if (it != where_.end()) {
    recency_.splice(recency_.begin(), recency_, it->second.second);
    *fresh = false;
    ++hits_;
    return storage_.data() + it->second.first * n_;
  }
  int64_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {  // evict the least recently used column that is not the one just fetched
    auto victim = std::prev(recency_.end());
    if (*victim == pinned) victim = std::prev(victim);
    slot = where_[*victim].first;
    where_.erase(*victim);
    recency_.erase(victim);
  }
  recency_.push_front(idx);
  where_[idx] = {slot, recency_.begin()};
  *fresh = true;
  ++misses_;
  return storage_.data() + slot * n_;
}

template <typename T>
void CachedColumns<T>::get(int64_t i, int64_t j, const T** col_i, const T** col_j) {
  bool fresh_i, fresh_j = false;
  T* ci = slot_for(i, -1, &fresh_i);
  T* cj = i == j ? ci : slot_for(j, i, &fresh_j);
  int64_t idx[2];
  T* dst[2];
  int count = 0;
  if (fresh_i) { idx[count] = i; dst[count++] = ci; }
  if (fresh_j) { idx[count] = j; dst[count++] = cj; }
  if (count) compute(idx, count, dst);
  *col_i = ci;
  *col_j = cj;
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

// ---- Frank-Wolfe loops

namespace {

// Exact line search along alpha_s += gamma, alpha_a -= gamma (same class, t = tc),
// gamma in [0, alpha_a]: phi'(gamma) is increasing; closed form for q = 2.
template <typename T>
T pairwise_step(T g_s, T g_a, T alpha_s, T alpha_a, T curvature_k, T pen, T q) {
  const T slope0 = g_s - g_a;  // < 0 for a descent pair
  if (q == T(2)) {
    const T denom = T(2) * curvature_k + T(4) * pen;
    if (!(denom > 0)) return alpha_a;
    return std::clamp(-slope0 / denom, T(0), alpha_a);
  }
  auto slope = [&](T gamma) {
    return slope0 + T(2) * gamma * curvature_k + penalty_derivative(alpha_s + gamma, pen, q) -
           penalty_derivative(alpha_s, pen, q) - penalty_derivative(alpha_a - gamma, pen, q) +
           penalty_derivative(alpha_a, pen, q);
  };
  if (slope(alpha_a) <= 0) return alpha_a;
  T lo = 0, hi = alpha_a;
  for (int it = 0; it < 100 && hi - lo > std::numeric_limits<T>::epsilon() * alpha_a; ++it) {
    const T mid = (lo + hi) / 2;
    (slope(mid) > 0 ? hi : lo) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

template <typename T>
FwReport fw_solve(ColumnSource<T>& columns, T* alpha, T* ka, const T* t, int64_t n, const DualCoefs<T>& c,
                  const FwOptions& options, double* history_objective, double* history_gap) {
  FwReport report;
  for (int64_t it = 0;; ++it) {
    const OracleResult<T> r = dual_oracle(alpha, ka, t, n, c);
    const double objective = r.objective(), gap = r.gap(c);
    history_objective[it] = objective;
    history_gap[it] = gap;
    report.n_iter = it;
    if (gap <= options.tol * std::abs(objective)) {
      report.converged = true;
      return report;
    }
    if (it == options.max_iter) return report;

    if (options.method == FwMethod::vanilla) {
      // alpha <- (1 - lambda) alpha + lambda s, s = mu_N e_i + mu_A e_l;
      // K a follows from the two new columns.
      const T lambda = T(2) / T(it + 2 + options.step_offset);
      const bool anomalies = r.fw_anomaly >= 0;
      const T *col_n, *col_a;
      columns.get(r.fw_normal, anomalies ? r.fw_anomaly : r.fw_normal, &col_n, &col_a);
      const T wn = lambda * c.mu_normal, wa = anomalies ? lambda * c.mu_anomaly : T(0);
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
      for (int64_t i = 0; i < n; ++i) {
        alpha[i] *= (1 - lambda);
        ka[i] = (1 - lambda) * ka[i] + wn * col_n[i] - wa * col_a[i];
      }
      alpha[r.fw_normal] += wn;
      if (anomalies) alpha[r.fw_anomaly] += wa;
      continue;
    }

    // Pairwise: move mass from the away atom to the Frank-Wolfe atom in the
    // class whose pair violates optimality most.
    const T viol_n = r.away_normal >= 0 ? r.g_away_normal - r.g_fw_normal : T(0);
    const T viol_a = r.away_anomaly >= 0 ? r.g_away_anomaly - r.g_fw_anomaly : T(0);
    const bool normal = viol_n >= viol_a;
    const int64_t s = normal ? r.fw_normal : r.fw_anomaly;
    const int64_t a = normal ? r.away_normal : r.away_anomaly;
    if (s == a || (normal ? viol_n : viol_a) <= 0) return report;  // nothing left to move
    const T *col_s, *col_a;
    columns.get(s, a, &col_s, &col_a);
    const T curvature_k = col_s[s] + col_a[a] - 2 * col_s[a];
    const T pen = normal ? c.pen_normal : c.pen_anomaly;
    const T gamma = pairwise_step(normal ? r.g_fw_normal : r.g_fw_anomaly,
                                  normal ? r.g_away_normal : r.g_away_anomaly, alpha[s], alpha[a], curvature_k, pen, c.q);
    const T tg = (normal ? T(1) : T(-1)) * gamma;
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
    for (int64_t i = 0; i < n; ++i) ka[i] += tg * (col_s[i] - col_a[i]);
    alpha[s] += gamma;
    alpha[a] = gamma == alpha[a] ? T(0) : alpha[a] - gamma;  // a drop step empties the atom exactly
  }
}

#define DLMSVDD_INSTANTIATE(T)                                                                          \
  template OracleResult<T> dual_oracle<T>(const T*, const T*, const T*, int64_t, const DualCoefs<T>&); \
  template class CachedColumns<T>;                                                                      \
  template class FeatureColumns<T>;                                                                     \
  template class FactorColumns<T>;                                                                      \
  template FwReport fw_solve<T>(ColumnSource<T>&, T*, T*, const T*, int64_t, const DualCoefs<T>&,      \
                                const FwOptions&, double*, double*);
DLMSVDD_INSTANTIATE(float)
DLMSVDD_INSTANTIATE(double)
#undef DLMSVDD_INSTANTIATE

}  // namespace dlmsvdd::cpu
