// Kernel columns for the Frank-Wolfe methods, on any device: the cache is host
// bookkeeping over storage the caller allocates (torch, so GPU memory goes
// through its allocator); subclasses compute missing columns on their device.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <list>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dlmsvdd {

template <typename T>
class ColumnSource {
 public:
  explicit ColumnSource(int64_t n) : n_(n) {}
  virtual ~ColumnSource() = default;
  // Columns i and j (j may equal i) of the n x n kernel; the pointers stay
  // valid until the next call. An index outside [0, n) throws
  // std::out_of_range (IndexError in Python) before any memory is touched:
  // the Frank-Wolfe loops take atoms from here first, so a bad atom (the -1
  // of an empty class) never reaches a column, an alpha or K a.
  void get(int64_t i, int64_t j, const T** col_i, const T** col_j) {
    for (int64_t k : {i, j})
      if (k < 0 || k >= n_)
        throw std::out_of_range("dlmsvdd: kernel column " + std::to_string(k) + " of " + std::to_string(n_));
    fetch(i, j, col_i, col_j);
  }

 protected:
  virtual void fetch(int64_t i, int64_t j, const T** col_i, const T** col_j) = 0;
  int64_t n_;
};

// A materialised symmetric K: column i is row i.
template <typename T>
class DenseColumns final : public ColumnSource<T> {
 public:
  DenseColumns(const T* k, int64_t ld, int64_t n) : ColumnSource<T>(n), k_(k), ld_(ld) {}

 protected:
  void fetch(int64_t i, int64_t j, const T** col_i, const T** col_j) override {
    *col_i = k_ + i * ld_;
    *col_j = k_ + j * ld_;
  }

 private:
  const T* k_;
  int64_t ld_;
};

// Columns computed on demand into `slots` (>= 2) columns of n entries at
// `storage`, least recently used evicted first, as libsvm's cache does.
template <typename T>
class CachedColumns : public ColumnSource<T> {
 public:
  CachedColumns(T* storage, int64_t n, int64_t slots) : ColumnSource<T>(n), storage_(storage) {
    for (int64_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
  }

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 protected:
  void fetch(int64_t i, int64_t j, const T** col_i, const T** col_j) override {
    bool fresh_i, fresh_j = false;
    T* ci = slot_for(i, -1, &fresh_i);
    T* cj = i == j ? ci : slot_for(j, i, &fresh_j);
    int64_t idx[2];
    T* dst[2];
    int count = 0;
    if (fresh_i) { idx[count] = i; dst[count++] = ci; }
    if (fresh_j) { idx[count] = j; dst[count++] = cj; }
    if (count) compute(idx, count, dst);
    *col_i = ci;
    *col_j = cj;
  }

  // Writes the columns idx[0..count) to dst[0..count) (count is 1 or 2).
  virtual void compute(const int64_t* idx, int count, T* const* dst) = 0;

 private:
  T* slot_for(int64_t idx, int64_t pinned, bool* fresh) {
    auto it = where_.find(idx);
    if (it != where_.end()) {
      recency_.splice(recency_.begin(), recency_, it->second.second);
      *fresh = false;
      ++hits_;
      return storage_ + it->second.first * this->n_;
    }
    int64_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {  // evict the least recently used column that is not the one just fetched
      auto victim = std::prev(recency_.end());
      if (*victim == pinned) victim = std::prev(victim);
      slot = where_[*victim].first;
      where_.erase(*victim);
      recency_.erase(victim);
    }
    recency_.push_front(idx);
    where_[idx] = {slot, recency_.begin()};
    *fresh = true;
    ++misses_;
    return storage_ + slot * this->n_;
  }

  T* storage_;
  std::list<int64_t> recency_;  // most recent first
  std::unordered_map<int64_t, std::pair<int64_t, std::list<int64_t>::iterator>> where_;  // idx -> slot
  std::vector<int64_t> free_slots_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace dlmsvdd
