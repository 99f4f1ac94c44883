// The CPU float64 matrix-vector products for one instruction set; CMakeLists.txt sets this file's flags.
#define DLMSVDD_ISA_NS isa_avx2
#define DLMSVDD_VEC_BYTES 32
#include "cpu/matvec_cpu_impl.h"
