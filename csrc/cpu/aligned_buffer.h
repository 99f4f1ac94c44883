// A 64-byte aligned scratch array, zero-initialised unless the caller will
// write every element anyway (packed panels: skipping the memset saves a pass).
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

namespace dlmsvdd::cpu {

template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  enum Init { zeroed, uninitialized };
  explicit AlignedBuffer(size_t n, Init init = zeroed) : n_(n) {
    size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    if (bytes == 0) bytes = 64;
    data_ = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!data_) throw std::bad_alloc();
    if (init == zeroed) std::memset(data_, 0, bytes);
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), n_(o.n_) { o.data_ = nullptr; o.n_ = 0; }
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace dlmsvdd::cpu
