// A growable, uninitialised byte buffer aligned to 64 bytes (a cache line and
// an AVX-512 register), for scratch that kernels reuse across calls: it only
// reallocates when asked for more than it holds, so a steady decode loop
// allocates nothing.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace tokamak {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;

  // Makes size() >= n; the contents are lost when it grows.
  void reserve(size_t n) {
    if (n <= size_) return;
    const size_t rounded = (n + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr) throw std::bad_alloc();
    data_.reset(static_cast<std::byte*>(p));
    size_ = rounded;
  }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data_;
  size_t size_ = 0;
};

}  // namespace tokamak
