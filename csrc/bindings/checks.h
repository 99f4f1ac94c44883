// The argument checks every op's bindings share. Errors are Python's: a
// ValueError (TypeError for a dtype mismatch) naming the array.
#pragma once
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "bindings/dlpack_bridge.h"

namespace dlmsvdd::bindings {

[[noreturn]] inline void fail(const std::string& what) { throw py::value_error(what); }

inline void require_same(const ArrayView& a, const ArrayView& b) {
  if (a.dtype != b.dtype)
    throw py::type_error(b.name + ": dtype " + dtype_name(b.dtype) + " does not match " + a.name + " (" +
                         dtype_name(a.dtype) + ")");
  if (a.device != b.device || a.device_id != b.device_id)
    fail(b.name + ": on a different device than " + a.name);
}

// True when the memory spans of a and b (first to last element) on one
// device intersect.
inline bool overlapping(const ArrayView& a, const ArrayView& b) {
  if (a.rows == 0 || b.rows == 0 || a.cols == 0 || b.cols == 0) return false;
  if (a.device != b.device || a.device_id != b.device_id) return false;
  auto span = [](const ArrayView& v) {
    const size_t elem = v.dtype == DType::float32 ? sizeof(float) : sizeof(double);
    const auto begin = reinterpret_cast<uintptr_t>(v.data);
    return std::pair{begin, begin + size_t((v.rows - 1) * v.ld + v.cols) * elem};
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

// An array a kernel writes: not read-only, and sharing no memory with the
// arrays it reads (a kernel would read what it has already overwritten).
inline void require_writable(const ArrayView& out, std::initializer_list<const ArrayView*> inputs) {
  if (out.read_only) fail(out.name + ": is read-only");
  for (const ArrayView* in : inputs)
    if (overlapping(*in, out)) fail(out.name + ": must not share memory with " + in->name);
}

// The scratch of the CUDA (or emulated) kernels: a contiguous float64 array on
// like's device of at least `need` bytes.
inline ArrayView device_workspace(py::handle workspace, const ArrayView& like, size_t need, const std::string& sizing,
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

}  // namespace dlmsvdd::bindings
