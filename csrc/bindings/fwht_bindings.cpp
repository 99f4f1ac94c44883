// The fast Walsh-Hadamard transform's bindings.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/fwht_params.h"
#include "cuda/fwht_cuda.h"

namespace dlmsvdd::bindings {

namespace {

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
  route(backend, [&] { cpu::fwht<T>(a); }, [&] { emulated::fwht<T>(a); },
        [&] { cuda::fwht<T>(a, cuda_stream(stream)); });
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
  const Backend backend = backend_for(x, cuda_emulation);
  if (x.dtype == DType::float32)
    fwht_typed<float>(x, o, normalized, backend, stream);
  else
    fwht_typed<double>(x, o, normalized, backend, stream);
}

}  // namespace

void bind_fwht(py::module_& m) {
  m.def("fwht", &fwht, py::arg("x"), py::arg("out"), py::arg("normalized"), py::arg("stream") = 0,
        py::arg("cuda_emulation") = false,
        "out = H x over each row (Sylvester-order Hadamard, entries +-1, over sqrt(L) when normalized); "
        "out may be x.");
}

}  // namespace dlmsvdd::bindings
