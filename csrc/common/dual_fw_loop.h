// The Frank-Wolfe loops (vanilla and pairwise) written once over an "engine"
// that owns the state (alpha, K a) on its device:
//
//   OracleResult<T> oracle();                         // one fused pass
//   void columns(i, j, const T** ci, const T** cj);   // K[:, i], K[:, j] (device pointers on a GPU)
//   T entry(const T* col, int64_t k);                 // one element of such a column
//   T alpha(int64_t i);                               // one weight
//   void vanilla_update(lambda, i, l, wn, wa, ci, cl);  // alpha <- (1-lambda) alpha + wn e_i + wa e_l,
//                                                       // K a <- (1-lambda) K a + wn ci - wa cl (l < 0: no anomaly atom)
//   void pairwise_update(tg, s, a, gamma, cs, ca);    // alpha_s += gamma, alpha_a -= gamma, K a += tg (cs - ca)
//
// Host code only: the CPU, CUDA and emulated engines all run this loop.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/dual_math.h"

namespace dlmsvdd {

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

// Exact line search along alpha_s += gamma, alpha_a -= gamma (one class),
// gamma in [0, alpha_a]: phi'(gamma) increases; closed form for q = 2.
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

// history_* hold max_iter + 1 entries: objective and gap before each step and at the end.
template <typename T, typename Engine>
FwReport fw_loop(Engine& e, const DualCoefs<T>& c, const FwOptions& options, double* history_objective,
                 double* history_gap) {
  FwReport report;
  for (int64_t it = 0;; ++it) {
    const OracleResult<T> r = e.oracle();
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
      e.columns(r.fw_normal, anomalies ? r.fw_anomaly : r.fw_normal, &col_n, &col_a);
      e.vanilla_update(lambda, r.fw_normal, anomalies ? r.fw_anomaly : -1, lambda * c.mu_normal,
                       anomalies ? lambda * c.mu_anomaly : T(0), col_n, col_a);
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
    e.columns(s, a, &col_s, &col_a);
    const T curvature_k = e.entry(col_s, s) + e.entry(col_a, a) - 2 * e.entry(col_s, a);
    const T pen = normal ? c.pen_normal : c.pen_anomaly;
    const T gamma = pairwise_step(normal ? r.g_fw_normal : r.g_fw_anomaly, normal ? r.g_away_normal : r.g_away_anomaly,
                                  e.alpha(s), e.alpha(a), curvature_k, pen, c.q);
    e.pairwise_update((normal ? T(1) : T(-1)) * gamma, s, a, gamma, col_s, col_a);
  }
}

}  // namespace dlmsvdd
