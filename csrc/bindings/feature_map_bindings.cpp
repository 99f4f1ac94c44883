// The structured feature maps' (SORF, Fastfood) bindings.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"
#include "bindings/module.h"
#include "bindings/routing.h"
#include "common/feature_map_params.h"
#include "common/fwht_params.h"
#include "cuda/device.h"
#include "cuda/feature_map_cuda.h"

namespace dlmsvdd::bindings {

namespace {

// Fastfood's permutation (contiguous, checked before) on the host: read in
// place, or copied from the GPU (blocks x d_pad entries).
template <typename T>
void check_permutation(const ArrayView& perm, Backend backend, int64_t stream) {
  const T* values = perm.ptr<T>();
  std::vector<T> copy;
  if (backend == Backend::cuda) {
    copy.resize(size_t(perm.rows * perm.cols));
    route(backend, [] {}, [] {}, [&] { cuda::copy_to_host(copy.data(), values, copy.size() * sizeof(T), cuda_stream(stream)); });
    values = copy.data();
  }
  check_feature_map_permutation(values, perm.rows, perm.cols);
}

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
  try {
    feature_map_log2_pad(a, backend == Backend::cpu ? kFwhtMaxLog2 : kCudaFeatureMapMaxLog2);
    if (kind == StructuredMap::fastfood) check_permutation<T>(perm, backend, stream);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (a.rows == 0) return;
  py::gil_scoped_release release;
  route(backend, [&] { cpu::structured_features<T>(a); }, [&] { emulated::structured_features<T>(a); },
        [&] { cuda::structured_features<T>(a, cuda_stream(stream)); });
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
  if (k == StructuredMap::fastfood) require_writable(z, {&p});
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
  const Backend backend = backend_for(x, cuda_emulation);
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

}  // namespace

void bind_feature_map(py::module_& m) {
  m.def("structured_features", &structured_features, py::arg("kind"), py::arg("x"), py::arg("diag"),
        py::arg("perm"), py::arg("offset"), py::arg("out"), py::arg("scale"), py::arg("out_scale"),
        py::arg("stream") = 0, py::arg("cuda_emulation") = false,
        "The SORF or Fastfood features of the rows of x into out (see common/feature_map_params.h).");
  m.attr("cuda_feature_map_max_pad") = int64_t(1) << kCudaFeatureMapMaxLog2;
  m.def("vector_cos", &vector_cos, py::arg("x"), py::arg("out"),
        "out = cos(x) by the CPU feature maps' vectorised cosine (for tests).");
}

}  // namespace dlmsvdd::bindings
