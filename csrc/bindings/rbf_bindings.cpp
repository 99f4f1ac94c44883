// The RBF kernel's bindings: K(X, Y) @ V and the Gram matrix K(X, Y).
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/rbf_params.h"
#include "cpu/rbf_cpu.h"
#include "cuda/rbf_cuda.h"

namespace dlmsvdd::bindings {

namespace {

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
  route(backend, [&] { cpu::rbf_matvec<T>(p, a); }, [&] { emulated::rbf_matvec<T>(p, a); },
        [&] { cuda::rbf_matvec<T>(p, a, cuda_stream(stream)); });
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
  route(backend, [&] { cpu::rbf_gram<T>(p, a); }, [&] { emulated::rbf_gram<T>(p, a); },
        [&] { cuda::rbf_gram<T>(p, a, cuda_stream(stream)); });
}

void rbf_matvec(py::handle X, py::handle Y, py::handle V, py::handle out, double gamma, bool symmetric,
                int64_t stream, bool cuda_emulation) {
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView y = view_array(Y, "Y", 2, 2, stream);
  const ArrayView v = view_array(V, "V", 1, 2, stream);
  const ArrayView o = view_array(out, "out", 1, 2, stream);
  for (const ArrayView* a : {&y, &v, &o}) require_same(x, *a);
  require_writable(o, {&x, &y, &v});
  if (v.rows != y.rows) fail("V has " + std::to_string(v.rows) + " rows but Y has " + std::to_string(y.rows));
  if (o.ndim != v.ndim || o.rows != x.rows || o.cols != v.cols)
    fail("out must have shape (" + std::to_string(x.rows) + (v.ndim == 2 ? ", " + std::to_string(v.cols) : std::string(",")) + ")");
  const Backend backend = backend_for(x, cuda_emulation);
  if (x.dtype == DType::float32)
    matvec_typed<float>(x, y, v, o, gamma, symmetric, backend, stream);
  else
    matvec_typed<double>(x, y, v, o, gamma, symmetric, backend, stream);
}

void rbf_gram(py::handle X, py::handle Y, py::handle out, double gamma, bool symmetric, bool distances_only,
              int64_t stream, bool cuda_emulation) {
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView y = view_array(Y, "Y", 2, 2, stream);
  const ArrayView o = view_array(out, "out", 2, 2, stream);
  for (const ArrayView* a : {&y, &o}) require_same(x, *a);
  require_writable(o, {&x, &y});
  if (o.rows != x.rows || o.cols != y.rows)
    fail("out must have shape (" + std::to_string(x.rows) + ", " + std::to_string(y.rows) + ")");
  const Backend backend = backend_for(x, cuda_emulation);
  if (x.dtype == DType::float32)
    gram_typed<float>(x, y, o, gamma, symmetric, distances_only, backend, stream);
  else
    gram_typed<double>(x, y, o, gamma, symmetric, distances_only, backend, stream);
}

}  // namespace

void bind_rbf(py::module_& m) {
  m.def("rbf_matvec", &rbf_matvec, py::arg("X"), py::arg("Y"), py::arg("V"), py::arg("out"), py::arg("gamma"),
        py::arg("symmetric") = false, py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        "out = K(X, Y) @ V with K_ij = exp(-gamma ||x_i - y_j||^2).");
  m.def("rbf_gram", &rbf_gram, py::arg("X"), py::arg("Y"), py::arg("out"), py::arg("gamma"),
        py::arg("symmetric") = false, py::arg("distances_only") = false, py::arg("stream") = 0,
        py::arg("cuda_emulation") = false, "out = K(X, Y), or the squared distances with distances_only.");
}

}  // namespace dlmsvdd::bindings
