// Where the reference data of ../shared lives, for tests.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tokamak::testing {

// Whether the build is instrumented (ASan): heavy tests then check less.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif


// $TOKAMAK_TEST_DATA, else ../shared beside the checkout (resolved by CMake).
std::filesystem::path test_data_dir();
// test_data_dir() / relative; the test fails (GTEST_SKIP is not used: missing data is an error).
std::filesystem::path test_data(const std::string& relative);
// The tokamak executable: $TOKAMAK_BIN, else the one this build made.
std::filesystem::path tokamak_bin();
std::vector<float> read_f32_file(const std::filesystem::path& path);
std::string read_text_file(const std::filesystem::path& path);  // any bytes, read as they are
// temp_directory_path() / "tokamak_<pid>_<name>": distinct per test process.
std::filesystem::path temp_file(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs argv (no shell) with optional extra environment "K=V" entries (they replace
// inherited ones of the same name) and stdin text.
CommandResult run_command(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                          const std::string& stdin_text = "");

}  // namespace tokamak::testing
