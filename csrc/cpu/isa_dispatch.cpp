// Picks the best instruction set the running CPU supports (or the one named
// by DLMSVDD_CPU_ISA, or set by tests) for the kernels of every op.
#include "cpu/isa_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dlmsvdd::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "generic";
  }
}

Isa best_supported_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
    return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
  return Isa::generic;
}

namespace {

Isa initial_isa() {
  Isa best = best_supported_isa();
  const char* env = std::getenv("DLMSVDD_CPU_ISA");
  if (!env || !*env) return best;
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512})
    if (std::strcmp(env, isa_name(isa)) == 0) return static_cast<int>(isa) <= static_cast<int>(best) ? isa : best;
  return best;
}

std::atomic<int> g_isa{static_cast<int>(initial_isa())};

}  // namespace

Isa active_isa() { return static_cast<Isa>(g_isa.load()); }

void set_active_isa(Isa isa) {
  if (static_cast<int>(isa) > static_cast<int>(best_supported_isa()))
    throw std::invalid_argument(std::string("this CPU does not support ") + isa_name(isa));
  g_isa.store(static_cast<int>(isa));
}

}  // namespace dlmsvdd::cpu
