// RPCholesky of the RBF kernel on the CPU (the algorithm: common/rpcholesky_driver.h).
#pragma once
#include <cstdint>

#include "common/rpcholesky_params.h"

namespace dlmsvdd::cpu {

// Host pointers. Fills p.l[:, 0:rank) and p.pivots[0:rank) and returns the rank
// reached (<= p.rank; smaller when the residual vanished first). Scratch is
// allocated here. Columns come from cpu::rbf_gram; the downdate is one OpenMP
// pass over the rows per round.
template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& p);

}  // namespace dlmsvdd::cpu
