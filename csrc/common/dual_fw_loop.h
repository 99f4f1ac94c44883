// The Frank-Wolfe loops (vanilla and pairwise) written once over an "engine"
// that owns the state (alpha, K a, in T) on its device and reads kernel
// columns of its Column type (T, or float under a double state: a float32 K
// or float32 features with the state, the oracle and the certificate in
// double, and no double copy of K):
//
//   OracleResult<T> oracle();                         // one fused pass
//   void columns(i, j, const Column** ci, const Column** cj);  // K[:, i], K[:, j] (device pointers on a GPU)
//   T entry(const Column* col, int64_t k);            // one element of such a column
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
#include <stdexcept>
#include <string>

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

// Why the loop stopped.
enum class FwStop {
  converged,     // 0 <= gap <= tol |objective|
  max_iter,      // out of iterations
  no_descent,    // pairwise: no pair left to move mass along
  not_finite,    // the objective or the gap is NaN or infinite: nothing to certify or follow
  negative_gap,  // rounding exceeds the gap: the arithmetic cannot certify more
};

inline const char* fw_stop_name(FwStop s) {
  switch (s) {
    case FwStop::converged: return "converged";
    case FwStop::max_iter: return "max_iter";
    case FwStop::no_descent: return "no_descent";
    case FwStop::not_finite: return "not_finite";
    case FwStop::negative_gap: return "negative_gap";
  }
  return "unknown";
}

struct FwReport {
  int64_t n_iter = 0;
  bool converged = false;
  FwStop stop = FwStop::max_iter;
};

// Refuses labels the dual cannot be solved for, from an oracle pass over them
// (which reads every label): std::invalid_argument (ValueError in Python) when
// a label is neither +1 nor -1; for a whole problem (not a shard of one), also
// when no label is +1 (the normal class is empty; n = 0 included), and when
// none is -1 while mu_anomaly is not 0 (the anomalies' weights could not sum
// to it). An empty anomaly class with mu_anomaly = 0 is one-class SVDD.
template <typename T>
void require_labels(const OracleResult<T>& r, const DualCoefs<T>& c, bool whole_problem) {
  if (r.bad_label >= 0)
    throw std::invalid_argument("t: entry " + std::to_string(r.bad_label) +
                                " is neither +1 (normal) nor -1 (anomaly); labels must be exactly +1 or -1");
  if (!whole_problem) return;
  if (r.fw_normal < 0)
    throw std::invalid_argument("t: no label is +1; the dual needs at least one normal sample");
  if (r.fw_anomaly < 0 && c.mu_anomaly != T(0))
    throw std::invalid_argument("t: no label is -1 but mu_anomaly = " + std::to_string(double(c.mu_anomaly)) +
                                "; without anomalies nu must be 1 (mu_anomaly = 0)");
}

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

// history_* hold max_iter + 1 entries: objective and gap before each step and
// at the end. The labels are checked on the first pass, before anything is
// written (require_labels). Converged only for a gap in [0, tol |objective|]:
// a negative gap (rounding) or a non-finite one stops the loop unconverged.
template <typename T, typename Engine>
FwReport fw_loop(Engine& e, const DualCoefs<T>& c, const FwOptions& options, double* history_objective,
                 double* history_gap) {
  using Column = typename Engine::Column;
  FwReport report;
  const auto stop = [&](FwStop why) {
    report.stop = why;
    report.converged = why == FwStop::converged;
    return report;
  };
  for (int64_t it = 0;; ++it) {
    const OracleResult<T> r = e.oracle();
    if (it == 0) require_labels(r, c, true);
    const double objective = r.objective(), gap = r.gap(c);
    history_objective[it] = objective;
    history_gap[it] = gap;
    report.n_iter = it;
    if (!std::isfinite(objective) || !std::isfinite(gap)) return stop(FwStop::not_finite);
    if (gap < 0) return stop(FwStop::negative_gap);
    if (gap <= options.tol * std::abs(objective)) return stop(FwStop::converged);
    if (it == options.max_iter) return stop(FwStop::max_iter);

    if (options.method == FwMethod::vanilla) {
      // alpha <- (1 - lambda) alpha + lambda s, s = mu_N e_i + mu_A e_l;
      // K a follows from the two new columns.
      const T lambda = T(2) / T(it + 2 + options.step_offset);
      const bool anomalies = r.fw_anomaly >= 0;
      const Column *col_n, *col_a;
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
    if (s < 0 || a < 0 || s == a || !((normal ? viol_n : viol_a) > 0)) return stop(FwStop::no_descent);
    const Column *col_s, *col_a;
    e.columns(s, a, &col_s, &col_a);
    const T curvature_k = e.entry(col_s, s) + e.entry(col_a, a) - 2 * e.entry(col_s, a);
    const T pen = normal ? c.pen_normal : c.pen_anomaly;
    const T gamma = pairwise_step(normal ? r.g_fw_normal : r.g_fw_anomaly, normal ? r.g_away_normal : r.g_away_anomaly,
                                  e.alpha(s), e.alpha(a), curvature_k, pen, c.q);
    e.pairwise_update((normal ? T(1) : T(-1)) * gamma, s, a, gamma, col_s, col_a);
  }
}

}  // namespace dlmsvdd
