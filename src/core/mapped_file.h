// A read-only memory image of a whole file (RAII, move-only): a mapping of
// the file, or a copy of it on transparent huge pages.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>

#include "core/huge_pages.h"

namespace tokamak {

// Where the bytes live.
enum class MapMode {
  // mmap of the file: shared through the page cache, evictable, loads
  // instantly. On most file systems (ext4 here) it gets 4 KiB pages only.
  kMapped,
  // The file read into anonymous memory with MADV_HUGEPAGE. Streaming reads
  // of 2 MiB pages need far fewer TLB walks: on the reference 2-core machine
  // 2 threads read ~65 GB/s from them against ~33 GB/s from 4 KiB pages. Costs
  // a copy at load (page cache speed) and memory that cannot be evicted.
  kHugePageCopy,
  // kHugePageCopy for files from 64 MiB up to half of the memory available
  // now (MemAvailable, core/memory_info.h), else kMapped: model weights that
  // decode streams, without risking memory on files close to the machine's
  // size.
  kAuto,
};

class MappedFile {
 public:
  // Throws tokamak::Error naming the path and the system's reason.
  static MappedFile open(const std::filesystem::path& path, MapMode mode = MapMode::kMapped);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }
  // True when the bytes are a copy on huge pages (kHugePageCopy, or kAuto that chose it).
  bool huge_page_copy() const { return copy_.data() != nullptr; }
  // Calls edit with the copy's bytes, writable for the call (an empty span
  // when the file is mapped), then makes them read-only again: Model
  // repacks weights in place this way.
  void rewrite(const std::function<void(std::span<std::byte>)>& edit);

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  HugePageBuffer copy_;  // the bytes when copied; empty: data_ maps the file itself
};

}  // namespace tokamak
