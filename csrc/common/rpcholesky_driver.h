// Randomly pivoted Cholesky (RPCholesky; Chen, Epperly, Tropp, Webber 2023) of
// the RBF kernel: the driver every back end runs (parameters:
// common/rpcholesky_params.h). The pivots are sampled on the host by one driver
// (rpcholesky_loop below), so every back end picks the same pivots for the same
// seed; a back end only supplies an "engine" that computes kernel blocks and
// adds factor columns where its memory lives (what the CPU and the CUDA engines
// share: common/rpcholesky_engine.h).
//
// One round of the driver (block_size b; b = 1 is the simple algorithm):
//  1. draw c = min(b, rank - k) candidates i.i.d. with probability proportional
//     to the residual diagonal d (on the host, running sums in double);
//  2. H = K(S, S) - L[S, :k] L[S, :k]^T, the candidates' residual block (c x c);
//  3. a Cholesky of H with the rejection step of accelerated RPCholesky
//     (Epperly, Tropp, Webber 2024): candidate j is accepted when
//     v_j H0_jj < H_jj, H0_jj its residual when the round began and H_jj its
//     residual after this round's accepted pivots; candidates whose residual is
//     negligible are dropped. In exact arithmetic the accepted pivots are
//     distributed as those of sequential RPCholesky; the first candidate with
//     a non-negligible residual is always accepted, so b = 1 is plain
//     RPCholesky;
//  4. the accepted a pivots' columns in one fused pass over the rows:
//     L[i, k:k+a] = (K(x_i, pivots) - L[i, :k] L[pivots, :k]^T) R^-T, with
//     H(accepted) = R R^T, and d_i -= |L[i, k:k+a]|^2; then d is set to 0 at
//     the pivots and the dropped candidates. Every round thus adds a pivot or
//     zeroes a residual, and the loop ends.
// The driver stops at `rank` columns, or earlier when the residual trace falls
// below stop_tol times the initial trace or no residual is above negligible.
//
// A row of X holding a NaN or an infinity has NaN kernel values
// (common/rbf_math.h), so a NaN residual (once any column is in) or a NaN
// candidate block: the driver refuses X then (std::invalid_argument, a
// ValueError in Python) naming the row, on every back end alike.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rpcholesky_params.h"

namespace dlmsvdd {

// The helpers below are RPCholesky's alone: their own namespace keeps generic
// names (sample_index, BlockChoice, ...) clear of other headers'.
namespace rpchol {

// A residual at or below this (relative to K's diagonal, 1 for the RBF kernel)
// is rounding noise: such a pivot would divide noise by its square root.
template <typename T>
inline constexpr double kNegligibleResidual = 100.0 * std::numeric_limits<T>::epsilon();

// SplitMix64 (Steele, Lea, Flood 2014). Draw t = 1, 2, ... is
// mix(seed + t * 0x9E3779B97F4A7C15) in wrapping 64-bit arithmetic, and a
// uniform is (draw >> 11) * 2^-53 in [0, 1): spelled out so that any
// implementation (the tests' numpy reference) reproduces the stream bit for bit.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

[[noreturn]] inline void refuse_row(int64_t i) {
  throw std::invalid_argument("X: row " + std::to_string(i) +
                              " holds a NaN or an infinity (or its squared norm overflows); RPCholesky needs "
                              "finite features");
}

// The first index whose running sum exceeds u * total (total = cum.back() > 0).
// Entries with zero weight never qualify: their running sum equals the previous one.
inline int64_t sample_index(const std::vector<double>& cum, double u) {
  const double total = cum.back();
  auto it = std::upper_bound(cum.begin(), cum.end(), u * total);
  // u * total can round up to total; then take the last entry with weight.
  if (it == cum.end()) it = std::lower_bound(cum.begin(), cum.end(), total);
  return it - cum.begin();
}

// The outcome of a round's Cholesky with rejection, in candidate positions.
struct BlockChoice {
  std::vector<int> accepted;   // in acceptance order
  std::vector<int> negligible; // residual at or below the threshold: dropped
  std::vector<double> r;       // R (accepted x accepted, lower, row-major): H(accepted) = R R^T
};

// h: the c x c residual block (row-major, overwritten by its Schur complements);
// v: the c acceptance uniforms. See step 3 at the top of the file.
inline BlockChoice rejection_cholesky(std::vector<double>& h, int c, const double* v, double negligible) {
  BlockChoice out;
  std::vector<double> h0(c), cols;  // cols: column q of the factor over all c candidates, c apart
  for (int j = 0; j < c; ++j) h0[j] = h[j * c + j];
  for (int j = 0; j < c; ++j) {
    const double hj = h[j * c + j];
    if (!(hj > negligible)) {
      out.negligible.push_back(j);
      continue;
    }
    if (!(v[j] * h0[j] < hj)) continue;  // rejected
    const size_t q = out.accepted.size();
    out.accepted.push_back(j);
    cols.resize(cols.size() + c, 0.0);
    double* col = cols.data() + q * c;
    const double s = std::sqrt(hj);
    for (int i = j; i < c; ++i) col[i] = h[i * c + j] / s;
    // Schur complement of the later candidates (lower triangle, which is all that is read).
    for (int i = j + 1; i < c; ++i)
      for (int t = j + 1; t <= i; ++t) h[i * c + t] -= col[i] * col[t];
  }
  const size_t a = out.accepted.size();
  out.r.assign(a * a, 0.0);
  for (size_t i = 0; i < a; ++i)
    for (size_t q = 0; q <= i; ++q) out.r[i * a + q] = cols[q * c + out.accepted[i]];
  return out;
}

// h (c x c, double) = kcc - rows rows^T: kcc = K(S, S) (c x c), rows = L[S, :k] (c x k).
template <typename T>
void residual_block(const T* kcc, const T* rows, int c, int64_t k, std::vector<double>& h) {
  for (int i = 0; i < c; ++i)
    for (int j = 0; j <= i; ++j) {
      const T *ri = rows + i * k, *rj = rows + j * k;
      double dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t e = 0; e < k; ++e) dot += double(ri[e]) * double(rj[e]);
      h[i * c + j] = h[j * c + i] = double(kcc[i * c + j]) - dot;
    }
}

// Runs the rounds over `engine`, which provides (host pointers unless noted):
//   const double* residual();                      the residual diagonal (n), readable on the host
//   void candidate_block(const int64_t* idx, int c, int64_t k, T* kcc, T* rows);
//                                                  K(X_idx, X_idx) (c x c) and L[idx, :k] (c x k)
//   void add_columns(const int64_t* idx, int a, int64_t k, const T* rt);
//                                                  the fused pass for pivots idx, rt = R^T (a x a)
//   void zero_residual(const int64_t* idx, int count);
// The residual starts as K's diagonal (all ones). Writes p.pivots[0, rank) and
// returns the rank reached.
template <typename T, typename Engine>
int64_t rpcholesky_loop(const RpcholeskyProblem<T>& p, Engine& engine) {
  const int64_t n = p.n, m = p.rank;
  const int b = int(std::min<int64_t>(p.block_size, m));
  const double negligible = kNegligibleResidual<T>;
  SplitMix64 rng(p.seed);
  std::vector<double> cum(n), uniforms(2 * b), h(size_t(b) * b);
  std::vector<T> kcc(size_t(b) * b), rows(size_t(b) * m), rt(size_t(b) * b);
  std::vector<int64_t> candidates(b), chosen, cleared;
  double trace0 = -1;
  int64_t k = 0;
  // The residuals as sampling weights (running sums in cum), refusing NaN.
  const auto weigh = [&](double& total, double& largest) {
    const double* resid = engine.residual();
    total = largest = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(resid[i])) refuse_row(i);
      const double w = resid[i] > 0 ? resid[i] : 0.0;
      total += w;
      cum[i] = total;
      largest = std::max(largest, w);
    }
  };
  while (k < m) {
    double total, largest;
    weigh(total, largest);
    if (trace0 < 0) trace0 = total;
    if (total <= p.stop_tol * trace0 || largest <= negligible) break;

    // The stream's use per round: c sampling uniforms, then c acceptance uniforms.
    const int c = int(std::min<int64_t>(b, m - k));
    for (int j = 0; j < 2 * c; ++j) uniforms[j] = rng.uniform();
    for (int j = 0; j < c; ++j) candidates[j] = sample_index(cum, uniforms[j]);

    engine.candidate_block(candidates.data(), c, k, kcc.data(), rows.data());
    residual_block(kcc.data(), rows.data(), c, k, h);
    for (int j = 0; j < c; ++j)
      if (std::isnan(h[j * c + j])) refuse_row(candidates[j]);  // K(x, x) is NaN only for such a row
    const BlockChoice choice = rejection_cholesky(h, c, uniforms.data() + c, negligible);

    const int a = int(choice.accepted.size());
    chosen.clear();
    for (int j : choice.accepted) chosen.push_back(candidates[j]);
    if (a > 0) {
      for (int i = 0; i < a; ++i)
        for (int q = 0; q < a; ++q) rt[q * a + i] = T(choice.r[i * a + q]);
      engine.add_columns(chosen.data(), a, k, rt.data());
      std::copy(chosen.begin(), chosen.end(), p.pivots + k);
      k += a;
    }
    // Pivots' residuals are 0 up to rounding, negligible candidates' nearly so:
    // zeroing them keeps pivots distinct and stops noise from being sampled again.
    cleared = chosen;
    for (int j : choice.negligible) cleared.push_back(candidates[j]);
    if (!cleared.empty()) engine.zero_residual(cleared.data(), int(cleared.size()));
  }
  if (k > 0) {  // the last round's columns, which no round after it has weighed
    double total, largest;
    weigh(total, largest);
  }
  return k;
}

}  // namespace rpchol
}  // namespace dlmsvdd
