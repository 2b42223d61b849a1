// Where a writer's bytes go: a file that appears under its name only when it
// is complete, or an already open descriptor (stdout for `-o -`).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace tokamak::io {

// A new file is written unnamed (O_TMPFILE in the target's folder, so a process
// killed midway leaves nothing behind) or, where the file system has no
// O_TMPFILE, under "<path>.tmp.<pid>.<n>" that the destructor removes. commit()
// syncs it and renames it over `path` in one step: readers see the old file or
// the whole new one, never a prefix. Not thread safe; one writer at a time.
class OutputFile {
 public:
  // Throws tokamak::Error naming the path when the folder is not writable.
  static OutputFile create(const std::filesystem::path& path);
  // Writes go to `fd` as they come (not owned, not closed); commit() only
  // checks that nothing failed. `name` is for messages ("stdout").
  static OutputFile of_descriptor(int fd, std::string name);

  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&&) = delete;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // without commit(): the partial file is removed

  // The whole span or an Error "<name>: write failed: <reason>" (a full disk,
  // a closed pipe: SIGPIPE must be ignored for that to be an error, not death).
  void write(std::span<const std::byte> bytes);
  void commit();  // throws Error when syncing or renaming fails
  const std::string& name() const { return name_; }

 private:
  OutputFile() = default;
  int fd_ = -1;
  bool owned_ = false;            // a file we created (vs. a descriptor we were given)
  std::filesystem::path target_;  // the final name; empty for a descriptor
  std::filesystem::path temp_;    // the named temporary; empty while unnamed (O_TMPFILE)
  std::string name_;
};

}  // namespace tokamak::io
