// Bindings of APG's O(N) work on the lp-SVDD dual: the simplex projection, the
// fused gradient step with its projection, and the pass after the kernel
// product (cpu/dual_apg_cpu.h). Every array float64 (the solver's state).
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/dual_convert.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/dual_apg_math.h"
#include "common/dual_fw_loop.h"
#include "cpu/dual_apg_cpu.h"
#include "cuda/dual_apg_cuda.h"
#include "cuda/dual_cuda.h"

namespace dlmsvdd::bindings {

namespace {

// Float64 vectors of one length and device, unit stride; the back end; the
// device scratch (dual_oracle_workspace_bytes) for the CUDA and emulated kernels.
struct Vectors {
  std::vector<ArrayView> views;
  Backend backend = Backend::cpu;
  ArrayView workspace;
  int64_t stream = 0;

  int64_t n() const { return views[0].rows; }
  const double* in(size_t i) const { return views[i].ptr<double>(); }
};

Vectors vectors(std::initializer_list<std::pair<py::handle, const char*>> arrays, py::handle workspace,
                bool cuda_emulation, int64_t stream) {
  Vectors v;
  v.stream = stream;
  for (const auto& [obj, name] : arrays) {
    ArrayView a = view_array(obj, name, 1, 1, stream);
    if (a.dtype != DType::float64) throw py::type_error(a.name + ": must be float64 (the solver's state)");
    if (!v.views.empty()) {
      require_same(v.views[0], a);
      if (a.rows != v.views[0].rows)
        fail(a.name + ": length " + std::to_string(a.rows) + " differs from " + v.views[0].name + "'s " +
             std::to_string(v.views[0].rows));
    }
    if (a.rows > 1 && a.ld != 1) fail(a.name + ": must be contiguous");
    v.views.push_back(std::move(a));
  }
  v.backend = backend_for(v.views[0], cuda_emulation);
  if (v.backend != Backend::cpu && v.n() > 0)
    v.workspace = device_workspace(workspace, v.views[0], dual_oracle_workspace_bytes(v.n()),
                                   "dual_oracle_workspace_bytes(n)", stream);
  return v;
}

double finite(double value, const char* name) {
  if (!std::isfinite(value)) fail(std::string(name) + " must be finite, got " + std::to_string(value));
  return value;
}

ApgCoefs apg_coefs(const py::dict& coefs, double beta, double step_normal, double step_anomaly) {
  ApgCoefs c;
  c.dual = coefs_from<double>(coefs);
  c.beta = finite(beta, "beta");
  for (auto [value, name] : {std::pair{step_normal, "step_normal"}, {step_anomaly, "step_anomaly"}})
    if (!(finite(value, name) > 0)) fail(std::string(name) + " must be > 0, got " + std::to_string(value));
  c.step[0] = step_normal;
  c.step[1] = step_anomaly;
  return c;
}

py::tuple simplex_project(py::handle v, py::handle t, double mu_normal, double mu_anomaly, py::handle out,
                          py::handle workspace, bool cuda_emulation, int64_t stream) {
  for (auto [value, name] : {std::pair{mu_normal, "mu_normal"}, {mu_anomaly, "mu_anomaly"}})
    if (!(finite(value, name) >= 0)) fail(std::string(name) + " must be >= 0, got " + std::to_string(value));
  const Vectors s = vectors({{v, "v"}, {t, "t"}, {out, "out"}}, workspace, cuda_emulation, stream);
  const ArrayView& o = s.views[2];
  if (o.read_only) fail("out: is read-only");
  if (overlapping(o, s.views[1])) fail("out: must not share memory with t");  // out may be v
  const SimplexMass m{{mu_normal, mu_anomaly}};
  double theta[2] = {0, 0};
  int passes = 0;
  if (s.n() > 0) {
    const double *pv = s.in(0), *pt = s.in(1);
    double* po = o.ptr<double>();
    void* ws = s.workspace.data;
    py::gil_scoped_release release;
    passes = route(s.backend, [&] { return cpu::simplex_project(pv, pt, s.n(), m, po, theta); },
                   [&] { return emulated::simplex_project(pv, pt, s.n(), m, po, theta, ws); },
                   [&] { return cuda::simplex_project(pv, pt, s.n(), m, po, theta, ws, cuda_stream(s.stream)); });
  }
  return py::make_tuple(theta[0], theta[1], passes);
}

py::tuple apg_step(py::handle x, py::handle x_prev, py::handle kx, py::handle kx_prev, py::handle t,
                   const py::dict& coefs, double beta, double step_normal, double step_anomaly, py::handle out,
                   py::handle workspace, bool cuda_emulation, int64_t stream) {
  const ApgCoefs c = apg_coefs(coefs, beta, step_normal, step_anomaly);
  const Vectors s = vectors({{x, "x"}, {x_prev, "x_prev"}, {kx, "Kx"}, {kx_prev, "Kx_prev"}, {t, "t"}, {out, "out"}},
                            workspace, cuda_emulation, stream);
  const ArrayView& o = s.views[5];
  require_writable(o, {&s.views[0], &s.views[1], &s.views[2], &s.views[3], &s.views[4]});
  double theta[2] = {0, 0};
  int passes = 0;
  if (s.n() > 0) {
    const double *px = s.in(0), *pxp = s.in(1), *pk = s.in(2), *pkp = s.in(3), *pt = s.in(4);
    double* po = o.ptr<double>();
    void* ws = s.workspace.data;
    const int64_t n = s.n();
    py::gil_scoped_release release;
    passes = route(s.backend, [&] { return cpu::apg_step(px, pxp, pk, pkp, pt, n, c, po, theta); },
                   [&] { return emulated::apg_step(px, pxp, pk, pkp, pt, n, c, po, theta, ws); },
                   [&] { return cuda::apg_step(px, pxp, pk, pkp, pt, n, c, po, theta, ws, cuda_stream(s.stream)); });
  }
  return py::make_tuple(theta[0], theta[1], passes);
}

py::dict apg_check(py::handle x, py::handle x_prev, py::handle kx, py::handle kx_prev, py::handle x_new,
                   py::handle kx_new, py::handle t, const py::dict& coefs, double beta, double step_normal,
                   double step_anomaly, py::handle workspace, bool cuda_emulation, int64_t stream) {
  const ApgCoefs c = apg_coefs(coefs, beta, step_normal, step_anomaly);
  const Vectors s = vectors({{x, "x"}, {x_prev, "x_prev"}, {kx, "Kx"}, {kx_prev, "Kx_prev"}, {x_new, "x_new"},
                             {kx_new, "Kx_new"}, {t, "t"}},
                            workspace, cuda_emulation, stream);
  if (s.n() == 0) fail("t: is empty; the dual needs at least one normal sample");
  ApgCheckResult r;
  {
    const double *px = s.in(0), *pxp = s.in(1), *pk = s.in(2), *pkp = s.in(3), *pxn = s.in(4), *pkn = s.in(5),
                 *pt = s.in(6);
    void* ws = s.workspace.data;
    const int64_t n = s.n();
    py::gil_scoped_release release;
    r = route(s.backend, [&] { return cpu::apg_check(px, pxp, pk, pkp, pxn, pkn, pt, n, c); },
              [&] { return emulated::apg_check(px, pxp, pk, pkp, pxn, pkn, pt, n, c, ws); },
              [&] { return cuda::apg_check(px, pxp, pk, pkp, pxn, pkn, pt, n, c, ws, cuda_stream(s.stream)); });
  }
  as_value_error([&] { require_labels(r.oracle, c.dual, true); });
  py::dict d = oracle_dict(r.oracle, c.dual);
  d["objective_y"] = r.objective_y;
  d["g_dot_d"] = r.g_dot_d;
  d["step_d2"] = r.step_d2;
  d["restart"] = r.restart;
  return d;
}

}  // namespace

void bind_dual_apg(py::module_& m) {
  m.def("simplex_project", &simplex_project, py::arg("v"), py::arg("t"), py::arg("mu_normal"),
        py::arg("mu_anomaly"), py::arg("out"), py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false,
        py::arg("stream") = 0,
        "out = each class of v (t > 0 normal, else anomalous) projected onto {x >= 0, sum(x) = mu_k}; out may be "
        "v. Returns (theta_normal, theta_anomaly, passes).");
  m.def("apg_step", &apg_step, py::arg("x"), py::arg("x_prev"), py::arg("Kx"), py::arg("Kx_prev"), py::arg("t"),
        py::arg("coefs"), py::arg("beta"), py::arg("step_normal"), py::arg("step_anomaly"), py::arg("out"),
        py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false, py::arg("stream") = 0,
        "out = P(y - g(y) / step_k), y = x + beta (x - x_prev), K y likewise. Returns (theta_normal, "
        "theta_anomaly, passes).");
  m.def("apg_check", &apg_check, py::arg("x"), py::arg("x_prev"), py::arg("Kx"), py::arg("Kx_prev"),
        py::arg("x_new"), py::arg("Kx_new"), py::arg("t"), py::arg("coefs"), py::arg("beta"),
        py::arg("step_normal"), py::arg("step_anomaly"), py::arg("workspace") = py::none(),
        py::arg("cuda_emulation") = false, py::arg("stream") = 0,
        "The oracle at (x_new, Kx_new) (dual_oracle's keys) and objective_y = F(y), g_dot_d, step_d2 and restart.");
}

}  // namespace dlmsvdd::bindings
