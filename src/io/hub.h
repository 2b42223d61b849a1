// Model files from the Hugging Face hub: `-hf REPO:FILE` specs, the local
// cache, and a resumable HTTP(S) download through libcurl.
//
// URL:   <endpoint>/<owner>/<name>/resolve/main/<file>   (the hub answers with
//        a redirect to its CDN, which is followed)
// Cache: <cache_dir>/<owner>/<name>/<file>                (one folder per repo;
//        <file> keeps its own subfolders, e.g. tinyllamas/stories15M-q4_0.gguf)
//
// A file already in the cache is returned without touching the network. A
// download goes to <path>.part and is renamed into place only when complete;
// an interrupted one resumes from the .part with an HTTP Range request.
//
// The library reads no environment variables and never prints: the cache
// folder and endpoint are parameters (hub_options_from_env() computes the
// usual defaults for the command line), progress goes to a callback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace tokamak::io {

// The model `tokamak run` uses when no -m is given: TinyStories 15M, Q4_0.
inline constexpr std::string_view kDefaultHubRepo = "ggml-org/models";
inline constexpr std::string_view kDefaultHubFile = "tinyllamas/stories15M-q4_0.gguf";
inline constexpr uint64_t kDefaultHubFileBytes = 19'077'344;
inline constexpr std::string_view kDefaultHubEndpoint = "https://huggingface.co";

// One file of one hub repository.
struct HubFile {
  std::string repo;  // "owner/name"
  std::string file;  // path inside the repo, '/'-separated
};

inline HubFile default_hub_file() { return {std::string(kDefaultHubRepo), std::string(kDefaultHubFile)}; }

// Parses "owner/name:path/in/repo.gguf". Throws tokamak::Error naming the spec
// when FILE is missing (repos are not listed), or when the repo or file name is
// not a plain relative name (see validate_hub_file).
HubFile parse_hf_spec(std::string_view spec);

// Checks what a hub file name may contain before it becomes a URL and a path
// under the cache: repo = exactly "owner/name" of [A-Za-z0-9._-]; file = one
// or more '/'-separated parts, none empty, "." or "..", no '\\', no control
// characters. Throws tokamak::Error naming the offending value.
void validate_hub_file(const HubFile& f);

struct DownloadLimits {
  long connect_timeout_s = 30;
  // Abort when less than 1 byte/s arrives for this long (a stalled CDN);
  // the .part is kept, so the next call resumes.
  long stall_timeout_s = 60;
};

struct HubOptions {
  std::filesystem::path cache_dir;                          // required
  std::string endpoint = std::string(kDefaultHubEndpoint);  // scheme://host[:port][/prefix]
  DownloadLimits limits;
  // Only the cache: hub_fetch of a file not in it throws without connecting.
  bool offline = false;
};

// The defaults the command line uses, from an environment accessor (pass
// std::getenv, or a fake in tests; it returns nullptr for an unset variable):
//   cache_dir = $XDG_CACHE_HOME/tokamak when that is an absolute path,
//               else $HOME/.cache/tokamak  (tokamak::Error when neither is usable)
//   endpoint  = $HF_ENDPOINT when set and non-empty (a trailing '/' dropped),
//               else kDefaultHubEndpoint
//   offline   = $HF_HUB_OFFLINE is 1, ON, YES or TRUE in any case (the values
//               the Hugging Face tools take as true)
HubOptions hub_options_from_env(const std::function<const char*(const char*)>& getenv);

// <endpoint>/<repo>/resolve/main/<file>, the file's parts percent-encoded.
std::string hub_url(const HubOptions& options, const HubFile& f);
// <cache_dir>/<owner>/<name>/<file>
std::filesystem::path hub_cache_path(const HubOptions& options, const HubFile& f);

// Called after each received chunk: bytes of the file now on disk (a resumed
// download starts above zero), and the file's total size, or 0 when the server
// did not say. Within one download call `done` never decreases. May throw; the
// download then stops, keeps its .part, and the exception propagates.
using DownloadProgress = std::function<void(uint64_t done, uint64_t total)>;

// Returns the cached path of `f`, downloading it first when it is not in the
// cache. Throws tokamak::Error: a failed transfer names the URL, the curl
// reason and suggests `-m PATH`; an HTTP error names the URL and the status;
// a disk error names the path; with `options.offline`, a file not in the cache
// is an error that names it and the cache path.
std::filesystem::path hub_fetch(const HubFile& f, const HubOptions& options,
                                const DownloadProgress& progress = {});

// The transfer under hub_fetch: `url` into `dest` by way of `dest`.part,
// resuming from an existing .part. Overwrites `dest` when complete. The .part
// is locked (flock) while in use, so two processes never write into one.
void download_file(const std::string& url, const std::filesystem::path& dest,
                   const DownloadLimits& limits, const DownloadProgress& progress = {});

}  // namespace tokamak::io
