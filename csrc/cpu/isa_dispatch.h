// The instruction set the CPU kernels run with: every op's kernels are compiled
// once per set (cpu/isa/<op>_<set>.cpp) and one choice, made here, picks among
// them at run time.
#pragma once

namespace dlmsvdd::cpu {

enum class Isa { generic = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
Isa best_supported_isa();
Isa active_isa();
// Selects a (supported) instruction set; used by tests to cover every path.
void set_active_isa(Isa isa);

}  // namespace dlmsvdd::cpu

// return isa_<active set>::fn(args...), in a function inside dlmsvdd::cpu.
#define DLMSVDD_ISA_DISPATCH(fn, ...)                          \
  switch (active_isa()) {                                      \
    case Isa::avx512: return isa_avx512::fn(__VA_ARGS__);      \
    case Isa::avx2: return isa_avx2::fn(__VA_ARGS__);          \
    default: return isa_generic::fn(__VA_ARGS__);              \
  }
