// Anonymous memory on transparent huge pages (RAII, move-only), for the big
// buffers that kernels stream: the model weights' copy and the KV pool.
//
// Why: a 4 KiB page covers 64 cache lines, so a stream over a GiB walks the
// page tables every 4 KiB; paged KV attention touches a new page for every
// head's run of rows of every block and layer. 2 MiB pages remove nearly all
// of those walks. The mapping is 2 MiB aligned (over-allocated by one huge
// page) and MADV_HUGEPAGE, which THP honours in its default "madvise" mode.
// Pages cost RAM only once touched; the kernel zeroes them on first touch.
#pragma once

#include <cstddef>
#include <string>

namespace tokamak {

class HugePageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageBuffer() = default;
  // `what` names the buffer in the error thrown when the mapping fails.
  HugePageBuffer(size_t bytes, const std::string& what);
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  ~HugePageBuffer();

  std::byte* data() const { return data_; }  // 2 MiB aligned; null when empty
  size_t size() const { return size_; }
  // Makes the whole buffer read-only (weights once loaded), or writable again.
  void make_read_only(bool read_only = true);

 private:
  void* base_ = nullptr;  // the mapping; data_ is its first 2 MiB boundary
  size_t span_ = 0;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// Gives the whole pages inside [p, p + n) of anonymous memory back to the
// system (they read as zeros if touched again): bytes a model no longer
// reads, such as weights it keeps in another format.
void release_pages(std::byte* p, size_t n);

}  // namespace tokamak
