// A read-only memory mapping of a whole file (RAII, move-only).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tokamak {

class MappedFile {
 public:
  // Throws tokamak::Error naming the path and the system's reason.
  static MappedFile open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tokamak
