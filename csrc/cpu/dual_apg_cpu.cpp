#include "cpu/dual_apg_cpu.h"

#include <omp.h>

#include <vector>

namespace dlmsvdd::cpu {

namespace {

// Below this size one thread is faster than waking the others.
constexpr int64_t kParallelFrom = 16384;

// A record R over i in [0, n): each thread accumulates a contiguous range in
// index order (static schedule), and the records merge in thread order, so the
// result depends on the thread count only.
template <typename R, typename Body>
R reduce(int64_t n, Body body) {
  const int threads = n >= kParallelFrom ? omp_get_max_threads() : 1;
  std::vector<R> parts(threads);
#pragma omp parallel num_threads(threads)
  {
    R r;
    clear(r);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) body(r, i);
    parts[omp_get_thread_num()] = r;
  }
  for (int p = 1; p < threads; ++p) merge(parts[0], parts[p]);
  return parts[0];
}

// Thresholds of v (the first pass's record given) and out = the projection.
int project_from(const ProjectPart& first, const double* v, const double* t, int64_t n, const SimplexMass& m,
                 double* out, double* theta) {
  const int passes = simplex_thresholds(
      first, m,
      [&](const double* th) {
        return reduce<ProjectPart>(n, [&](ProjectPart& r, int64_t i) { accumulate(r, v[i], t[i], th, false); });
      },
      theta);
#pragma omp parallel for schedule(static) if (n >= kParallelFrom)
  for (int64_t i = 0; i < n; ++i) out[i] = clip_to_simplex(v[i], theta[t[i] > 0.0 ? 0 : 1]);
  return passes;
}

}  // namespace

int simplex_project(const double* v, const double* t, int64_t n, const SimplexMass& m, double* out, double* theta) {
  const ProjectPart first =
      reduce<ProjectPart>(n, [&](ProjectPart& r, int64_t i) { accumulate(r, v[i], t[i], nullptr, true); });
  return project_from(first, v, t, n, m, out, theta);
}

int apg_step(const double* x, const double* x_prev, const double* kx, const double* kx_prev, const double* t,
             int64_t n, const ApgCoefs& c, double* out, double* theta) {
  // The gradient step written to out and summed in one pass; the projection then works in place.
  const ProjectPart first = reduce<ProjectPart>(n, [&](ProjectPart& r, int64_t i) {
    out[i] = apg_gradient_step(x[i], x_prev[i], kx[i], kx_prev[i], t[i], c);
    accumulate(r, out[i], t[i], nullptr, true);
  });
  const SimplexMass m{{c.dual.mu_normal, c.dual.mu_anomaly}};
  return project_from(first, out, t, n, m, out, theta);
}

ApgCheckResult apg_check(const double* x, const double* x_prev, const double* kx, const double* kx_prev,
                         const double* x_new, const double* kx_new, const double* t, int64_t n, const ApgCoefs& c) {
  return to_result(reduce<ApgCheckPart>(n, [&](ApgCheckPart& r, int64_t i) {
    accumulate(r, i, x[i], x_prev[i], kx[i], kx_prev[i], x_new[i], kx_new[i], t[i], c);
  }));
}

}  // namespace dlmsvdd::cpu
