#include "core/huge_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace tokamak {

HugePageBuffer::HugePageBuffer(size_t bytes, const std::string& what) {
  if (bytes == 0) return;
  if (bytes > (size_t{1} << 62)) {  // no machine maps this much; also keeps the rounding below from overflowing
    throw Error(what + ": cannot allocate " + std::to_string(bytes) + " bytes: more than any address space holds");
  }
  const size_t span = (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
  void* base = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    throw Error(what + ": cannot allocate " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  base_ = base;
  span_ = span;
  data_ = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage);
  size_ = bytes;
  // Advice only: without THP the buffer works on 4 KiB pages.
  ::madvise(data_, span - static_cast<size_t>(data_ - static_cast<std::byte*>(base)), MADV_HUGEPAGE);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      span_(std::exchange(other.span_, 0)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    this->~HugePageBuffer();
    base_ = std::exchange(other.base_, nullptr);
    span_ = std::exchange(other.span_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

HugePageBuffer::~HugePageBuffer() {
  if (base_ != nullptr) ::munmap(base_, span_);
  base_ = nullptr;
  span_ = 0;
  data_ = nullptr;
  size_ = 0;
}

void HugePageBuffer::make_read_only(bool read_only) {
  if (base_ != nullptr) ::mprotect(base_, span_, read_only ? PROT_READ : PROT_READ | PROT_WRITE);
}

void release_pages(std::byte* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // Advice: where it fails the pages just stay resident.
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace tokamak
