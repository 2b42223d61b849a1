// Hub names, options and cache paths; the transfer itself is in hub_download.cpp.
#include "io/hub.h"

#include <cctype>
#include <string>
#include <system_error>

#include "core/error.h"

namespace tokamak::io {
namespace {

namespace fs = std::filesystem;

bool is_repo_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// One part of a '/'-separated path: it must stay inside its parent folder.
bool is_plain_part(std::string_view part) { return !part.empty() && part != "." && part != ".."; }

void validate_repo(std::string_view repo) {
  const size_t slash = repo.find('/');
  const bool ok = slash != std::string_view::npos && repo.find('/', slash + 1) == std::string_view::npos &&
                  is_plain_part(repo.substr(0, slash)) && is_plain_part(repo.substr(slash + 1));
  if (!ok) throw Error("hub repo '" + std::string(repo) + "' must have the form owner/name");
  for (char c : repo) {
    if (c != '/' && !is_repo_char(c)) {
      throw Error("hub repo '" + std::string(repo) + "' has a character other than A-Z a-z 0-9 . _ - in owner/name");
    }
  }
}

void validate_file(std::string_view file) {
  if (file.empty()) throw Error("hub file name is empty");
  for (char c : file) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || u < 0x20 || u == 0x7f) {
      throw Error("hub file name '" + std::string(file) + "' has a backslash or a control character");
    }
  }
  size_t begin = 0;
  while (true) {
    const size_t end = file.find('/', begin);
    const std::string_view part = file.substr(begin, end == std::string_view::npos ? end : end - begin);
    if (!is_plain_part(part)) {
      throw Error("hub file name '" + std::string(file) +
                  "' must be a relative path without empty, '.' or '..' parts");
    }
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
}

// RFC 3986: everything but the unreserved characters and the '/' between parts.
std::string percent_encode_path(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(path.size());
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (is_repo_char(c) || c == '~' || c == '/') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace

void validate_hub_file(const HubFile& f) {
  validate_repo(f.repo);
  validate_file(f.file);
}

HubFile parse_hf_spec(std::string_view spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string_view::npos || colon + 1 == spec.size()) {
    throw Error("-hf '" + std::string(spec) + "': name the file inside the repository as REPO:FILE, e.g. " +
                std::string(kDefaultHubRepo) + ":" + std::string(kDefaultHubFile) +
                " (tokamak does not list a repository's files)");
  }
  HubFile f{std::string(spec.substr(0, colon)), std::string(spec.substr(colon + 1))};
  try {
    validate_hub_file(f);
  } catch (const Error& e) {
    throw Error("-hf '" + std::string(spec) + "': " + e.what());
  }
  return f;
}

HubOptions hub_options_from_env(const std::function<const char*(const char*)>& getenv) {
  const auto get = [&](const char* name) -> std::string {
    const char* v = getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  HubOptions o;
  // XDG Base Directory spec: a relative $XDG_CACHE_HOME is invalid and ignored.
  if (const std::string xdg = get("XDG_CACHE_HOME"); !xdg.empty() && fs::path(xdg).is_absolute()) {
    o.cache_dir = fs::path(xdg) / "tokamak";
  } else if (const std::string home = get("HOME"); !home.empty() && fs::path(home).is_absolute()) {
    o.cache_dir = fs::path(home) / ".cache" / "tokamak";
  } else {
    throw Error(
        "no folder for downloaded models: neither XDG_CACHE_HOME nor HOME is set to an absolute path "
        "(set one, or pass a local model file with -m PATH)");
  }
  if (std::string endpoint = get("HF_ENDPOINT"); !endpoint.empty()) {
    if (!endpoint.starts_with("http://") && !endpoint.starts_with("https://")) {
      throw Error("HF_ENDPOINT '" + endpoint + "' must start with http:// or https://");
    }
    while (endpoint.ends_with('/')) endpoint.pop_back();
    o.endpoint = std::move(endpoint);
  }
  std::string offline = get("HF_HUB_OFFLINE");
  for (char& c : offline) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  o.offline = offline == "1" || offline == "ON" || offline == "YES" || offline == "TRUE";
  return o;
}

std::string hub_url(const HubOptions& options, const HubFile& f) {
  validate_hub_file(f);
  std::string_view endpoint = options.endpoint;
  while (endpoint.ends_with('/')) endpoint.remove_suffix(1);
  return std::string(endpoint) + "/" + f.repo + "/resolve/main/" + percent_encode_path(f.file);
}

fs::path hub_cache_path(const HubOptions& options, const HubFile& f) {
  validate_hub_file(f);
  // Validated names split on '/' into plain parts, so the result stays under cache_dir.
  return options.cache_dir / fs::path(f.repo) / fs::path(f.file);
}

fs::path hub_fetch(const HubFile& f, const HubOptions& options, const DownloadProgress& progress) {
  if (options.cache_dir.empty()) throw Error("hub download of " + f.repo + ":" + f.file + ": no cache folder given");
  const fs::path dest = hub_cache_path(options, f);
  std::error_code ec;
  if (fs::is_regular_file(dest, ec)) return dest;
  if (options.offline) {
    throw Error(f.repo + ":" + f.file + " is not in the model cache (" + dest.string() +
                ") and offline mode (HF_HUB_OFFLINE) allows no download; unset HF_HUB_OFFLINE, or pass a local model "
                "file with -m PATH");
  }
  fs::create_directories(dest.parent_path(), ec);
  if (ec) throw Error("cannot create the model cache folder " + dest.parent_path().string() + ": " + ec.message());
  download_file(hub_url(options, f), dest, options.limits, progress);
  return dest;
}

}  // namespace tokamak::io
