#include "bindings/dlpack_bridge.h"

#include <stdexcept>

namespace dlmsvdd {

namespace {

// ---- DLPack ABI (dlpack.h, versions 0.x and 1.x)
enum DLDeviceTypeCode : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };
enum DLDataTypeCode : uint8_t { kDLFloat = 2 };
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kDLPackFlagReadOnly = 1ull << 0;
constexpr const char* kLegacyName = "dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";

std::string dlpack_dtype_name(const DLDataType& t) {
  static const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string name = t.code < 7 ? kinds[t.code] : "code" + std::to_string(t.code);
  name += std::to_string(t.bits);
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

[[noreturn]] void fail_value(const std::string& name, const std::string& what) {
  throw py::value_error(name + ": " + what);
}

// Asks the producer for a capsule, versioned when it can give one.
py::object capsule_of(py::handle obj, const std::string& name, int64_t stream) {
  if (PyCapsule_CheckExact(obj.ptr())) return py::reinterpret_borrow<py::object>(obj);
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error(name + ": expected a torch tensor or numpy array (an object with __dlpack__), got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  py::object device_stream = py::none();
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    if (dev[0].cast<int>() == kDLCUDA || dev[0].cast<int>() == kDLCUDAManaged)
      device_stream = py::int_(stream == 0 ? 1 : stream);  // 1 names the legacy default stream
  }
  try {
    return obj.attr("__dlpack__")(py::arg("stream") = device_stream,
                                  py::arg("max_version") = py::make_tuple(1, 0));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;  // a producer without max_version
  }
  return obj.attr("__dlpack__")(py::arg("stream") = device_stream);
}

}  // namespace

const char* dtype_name(DType dtype) { return dtype == DType::float32 ? "float32" : "float64"; }

ArrayView view_array(py::handle obj, const std::string& name, int min_ndim, int max_ndim,
                     int64_t stream) {
  ArrayView view;
  view.name = name;
  view.owner = capsule_of(obj, name, stream);
  PyObject* cap = view.owner.ptr();
  const DLTensor* t = nullptr;
  if (PyCapsule_IsValid(cap, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kVersionedName));
    if (m->version.major > 1) fail_value(name, "DLPack major version " + std::to_string(m->version.major) + " is not supported (need 1)");
    t = &m->dl_tensor;
    view.read_only = (m->flags & kDLPackFlagReadOnly) != 0;
  } else if (PyCapsule_IsValid(cap, kLegacyName)) {
    t = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, kLegacyName))->dl_tensor;
  } else {
    fail_value(name, "not an unconsumed DLPack capsule (was it used already?)");
  }

  if (t->dtype.code != kDLFloat || t->dtype.lanes != 1 || (t->dtype.bits != 32 && t->dtype.bits != 64))
    throw py::type_error(name + ": expected dtype float32 or float64, got " + dlpack_dtype_name(t->dtype));
  view.dtype = t->dtype.bits == 32 ? DType::float32 : DType::float64;

  switch (t->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: view.device = Device::cpu; break;
    case kDLCUDA:
    case kDLCUDAManaged: view.device = Device::cuda; break;
    default: fail_value(name, "unsupported device type " + std::to_string(t->device.device_type) + " (CPU or CUDA only)");
  }
  view.device_id = t->device.device_id;

  if (t->ndim < min_ndim || t->ndim > max_ndim)
    fail_value(name, "expected " + (min_ndim == max_ndim ? std::to_string(min_ndim) : std::to_string(min_ndim) + " or " + std::to_string(max_ndim)) +
                         " dimensions, got " + std::to_string(t->ndim));
  view.ndim = t->ndim;
  view.rows = t->ndim >= 1 ? t->shape[0] : 1;
  view.cols = t->ndim == 2 ? t->shape[1] : 1;
  view.data = static_cast<char*>(t->data) + t->byte_offset;

  // Strides in elements; NULL means compact row-major.
  const int64_t row_stride = t->strides ? t->strides[0] : (t->ndim == 2 ? view.cols : 1);
  if (t->ndim == 2) {
    const int64_t col_stride = t->strides ? t->strides[1] : 1;
    // An empty array has no layout to check (numpy gives its strides as 0).
    if (col_stride != 1 && view.cols > 1 && view.rows > 0)
      fail_value(name, "columns must be contiguous (stride 1 along the last dimension), got stride " +
                           std::to_string(col_stride) + "; call .contiguous() first");
    view.ld = view.rows > 1 ? row_stride : view.cols;
    if (view.rows > 1 && view.ld < view.cols)
      fail_value(name, "row stride " + std::to_string(view.ld) + " is smaller than the row length " +
                           std::to_string(view.cols) + " (overlapping or transposed layout); call .contiguous() first");
  } else {
    view.ld = view.rows > 1 ? row_stride : 1;
    if (view.ld < 1) fail_value(name, "stride must be positive, got " + std::to_string(view.ld));
  }
  return view;
}

}  // namespace dlmsvdd
