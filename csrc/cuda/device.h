// Whether a CUDA device can be used, asked without touching CUDA at import.
#pragma once

namespace dlmsvdd::cuda {

// True when the build has CUDA and a device is present (no CUDA call at import).
bool device_available();

}  // namespace dlmsvdd::cuda
