// The O(N) work of one APG iteration on the lp-SVDD dual (dlmsvdd_ext/solver.py,
// _apg), element by element for host and device, and the simplex projection's
// threshold search, which every back end drives through the same host loop.
//
// One iteration, with beta the momentum and step_k = L w_k the metric of x's class:
//   y  = x + beta (x - x_prev),   K y = K x + beta (K x - K x_prev)
//   g  = 2 t K y + penalty'(y),   v = y - g / step_k
//   x+ = P(v): each class onto its scaled simplex {x >= 0, sum = mu_k}
// then, once K x+ is known (the caller's kernel product), one pass gives the
// oracle at x+ (its objective, the next iteration's Frank-Wolfe gap) and what
// the backtracking and the restart test need: F(y), <g, d>, sum step_k d^2 and
// sum step_k (y - x+)(x+ - x), with d = x+ - y.
//
// The state is float64 (the solver's); these routines take double only.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/dual_math.h"

namespace dlmsvdd {

// penalty'(y) at a momentum point, which may be negative: for q = 2 the
// quadratic extends to negative weights, other powers are taken at max(y, 0)
// (as the Python solver's DualProblem.penalty_derivative).
DLMSVDD_HD double momentum_penalty_derivative(double y, double pen, double q) {
  return penalty_derivative(q == 2.0 ? y : (y > 0.0 ? y : 0.0), pen, q);
}

// What a pass of the projection sees of v, per class (0 normal, 1 anomalous):
// the sum and the number of the entries above the class's threshold (all of
// them in the first pass). Trivial, for __shared__ arrays.
struct ProjectPart {
  double sum[2];
  int64_t count[2];
};

DLMSVDD_HD void clear(ProjectPart& r) {
  for (int k = 0; k < 2; ++k) {
    r.sum[k] = 0.0;
    r.count[k] = 0;
  }
}

DLMSVDD_HD void merge(ProjectPart& into, const ProjectPart& r) {
  for (int k = 0; k < 2; ++k) {
    into.sum[k] += r.sum[k];
    into.count[k] += r.count[k];
  }
}

// v_i counts if it lies above its class's threshold (`all`: every v_i, NaN included,
// so that a NaN reaches the threshold).
DLMSVDD_HD void accumulate(ProjectPart& r, double v, double t, const double* theta, bool all) {
  const int k = t > 0.0 ? 0 : 1;
  if (all || v > theta[k]) {
    r.sum[k] += v;
    r.count[k] += 1;
  }
}

// The per-class constants of the projection: each class's mass (a class with
// no mass gets zeros).
struct SimplexMass {
  double mass[2];
};

// The thresholds theta_k with sum over class k of max(v_i - theta_k, 0) = mass_k
// (Michelot's algorithm: Newton's method on that piecewise-linear decreasing
// function from the left). theta = (sum over S of v - mass) / |S| for the
// support S = {v > theta}; from S = the whole class, each pass recomputes
// theta from S and S shrinks; when it stops shrinking theta is exact, the
// sorting algorithm's formula on the same support. `first` is the all-entries
// pass; `survivors(theta)` one more pass (ProjectPart with theta per class).
// A class with no entries or no mass keeps theta = +inf (all zeros); v holding
// NaN gives theta NaN. Returns the number of passes after the first.
template <typename Survivors>
int simplex_thresholds(const ProjectPart& first, const SimplexMass& m, Survivors survivors, double* theta) {
  const double inf = std::numeric_limits<double>::infinity();
  int64_t count[2];
  bool live[2];
  for (int k = 0; k < 2; ++k) {
    count[k] = first.count[k];
    live[k] = count[k] > 0 && m.mass[k] > 0.0;
    theta[k] = live[k] ? (first.sum[k] - m.mass[k]) / double(count[k]) : inf;
  }
  int passes = 0;
  while (live[0] || live[1]) {
    const ProjectPart p = survivors(theta);
    ++passes;
    for (int k = 0; k < 2; ++k) {
      if (!live[k]) continue;
      // Converged when S did not shrink (>=: rounding cannot make it loop). No
      // survivor at all: theta is NaN (v held NaN) and stays so, or a mass
      // below the rounding of v's largest entry put theta on it (keep it).
      if (p.count[k] >= count[k] || p.count[k] == 0) {
        live[k] = false;
        continue;
      }
      count[k] = p.count[k];
      theta[k] = (p.sum[k] - m.mass[k]) / double(count[k]);
    }
  }
  return passes;
}

// The projected entry: max(v - theta, 0), NaN passing through (v or theta NaN);
// a class without mass or entries (theta = +inf) gets 0 for finite v.
DLMSVDD_HD double clip_to_simplex(double v, double theta) {
  const double d = v - theta;
  return d > 0.0 ? d : (d == d ? 0.0 : d);
}

// The iteration's scalars.
struct ApgCoefs {
  DualCoefs<double> dual;
  double beta = 0;          // momentum
  double step[2] = {1, 1};  // L w_k per class (0 normal, 1 anomalous)
};

// The gradient step at element i: y, K y and v = y - g / step_k.
DLMSVDD_HD double apg_gradient_step(double x, double x_prev, double kx, double kx_prev, double t,
                                           const ApgCoefs& c) {
  const bool normal = t > 0.0;
  const double y = x + c.beta * (x - x_prev);
  const double ky = kx + c.beta * (kx - kx_prev);
  const double pen = normal ? c.dual.pen_normal : c.dual.pen_anomaly;
  const double g = 2.0 * t * ky + momentum_penalty_derivative(y, pen, c.dual.q);
  return y - g / c.step[normal ? 0 : 1];
}

// What the pass after the kernel product gathers: the oracle at x+ and the
// backtracking's and the restart's sums. Trivial, for __shared__ arrays.
struct ApgCheckPart {
  OraclePart<double> oracle;  // at (x+, K x+)
  double objective_y;         // F(y)
  double g_dot_d;             // <g(y), x+ - y>
  double step_d2;             // sum step_k (x+ - y)^2
  double restart;             // sum step_k (y - x+)(x+ - x): > 0 restarts the momentum
};

DLMSVDD_HD void clear(ApgCheckPart& r) {
  clear(r.oracle);
  r.objective_y = r.g_dot_d = r.step_d2 = r.restart = 0.0;
}

DLMSVDD_HD void merge(ApgCheckPart& into, const ApgCheckPart& r) {
  merge(into.oracle, r.oracle);
  into.objective_y += r.objective_y;
  into.g_dot_d += r.g_dot_d;
  into.step_d2 += r.step_d2;
  into.restart += r.restart;
}

// Element i, after every element of this record with a lower index.
DLMSVDD_HD void accumulate(ApgCheckPart& r, int64_t i, double x, double x_prev, double kx, double kx_prev,
                                  double x_new, double kx_new, double t, const ApgCoefs& c) {
  accumulate(r.oracle, i, x_new, kx_new, t, c.dual);
  const bool normal = t > 0.0;
  const double y = x + c.beta * (x - x_prev);
  const double ky = kx + c.beta * (kx - kx_prev);
  const double pen = normal ? c.dual.pen_normal : c.dual.pen_anomaly;
  const double g = 2.0 * t * ky + momentum_penalty_derivative(y, pen, c.dual.q);
  const double step = c.step[normal ? 0 : 1];
  const double d = x_new - y;
  r.objective_y += penalty_value(c.dual.q == 2.0 ? y : (y > 0.0 ? y : 0.0), pen, c.dual.q) + t * y * ky;
  r.g_dot_d += g * d;
  r.step_d2 += step * d * d;
  r.restart += step * (y - x_new) * (x_new - x);
}

struct ApgCheckResult {
  OracleResult<double> oracle;
  double objective_y = 0, g_dot_d = 0, step_d2 = 0, restart = 0;
};

inline ApgCheckResult to_result(const ApgCheckPart& p) {
  ApgCheckResult r;
  r.oracle = to_result(p.oracle);
  r.objective_y = p.objective_y;
  r.g_dot_d = p.g_dot_d;
  r.step_d2 = p.step_d2;
  r.restart = p.restart;
  return r;
}

}  // namespace dlmsvdd
