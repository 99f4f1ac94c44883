// The one pybind11 module: the build and instruction-set queries here, each
// op's functions from its bindings/<op>_bindings.cpp, which turn arrays into
// parameter structs and route them to the CPU, emulated or CUDA kernels
// (bindings/routing.h). No kernel code in bindings/.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/checks.h"
#include "bindings/module.h"
#include "cpu/isa_dispatch.h"
#include "cuda/device.h"

namespace py = pybind11;
using namespace dlmsvdd;

namespace {

constexpr cpu::Isa kCompiledIsas[] = {cpu::Isa::generic, cpu::Isa::avx2, cpu::Isa::avx512};

cpu::Isa isa_from_name(const std::string& name) {
  for (cpu::Isa isa : kCompiledIsas)
    if (name == cpu::isa_name(isa)) return isa;
  bindings::fail("unknown instruction set '" + name + "' (generic, avx2 or avx512)");
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

  m.def("build_info", [] {
    py::dict info;
#ifdef DLMSVDD_WITH_CUDA
    info["cuda_version"] = DLMSVDD_CUDA_VERSION;            // nvcc's, from CMake
    info["cuda_architectures"] = DLMSVDD_CUDA_ARCHITECTURES;  // CMake's list, comma-separated
#else
    info["cuda_version"] = py::none();
    info["cuda_architectures"] = "";
#endif
    std::vector<std::string> isas;  // every CPU kernel set is compiled; which run is the CPU's business
    for (cpu::Isa isa : kCompiledIsas) isas.emplace_back(cpu::isa_name(isa));
    info["cpu_instruction_sets"] = isas;
    info["compiler"] = __VERSION__;
    return info;
  }, "What this build holds: CUDA version and architectures, the CPU instruction sets, the compiler.");
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

  bindings::bind_rbf(m);
  bindings::bind_dual(m);
  bindings::bind_dual_apg(m);
  bindings::bind_fwht(m);
  bindings::bind_feature_map(m);
  bindings::bind_rpcholesky(m);
  bindings::bind_matvec(m);
}
