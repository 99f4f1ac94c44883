// The O(N) work of an APG iteration on the lp-SVDD dual, on the CPU (OpenMP):
// the simplex projection in O(N) passes, the fused gradient step with its
// projection, and the pass after the kernel product (common/dual_apg_math.h).
#pragma once
#include <cstdint>

#include "common/dual_apg_math.h"

namespace dlmsvdd::cpu {

// out = each class of v (t > 0 normal) projected onto its scaled simplex; out
// may be v. theta receives the two thresholds; returns the passes after the first.
int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta);

// out = P(y - g(y) / step_k), the masses c.dual.mu_normal and c.dual.mu_anomaly;
// out must not alias the inputs.
int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta);

// The oracle at (x_new, kx_new) and the backtracking's and restart's sums.
ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c);

}  // namespace dlmsvdd::cpu
