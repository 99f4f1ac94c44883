// The bindings of RPCholesky of the RBF kernel.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/rpcholesky_params.h"
#include "cpu/rpcholesky_cpu.h"
#include "cuda/rpcholesky_cuda.h"

namespace dlmsvdd::bindings {

namespace {

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
  return route(backend, [&] { return cpu::rpcholesky<T>(p); },
               [&] { return emulated::rpcholesky<T>(p, workspace.data); },
               [&] { return cuda::rpcholesky<T>(p, workspace.data, cuda_stream(stream)); });
}

int64_t rpcholesky(py::handle X, py::handle L, py::handle pivots, double gamma, uint64_t seed, int64_t block_size,
                   py::handle workspace, int64_t stream, bool cuda_emulation) {
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
  const Backend backend = backend_for(x, cuda_emulation);
  ArrayView w;
  if (backend != Backend::cpu) {
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

}  // namespace

void bind_rpcholesky(py::module_& m) {
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
}

}  // namespace dlmsvdd::bindings
