// Whether a CUDA device can be used, asked without touching CUDA at import;
// and the one copy the bindings make from a device (arguments they check on
// the host).
#pragma once
#include <cstddef>

namespace dlmsvdd::cuda {

// True when the build has CUDA and a device is present (no CUDA call at import).
bool device_available();

// bytes from device memory src to host memory dst, after the work queued on
// `stream` (a cudaStream_t); std::runtime_error on a CUDA error.
void copy_to_host(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace dlmsvdd::cuda
