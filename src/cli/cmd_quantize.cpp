// tokamak quantize: rewrite a GGUF with its weights in another type, following
// llama-quantize's recipes (model/quant_recipe.h). One line per tensor on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/args.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "model/quantize_model.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"--pure", "", "every matrix in TYPE, no mix (row-length fallbacks still apply)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    {"-h,--help", "", "show this help"},
};

std::string shape(const TensorPlan& p) {
  std::string s = "[";
  for (int d = 0; d < p.n_dims; ++d) s += (d ? ", " : "") + std::to_string(p.ne[static_cast<size_t>(d)]);
  return s + "]";
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int quantize_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  const std::string synopsis = "IN.gguf OUT.gguf TYPE [--pure] [-t N]\n\nTYPE: " + file_type_names();
  if (args.has("--help")) {
    std::fputs(usage_text("quantize", synopsis, kOptions).c_str(), stdout);
    return 0;
  }
  const std::vector<std::string>& pos = args.positional();
  if (pos.size() != 3) throw Error("quantize needs IN.gguf OUT.gguf TYPE (see --help)");
  const std::optional<FileType> ftype = file_type_from_name(pos[2]);
  if (!ftype) throw Error("unknown type '" + pos[2] + "' (known: " + file_type_names() + ")");
  if (std::filesystem::exists(pos[1]) && std::filesystem::equivalent(pos[0], pos[1])) {
    throw Error("the output " + pos[1] + " is the input file");
  }
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));

  const io::GgufFile in = io::GgufFile::open(pos[0]);
  QuantizeOptions options;
  options.ftype = *ftype;
  options.pure = args.has("--pure");
  ThreadPool pool(threads);
  const auto start = std::chrono::steady_clock::now();
  const size_t n_total = plan_quantization(in, options).size();
  size_t in_bytes = 0;
  size_t out_bytes = 0;
  quantize_gguf(in, pos[1], options, pool, [&](size_t index, const TensorPlan& p) {
    in_bytes += p.bytes_from;
    out_bytes += p.bytes_to;
    std::printf("[%4zu/%4zu] %-32s %-20s %6s -> %-6s %9.2f MiB -> %8.2f MiB\n", index + 1, n_total, p.name.c_str(),
                shape(p).c_str(), std::string(dtype_name(p.from)).c_str(), std::string(dtype_name(p.to)).c_str(),
                mib(p.bytes_from), mib(p.bytes_to));
    std::fflush(stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %s, tensors %.2f MiB -> %.2f MiB in %.1f s (%d threads)\n", pos[1].c_str(),
              std::string(file_type_name(*ftype)).c_str(), mib(in_bytes), mib(out_bytes), seconds, threads);
  return 0;
}

}  // namespace

int quantize_command(int argc, char** argv) { return quantize_main(argc, argv); }

}  // namespace tokamak::cli
