// The one pybind11 module: turns arrays into parameter structs and dispatches
// on device. No kernel code here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/params.h"
#include "cpu/rbf_cpu.h"
#include "cuda/rbf_cuda.h"
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
