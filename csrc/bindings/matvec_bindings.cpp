// The float64 matrix-vector products' bindings: A x and A^T x for a float32 or
// float64 A and float64 vectors, every sum in float64.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/matvec_params.h"
#include "cpu/matvec_cpu.h"
#include "cuda/matvec_cuda.h"

namespace dlmsvdd::bindings {

namespace {

// A float64 vector of `length` entries with unit stride on A's device.
void check_vector(const ArrayView& a, const ArrayView& v, int64_t length, const std::string& expected) {
  if (v.dtype != DType::float64)
    throw py::type_error(v.name + ": dtype " + std::string(dtype_name(v.dtype)) +
                         ", expected float64 (the products are float64)");
  if (v.device != a.device || v.device_id != a.device_id) fail(v.name + ": on a different device than " + a.name);
  if (v.rows != length) fail(v.name + ": has " + std::to_string(v.rows) + " entries, expected " + expected);
  if (v.rows > 1 && v.ld != 1)
    fail(v.name + ": must be contiguous (stride 1), got stride " + std::to_string(v.ld));
}

struct Operands {
  ArrayView a, x, out;
};

// A (n, k), x and out checked for A x (transposed = false: x has k entries,
// out n) or A^T x (x has n entries, out k).
Operands operands(py::handle A, py::handle X, py::handle out, const char* x_name, bool transposed, int64_t stream) {
  Operands o{view_array(A, "A", 2, 2, stream), view_array(X, x_name, 1, 1, stream),
             view_array(out, "out", 1, 1, stream)};
  const std::string rows = std::to_string(o.a.rows) + " (A's rows)", cols = std::to_string(o.a.cols) + " (A's columns)";
  check_vector(o.a, o.x, transposed ? o.a.rows : o.a.cols, transposed ? rows : cols);
  check_vector(o.a, o.out, transposed ? o.a.cols : o.a.rows, transposed ? cols : rows);
  require_writable(o.out, {&o.a, &o.x});
  return o;
}

template <typename T>
Matvec64Args<T> args_of(const Operands& o) {
  return {.a = o.a.ptr<T>(), .lda = o.a.ld, .rows = o.a.rows, .cols = o.a.cols, .x = o.x.ptr<double>(),
          .out = o.out.ptr<double>()};
}

void matvec64(py::handle A, py::handle V, py::handle out, int64_t stream, bool cuda_emulation) {
  const Operands o = operands(A, V, out, "v", false, stream);
  const Backend backend = backend_for(o.a, cuda_emulation);
  if (o.a.rows == 0) return;
  py::gil_scoped_release release;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const Matvec64Args<T> a = args_of<T>(o);
    route(backend, [&] { cpu::matvec64<T>(a); }, [&] { emulated::matvec64<T>(a); },
          [&] { cuda::matvec64<T>(a, cuda_stream(stream)); });
  };
  if (o.a.dtype == DType::float32)
    run(0.0f);
  else
    run(0.0);
}

void rmatvec64(py::handle A, py::handle U, py::handle out, py::handle workspace, int64_t stream,
               bool cuda_emulation) {
  const Operands o = operands(A, U, out, "u", true, stream);
  const Backend backend = backend_for(o.a, cuda_emulation);
  if (o.a.cols == 0) return;
  ArrayView w;
  if (backend != Backend::cpu) {
    w = device_workspace(workspace, o.a, rmatvec64_workspace_bytes(o.a.rows, o.a.cols),
                         "rmatvec64_workspace_bytes(n, k)", stream);
    require_writable(w, {&o.a, &o.x, &o.out});
  }
  py::gil_scoped_release release;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const Matvec64Args<T> a = args_of<T>(o);
    route(backend, [&] { cpu::rmatvec64<T>(a); }, [&] { emulated::rmatvec64<T>(a, w.data); },
          [&] { cuda::rmatvec64<T>(a, w.data, cuda_stream(stream)); });
  };
  if (o.a.dtype == DType::float32)
    run(0.0f);
  else
    run(0.0);
}

}  // namespace

void bind_matvec(py::module_& m) {
  m.def("matvec64", &matvec64, py::arg("A"), py::arg("v"), py::arg("out"), py::arg("stream") = 0,
        py::arg("cuda_emulation") = false,
        "out = A v, A float32 or float64 (n, k), v and out float64; every product and sum in float64.");
  m.def("rmatvec64", &rmatvec64, py::arg("A"), py::arg("u"), py::arg("out"), py::arg("workspace") = py::none(),
        py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        "out = A^T u, A float32 or float64 (n, k), u and out float64; every product and sum in float64.");
  m.def("rmatvec64_workspace_bytes",
        [](int64_t n, int64_t k) {
          if (n < 0 || k < 0) fail("n and k must be >= 0, got " + std::to_string(n) + " and " + std::to_string(k));
          return rmatvec64_workspace_bytes(n, k);
        },
        py::arg("n"), py::arg("k"), "Bytes of scratch the CUDA (and emulated) A^T u needs for A (n, k).");
}

}  // namespace dlmsvdd::bindings
