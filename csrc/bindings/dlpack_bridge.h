// Zero-copy views of torch tensors and numpy arrays through DLPack.
// pybind11 has no DLPack support, so the ABI structs (a stable C layout) are
// declared here; both the legacy ("dltensor") and the versioned
// ("dltensor_versioned") capsule kinds are read.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

namespace dlmsvdd {

namespace py = pybind11;

enum class Device { cpu, cuda };
enum class DType { float32, float64 };

// A borrowed 1-D or 2-D floating-point array with unit column stride.
struct ArrayView {
  py::object owner;  // the capsule: keeps the producer's memory alive while we use it
  std::string name;
  void* data = nullptr;
  Device device = Device::cpu;
  int device_id = 0;
  DType dtype = DType::float32;
  int ndim = 0;
  int64_t rows = 0;  // shape[0]
  int64_t cols = 1;  // shape[1], or 1 for a 1-D array
  int64_t ld = 0;    // elements between consecutive rows
  bool read_only = false;

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }
};

// Reads obj (anything with __dlpack__, or a DLPack capsule). `name` is used in
// errors. Raises TypeError for a non-float dtype or a non-array, ValueError for
// an unsupported rank, layout or device. `stream` is the consumer's CUDA stream
// handed to __dlpack__ for device arrays (0 = the legacy default stream).
ArrayView view_array(py::handle obj, const std::string& name, int min_ndim, int max_ndim,
                     int64_t stream = 0);

const char* dtype_name(DType dtype);

}  // namespace dlmsvdd
