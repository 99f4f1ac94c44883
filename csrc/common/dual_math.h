// The large-margin lp-SVDD dual, coordinate by coordinate, for host and device.
//
//   F(alpha) = sum_i pen_k(i) alpha_i^q + a^T K a,   a = alpha * t,
//   pen_k = cbar_k 2^q,  q = p / (p - 1),
//   alpha >= 0, sum over normal alpha = mu_normal, over anomalous = mu_anomaly.
#pragma once
#include <cmath>
#include <cstdint>

#include "common/rbf_math.h"

namespace dlmsvdd {

template <typename T>
struct DualCoefs {
  T q = 2;            // conjugate exponent
  T pen_normal = 0;   // cbar_1 * 2^q
  T pen_anomaly = 0;  // cbar_2 * 2^q
  T mu_normal = 1;    // (nu + 1) / 2
  T mu_anomaly = 0;   // (nu - 1) / 2
};

// alpha^e for alpha >= 0 with the common p = 2 case (e = 1 or 2) kept exact and cheap.
template <typename T>
DLMSVDD_HD T nonneg_pow(T alpha, T e) {
  if (e == T(1)) return alpha;
  if (e == T(2)) return alpha * alpha;
  return alpha > T(0) ? pow(alpha, e) : T(0);
}

template <typename T>
DLMSVDD_HD T penalty_value(T alpha, T pen, T q) {
  return pen * nonneg_pow(alpha, q);
}

// d/d alpha of the penalty; also the slack of the sample implied by the dual.
template <typename T>
DLMSVDD_HD T penalty_derivative(T alpha, T pen, T q) {
  return q * pen * nonneg_pow(alpha, q - T(1));
}

// dF / d alpha_i = 2 t_i (K a)_i + penalty'(alpha_i).
template <typename T>
DLMSVDD_HD T dual_gradient(T t, T ka, T alpha, T pen, T q) {
  return T(2) * t * ka + penalty_derivative(alpha, pen, q);
}

// What one pass over (alpha, K a) gives: the objective, the linear oracle (the
// smallest gradient in each class), the away atoms of pairwise Frank-Wolfe (the
// largest gradient among each class's support), and <alpha, g> for the gap
//   gap = <alpha, g> - mu_normal g[fw_normal] - mu_anomaly g[fw_anomaly].
template <typename T>
struct OracleResult {
  int64_t fw_normal = -1, fw_anomaly = -1;      // argmin g per class
  int64_t away_normal = -1, away_anomaly = -1;  // argmax g over alpha > 0 per class
  int64_t bad_label = -1;                       // the first i with t_i neither +1 nor -1
  T g_fw_normal = 0, g_fw_anomaly = 0;
  T g_away_normal = 0, g_away_anomaly = 0;
  // Sums in double even for float data: the gap is a difference of nearly
  // equal numbers near the optimum.
  double alpha_dot_g = 0;
  double quadratic = 0;  // a^T K a
  double penalty = 0;

  DLMSVDD_HD double objective() const { return quadratic + penalty; }
  DLMSVDD_HD double gap(const DualCoefs<T>& c) const {
    double g = alpha_dot_g - double(c.mu_normal) * double(g_fw_normal);
    if (fw_anomaly >= 0) g -= double(c.mu_anomaly) * double(g_fw_anomaly);
    return g;
  }
};

// What a thread, a block, a CPU thread or the whole pass has seen of the
// oracle pass; index 0 is the normal class, 1 the anomalous one. Trivial (no
// member initialisers), so a GPU block can keep an array of them __shared__.
// Every back end accumulates and merges with the functions below, so atoms
// and tie-breaks are the same everywhere.
template <typename T>
struct OraclePart {
  int64_t fw[2], away[2];  // -1: none seen
  int64_t bad_label;       // the lowest index seen whose label is neither +1 nor -1; -1: none
  T g_fw[2], g_away[2];
  double alpha_dot_g, quadratic, penalty;
};

template <typename T>
DLMSVDD_HD void clear(OraclePart<T>& r) {
  for (int k = 0; k < 2; ++k) {
    r.fw[k] = r.away[k] = -1;
    r.g_fw[k] = r.g_away[k] = T(0);
  }
  r.bad_label = -1;
  r.alpha_dot_g = r.quadratic = r.penalty = 0.0;
}

// Element i, after every element of this record with a lower index: strict
// comparisons keep the first of equal gradients.
template <typename T>
DLMSVDD_HD void accumulate(OraclePart<T>& r, int64_t i, T alpha, T ka, T t, const DualCoefs<T>& c) {
  // The pass reads every label, so it checks them too (callers refuse a bad
  // one before using the atoms: common/dual_fw_loop.h, require_labels).
  if (t != T(1) && t != T(-1) && r.bad_label < 0) r.bad_label = i;
  const bool normal = t > T(0);
  const T pen = normal ? c.pen_normal : c.pen_anomaly;
  const T g = dual_gradient(t, ka, alpha, pen, c.q);
  r.alpha_dot_g += double(alpha) * double(g);
  r.quadratic += double(t) * double(alpha) * double(ka);
  r.penalty += double(penalty_value(alpha, pen, c.q));
  for (int k = 0; k < 2; ++k) {
    // Constant class indices keep the record in registers; one of them is this element's.
    if (normal != (k == 0)) continue;
    if (r.fw[k] < 0 || g < r.g_fw[k]) {
      r.fw[k] = i;
      r.g_fw[k] = g;
    }
    if (alpha > T(0) && (r.away[k] < 0 || g > r.g_away[k])) {
      r.away[k] = i;
      r.g_away[k] = g;
    }
  }
}

// into := into and r together, for records of any index ranges: equal
// gradients go to the lower index, so the order of merges does not matter.
template <typename T>
DLMSVDD_HD void merge(OraclePart<T>& into, const OraclePart<T>& r) {
  for (int k = 0; k < 2; ++k) {
    if (r.fw[k] >= 0 && (into.fw[k] < 0 || r.g_fw[k] < into.g_fw[k] ||
                         (r.g_fw[k] == into.g_fw[k] && r.fw[k] < into.fw[k]))) {
      into.fw[k] = r.fw[k];
      into.g_fw[k] = r.g_fw[k];
    }
    if (r.away[k] >= 0 && (into.away[k] < 0 || r.g_away[k] > into.g_away[k] ||
                           (r.g_away[k] == into.g_away[k] && r.away[k] < into.away[k]))) {
      into.away[k] = r.away[k];
      into.g_away[k] = r.g_away[k];
    }
  }
  if (r.bad_label >= 0 && (into.bad_label < 0 || r.bad_label < into.bad_label)) into.bad_label = r.bad_label;
  into.alpha_dot_g += r.alpha_dot_g;
  into.quadratic += r.quadratic;
  into.penalty += r.penalty;
}

template <typename T>
OracleResult<T> to_result(const OraclePart<T>& p) {
  OracleResult<T> r;
  r.fw_normal = p.fw[0];
  r.fw_anomaly = p.fw[1];
  r.away_normal = p.away[0];
  r.away_anomaly = p.away[1];
  r.g_fw_normal = p.g_fw[0];
  r.g_fw_anomaly = p.g_fw[1];
  r.g_away_normal = p.g_away[0];
  r.g_away_anomaly = p.g_away[1];
  r.bad_label = p.bad_label;
  r.alpha_dot_g = p.alpha_dot_g;
  r.quadratic = p.quadratic;
  r.penalty = p.penalty;
  return r;
}

}  // namespace dlmsvdd
