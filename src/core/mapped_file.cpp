#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/memory_info.h"

namespace tokamak {

namespace {

constexpr size_t kAutoMinBytes = size_t{64} << 20;

bool auto_wants_copy(size_t size) {
  const std::optional<int64_t> available = memory_available_bytes();
  return size >= kAutoMinBytes && available && size <= static_cast<uint64_t>(*available) / 2;
}

}  // namespace

MappedFile MappedFile::open(const std::filesystem::path& path, MapMode mode) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path.string() + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path.string() + ": not a regular file");
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  const bool copy = mode == MapMode::kHugePageCopy || (mode == MapMode::kAuto && auto_wants_copy(f.size_));
  if (f.size_ > 0 && copy) {
    try {
      f.copy_ = HugePageBuffer(f.size_, path.string() + ": huge-page copy");
    } catch (const Error&) {
      ::close(fd);
      throw;
    }
    std::byte* data = f.copy_.data();
    for (size_t done = 0; done < f.size_;) {
      const ssize_t got = ::pread(fd, data + done, std::min<size_t>(f.size_ - done, size_t{1} << 30), static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        const int err = got < 0 ? errno : EIO;
        ::close(fd);
        throw Error(path.string() + ": cannot read at offset " + std::to_string(done) + ": " + std::strerror(err));
      }
      done += static_cast<size_t>(got);
    }
    f.copy_.make_read_only();
    f.data_ = data;
  } else if (f.size_ > 0) {
    void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(path.string() + ": cannot mmap: " + std::strerror(err));
    }
    // Asks for huge pages in case the file system can back them.
    ::madvise(p, f.size_, MADV_HUGEPAGE);
    f.data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      copy_(std::move(other.copy_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    this->~MappedFile();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    copy_ = std::move(other.copy_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (copy_.data() == nullptr && data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  copy_ = HugePageBuffer();
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::rewrite(const std::function<void(std::span<std::byte>)>& edit) {
  if (copy_.data() == nullptr) {
    edit({});
    return;
  }
  copy_.make_read_only(false);
  struct Protect {
    HugePageBuffer& buf;
    ~Protect() { buf.make_read_only(); }
  } protect{copy_};
  edit({copy_.data(), size_});
}

}  // namespace tokamak
