// Runs CUDA kernel bodies on the CPU, so that their logic is tested on machines
// without a GPU (DESIGN.md section 8). Only for host compilers: kernels include
// it through cuda/launch.h when __CUDACC__ is not defined.
//
// A launch runs the grid's blocks one after another; the threads of a block are
// std::threads that meet at a std::barrier for __syncthreads(). Because only one
// block runs at a time, a __shared__ variable can be a function-local static,
// shared by the block's threads. The built-ins (threadIdx, blockIdx, ...) are
// thread_locals. Warp shuffles exchange values through a per-warp buffer between
// two phases of a per-warp barrier; atomics use std::atomic_ref.
//
// What kernels must respect to run here (all of it is also good CUDA):
//  * no dynamic shared memory (smem must be 0), no cooperative groups;
//  * shuffles are made by every lane of the warp (full mask);
//  * __shared__ variables have trivial constructors and no initialisers (they
//    become statics, so zero-initialised once per program, like the GPU's garbage);
//  * non-template __global__ / __device__ functions in headers are also inline.
// Launches are serialised by a mutex: concurrent launches of one kernel would
// otherwise share its static "__shared__" storage.
#pragma once

#if defined(__CUDACC__)
#error "cuda_emulation.h is for host compilers; nvcc compiles the kernels natively"
#endif

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)

namespace dlmsvdd::emu {

// CUDA's vector types, in this namespace so that they cannot clash with the real
// ones when a CUDA object is linked into the same library.
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
inline constexpr int warpSize = 32;

struct Stream {};  // kernels run synchronously: nothing to queue on

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "dlmsvdd CUDA emulation: %s\n", what);
  std::abort();
}

struct Warp {
  explicit Warp(unsigned n) : sync(n), size(n) {}
  std::barrier<> sync;
  unsigned size;
  uint64_t slot[32] = {};  // one value per lane, for shuffles
};

// The barriers of the block being run; rebuilt for each block because threads
// that return from the kernel leave them (arrive_and_drop), as exited threads
// stop counting for __syncthreads on the GPU.
struct Block {
  explicit Block(unsigned threads) : sync(threads) {
    for (unsigned first = 0; first < threads; first += warpSize)
      warps.push_back(std::make_unique<Warp>(std::min<unsigned>(warpSize, threads - first)));
  }
  std::barrier<> sync;
  std::vector<std::unique_ptr<Warp>> warps;
};

struct ThreadState {
  Block* block = nullptr;
  Warp* warp = nullptr;
  unsigned lane = 0;
};
inline thread_local ThreadState current_thread;

// One for all kernels: a __shared__ variable of a __device__ helper is one
// static shared by every kernel that calls it.
inline std::mutex one_launch_at_a_time;

// Runs run_block() once per (block, thread) of the grid.
template <typename F>
void launch(dim3 grid, dim3 block, size_t smem, const F& run_block) {
  if (smem != 0) fail("dynamic shared memory is not emulated");
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads > 1024) fail("a block must have 1 to 1024 threads");
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  if (blocks == 0) return;

  const std::lock_guard lock(one_launch_at_a_time);
  std::unique_ptr<Block> current = std::make_unique<Block>(threads);
  // Completes when every thread has finished a block: only then is it safe to
  // reset the barriers and let the static shared storage be reused.
  std::barrier next_block(threads, [&]() noexcept { current = std::make_unique<Block>(threads); });

  auto thread_main = [&](unsigned t) {
    threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
    blockDim = block;
    gridDim = grid;
    for (uint64_t b = 0; b < blocks; ++b) {
      blockIdx = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y), unsigned(b / (uint64_t(grid.x) * grid.y))};
      current_thread = {current.get(), current->warps[t / warpSize].get(), t % warpSize};
      run_block();
      current_thread.warp->sync.arrive_and_drop();
      current_thread.block->sync.arrive_and_drop();
      next_block.arrive_and_wait();
    }
    current_thread = {};
  };
  std::vector<std::jthread> pool;  // joined on scope exit
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(thread_main, t);
}

inline void __syncthreads() { current_thread.block->sync.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { current_thread.warp->sync.arrive_and_wait(); }

// Every lane publishes v, then reads lane src's value (its own when src < 0).
template <typename T>
T warp_exchange(unsigned mask, T v, int src) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t));
  Warp& w = *current_thread.warp;
  const unsigned all = w.size == 32 ? 0xffffffffu : (1u << w.size) - 1;
  if ((mask & all) != all) fail("only full-warp shuffles are emulated");
  std::memcpy(&w.slot[current_thread.lane], &v, sizeof(T));
  w.sync.arrive_and_wait();
  T r = v;
  if (src >= 0 && unsigned(src) < w.size) std::memcpy(&r, &w.slot[src], sizeof(T));
  w.sync.arrive_and_wait();  // nobody overwrites a slot before everyone has read
  return r;
}

// Shuffle semantics as in the CUDA programming guide, within segments of `width` lanes.
template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
  const int lane = int(current_thread.lane);
  return warp_exchange(mask, v, (lane & ~(width - 1)) + (src_lane & (width - 1)));
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  const int lane = int(current_thread.lane), src = lane ^ lane_mask;
  return warp_exchange(mask, v, src < (lane & ~(width - 1)) + width ? src : -1);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = int(current_thread.lane);
  return warp_exchange(mask, v, (lane & (width - 1)) + int(delta) < width ? lane + int(delta) : -1);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  const int lane = int(current_thread.lane);
  return warp_exchange(mask, v, (lane & (width - 1)) >= int(delta) ? lane - int(delta) : -1);
}

template <typename T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

}  // namespace dlmsvdd::emu

// Kernel code spells the built-ins unqualified, as in CUDA.
using dlmsvdd::emu::__shfl_down_sync;
using dlmsvdd::emu::__shfl_sync;
using dlmsvdd::emu::__shfl_up_sync;
using dlmsvdd::emu::__shfl_xor_sync;
using dlmsvdd::emu::__syncthreads;
using dlmsvdd::emu::__syncwarp;
using dlmsvdd::emu::atomicAdd;
using dlmsvdd::emu::blockDim;
using dlmsvdd::emu::blockIdx;
using dlmsvdd::emu::dim3;
using dlmsvdd::emu::gridDim;
using dlmsvdd::emu::threadIdx;
using dlmsvdd::emu::uint3;
using dlmsvdd::emu::warpSize;
