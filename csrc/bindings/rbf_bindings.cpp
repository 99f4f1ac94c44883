// The RBF kernel's bindings: K(X, Y) @ V and the Gram matrix K(X, Y) on the CPU, their checks
// for every device, and the GPU epilogues of dlmsvdd_ext/rbf_gemm.py (on CUDA tensors the
// products are cuBLAS's, through torch; these kernels make kernel values of them).
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
  return {.x = x.ptr<T>(), .ldx = x.ld, .nx = x.rows, .y = y.ptr<T>(), .ldy = y.ld, .ny = y.rows, .d = x.cols,
          .gamma = static_cast<T>(gamma), .symmetric = symmetric};
}

// The CUDA and emulated back ends compute these products as a matrix product and an epilogue
// (dlmsvdd_ext/rbf_gemm.py): here they only check the arguments (check_only).
void cpu_only(Backend backend, bool check_only) {
  if (backend != Backend::cpu && !check_only)
    throw std::logic_error("dlmsvdd: RBF products on CUDA (or emulated) arrays go through dlmsvdd_ext.rbf_gemm");
}

template <typename T>
void matvec_typed(const ArrayView& x, const ArrayView& y, const ArrayView& v, const ArrayView& out, double gamma,
                  bool symmetric, Backend backend, bool check_only) {
  const RbfProblem<T> p = make_problem<T>(x, y, gamma, symmetric);
  const MatvecArgs<T> a{.v = v.ptr<T>(), .ldv = v.ld, .k = v.cols, .out = out.ptr<T>(), .ldo = out.ld};
  cpu_only(backend, check_only);
  if (check_only || p.nx == 0 || a.k == 0) return;
  py::gil_scoped_release release;
  cpu::rbf_matvec<T>(p, a);
}

template <typename T>
void gram_typed(const ArrayView& x, const ArrayView& y, const ArrayView& out, double gamma, bool symmetric,
                bool distances_only, Backend backend, bool check_only) {
  const RbfProblem<T> p = make_problem<T>(x, y, gamma, symmetric);
  const GramArgs<T> a{.out = out.ptr<T>(), .ldo = out.ld, .distances_only = distances_only};
  cpu_only(backend, check_only);
  if (check_only || p.nx == 0 || p.ny == 0) return;
  py::gil_scoped_release release;
  cpu::rbf_gram<T>(p, a);
}

void rbf_matvec(py::handle X, py::handle Y, py::handle V, py::handle out, double gamma, bool symmetric,
                int64_t stream, bool cuda_emulation, bool check_only) {
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
    matvec_typed<float>(x, y, v, o, gamma, symmetric, backend, check_only);
  else
    matvec_typed<double>(x, y, v, o, gamma, symmetric, backend, check_only);
}

void rbf_gram(py::handle X, py::handle Y, py::handle out, double gamma, bool symmetric, bool distances_only,
              int64_t stream, bool cuda_emulation, bool check_only) {
  const ArrayView x = view_array(X, "X", 2, 2, stream);
  const ArrayView y = view_array(Y, "Y", 2, 2, stream);
  const ArrayView o = view_array(out, "out", 2, 2, stream);
  for (const ArrayView* a : {&y, &o}) require_same(x, *a);
  require_writable(o, {&x, &y});
  if (o.rows != x.rows || o.cols != y.rows)
    fail("out must have shape (" + std::to_string(x.rows) + ", " + std::to_string(y.rows) + ")");
  const Backend backend = backend_for(x, cuda_emulation);
  if (x.dtype == DType::float32)
    gram_typed<float>(x, y, o, gamma, symmetric, distances_only, backend, check_only);
  else
    gram_typed<double>(x, y, o, gamma, symmetric, distances_only, backend, check_only);
}

// ---- the GPU epilogues (cuda/rbf_epilogue_kernels.cuh)

// dots (rows, cols) with the squared norms of its rows and columns, checked.
template <typename T>
RbfDots<T> make_dots(const ArrayView& dots, const ArrayView& xn, const ArrayView& yn, double gamma,
                     bool distances_only) {
  if (!(gamma > 0) || !std::isfinite(gamma)) fail("gamma must be a positive finite number, got " + std::to_string(gamma));
  if (xn.ndim != 1 || xn.rows != dots.rows || (xn.rows > 1 && xn.ld != 1))
    fail("x_norm must be contiguous of shape (" + std::to_string(dots.rows) + ",)");
  if (yn.ndim != 1 || yn.rows != dots.cols || (yn.rows > 1 && yn.ld != 1))
    fail("y_norm must be contiguous of shape (" + std::to_string(dots.cols) + ",)");
  return {.dots = dots.ptr<T>(), .ldd = dots.ld, .rows = dots.rows, .cols = dots.cols, .x_norm = xn.ptr<T>(),
          .y_norm = yn.ptr<T>(), .gamma = static_cast<T>(gamma), .distances_only = distances_only};
}

void rbf_dots_to_kernel(py::handle dots, py::handle x_norm, py::handle y_norm, double gamma, bool distances_only,
                        int64_t stream, bool cuda_emulation, py::handle out) {
  const ArrayView d = view_array(dots, "dots", 2, 2, stream);
  const ArrayView xn = view_array(x_norm, "x_norm", 1, 1, stream);
  const ArrayView yn = view_array(y_norm, "y_norm", 1, 1, stream);
  for (const ArrayView* a : {&xn, &yn}) require_same(d, *a);
  const bool in_place = out.is_none();
  const ArrayView o = in_place ? d : view_array(out, "out", 2, 2, stream);
  if (!in_place) {
    require_same(d, o);
    if (o.rows != d.rows || o.cols != d.cols)
      fail("out must have dots' shape (" + std::to_string(d.rows) + ", " + std::to_string(d.cols) + ")");
    require_writable(o, {&d, &xn, &yn});
  } else {
    require_writable(d, {&xn, &yn});
  }
  const Backend backend = backend_for(d, cuda_emulation);
  if (backend == Backend::cpu) fail("rbf_dots_to_kernel runs the CUDA kernel: CUDA arrays, or cuda_emulation=True");
  auto run = [&](auto zero) {
    using T = decltype(zero);
    RbfDots<T> p = make_dots<T>(d, xn, yn, gamma, distances_only);
    if (!in_place) {
      p.out = o.ptr<T>();
      p.ldo = o.ld;
    }
    py::gil_scoped_release release;
    route(backend, [] {}, [&] { emulated::rbf_dots_to_kernel<T>(p); },
          [&] { cuda::rbf_dots_to_kernel<T>(p, cuda_stream(stream)); });
  };
  d.dtype == DType::float32 ? run(float{}) : run(double{});
}

void rbf_dots_matvec(py::handle dots, py::handle x_norm, py::handle y_norm, py::handle V, py::handle acc,
                     py::handle partial, double gamma, bool accumulate, int64_t stream, bool cuda_emulation) {
  const ArrayView d = view_array(dots, "dots", 2, 2, stream);
  const ArrayView xn = view_array(x_norm, "x_norm", 1, 1, stream);
  const ArrayView yn = view_array(y_norm, "y_norm", 1, 1, stream);
  const ArrayView v = view_array(V, "V", 2, 2, stream);
  const ArrayView a = view_array(acc, "acc", 2, 2, stream);
  const ArrayView w = view_array(partial, "partial", 1, 1, stream);
  for (const ArrayView* arr : {&xn, &yn, &v}) require_same(d, *arr);
  if (a.dtype != DType::float64 || a.device != d.device || a.device_id != d.device_id)
    fail("acc: must be a float64 array on dots' device");
  const int64_t need = rbf_dots_segments(d.cols) * d.rows * v.cols;
  if (w.dtype != DType::float64 || w.device != d.device || w.device_id != d.device_id || (w.rows > 1 && w.ld != 1) ||
      w.rows < need)
    fail("partial: must be a contiguous float64 array on dots' device of at least " + std::to_string(need) + " elements");
  require_writable(a, {&d, &xn, &yn, &v, &w});
  require_writable(w, {&d, &xn, &yn, &v});
  if (v.rows != d.cols) fail("V has " + std::to_string(v.rows) + " rows but dots has " + std::to_string(d.cols) + " columns");
  if (v.cols > kRbfDotsMaxColumns)
    fail("V has " + std::to_string(v.cols) + " columns; the epilogue sums at most " + std::to_string(kRbfDotsMaxColumns));
  if (a.rows != d.rows || a.cols != v.cols)
    fail("acc must have shape (" + std::to_string(d.rows) + ", " + std::to_string(v.cols) + ")");
  const Backend backend = backend_for(d, cuda_emulation);
  if (backend == Backend::cpu) fail("rbf_dots_matvec runs the CUDA kernel: CUDA arrays, or cuda_emulation=True");
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const RbfDots<T> p = make_dots<T>(d, xn, yn, gamma, false);
    const RbfDotsMatvec<T> m{.v = v.ptr<T>(), .ldv = v.ld, .k = v.cols, .partial = w.ptr<double>(),
                             .acc = a.ptr<double>(), .lda = a.ld, .accumulate = accumulate};
    py::gil_scoped_release release;
    route(backend, [] {}, [&] { emulated::rbf_dots_matvec<T>(p, m); },
          [&] { cuda::rbf_dots_matvec<T>(p, m, cuda_stream(stream)); });
  };
  d.dtype == DType::float32 ? run(float{}) : run(double{});
}

}  // namespace

void bind_rbf(py::module_& m) {
  m.def("rbf_matvec", &rbf_matvec, py::arg("X"), py::arg("Y"), py::arg("V"), py::arg("out"), py::arg("gamma"),
        py::arg("symmetric") = false, py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        py::arg("check_only") = false,
        "out = K(X, Y) @ V with K_ij = exp(-gamma ||x_i - y_j||^2) on the CPU; check_only: the arguments' checks alone.");
  m.def("rbf_gram", &rbf_gram, py::arg("X"), py::arg("Y"), py::arg("out"), py::arg("gamma"),
        py::arg("symmetric") = false, py::arg("distances_only") = false, py::arg("stream") = 0,
        py::arg("cuda_emulation") = false, py::arg("check_only") = false,
        "out = K(X, Y), or the squared distances with distances_only, on the CPU; check_only: the checks alone.");
  m.def("rbf_dots_to_kernel", &rbf_dots_to_kernel, py::arg("dots"), py::arg("x_norm"), py::arg("y_norm"),
        py::arg("gamma"), py::arg("distances_only") = false, py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        py::arg("out") = py::none(),
        "out (default: dots, in place) := exp(-gamma max(x_norm + y_norm - 2 dots, 0)) (or the squared distances).");
  m.def("rbf_dots_matvec", &rbf_dots_matvec, py::arg("dots"), py::arg("x_norm"), py::arg("y_norm"), py::arg("V"),
        py::arg("acc"), py::arg("partial"), py::arg("gamma"), py::arg("accumulate") = false, py::arg("stream") = 0,
        py::arg("cuda_emulation") = false, "acc (+)= K @ V from the dot products, in float64, for at most 8 columns.");
}

}  // namespace dlmsvdd::bindings
