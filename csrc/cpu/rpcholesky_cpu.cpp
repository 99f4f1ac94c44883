// RPCholesky on the CPU: the engine of common/rpcholesky_driver.h's driver over
// host memory. Kernel columns come from cpu::feature_gram (X packed once for
// all rounds) and cpu::rbf_gram (the candidates' block); the downdate of a round
// is one OpenMP pass over the rows, fused with the triangular solve and the
// residual update, in GCC vector code compiled for each instruction set
// (target attributes) and chosen at run time like the RBF kernels.
#include "cpu/rpcholesky_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/rbf_params.h"
#include "common/rpcholesky_driver.h"
#include "common/rpcholesky_engine.h"
#include "cpu/isa_dispatch.h"
#include "cpu/rbf_cpu.h"

namespace dlmsvdd::cpu {

namespace {

using rpchol::ColumnPass;
using rpchol::downdated_residual;

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

template <typename T, int Bytes>
struct Vec {
  typedef T V __attribute__((vector_size(Bytes)));
};

// Register tile of the pass for a vector of `Bytes`: MR rows by NR pivots,
// MR * 2 vector accumulators (16 of 32 zmm registers; 8 of 16 ymm/xmm).
template <typename T, int Bytes>
struct PassTile {
  static constexpr int W = Bytes / int(sizeof(T));
  static constexpr int NV = 2;
  static constexpr int NR = NV * W;
  static constexpr int MR = Bytes == 64 ? 8 : 4;
};
inline constexpr int kMaxRows = 8;  // the largest MR: sizes the solve's scratch

// g_q[0:a) for the rows q < MR (g_q = row q's new columns): solves f R^T = g
// in place and returns |f_q|^2 in norm2[q]. The operations of solve_block_row
// in the same order, but on the MR rows at once, one vector lane per row (gt:
// a transposed copy, a x MR): no chain of dependent updates through one row.
// Only the first `rows` rows are written back (the others may repeat a row).
template <typename T, int MR>
[[gnu::always_inline]] inline void solve_rows(T* const (&g)[MR], int rows, int a, const T* rt, T* gt,
                                              double (&norm2)[MR]) {
  using V = typename Vec<T, MR * sizeof(T)>::V;
  using VD = typename Vec<double, MR * sizeof(double)>::V;
  for (int j = 0; j < a; ++j)
    for (int q = 0; q < MR; ++q) gt[j * MR + q] = g[q][j];
  VD sum = {};
  for (int j = 0; j < a; ++j) {
    V f;
    std::memcpy(&f, gt + j * MR, sizeof f);
    f = f / rt[j * a + j];
    std::memcpy(gt + j * MR, &f, sizeof f);
    const VD fd = __builtin_convertvector(f, VD);
    sum += fd * fd;
    for (int i = j + 1; i < a; ++i) {
      V gi;
      std::memcpy(&gi, gt + i * MR, sizeof gi);
      gi -= f * rt[j * a + i];
      std::memcpy(gt + i * MR, &gi, sizeof gi);
    }
  }
  for (int q = 0; q < rows; ++q)
    for (int j = 0; j < a; ++j) g[q][j] = gt[j * MR + q];
  for (int q = 0; q < MR; ++q) norm2[q] = sum[q];
}

// Rows i0 .. i0 + MR - 1 of the fused pass (see ColumnPass): subtract the
// projections on the previous columns, solve against R, downdate the residual.
// The projections are outer products (a row's entry broadcast times a vector
// of pivots), so no horizontal sums; the pivot panel (k x NR) stays in cache
// while the MR rows stream through. `scratch` holds a * MR elements.
template <typename T, int Bytes>
[[gnu::always_inline]] inline void column_pass_rows(const ColumnPass<T>& c, int64_t i0, T* scratch) {
  using V = typename Vec<T, Bytes>::V;
  using Tile = PassTile<T, Bytes>;
  constexpr int W = Tile::W, NV = Tile::NV, NR = Tile::NR, MR = Tile::MR;
  const int rows = int(std::min<int64_t>(MR, c.n - i0));
  T* x[MR];
  for (int q = 0; q < MR; ++q) x[q] = c.l + std::min<int64_t>(i0 + q, c.n - 1) * c.ldl;  // past n: repeats, unused
  for (int j0 = 0; j0 < c.a; j0 += NR) {
    // Constant indices only (no memcpy of acc, no runtime row count), so that
    // the accumulators stay in registers.
    V acc[MR][NV] = {};
    const T* panel = c.lpt + j0;  // ldlpt is a multiple of NR: whole panels, zero past a
    for (int64_t e = 0; e < c.k; ++e) {
      for (int v = 0; v < NV; ++v) {
        V p;
        std::memcpy(&p, panel + e * c.ldlpt + v * W, sizeof p);
        for (int q = 0; q < MR; ++q) acc[q][v] += p * x[q][e];
      }
    }
    const int cols = std::min(NR, c.a - j0);
    for (int q = 0; q < MR; ++q) {
      if (q >= rows) break;
      T* g = x[q] + c.k + j0;
      for (int v = 0; v < NV; ++v)
        for (int l = 0; l < W; ++l)
          if (v * W + l < cols) g[v * W + l] -= acc[q][v][l];
    }
  }
  T* g[MR];
  for (int q = 0; q < MR; ++q) g[q] = x[q] + c.k;
  double norm2[MR];
  solve_rows<T, MR>(g, rows, c.a, c.rt, scratch, norm2);
  for (int q = 0; q < rows; ++q) c.resid[i0 + q] = downdated_residual(c.resid[i0 + q], norm2[q]);
}

// One copy per instruction set; the vector width follows the set.
template <typename T>
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma"))) void rows_avx512(const ColumnPass<T>& c,
                                                                                        int64_t i0, T* scratch) {
  column_pass_rows<T, 64>(c, i0, scratch);
}
template <typename T>
__attribute__((target("avx2,fma"))) void rows_avx2(const ColumnPass<T>& c, int64_t i0, T* scratch) {
  column_pass_rows<T, 32>(c, i0, scratch);
}
template <typename T>
void rows_generic(const ColumnPass<T>& c, int64_t i0, T* scratch) {
  column_pass_rows<T, 16>(c, i0, scratch);
}

// Pivot panels are padded to the widest tile (AVX-512's NR) whatever the ISA.
template <typename T>
inline constexpr int kPanelPad = PassTile<T, 64>::NR;

template <typename T>
void column_pass(const ColumnPass<T>& c) {
  void (*rows)(const ColumnPass<T>&, int64_t, T*) = rows_generic<T>;
  int mr = PassTile<T, 16>::MR;
  switch (active_isa()) {
    case Isa::avx512: rows = rows_avx512<T>, mr = PassTile<T, 64>::MR; break;
    case Isa::avx2: rows = rows_avx2<T>, mr = PassTile<T, 32>::MR; break;
    default: break;
  }
  const int64_t tasks = (c.n + mr - 1) / mr;
  const size_t per_thread = size_t(c.a) * kMaxRows;
  std::vector<T> scratch(size_t(omp_get_max_threads()) * per_thread);
#pragma omp parallel
  {
    T* mine = scratch.data() + size_t(omp_get_thread_num()) * per_thread;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) rows(c, t * mr, mine);
  }
}

// The driver's engine over host memory; scratch in std::vectors.
template <typename T>
class CpuEngine {
 public:
  explicit CpuEngine(const RpcholeskyProblem<T>& p)
      : p_(p),
        resid_(p.n, 1.0),  // the RBF kernel's diagonal
        xs_(std::min(p.block_size, p.rank) * p.d),
        lpt_(p.rank * round_up(std::min(p.block_size, p.rank), kPanelPad<T>)),
        columns_(feature_gram(rpchol::gathered_gram<T>(p, p.x, p.ldx, p.n, nullptr, 0))) {}

  const double* residual() const { return resid_.data(); }

  void candidate_block(const int64_t* idx, int c, int64_t k, T* kcc, T* rows) {
    gather_features(idx, c);
    gram_of_gathered(c, kcc, c);
    gather_factor_rows(idx, c, k, rows);
  }

  void add_columns(const int64_t* idx, int a, int64_t k, const T* rt) {
    gather_features(idx, a);
    columns_->gram(xs_.data(), p_.d, a, p_.l + k, p_.ldl);  // K(X, pivots) into L[:, k:k+a]
    const int64_t ldlpt = round_up(a, kPanelPad<T>);
    for (int64_t e = 0; e < k; ++e) {
      T* dst = lpt_.data() + e * ldlpt;
      for (int j = 0; j < a; ++j) dst[j] = p_.l[idx[j] * p_.ldl + e];
      std::fill(dst + a, dst + ldlpt, T(0));
    }
    column_pass(ColumnPass<T>{p_.l, p_.ldl, p_.n, k, a, lpt_.data(), ldlpt, rt, resid_.data()});
  }

  void zero_residual(const int64_t* idx, int count) {
    for (int j = 0; j < count; ++j) resid_[idx[j]] = 0;
  }

 private:
  // xs_[j] = x[idx[j]]: rbf_gram takes Y with one row stride.
  void gather_features(const int64_t* idx, int count) {
    for (int j = 0; j < count; ++j) std::copy_n(p_.x + idx[j] * p_.ldx, p_.d, xs_.data() + j * p_.d);
  }
  void gather_factor_rows(const int64_t* idx, int count, int64_t k, T* out) const {
    for (int j = 0; j < count; ++j) std::copy_n(p_.l + idx[j] * p_.ldl, k, out + j * k);
  }
  // out (ny x ny, row stride ldo) = K(the first ny gathered rows, themselves).
  void gram_of_gathered(int64_t ny, T* out, int64_t ldo) const {
    rbf_gram(rpchol::gathered_gram(p_, xs_.data(), p_.d, ny, xs_.data(), ny), GramArgs<T>{out, ldo});
  }

  RpcholeskyProblem<T> p_;
  std::vector<double> resid_;
  std::vector<T> xs_, lpt_;  // gathered features; the pivots' factor rows, transposed
  std::unique_ptr<FeatureGram<T>> columns_;  // K(X, pivots), X packed once for all rounds
};

}  // namespace

template <typename T>
int64_t rpcholesky(const RpcholeskyProblem<T>& p) {
  CpuEngine<T> engine(p);
  return rpchol::rpcholesky_loop(p, engine);
}

template int64_t rpcholesky<float>(const RpcholeskyProblem<float>&);
template int64_t rpcholesky<double>(const RpcholeskyProblem<double>&);

}  // namespace dlmsvdd::cpu
