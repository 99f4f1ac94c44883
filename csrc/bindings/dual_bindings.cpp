// The large-margin lp-SVDD dual's bindings: the oracle pass, the compiled
// Frank-Wolfe loops over kernel columns, and pairwise Frank-Wolfe's line search.
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/dual_convert.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/column_cache.h"
#include "common/dual_fw_loop.h"
#include "common/dual_math.h"
#include "cpu/dual_cpu.h"
#include "cuda/dual_cuda.h"

namespace dlmsvdd::bindings {

namespace {

// alpha, Ka and t: 1-D, same length, dtype and device, unit stride; where they
// run; and the scratch of the CUDA (or emulated) oracle, which the CPU
// routines do not need.
struct DualState {
  ArrayView alpha, ka, t, workspace;
  Backend backend = Backend::cpu;
  int64_t stream = 0;

  bool on_cpu() const { return backend == Backend::cpu; }
};

DualState dual_state(py::handle alpha, py::handle ka, py::handle t, py::handle workspace, bool cuda_emulation,
                     int64_t stream) {
  DualState s{view_array(alpha, "alpha", 1, 1, stream), view_array(ka, "Ka", 1, 1, stream),
              view_array(t, "t", 1, 1, stream), ArrayView{}, Backend::cpu, stream};
  for (const ArrayView* a : {&s.ka, &s.t}) require_same(s.alpha, *a);
  for (const ArrayView* a : {&s.alpha, &s.ka, &s.t}) {
    if (a->rows != s.alpha.rows) fail(a->name + ": length " + std::to_string(a->rows) + " differs from alpha's");
    if (a->rows > 1 && a->ld != 1) fail(a->name + ": must be contiguous");
  }
  s.backend = backend_for(s.alpha, cuda_emulation);
  if (s.on_cpu()) return s;
  s.workspace = device_workspace(workspace, s.alpha, dual_oracle_workspace_bytes(s.alpha.rows),
                                 "dual_oracle_workspace_bytes(n)", stream);
  require_writable(s.workspace, {&s.alpha, &s.ka, &s.t});
  return s;
}

// `shard`: t is a part of the problem's labels (the sharded solver's), which
// may hold no normal sample; otherwise the whole problem's (require_labels).
template <typename T>
py::dict dual_oracle_typed(const DualState& s, const py::dict& coefs, bool shard) {
  const DualCoefs<T> c = coefs_from<T>(coefs);
  const T *alpha = s.alpha.ptr<T>(), *ka = s.ka.ptr<T>(), *t = s.t.ptr<T>();
  const int64_t n = s.alpha.rows;
  OracleResult<T> r;
  {
    py::gil_scoped_release release;
    r = route(s.backend, [&] { return cpu::dual_oracle<T>(alpha, ka, t, n, c); },
              [&] { return emulated::dual_oracle<T>(alpha, ka, t, n, c, s.workspace.data); },
              [&] { return cuda::dual_oracle<T>(alpha, ka, t, n, c, s.workspace.data, cuda_stream(s.stream)); });
  }
  as_value_error([&] { require_labels(r, c, !shard); });
  return oracle_dict(r, c);
}

py::dict dual_oracle(py::handle alpha, py::handle ka, py::handle t, const py::dict& coefs, py::handle workspace,
                     bool cuda_emulation, int64_t stream, bool shard) {
  const DualState s = dual_state(alpha, ka, t, workspace, cuda_emulation, stream);
  return s.alpha.dtype == DType::float32 ? dual_oracle_typed<float>(s, coefs, shard)
                                         : dual_oracle_typed<double>(s, coefs, shard);
}

// The kernel matrix (K, X or Z by `source`), on the state's device, with
// `n` rows: in the state's dtype, or float32 under a float64 state (a
// float32 K or float32 features, with the state and certificate in float64).
ArrayView column_matrix(const DualState& s, const std::string& source, py::handle matrix) {
  if (source != "dense" && source != "features" && source != "factor")
    fail("source must be 'dense', 'features' or 'factor', got '" + source + "'");
  const ArrayView m = view_array(matrix, source == "dense" ? "K" : source == "features" ? "X" : "Z", 2, 2, s.stream);
  if (m.device != s.alpha.device || m.device_id != s.alpha.device_id)
    fail(m.name + ": on a different device than alpha");
  if (m.dtype != s.alpha.dtype && !(s.alpha.dtype == DType::float64 && m.dtype == DType::float32))
    throw py::type_error(m.name + ": dtype " + dtype_name(m.dtype) + " with a " + dtype_name(s.alpha.dtype) +
                         " state; the columns take the state's dtype, or float32 under a float64 state");
  const int64_t n = s.alpha.rows;
  if (m.rows != n) fail(m.name + ": has " + std::to_string(m.rows) + " rows, alpha has " + std::to_string(n));
  if (source == "dense" && m.cols != n) fail("K must be square");
  if (source != "dense" && m.cols < 1) fail(m.name + ": has no columns");  // an empty K: the label check says why
  return m;
}

// Kernel columns in C from the matrix m (column_matrix) on the state's
// device (and back end); computed ones are cached in `cache` (C, slots x n).
template <typename C>
std::unique_ptr<ColumnSource<C>> column_source(const DualState& s, const std::string& source, const ArrayView& m,
                                               double gamma, py::handle cache) {
  const int64_t n = s.alpha.rows;
  if (source == "dense") return std::make_unique<DenseColumns<C>>(m.ptr<C>(), m.ld, n);
  const ArrayView store = view_array(cache, "cache", 2, 2, s.stream);
  require_same(m, store);
  require_writable(store, {&s.alpha, &s.ka, &m});
  if (store.rows < 2 || store.cols != n || (store.rows > 1 && store.ld != n))
    fail("cache must be a contiguous (slots >= 2, n) array");
  const bool features = source == "features";
  if (features && !(gamma > 0 && std::isfinite(gamma))) fail("gamma must be a positive finite number");
  C* storage = store.ptr<C>();
  const int64_t slots = store.rows;
  const C* rows = m.ptr<C>();  // X or Z
  using Columns = std::unique_ptr<ColumnSource<C>>;
  return route(
      s.backend,
      [&]() -> Columns {
        if (features) return std::make_unique<cpu::FeatureColumns<C>>(storage, slots, rows, m.ld, n, m.cols, C(gamma));
        return std::make_unique<cpu::FactorColumns<C>>(storage, slots, rows, m.ld, n, m.cols);
      },
      [&]() -> Columns {
        return features ? emulated::feature_columns<C>(storage, slots, rows, m.ld, n, m.cols, C(gamma))
                        : emulated::factor_columns<C>(storage, slots, rows, m.ld, n, m.cols);
      },
      [&]() -> Columns {
        void* const stream = cuda_stream(s.stream);
        return features ? cuda::feature_columns<C>(storage, slots, rows, m.ld, n, m.cols, C(gamma), stream)
                        : cuda::factor_columns<C>(storage, slots, rows, m.ld, n, m.cols, stream);
      });
}

// A state in T over columns in C.
template <typename T, typename C>
py::dict fw_solve_typed(const DualState& s, const py::dict& coefs, const FwOptions& o, const ArrayView& hist_obj,
                        const ArrayView& hist_gap, const std::string& source, const ArrayView& matrix, double gamma,
                        py::handle cache) {
  const std::unique_ptr<ColumnSource<C>> columns = column_source<C>(s, source, matrix, gamma, cache);
  const DualCoefs<T> c = coefs_from<T>(coefs);  // reads Python objects: before releasing the GIL
  T *alpha = s.alpha.ptr<T>(), *ka = s.ka.ptr<T>();
  const T* t = s.t.ptr<T>();
  const int64_t n = s.alpha.rows;
  double *ho = hist_obj.ptr<double>(), *hg = hist_gap.ptr<double>();
  FwReport rep;
  {
    py::gil_scoped_release release;
    rep = route(
        s.backend, [&] { return cpu::fw_solve<T, C>(*columns, alpha, ka, t, n, c, o, ho, hg); },
        [&] { return emulated::fw_solve<T, C>(*columns, alpha, ka, t, n, c, o, ho, hg, s.workspace.data); },
        [&] {
          return cuda::fw_solve<T, C>(*columns, alpha, ka, t, n, c, o, ho, hg, s.workspace.data,
                                      cuda_stream(s.stream));
        });
  }
  py::dict d;
  d["n_iter"] = rep.n_iter;
  d["converged"] = rep.converged;
  d["stop"] = fw_stop_name(rep.stop);
  if (auto* cached = dynamic_cast<CachedColumns<C>*>(columns.get())) {
    d["cache_hits"] = cached->hits();
    d["cache_misses"] = cached->misses();
  }
  return d;
}

py::dict fw_solve(py::handle alpha, py::handle ka, py::handle t, const py::dict& coefs, const std::string& method,
                  int64_t max_iter, double tol, int64_t step_offset, py::handle history_objective,
                  py::handle history_gap, const std::string& source, py::handle matrix, double gamma,
                  py::handle cache, py::handle workspace, bool cuda_emulation, int64_t stream) {
  FwOptions o;
  if (method == "vanilla") o.method = FwMethod::vanilla;
  else if (method == "pairwise") o.method = FwMethod::pairwise;
  else fail("method must be 'vanilla' or 'pairwise', got '" + method + "'");
  if (max_iter < 0 || max_iter == std::numeric_limits<int64_t>::max())
    fail("max_iter must be >= 0, got " + std::to_string(max_iter));
  if (!(tol >= 0)) fail("tol must be >= 0, got " + std::to_string(tol));
  if (step_offset < 0) fail("step_offset must be >= 0, got " + std::to_string(step_offset));
  o.max_iter = max_iter;
  o.tol = tol;
  o.step_offset = step_offset;
  const DualState s = dual_state(alpha, ka, t, workspace, cuda_emulation, stream);
  require_writable(s.alpha, {&s.ka, &s.t});  // the loop writes both
  require_writable(s.ka, {&s.t});
  const ArrayView ho = view_array(history_objective, "history_objective", 1, 1);
  const ArrayView hg = view_array(history_gap, "history_gap", 1, 1);
  for (const ArrayView* h : {&ho, &hg}) {
    if (h->dtype != DType::float64 || h->device != Device::cpu || h->rows < max_iter + 1 || (h->rows > 1 && h->ld != 1))
      fail(h->name + ": must be a contiguous float64 CPU array of at least max_iter + 1 entries");
    require_writable(*h, {&s.alpha, &s.ka});
  }
  require_writable(hg, {&ho});
  const ArrayView m = column_matrix(s, source, matrix);
  if (s.alpha.dtype == DType::float32) return fw_solve_typed<float, float>(s, coefs, o, ho, hg, source, m, gamma, cache);
  if (m.dtype == DType::float32) return fw_solve_typed<double, float>(s, coefs, o, ho, hg, source, m, gamma, cache);
  return fw_solve_typed<double, double>(s, coefs, o, ho, hg, source, m, gamma, cache);
}

}  // namespace

void bind_dual(py::module_& m) {
  m.def("dual_oracle", &dual_oracle, py::arg("alpha"), py::arg("Ka"), py::arg("t"), py::arg("coefs"),
        py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false, py::arg("stream") = 0,
        py::arg("shard") = false,
        "One pass over the dual: objective, Frank-Wolfe gap, linear oracle and away atoms. ValueError for a "
        "label other than +1 or -1, and (unless shard) for no +1 label or no -1 label with mu_anomaly != 0.");
  m.def("fw_solve", &fw_solve, py::arg("alpha"), py::arg("Ka"), py::arg("t"), py::arg("coefs"), py::arg("method"),
        py::arg("max_iter"), py::arg("tol"), py::arg("step_offset"), py::arg("history_objective"),
        py::arg("history_gap"), py::arg("source"), py::arg("matrix"), py::arg("gamma") = 0.0,
        py::arg("cache") = py::none(), py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false,
        py::arg("stream") = 0,
        "Frank-Wolfe (vanilla or pairwise) in place on alpha and Ka; the matrix (and cache) in alpha's dtype, or "
        "float32 under float64 alpha.");
  m.def("pairwise_step",
        [](double g_s, double g_a, double alpha_s, double alpha_a, double curvature, double pen, double q) {
          for (auto [name, v] : {std::pair{"g_s", g_s}, {"g_a", g_a}, {"alpha_s", alpha_s}, {"alpha_a", alpha_a},
                                 {"curvature", curvature}, {"pen", pen}, {"q", q}})
            if (!std::isfinite(v)) fail(std::string(name) + " must be finite, got " + std::to_string(v));
          // The step lies in [0, alpha_a]: a negative weight would make that range empty.
          if (alpha_s < 0 || alpha_a < 0) fail("alpha_s and alpha_a must be >= 0 (weights)");
          if (pen < 0) fail("pen must be >= 0, got " + std::to_string(pen));
          if (!(q > 1)) fail("q = p / (p - 1) must be > 1, got " + std::to_string(q));
          return pairwise_step<double>(g_s, g_a, alpha_s, alpha_a, curvature, pen, q);
        },
        py::arg("g_s"), py::arg("g_a"), py::arg("alpha_s"), py::arg("alpha_a"), py::arg("curvature"),
        py::arg("pen"), py::arg("q"),
        "Pairwise Frank-Wolfe's exact line search (the compiled loop's own), for loops driven from Python.");
  m.def("dual_oracle_workspace_bytes",
        [](int64_t n) {
          if (n < 0) fail("n must be >= 0, got " + std::to_string(n));
          return dual_oracle_workspace_bytes(n);
        },
        py::arg("n"), "Bytes of scratch the CUDA (and emulated) dual oracle needs for n samples.");
}

}  // namespace dlmsvdd::bindings
