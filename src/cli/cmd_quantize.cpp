// tokamak quantize: rewrite a GGUF with its weights in another type, following
// llama-quantize's recipes (tools/quant_recipe.h). One line per tensor on stderr:
// stdout stays free for the file itself (`quantize IN - TYPE`).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cli/args.h"
#include "cli/std_streams.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "tools/quantize_model.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"--pure", "", "every matrix in TYPE, no mix (row-length fallbacks still apply)"},
    {"--allow-requantize", "", "accept an input whose weights are already quantized (quality drops twice)"},
    {"-t,--threads", "N", "threads (default: all cores; also the optional 4th argument, as llama-quantize)"},
    {"-h,--help", "", "show this help"},
};

std::string shape(const TensorPlan& p) {
  std::string s = "[";
  for (int d = 0; d < p.n_dims; ++d) s += (d ? ", " : "") + std::to_string(p.ne[static_cast<size_t>(d)]);
  return s + "]";
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// llama-quantize refuses to requantize unless asked: a quantized input is
// dequantized first, so its rounding errors add to the new ones.
void check_requantize(const io::GgufFile& in, const std::string& path) {
  for (const io::GgufTensorInfo& t : in.tensors()) {
    if (dtype_traits(t.type).block_size > 1) {
      throw UsageError(path + ": tensor " + t.name + " is already quantized (" + std::string(dtype_name(t.type)) +
                       "); quantize the f32/f16/bf16 original, or pass --allow-requantize to accept the extra loss");
    }
  }
}

int quantize_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  const std::string synopsis = "IN.gguf OUT.gguf TYPE [THREADS] [--pure] [--allow-requantize] [-t N]\n\n"
                               "OUT.gguf '-' writes to stdout. The per-tensor table goes to stderr.\nTYPE: " +
                               file_type_names();
  if (args.has("--help")) {
    std::fputs(usage_text("quantize", synopsis, kOptions).c_str(), stdout);
    return 0;
  }
  const std::vector<std::string>& pos = args.positional();
  if (pos.size() != 3 && pos.size() != 4) {
    throw UsageError("quantize needs IN.gguf OUT.gguf TYPE [THREADS], got " + std::to_string(pos.size()) +
                     " arguments");
  }
  const std::optional<FileType> ftype = file_type_from_name(pos[2]);
  if (!ftype) throw UsageError("unknown type '" + pos[2] + "' (known: " + file_type_names() + ")");
  if (pos[1] != "-" && std::filesystem::exists(pos[1]) && std::filesystem::exists(pos[0]) &&
      std::filesystem::equivalent(pos[0], pos[1])) {
    throw UsageError("the output " + pos[1] + " is the input file; give another name");
  }
  const int64_t all_cores = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = args.get_int("--threads", all_cores, 1, 1024);
  if (pos.size() == 4) {
    if (args.has("--threads")) throw UsageError("give the thread count once: as THREADS or with -t");
    char* end = nullptr;
    threads = std::strtoll(pos[3].c_str(), &end, 10);
    if (pos[3].empty() || *end != '\0' || threads < 1 || threads > 1024) {
      throw UsageError("THREADS: '" + pos[3] + "' is not a thread count in [1, 1024]");
    }
  }

  const io::GgufFile in = io::GgufFile::open(pos[0]);
  if (!args.has("--allow-requantize")) check_requantize(in, pos[0]);
  QuantizeOptions options;
  options.ftype = *ftype;
  options.pure = args.has("--pure");
  ThreadPool pool(static_cast<int>(threads));
  const auto start = std::chrono::steady_clock::now();
  const size_t n_total = plan_quantization(in, options).size();
  size_t in_bytes = 0;
  size_t out_bytes = 0;
  io::OutputFile out = open_output(pos[1], "OUT.gguf", true);
  quantize_gguf(in, out, options, pool, [&](size_t index, const TensorPlan& p) {
    in_bytes += p.bytes_from;
    out_bytes += p.bytes_to;
    std::fprintf(stderr, "[%4zu/%4zu] %-32s %-20s %6s -> %-6s %9.2f MiB -> %8.2f MiB\n", index + 1, n_total,
                 p.name.c_str(), shape(p).c_str(), std::string(dtype_name(p.from)).c_str(),
                 std::string(dtype_name(p.to)).c_str(), mib(p.bytes_from), mib(p.bytes_to));
  });
  out.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "%s: %s, tensors %.2f MiB -> %.2f MiB in %.1f s (%lld threads)\n", out.name().c_str(),
               std::string(file_type_name(*ftype)).c_str(), mib(in_bytes), mib(out_bytes), seconds,
               static_cast<long long>(threads));
  return 0;
}

}  // namespace

int quantize_command(int argc, char** argv) { return quantize_main(argc, argv); }

}  // namespace tokamak::cli
