// Runs CUDA kernel bodies on the CPU, so that their logic is tested on machines
// without a GPU (DESIGN.md section 8). Only for host compilers: kernels include
// it through cuda/launch.h when __CUDACC__ is not defined.
//
// A launch runs the grid's blocks one after another; the threads of a block are
// fibers (ucontext) that the launching thread runs in turn, each until it reaches
// a barrier or returns (see Fiber below). Because only one block runs at a time,
// a __shared__ variable can be a function-local static, shared by the block's
// threads. The built-ins (threadIdx, blockIdx, ...) are thread_locals, set for
// each fiber when it resumes. Warp shuffles exchange values through a per-warp
// buffer between two warp barriers; atomics use std::atomic_ref.
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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <ucontext.h>
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

// A warp's lanes exchange shuffled values through its slots.
struct Warp {
  unsigned size = 0;
  uint64_t slot[32] = {};  // one value per lane, for shuffles
};

// The block's threads are fibers (ucontext) run in turn on the launching thread:
// each runs until it reaches a barrier (__syncthreads, or its warp's __syncwarp
// or shuffle) or returns, and a barrier lets its threads go on once every thread
// it counts that has not returned has reached it, as on the GPU (exited threads stop
// counting). No OS thread is created per launch and none waits on the OS scheduler:
// on the 2-core CI machine an emulated APG step of the dual took 13-25 ms instead of
// 210 ms with a std::thread per GPU thread meeting at std::barriers, and the test files
// that emulate most 117 s instead of 306 s. The interleaving is the same on every run.
enum class FiberState { Runnable, AtBlockBarrier, AtWarpBarrier, Returned };

struct Fiber {
  ucontext_t context;
  FiberState state = FiberState::Runnable;
};

struct Block;
struct ThreadState {
  Block* block = nullptr;
  Warp* warp = nullptr;
  unsigned lane = 0;
  unsigned index = 0;  // the thread's index in its block
};
inline thread_local ThreadState current_thread;

struct Block {
  explicit Block(unsigned threads) : fibers(threads), warps((threads + warpSize - 1) / warpSize) {
    for (unsigned w = 0; w < warps.size(); ++w) warps[w].size = std::min<unsigned>(warpSize, threads - w * warpSize);
  }
  ucontext_t scheduler;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  const void* body = nullptr;
  void (*run_body)(const void*) = nullptr;
};

// The fibers' stacks, kept for the next launch (one per thread of the largest block so far).
inline constexpr size_t kFiberStack = 256 * 1024;
inline std::vector<std::unique_ptr<char[]>>& fiber_stacks() {
  static std::vector<std::unique_ptr<char[]>> stacks;
  return stacks;
}

inline void park(FiberState state) {
  Block& b = *current_thread.block;
  Fiber& f = b.fibers[current_thread.index];
  f.state = state;
  swapcontext(&f.context, &b.scheduler);
}

inline void fiber_main() {
  Block& b = *current_thread.block;
  b.run_body(b.body);
  b.fibers[current_thread.index].state = FiberState::Returned;  // uc_link resumes the scheduler
}

// Lets the threads waiting at a barrier go on when all of those it counts have reached it or
// returned; false when none can (a deadlock: threads wait at different barriers).
inline bool release(Block& b) {
  bool released = false, everyone_at_block = true, anyone_at_block = false;
  for (unsigned w = 0; w < b.warps.size(); ++w) {
    bool warp_ready = true, anyone_at_warp = false;
    for (unsigned l = 0; l < b.warps[w].size; ++l) {
      const FiberState s = b.fibers[w * warpSize + l].state;
      anyone_at_warp |= s == FiberState::AtWarpBarrier;
      warp_ready &= s == FiberState::AtWarpBarrier || s == FiberState::Returned;
      everyone_at_block &= s == FiberState::AtBlockBarrier || s == FiberState::Returned;
      anyone_at_block |= s == FiberState::AtBlockBarrier;
    }
    if (anyone_at_warp && warp_ready) {
      for (unsigned l = 0; l < b.warps[w].size; ++l)
        if (b.fibers[w * warpSize + l].state == FiberState::AtWarpBarrier)
          b.fibers[w * warpSize + l].state = FiberState::Runnable;
      released = true;
    }
  }
  if (!released && anyone_at_block && everyone_at_block) {
    for (Fiber& f : b.fibers)
      if (f.state == FiberState::AtBlockBarrier) f.state = FiberState::Runnable;
    released = true;
  }
  return released;
}

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
  auto& stacks = fiber_stacks();
  while (stacks.size() < threads) stacks.emplace_back(new char[kFiberStack]);  // untouched pages stay unmapped
  Block b(threads);
  b.body = &run_block;
  b.run_body = [](const void* body) { (*static_cast<const F*>(body))(); };
  blockDim = block;
  gridDim = grid;
  for (uint64_t i = 0; i < blocks; ++i) {
    blockIdx = {unsigned(i % grid.x), unsigned(i / grid.x % grid.y), unsigned(i / (uint64_t(grid.x) * grid.y))};
    for (unsigned t = 0; t < threads; ++t) {
      Fiber& f = b.fibers[t];
      f.state = FiberState::Runnable;
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = stacks[t].get();
      f.context.uc_stack.ss_size = kFiberStack;
      f.context.uc_link = &b.scheduler;
      makecontext(&f.context, fiber_main, 0);
    }
    for (;;) {
      for (unsigned t = 0; t < threads; ++t) {
        if (b.fibers[t].state != FiberState::Runnable) continue;
        threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
        current_thread = {&b, &b.warps[t / warpSize], t % warpSize, t};
        swapcontext(&b.scheduler, &b.fibers[t].context);
      }
      bool all_returned = true;
      for (const Fiber& f : b.fibers) all_returned &= f.state == FiberState::Returned;
      if (all_returned) break;
      if (!release(b)) fail("deadlock: the block's threads wait at different barriers");
    }
  }
  current_thread = {};
}

inline void __syncthreads() { park(FiberState::AtBlockBarrier); }
inline void __syncwarp(unsigned = 0xffffffffu) { park(FiberState::AtWarpBarrier); }

// Every lane publishes v, then reads lane src's value (its own when src < 0).
template <typename T>
T warp_exchange(unsigned mask, T v, int src) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t));
  Warp& w = *current_thread.warp;
  const unsigned all = w.size == 32 ? 0xffffffffu : (1u << w.size) - 1;
  if ((mask & all) != all) fail("only full-warp shuffles are emulated");
  std::memcpy(&w.slot[current_thread.lane], &v, sizeof(T));
  __syncwarp();
  T r = v;
  if (src >= 0 && unsigned(src) < w.size) std::memcpy(&r, &w.slot[src], sizeof(T));
  __syncwarp();  // nobody overwrites a slot before everyone has read
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
