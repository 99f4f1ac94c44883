// Where an op runs, decided the same way for every op: once per call, from its
// arrays' device and its cuda_emulation argument (backend_for); then route()
// calls that back end's entry point.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "bindings/checks.h"
#include "bindings/dlpack_bridge.h"

#ifdef DLMSVDD_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dlmsvdd::bindings {

enum class Backend {
  cpu,       // the CPU kernels, on CPU arrays
  emulated,  // the CUDA kernels run on the CPU (cuda_emulation=True), on CPU arrays
  cuda,      // the CUDA kernels, on CUDA arrays
};

// The back end for arrays on a's device (checked to be all on one device
// before), making a's CUDA device the current one. ValueError for emulation of
// CUDA arrays, and for CUDA arrays in a build without CUDA.
inline Backend backend_for(const ArrayView& a, bool cuda_emulation) {
  if (cuda_emulation) {
    if (a.device != Device::cpu) fail("the emulated CUDA kernels take CPU arrays");
    return Backend::emulated;
  }
  if (a.device == Device::cpu) return Backend::cpu;
#ifdef DLMSVDD_WITH_CUDA
  if (cudaSetDevice(a.device_id) != cudaSuccess) fail("cannot select CUDA device " + std::to_string(a.device_id));
  return Backend::cuda;
#else
  fail(a.name + ": is a CUDA array, but dlmsvdd_ext was built without CUDA");
#endif
}

// The stream Python passes (torch's current stream, as an integer) as the
// CUDA entry points take it (a cudaStream_t).
inline void* cuda_stream(int64_t stream) { return reinterpret_cast<void*>(stream); }

// on_cpu(), emulated() or on_cuda() by the back end, the result converted to
// on_cpu's type. A build without CUDA never calls on_cuda (backend_for gives
// no Backend::cuda there), so the CUDA entry points it names, absent from that
// build, are never referenced.
template <typename Cpu, typename Emulated, typename Cuda>
std::invoke_result_t<Cpu&> route(Backend backend, Cpu&& on_cpu, Emulated&& emulated, Cuda&& on_cuda) {
  if (backend == Backend::cpu) return on_cpu();
  if (backend == Backend::emulated) return emulated();
#ifdef DLMSVDD_WITH_CUDA
  return on_cuda();
#else
  (void)on_cuda;
  throw std::logic_error("dlmsvdd: the CUDA back end in a build without CUDA");
#endif
}

}  // namespace dlmsvdd::bindings
