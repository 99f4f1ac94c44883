// RPCholesky on CUDA: the device engine of common/rpcholesky_driver.h's driver
// and its kernels, written once for nvcc (cuda/rpcholesky_cuda.cu) and for the
// CPU emulation (emu/rpcholesky_emulated.cpp). Keep the kernels to what
// emu/cuda_emulation.h can run.
//
// The sampling and the small c x c Cholesky run on the host (the driver); each
// round copies the residual diagonal (n doubles), the candidates' kernel block
// (c x c) and their factor rows (c x k) to the host, and the pivots (c indices)
// and R (a x a) to the device. Kernel columns come from the CUDA RBF Gram kernel,
// written straight into the factor; the downdate is one kernel, a thread per row.
// All device memory is the caller's: L, and a workspace (layout below).
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rbf_params.h"
#include "common/rpcholesky_driver.h"
#include "common/rpcholesky_engine.h"
#include "cuda/dual_kernels.cuh"  // copy_to_host, rbf_gram_on_device
#include "cuda/launch.h"

namespace dlmsvdd::gpu {
inline namespace DLMSVDD_GPU_BACKEND {
namespace rpchol {  // generic kernel names, kept clear of other headers'

using dlmsvdd::rpchol::ColumnPass;
using dlmsvdd::rpchol::downdated_residual;
using dlmsvdd::rpchol::solve_block_row;

inline constexpr int kThreads = 256;  // threads of every block below

// Byte offsets into the workspace, each region 256-byte aligned.
struct WorkspaceLayout {
  size_t resid = 0, idx = 0, xs = 0, kcc = 0, lp = 0, rt = 0, bytes = 0;

  WorkspaceLayout(int64_t n, int64_t d, int64_t rank, int64_t block_size, size_t elem) {
    const size_t b = size_t(block_size < rank ? block_size : rank);
    auto take = [this](size_t size) {
      const size_t at = bytes;
      bytes += (size + 255) / 256 * 256;
      return at;
    };
    resid = take(size_t(n) * sizeof(double));  // the residual diagonal
    idx = take(b * sizeof(int64_t));            // a round's row indices
    xs = take(b * size_t(d) * elem);            // their features
    kcc = take(b * b * elem);                   // the candidates' kernel block
    lp = take(b * size_t(rank) * elem);         // their factor rows (transposed for the pass)
    rt = take(b * b * elem);                    // R^T of the accepted pivots
  }
};

__global__ inline void __launch_bounds__(kThreads) fill_kernel(double* v, int64_t n, double value) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) v[i] = value;
}

__global__ inline void __launch_bounds__(kThreads) zero_entries_kernel(double* v, const int64_t* idx, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += stride) v[idx[j]] = 0;
}

// dst[r * dst_row + c * dst_col] = src[idx[r]][c] for r < count, c < cols: rows
// gathered (dst_col 1) or gathered and transposed (dst_row 1). Consecutive
// threads read consecutive elements of a row.
template <typename T>
__global__ void __launch_bounds__(kThreads) gather_rows_kernel(const T* src, int64_t lds, const int64_t* idx,
                                                               int64_t count, int64_t cols, T* dst, int64_t dst_row,
                                                               int64_t dst_col) {
  const int64_t total = count * cols, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t r = e / cols, c = e % cols;
    dst[r * dst_row + c * dst_col] = src[idx[r] * lds + c];
  }
}

// The fused pass (ColumnPass), a thread per row: JB dot products at a time
// share each read of the row; the pivot rows are the same for every thread (a
// broadcast). Then the shared forward substitution and residual downdate.
template <typename T>
__global__ void __launch_bounds__(kThreads) column_pass_kernel(ColumnPass<T> c) {
  constexpr int JB = 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < c.n; i += stride) {
    T* row = c.l + i * c.ldl;
    for (int j0 = 0; j0 < c.a; j0 += JB) {
      const int cols = c.a - j0 < JB ? c.a - j0 : JB;
      T acc[JB];
      DLMSVDD_UNROLL
      for (int j = 0; j < JB; ++j) acc[j] = T(0);
      for (int64_t e = 0; e < c.k; ++e) {
        const T xe = row[e];
        DLMSVDD_UNROLL
        for (int j = 0; j < JB; ++j)
          if (j < cols) acc[j] += xe * c.lpt[e * c.ldlpt + j0 + j];
      }
      for (int j = 0; j < cols; ++j) row[c.k + j0 + j] -= acc[j];
    }
    c.resid[i] = downdated_residual(c.resid[i], solve_block_row(row + c.k, c.a, c.rt));
  }
}

// ---- host side

#if defined(__CUDACC__)
inline void copy_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  // From pageable memory: returns once the source is staged, so it may be reused at once.
  const cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) throw std::runtime_error(std::string("dlmsvdd: CUDA copy to device failed: ") + cudaGetErrorString(err));
}
#else
inline void copy_to_device(void* dst, const void* src, size_t bytes, Stream) { std::memcpy(dst, src, bytes); }
#endif

// The driver's engine over device memory (see rpcholesky_loop).
template <typename T>
class DeviceRpEngine {
 public:
  DeviceRpEngine(const RpcholeskyProblem<T>& p, void* workspace, Stream stream)
      : p_(p), stream_(stream), resid_host_(p.n) {
    const WorkspaceLayout w(p.n, p.d, p.rank, p.block_size, sizeof(T));
    char* base = static_cast<char*>(workspace);
    resid_ = reinterpret_cast<double*>(base + w.resid);
    idx_ = reinterpret_cast<int64_t*>(base + w.idx);
    xs_ = reinterpret_cast<T*>(base + w.xs);
    kcc_ = reinterpret_cast<T*>(base + w.kcc);
    lp_ = reinterpret_cast<T*>(base + w.lp);
    rt_ = reinterpret_cast<T*>(base + w.rt);
    launch(fill_kernel, dim3(grid_blocks(p.n, kThreads)), dim3(kThreads), 0, stream_, resid_, p.n,
           1.0);  // the RBF kernel's diagonal
  }

  const double* residual() {
    copy_to_host(resid_host_.data(), resid_, size_t(p_.n) * sizeof(double), stream_);
    return resid_host_.data();
  }

  void candidate_block(const int64_t* idx, int c, int64_t k, T* kcc, T* rows) {
    upload_indices(idx, c);
    gather(p_.x, p_.ldx, c, p_.d, xs_, p_.d, 1);
    gram_with_gathered(xs_, p_.d, c, c, kcc_, c);
    copy_to_host(kcc, kcc_, size_t(c) * c * sizeof(T), stream_);
    if (k == 0) return;
    gather(p_.l, p_.ldl, c, k, lp_, k, 1);
    copy_to_host(rows, lp_, size_t(c) * k * sizeof(T), stream_);
  }

  void add_columns(const int64_t* idx, int a, int64_t k, const T* rt) {
    upload_indices(idx, a);
    gather(p_.x, p_.ldx, a, p_.d, xs_, p_.d, 1);
    gram_with_gathered(p_.x, p_.ldx, p_.n, a, p_.l + k, p_.ldl);  // K(X, pivots) into L[:, k:k+a]
    gather(p_.l, p_.ldl, a, k, lp_, 1, a);  // transposed: k x a
    copy_to_device(rt_, rt, size_t(a) * a * sizeof(T), stream_);
    const ColumnPass<T> c{p_.l, p_.ldl, p_.n, k, a, lp_, a, rt_, resid_};
    launch(column_pass_kernel<T>, dim3(grid_blocks(p_.n, kThreads)), dim3(kThreads), 0, stream_, c);
  }

  void zero_residual(const int64_t* idx, int count) {
    upload_indices(idx, count);
    launch(zero_entries_kernel, dim3(grid_blocks(count, kThreads)), dim3(kThreads), 0, stream_, resid_,
           static_cast<const int64_t*>(idx_), int64_t(count));
  }

 private:
  void upload_indices(const int64_t* idx, int count) {
    copy_to_device(idx_, idx, size_t(count) * sizeof(int64_t), stream_);
  }
  // Rows idx_[0:count) of src, their first `cols` entries, into dst (gather_rows_kernel).
  void gather(const T* src, int64_t lds, int count, int64_t cols, T* dst, int64_t dst_row, int64_t dst_col) {
    if (int64_t(count) * cols == 0) return;
    launch(gather_rows_kernel<T>, dim3(grid_blocks(int64_t(count) * cols, kThreads)), dim3(kThreads), 0,
           stream_, src, lds, static_cast<const int64_t*>(idx_), int64_t(count), cols, dst, dst_row, dst_col);
  }
  // out (nx x ny, row stride ldo) = K(rows of x, the first ny gathered rows).
  void gram_with_gathered(const T* x, int64_t ldx, int64_t nx, int64_t ny, T* out, int64_t ldo) {
    rbf_gram_on_device(dlmsvdd::rpchol::gathered_gram(p_, x, ldx, nx, xs_, ny), GramArgs<T>{out, ldo}, stream_);
  }

  RpcholeskyProblem<T> p_;
  Stream stream_;
  std::vector<double> resid_host_;  // host copy of the residual for the sampling
  double* resid_ = nullptr;
  int64_t* idx_ = nullptr;
  T *xs_ = nullptr, *kcc_ = nullptr, *lp_ = nullptr, *rt_ = nullptr;
};

template <typename T>
int64_t rpcholesky_on_device(const RpcholeskyProblem<T>& p, void* workspace, Stream stream) {
  DeviceRpEngine<T> engine(p, workspace, stream);
  return dlmsvdd::rpchol::rpcholesky_loop(p, engine);
}

}  // namespace rpchol
}  // namespace DLMSVDD_GPU_BACKEND
}  // namespace dlmsvdd::gpu
