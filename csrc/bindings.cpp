// The one pybind11 module: turns arrays into parameter structs and dispatches
// on device. No kernel code here.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "common/dual_fw_loop.h"
#include "common/feature_map_params.h"
#include "common/fwht_params.h"
#include "common/rbf_params.h"
#include "cpu/dual_cpu.h"
#include "cpu/isa_dispatch.h"
#include "cpu/rbf_cpu.h"
#include "cpu/rpcholesky_cpu.h"
#include "cuda/dual_cuda.h"
#include "cuda/feature_map_cuda.h"
#include "cuda/fwht_cuda.h"
#include "cuda/rbf_cuda.h"
#include "cuda/rpcholesky_cuda.h"
#include "dlpack_bridge.h"

#ifdef DLMSVDD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace py = pybind11;
using namespace dlmsvdd;

namespace {

enum class Backend { native, emulated };  // native: CPU or CUDA by the arrays' device

[[noreturn]] void fail(const std::string& what) { throw py::value_error(what); }

void require_same(const ArrayView& a, const ArrayView& b) {
  if (a.dtype != b.dtype)
    throw py::type_error(b.name + ": dtype " + dtype_name(b.dtype) + " does not match " + a.name + " (" +
                         dtype_name(a.dtype) + ")");
  if (a.device != b.device || a.device_id != b.device_id)
    fail(b.name + ": on a different device than " + a.name);
}

void require_writable(const ArrayView& out, std::initializer_list<const ArrayView*> inputs) {
  if (out.read_only) fail(out.name + ": is read-only");
  for (const ArrayView* in : inputs)
    if (in->data == out.data) fail(out.name + ": must not share memory with " + in->name);
}

void select_device(const ArrayView& a, Backend backend) {
  if (backend == Backend::emulated) {
    if (a.device != Device::cpu) fail("the emulated CUDA kernels take CPU arrays");
    return;
  }
  if (a.device != Device::cuda) return;
#ifdef DLMSVDD_WITH_CUDA
  if (cudaSetDevice(a.device_id) != cudaSuccess) fail("cannot select CUDA device " + std::to_string(a.device_id));
#else
  fail(a.name + ": is a CUDA array, but dlmsvdd_ext was built without CUDA");
#endif
}

// X (nx, d) and Y (ny, d) into a problem; symmetric requires Y to be X.
template <typename T>
RbfProblem<T> make_problem(const ArrayView& x, const ArrayView& y, double gamma, bool symmetric) {
  if (!(gamma > 0) || !std::isfinite(gamma)) fail("gamma must be a positive finite number, got " + std::to_string(gamma));
  if (x.cols != y.cols)
    fail("Y has " + std::to_string(y.cols) + " features but X has " + std::to_string(x.cols));
  if (x.cols < 1) fail("X has no features (d = 0)");
  if (symmetric && (x.data != y.data || x.rows != y.rows || x.ld != y.ld))
    fail("symmetric=True requires Y to be the same array as X");
  RbfProblem<T> p;
  p.x = x.ptr<T>();
  p.ldx = x.ld;
  p.nx = x.rows;
  p.y = y.ptr<T>();
  p.ldy = y.ld;
  p.ny = y.rows;
  p.d = x.cols;
  p.gamma = static_cast<T>(gamma);
  p.symmetric = symmetric;
  return p;
}

template <typename T>
void matvec_typed(const ArrayView& x, const ArrayView& y, const ArrayView& v, const ArrayView& out, double gamma,
                  bool symmetric, Backend backend, int64_t stream) {
  const RbfProblem<T> p = make_problem<T>(x, y, gamma, symmetric);
  MatvecArgs<T> a;
  a.v = v.ptr<T>();
  a.ldv = v.ld;
  a.k = v.cols;
  a.out = out.ptr<T>();
  a.ldo = out.ld;
  if (p.nx == 0 || a.k == 0) return;
  py::gil_scoped_release release;
  if (backend == Backend::emulated) return emulated::rbf_matvec<T>(p, a);
  if (x.device == Device::cpu) return cpu::rbf_matvec<T>(p, a);
#ifdef DLMSVDD_WITH_CUDA
  cuda::rbf_matvec<T>(p, a, reinterpret_cast<void*>(stream));
#endif
  (void)stream;
}

template <typename T>
void gram_typed(const ArrayView& x, const ArrayView& y, const ArrayView& out, double gamma, bool symmetric,
                bool distances_only, Backend backend, int64_t stream) {
  const RbfProblem<T> p = make_problem<T>(x, y, gamma, symmetric);
  GramArgs<T> a;
  a.out = out.ptr<T>();
  a.ldo = out.ld;
  a.distances_only = distances_only;
  if (p.nx == 0 || p.ny == 0) return;
  py::gil_scoped_release release;
  if (backend == Backend::emulated) return emulated::rbf_gram<T>(p, a);
  if (x.device == Device::cpu) return cpu::rbf_gram<T>(p, a);
#ifdef DLMSVDD_WITH_CUDA
  cuda::rbf_gram<T>(p, a, reinterpret_cast<void*>(stream));
#endif
  (void)stream;
}

void rbf_matvec(py::handle X, py::handle Y, py::handle V, py::handle out, double gamma, bool symmetric,
                int64_t stream, Backend backend) {
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView y = view_array(Y, "Y", 2, 2, stream);
  const ArrayView v = view_array(V, "V", 1, 2, stream);
  const ArrayView o = view_array(out, "out", 1, 2, stream);
  for (const ArrayView* a : {&y, &v, &o}) require_same(x, *a);
  require_writable(o, {&x, &y, &v});
  if (v.rows != y.rows) fail("V has " + std::to_string(v.rows) + " rows but Y has " + std::to_string(y.rows));
  if (o.ndim != v.ndim || o.rows != x.rows || o.cols != v.cols)
    fail("out must have shape (" + std::to_string(x.rows) + (v.ndim == 2 ? ", " + std::to_string(v.cols) : std::string(",")) + ")");
  select_device(x, backend);
  if (x.dtype == DType::float32)
    matvec_typed<float>(x, y, v, o, gamma, symmetric, backend, stream);
  else
    matvec_typed<double>(x, y, v, o, gamma, symmetric, backend, stream);
}

void rbf_gram(py::handle X, py::handle Y, py::handle out, double gamma, bool symmetric, bool distances_only,
              int64_t stream, Backend backend) {
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView y = view_array(Y, "Y", 2, 2, stream);
  const ArrayView o = view_array(out, "out", 2, 2, stream);
  for (const ArrayView* a : {&y, &o}) require_same(x, *a);
  require_writable(o, {&x, &y});
  if (o.rows != x.rows || o.cols != y.rows)
    fail("out must have shape (" + std::to_string(x.rows) + ", " + std::to_string(y.rows) + ")");
  select_device(x, backend);
  if (x.dtype == DType::float32)
    gram_typed<float>(x, y, o, gamma, symmetric, distances_only, backend, stream);
  else
    gram_typed<double>(x, y, o, gamma, symmetric, distances_only, backend, stream);
}

// ---- the lp-SVDD dual

template <typename T>
DualCoefs<T> coefs_from(const py::dict& d) {
  DualCoefs<T> c;
  c.q = d["q"].cast<T>();
  c.pen_normal = d["pen_normal"].cast<T>();
  c.pen_anomaly = d["pen_anomaly"].cast<T>();
  c.mu_normal = d["mu_normal"].cast<T>();
  c.mu_anomaly = d["mu_anomaly"].cast<T>();
  return c;
}

// The scratch of the CUDA (or emulated) kernels: a contiguous float64 array on
// like's device of at least `need` bytes.
ArrayView device_workspace(py::handle workspace, const ArrayView& like, size_t need, const std::string& sizing,
                           int64_t stream) {
  const std::string expected = "a contiguous float64 array on " + like.name + "'s device of at least " +
                               std::to_string(need) + " bytes (" + sizing + ")";
  if (workspace.is_none()) fail("workspace: the CUDA and emulated kernels need " + expected);
  ArrayView w = view_array(workspace, "workspace", 1, 1, stream);
  if (w.dtype != DType::float64 || w.device != like.device || w.device_id != like.device_id ||
      (w.rows > 1 && w.ld != 1) || size_t(w.rows) * sizeof(double) < need)
    fail("workspace: must be " + expected);
  return w;
}

// alpha, Ka and t: 1-D, same length, dtype and device, unit stride; where they
// run; and the scratch of the CUDA (or emulated) oracle, which the CPU
// routines do not need.
struct DualState {
  ArrayView alpha, ka, t, workspace;
  Backend backend = Backend::native;
  int64_t stream = 0;

  bool on_cpu() const { return backend == Backend::native && alpha.device == Device::cpu; }
  void* cuda_stream() const { return reinterpret_cast<void*>(stream); }
};

DualState dual_state(py::handle alpha, py::handle ka, py::handle t, py::handle workspace, bool cuda_emulation,
                     int64_t stream) {
  DualState s{view_array(alpha, "alpha", 1, 1, stream), view_array(ka, "Ka", 1, 1, stream),
              view_array(t, "t", 1, 1, stream), ArrayView{}, cuda_emulation ? Backend::emulated : Backend::native,
              stream};
  for (const ArrayView* a : {&s.ka, &s.t}) require_same(s.alpha, *a);
  for (const ArrayView* a : {&s.alpha, &s.ka, &s.t}) {
    if (a->rows != s.alpha.rows) fail(a->name + ": length " + std::to_string(a->rows) + " differs from alpha's");
    if (a->rows > 1 && a->ld != 1) fail(a->name + ": must be contiguous");
  }
  select_device(s.alpha, s.backend);
  if (s.on_cpu()) return s;
  s.workspace = device_workspace(workspace, s.alpha, dual_oracle_workspace_bytes(s.alpha.rows),
                                 "dual_oracle_workspace_bytes(n)", stream);
  require_writable(s.workspace, {&s.alpha, &s.ka, &s.t});
  return s;
}

template <typename T>
py::dict oracle_dict(const OracleResult<T>& r, const DualCoefs<T>& c) {
  py::dict d;
  d["fw_normal"] = r.fw_normal;
  d["fw_anomaly"] = r.fw_anomaly;
  d["away_normal"] = r.away_normal;
  d["away_anomaly"] = r.away_anomaly;
  d["g_fw_normal"] = double(r.g_fw_normal);
  d["g_fw_anomaly"] = double(r.g_fw_anomaly);
  d["g_away_normal"] = double(r.g_away_normal);
  d["g_away_anomaly"] = double(r.g_away_anomaly);
  d["alpha_dot_g"] = r.alpha_dot_g;
  d["quadratic"] = r.quadratic;
  d["penalty"] = r.penalty;
  d["objective"] = r.objective();
  d["gap"] = r.gap(c);
  return d;
}

template <typename T>
py::dict dual_oracle_typed(const DualState& s, const py::dict& coefs) {
  const DualCoefs<T> c = coefs_from<T>(coefs);
  const T *alpha = s.alpha.ptr<T>(), *ka = s.ka.ptr<T>(), *t = s.t.ptr<T>();
  const int64_t n = s.alpha.rows;
  OracleResult<T> r;
  {
    py::gil_scoped_release release;
    if (s.backend == Backend::emulated) {
      r = emulated::dual_oracle<T>(alpha, ka, t, n, c, s.workspace.data);
    } else if (s.on_cpu()) {
      r = cpu::dual_oracle<T>(alpha, ka, t, n, c);
    } else {
#ifdef DLMSVDD_WITH_CUDA
      r = cuda::dual_oracle<T>(alpha, ka, t, n, c, s.workspace.data, s.cuda_stream());
#endif
    }
  }
  return oracle_dict(r, c);
}

py::dict dual_oracle(py::handle alpha, py::handle ka, py::handle t, const py::dict& coefs, py::handle workspace,
                     bool cuda_emulation, int64_t stream) {
  const DualState s = dual_state(alpha, ka, t, workspace, cuda_emulation, stream);
  return s.alpha.dtype == DType::float32 ? dual_oracle_typed<float>(s, coefs) : dual_oracle_typed<double>(s, coefs);
}

// Kernel columns from `source` on the state's device (and back end).
template <typename T>
std::unique_ptr<ColumnSource<T>> column_source(const DualState& s, const std::string& source, py::handle matrix,
                                               double gamma, py::handle cache) {
  const int64_t n = s.alpha.rows;
  if (source != "dense" && source != "features" && source != "factor")
    fail("source must be 'dense', 'features' or 'factor', got '" + source + "'");
  const ArrayView m = view_array(matrix, source == "dense" ? "K" : source == "features" ? "X" : "Z", 2, 2, s.stream);
  require_same(s.alpha, m);
  if (m.rows != n) fail(m.name + ": has " + std::to_string(m.rows) + " rows, alpha has " + std::to_string(n));
  if (source == "dense") {
    if (m.cols != n) fail("K must be square");
    return std::make_unique<DenseColumns<T>>(m.ptr<T>(), m.ld);
  }
  const ArrayView store = view_array(cache, "cache", 2, 2, s.stream);
  require_same(s.alpha, store);
  require_writable(store, {&s.alpha, &s.ka, &m});
  if (store.rows < 2 || store.cols != n || (store.rows > 1 && store.ld != n))
    fail("cache must be a contiguous (slots >= 2, n) array");
  const bool features = source == "features";
  if (features && !(gamma > 0)) fail("gamma must be positive");
  T* storage = store.ptr<T>();
  const int64_t slots = store.rows;
  const T* rows = m.ptr<T>();  // X or Z
  if (s.backend == Backend::emulated)
    return features ? emulated::feature_columns<T>(storage, slots, rows, m.ld, n, m.cols, T(gamma))
                    : emulated::factor_columns<T>(storage, slots, rows, m.ld, n, m.cols);
  if (s.on_cpu()) {
    if (features) return std::make_unique<cpu::FeatureColumns<T>>(storage, slots, rows, m.ld, n, m.cols, T(gamma));
    return std::make_unique<cpu::FactorColumns<T>>(storage, slots, rows, m.ld, n, m.cols);
  }
#ifdef DLMSVDD_WITH_CUDA
  return features ? cuda::feature_columns<T>(storage, slots, rows, m.ld, n, m.cols, T(gamma), s.cuda_stream())
                  : cuda::factor_columns<T>(storage, slots, rows, m.ld, n, m.cols, s.cuda_stream());
#else
  fail("alpha: is a CUDA array, but dlmsvdd_ext was built without CUDA");  // select_device refused it already
#endif
}

template <typename T>
py::dict fw_solve_typed(const DualState& s, const py::dict& coefs, const std::string& method, int64_t max_iter,
                        double tol, int64_t step_offset, const ArrayView& hist_obj, const ArrayView& hist_gap,
                        const std::string& source, py::handle matrix, double gamma, py::handle cache) {
  FwOptions o;
  if (method == "vanilla") o.method = FwMethod::vanilla;
  else if (method == "pairwise") o.method = FwMethod::pairwise;
  else fail("method must be 'vanilla' or 'pairwise', got '" + method + "'");
  o.max_iter = max_iter;
  o.tol = tol;
  o.step_offset = step_offset;
  const std::unique_ptr<ColumnSource<T>> columns = column_source<T>(s, source, matrix, gamma, cache);
  const DualCoefs<T> c = coefs_from<T>(coefs);  // reads Python objects: before releasing the GIL
  T *alpha = s.alpha.ptr<T>(), *ka = s.ka.ptr<T>();
  const T* t = s.t.ptr<T>();
  const int64_t n = s.alpha.rows;
  double *ho = hist_obj.ptr<double>(), *hg = hist_gap.ptr<double>();
  FwReport rep;
  {
    py::gil_scoped_release release;
    if (s.backend == Backend::emulated) {
      rep = emulated::fw_solve<T>(*columns, alpha, ka, t, n, c, o, ho, hg, s.workspace.data);
    } else if (s.on_cpu()) {
      rep = cpu::fw_solve<T>(*columns, alpha, ka, t, n, c, o, ho, hg);
    } else {
#ifdef DLMSVDD_WITH_CUDA
      rep = cuda::fw_solve<T>(*columns, alpha, ka, t, n, c, o, ho, hg, s.workspace.data, s.cuda_stream());
#endif
    }
  }
  py::dict d;
  d["n_iter"] = rep.n_iter;
  d["converged"] = rep.converged;
  if (auto* cached = dynamic_cast<CachedColumns<T>*>(columns.get())) {
    d["cache_hits"] = cached->hits();
    d["cache_misses"] = cached->misses();
  }
  return d;
}

py::dict fw_solve(py::handle alpha, py::handle ka, py::handle t, const py::dict& coefs, const std::string& method,
                  int64_t max_iter, double tol, int64_t step_offset, py::handle history_objective,
                  py::handle history_gap, const std::string& source, py::handle matrix, double gamma,
                  py::handle cache, py::handle workspace, bool cuda_emulation, int64_t stream) {
  const DualState s = dual_state(alpha, ka, t, workspace, cuda_emulation, stream);
  const ArrayView ho = view_array(history_objective, "history_objective", 1, 1);
  const ArrayView hg = view_array(history_gap, "history_gap", 1, 1);
  for (const ArrayView* h : {&ho, &hg}) {
    if (h->dtype != DType::float64 || h->device != Device::cpu || h->rows < max_iter + 1 || (h->rows > 1 && h->ld != 1))
      fail(h->name + ": must be a contiguous float64 CPU array of at least max_iter + 1 entries");
    require_writable(*h, {&s.alpha});
  }
  if (max_iter < 0) fail("max_iter must be >= 0");
  return s.alpha.dtype == DType::float32
             ? fw_solve_typed<float>(s, coefs, method, max_iter, tol, step_offset, ho, hg, source, matrix, gamma, cache)
             : fw_solve_typed<double>(s, coefs, method, max_iter, tol, step_offset, ho, hg, source, matrix, gamma, cache);
}

// ---- the fast Walsh-Hadamard transform

// True when the memory spans of a and b (first to last element) intersect.
bool overlapping(const ArrayView& a, const ArrayView& b) {
  if (a.rows == 0 || b.rows == 0) return false;
  const size_t elem = a.dtype == DType::float32 ? sizeof(float) : sizeof(double);
  auto span = [&](const ArrayView& v) {
    const auto begin = reinterpret_cast<uintptr_t>(v.data);
    return std::pair{begin, begin + size_t((v.rows - 1) * v.ld + v.cols) * elem};
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

template <typename T>
void fwht_typed(const ArrayView& x, const ArrayView& out, bool normalized, Backend backend, int64_t stream) {
  FwhtArgs<T> a;
  a.x = x.ptr<T>();
  a.ldx = x.ld;
  a.out = out.ptr<T>();
  a.ldo = out.ld;
  a.rows = x.rows;
  a.length = x.cols;
  a.normalized = normalized;
  try {
    fwht_log2_length(a);  // with the GIL held, so the error is an ordinary ValueError
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (a.rows == 0) return;
  py::gil_scoped_release release;
  if (backend == Backend::emulated) return emulated::fwht<T>(a);
  if (x.device == Device::cpu) return cpu::fwht<T>(a);
#ifdef DLMSVDD_WITH_CUDA
  cuda::fwht<T>(a, reinterpret_cast<void*>(stream));
#endif
  (void)stream;
}

void fwht(py::handle X, py::handle out, bool normalized, int64_t stream, bool cuda_emulation) {
  const ArrayView x = view_array(X, "x", 2, 2, stream);
  const ArrayView o = view_array(out, "out", 2, 2, stream);
  require_same(x, o);
  if (o.rows != x.rows || o.cols != x.cols)
    fail("out must have the shape of x, (" + std::to_string(x.rows) + ", " + std::to_string(x.cols) + ")");
  if (o.read_only) fail("out: is read-only");
  // In place is out == x exactly; any other overlap would read rows already written.
  const bool in_place = o.data == x.data && (o.ld == x.ld || x.rows <= 1);
  if (!in_place && overlapping(x, o)) fail("out: overlaps x without being x (pass out=x for in place)");
  const Backend backend = cuda_emulation ? Backend::emulated : Backend::native;
  select_device(x, backend);
  if (x.dtype == DType::float32)
    fwht_typed<float>(x, o, normalized, backend, stream);
  else
    fwht_typed<double>(x, o, normalized, backend, stream);
}

// ---- the structured feature maps (SORF, Fastfood) on the FWHT

template <typename T>
void features_typed(StructuredMap kind, const ArrayView& x, const ArrayView& diag, const ArrayView& perm,
                    const ArrayView& offset, const ArrayView& out, double scale, double out_scale, Backend backend,
                    int64_t stream) {
  FeatureMapArgs<T> a;
  a.kind = kind;
  a.x = x.ptr<T>();
  a.ldx = x.ld;
  a.rows = x.rows;
  a.d = x.cols;
  a.d_pad = diag.cols;
  a.blocks = diag.rows / 3;
  a.diag = diag.ptr<T>();
  a.perm = perm.ptr<T>();
  a.offset = offset.ptr<T>();
  a.scale = static_cast<T>(scale);
  a.out_scale = static_cast<T>(out_scale);
  a.out = out.ptr<T>();
  a.ldo = out.ld;
  a.m = offset.rows;
  const bool on_cpu = backend == Backend::native && x.device == Device::cpu;
  try {
    feature_map_log2_pad(a, on_cpu ? kFwhtMaxLog2 : kCudaFeatureMapMaxLog2);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (a.rows == 0) return;
  py::gil_scoped_release release;
  if (backend == Backend::emulated) return emulated::structured_features<T>(a);
  if (on_cpu) return cpu::structured_features<T>(a);
#ifdef DLMSVDD_WITH_CUDA
  cuda::structured_features<T>(a, reinterpret_cast<void*>(stream));
#endif
  (void)stream;
}

void structured_features(const std::string& kind, py::handle X, py::handle diag, py::handle perm, py::handle offset,
                         py::handle out, double scale, double out_scale, int64_t stream, bool cuda_emulation) {
  if (kind != "sorf" && kind != "fastfood") fail("kind must be 'sorf' or 'fastfood', got '" + kind + "'");
  const StructuredMap k = kind == "sorf" ? StructuredMap::sorf : StructuredMap::fastfood;
  const ArrayView x = view_array(X, "x", 2, 2, stream);
  const ArrayView g = view_array(diag, "diag", 2, 2, stream);
  const ArrayView o = view_array(offset, "offset", 1, 1, stream);
  const ArrayView z = view_array(out, "out", 2, 2, stream);
  ArrayView p;
  if (k == StructuredMap::fastfood) p = view_array(perm, "perm", 2, 2, stream);
  for (const ArrayView* a : {&g, &o, &z}) require_same(x, *a);
  require_writable(z, {&x, &g, &o});
  const int64_t dp = g.cols, blocks = g.rows / 3;
  if (g.rows % 3 != 0 || (g.rows > 1 && g.ld != dp)) fail("diag: must be a contiguous (3 * blocks, d_pad) array");
  if (k == StructuredMap::fastfood) {
    require_same(x, p);
    if (p.rows != blocks || p.cols != dp || (p.rows > 1 && p.ld != dp))
      fail("perm: must be a contiguous (blocks, d_pad) = (" + std::to_string(blocks) + ", " + std::to_string(dp) +
           ") array");
  }
  if (o.rows > 1 && o.ld != 1) fail("offset: must be contiguous");
  if (z.rows != x.rows || z.cols != o.rows)
    fail("out must have shape (" + std::to_string(x.rows) + ", " + std::to_string(o.rows) + ")");
  if (overlapping(x, z)) fail("out: overlaps x");
  const Backend backend = cuda_emulation ? Backend::emulated : Backend::native;
  select_device(x, backend);
  if (x.dtype == DType::float32)
    features_typed<float>(k, x, g, p, o, z, scale, out_scale, backend, stream);
  else
    features_typed<double>(k, x, g, p, o, z, scale, out_scale, backend, stream);
}

void vector_cos(py::handle X, py::handle out) {
  const ArrayView x = view_array(X, "x", 1, 1);
  const ArrayView o = view_array(out, "out", 1, 1);
  require_same(x, o);
  require_writable(o, {&x});
  if (x.device != Device::cpu) fail("x: vector_cos runs on the CPU");
  if (o.rows != x.rows || (x.rows > 1 && (x.ld != 1 || o.ld != 1))) fail("x and out must be contiguous, same length");
  py::gil_scoped_release release;
  if (x.dtype == DType::float32)
    cpu::vector_cos(x.ptr<float>(), o.ptr<float>(), x.rows);
  else
    cpu::vector_cos(x.ptr<double>(), o.ptr<double>(), x.rows);
}

// ---- RPCholesky of the RBF kernel

size_t element_size(DType dtype) { return dtype == DType::float32 ? sizeof(float) : sizeof(double); }

template <typename T>
int64_t rpcholesky_typed(const ArrayView& x, const ArrayView& l, int64_t* pivots, double gamma, uint64_t seed,
                         int64_t block_size, const ArrayView& workspace, Backend backend, int64_t stream) {
  RpcholeskyProblem<T> p;
  p.x = x.ptr<T>();
  p.ldx = x.ld;
  p.n = x.rows;
  p.d = x.cols;
  p.gamma = static_cast<T>(gamma);
  p.l = l.ptr<T>();
  p.ldl = l.ld;
  p.rank = l.cols;
  p.pivots = pivots;
  p.seed = seed;
  p.block_size = block_size;
  py::gil_scoped_release release;
  if (backend == Backend::emulated) return emulated::rpcholesky<T>(p, workspace.data);
  if (x.device == Device::cpu) return cpu::rpcholesky<T>(p);
#ifdef DLMSVDD_WITH_CUDA
  return cuda::rpcholesky<T>(p, workspace.data, reinterpret_cast<void*>(stream));
#else
  (void)stream;
  return 0;  // unreachable: select_device refuses CUDA arrays in this build
#endif
}

int64_t rpcholesky(py::handle X, py::handle L, py::handle pivots, double gamma, uint64_t seed, int64_t block_size,
                   py::handle workspace, int64_t stream, bool cuda_emulation) {
  const Backend backend = cuda_emulation ? Backend::emulated : Backend::native;
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView l = view_array(L, "L", 2, 2, stream);
  require_same(x, l);
  require_writable(l, {&x});
  const int64_t n = x.rows, rank = l.cols;
  if (x.cols < 1) fail("X has no features (d = 0)");
  if (l.rows != n) fail("L has " + std::to_string(l.rows) + " rows but X has " + std::to_string(n));
  if (rank < 1 || rank > n)
    fail("rank (L's columns) must be between 1 and N = " + std::to_string(n) + ", got " + std::to_string(rank));
  if (!(gamma > 0) || !std::isfinite(gamma)) fail("gamma must be a positive finite number, got " + std::to_string(gamma));
  if (block_size < 1) fail("block_size must be at least 1, got " + std::to_string(block_size));
  // The pivots are sampled on the host, whatever the device: a host int64 array.
  if (!py::isinstance<py::array>(pivots)) fail("pivots: must be a numpy int64 array");
  auto piv = py::reinterpret_borrow<py::array>(pivots);
  if (!piv.dtype().is(py::dtype::of<int64_t>()) || piv.ndim() != 1 || piv.shape(0) < rank ||
      !(piv.flags() & py::array::c_style) || !piv.writeable())
    fail("pivots: must be a writable contiguous 1-D numpy int64 array of at least rank = " + std::to_string(rank) +
         " entries");
  select_device(x, backend);
  ArrayView w;
  if (backend == Backend::emulated || x.device == Device::cuda) {
    w = device_workspace(workspace, x,
                         rpcholesky_workspace_bytes(n, x.cols, rank, block_size, element_size(x.dtype)),
                         "rpcholesky_workspace_bytes(n, d, rank, block_size, itemsize)", stream);
    require_writable(w, {&x, &l});
  }
  int64_t* out = static_cast<int64_t*>(piv.mutable_data());
  return x.dtype == DType::float32
             ? rpcholesky_typed<float>(x, l, out, gamma, seed, block_size, w, backend, stream)
             : rpcholesky_typed<double>(x, l, out, gamma, seed, block_size, w, backend, stream);
}

cpu::Isa isa_from_name(const std::string& name) {
  for (cpu::Isa isa : {cpu::Isa::generic, cpu::Isa::avx2, cpu::Isa::avx512})
    if (name == cpu::isa_name(isa)) return isa;
  fail("unknown instruction set '" + name + "' (generic, avx2 or avx512)");
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dlmsvdd compiled kernels (use dlmsvdd_ext.ops, which validates and allocates)";

  m.def("built_with_cuda", [] {
#ifdef DLMSVDD_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
  m.def("cuda_available", [] {
#ifdef DLMSVDD_WITH_CUDA
    return cuda::device_available();
#else
    return false;
#endif
  });

  m.def("cpu_isa", [] { return std::string(cpu::isa_name(cpu::active_isa())); },
        "The instruction set the CPU kernels use now.");
  m.def("supported_cpu_isas", [] {
    std::vector<std::string> names;
    for (int i = 0; i <= static_cast<int>(cpu::best_supported_isa()); ++i)
      names.emplace_back(cpu::isa_name(static_cast<cpu::Isa>(i)));
    return names;
  });
  m.def("set_cpu_isa", [](const std::string& name) { cpu::set_active_isa(isa_from_name(name)); },
        py::arg("name"));

  m.def("dual_oracle", &dual_oracle, py::arg("alpha"), py::arg("Ka"), py::arg("t"), py::arg("coefs"),
        py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false, py::arg("stream") = 0,
        "One pass over the dual: objective, Frank-Wolfe gap, linear oracle and away atoms.");
  m.def("fw_solve", &fw_solve, py::arg("alpha"), py::arg("Ka"), py::arg("t"), py::arg("coefs"), py::arg("method"),
        py::arg("max_iter"), py::arg("tol"), py::arg("step_offset"), py::arg("history_objective"),
        py::arg("history_gap"), py::arg("source"), py::arg("matrix"), py::arg("gamma") = 0.0,
        py::arg("cache") = py::none(), py::arg("workspace") = py::none(), py::arg("cuda_emulation") = false,
        py::arg("stream") = 0, "Frank-Wolfe (vanilla or pairwise) in place on alpha and Ka.");
  m.def("pairwise_step",
        [](double g_s, double g_a, double alpha_s, double alpha_a, double curvature, double pen, double q) {
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

  m.def("fwht", &fwht, py::arg("x"), py::arg("out"), py::arg("normalized"), py::arg("stream") = 0,
        py::arg("cuda_emulation") = false,
        "out = H x over each row (Sylvester-order Hadamard, entries +-1, over sqrt(L) when normalized); "
        "out may be x.");

  m.def("structured_features", &structured_features, py::arg("kind"), py::arg("x"), py::arg("diag"),
        py::arg("perm"), py::arg("offset"), py::arg("out"), py::arg("scale"), py::arg("out_scale"),
        py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        "The SORF or Fastfood features of the rows of x into out (see common/feature_map_params.h).");
  m.attr("cuda_feature_map_max_pad") = int64_t(1) << kCudaFeatureMapMaxLog2;
  m.def("vector_cos", &vector_cos, py::arg("x"), py::arg("out"),
        "out = cos(x) by the CPU feature maps' vectorised cosine (for tests).");

  m.def("rpcholesky", &rpcholesky, py::arg("X"), py::arg("L"), py::arg("pivots"), py::arg("gamma"), py::arg("seed"),
        py::arg("block_size"), py::arg("workspace") = py::none(), py::arg("stream") = 0,
        py::arg("cuda_emulation") = false,
        "Randomly pivoted Cholesky of the RBF kernel of X: fills L (N x rank) and pivots (host int64) and returns "
        "the rank reached.");
  m.def("rpcholesky_workspace_bytes",
        [](int64_t n, int64_t d, int64_t rank, int64_t block_size, int64_t itemsize) {
          if (n < 0 || d < 0 || rank < 0 || block_size < 1 || (itemsize != 4 && itemsize != 8))
            fail("rpcholesky_workspace_bytes: needs n, d, rank >= 0, block_size >= 1 and itemsize 4 or 8");
          return rpcholesky_workspace_bytes(n, d, rank, block_size, size_t(itemsize));
        },
        py::arg("n"), py::arg("d"), py::arg("rank"), py::arg("block_size"), py::arg("itemsize"),
        "Bytes of scratch the CUDA (and emulated) rpcholesky needs.");

  for (auto [prefix, backend] : {std::pair{"", Backend::native}, std::pair{"emulated_", Backend::emulated}}) {
    const Backend b = backend;
    m.def((std::string(prefix) + "rbf_matvec").c_str(),
          [b](py::handle X, py::handle Y, py::handle V, py::handle out, double gamma, bool symmetric, int64_t stream) {
            rbf_matvec(X, Y, V, out, gamma, symmetric, stream, b);
          },
          py::arg("X"), py::arg("Y"), py::arg("V"), py::arg("out"), py::arg("gamma"), py::arg("symmetric") = false,
          py::arg("stream") = 0, "out = K(X, Y) @ V with K_ij = exp(-gamma ||x_i - y_j||^2).");
    m.def((std::string(prefix) + "rbf_gram").c_str(),
          [b](py::handle X, py::handle Y, py::handle out, double gamma, bool symmetric, bool distances_only,
              int64_t stream) { rbf_gram(X, Y, out, gamma, symmetric, distances_only, stream, b); },
          py::arg("X"), py::arg("Y"), py::arg("out"), py::arg("gamma"), py::arg("symmetric") = false,
          py::arg("distances_only") = false, py::arg("stream") = 0,
          "out = K(X, Y), or the squared distances with distances_only.");
  }
}
