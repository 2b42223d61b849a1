// tokamak make-model: a random-weight GGUF in the shapes of a real model, for
// benchmarks (`tokamak bench`) and tests. Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/args.h"
#include "cli/progress_bar.h"
#include "cli/std_streams.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "tools/make_model.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"--preset", "NAME", "model shape and architecture options (the presets are listed below)"},
    {"--type", "TYPE", "f32, f16, bf16, q8_0, q4_0, q4_k_m, ... (llama-quantize's mix; default f16)"},
    {"-o,--output", "FILE", "the GGUF file to write (- for stdout)"},
    {"--vocab-from", "FILE", "copy this GGUF's tokenizer (and its vocabulary size)"},
    {"--layers", "N", "override the preset's layer count (e.g. --layers 32 for the full mistral-7b)"},
    {"--seed", "N", "random seed (default 0)"},
    {"--pure", "", "every matrix in TYPE, no llama-quantize mix"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    {"-h,--help", "", "show this help"},
};

// The preset table for --help: name, shape, and what the preset is.
std::string preset_help() {
  std::string out = "\npresets (micro ones are tiny models with a family's options, for tests):\n";
  char line[256];
  for (const ModelPreset& p : model_presets()) {
    std::snprintf(line, sizeof line, "  %-16s %-5s %4d x %-2d layers, %2d/%-2d heads, vocab %6d  %.*s\n",
                  std::string(p.name).c_str(), std::string(p.architecture).c_str(), p.n_embd, p.n_layers, p.n_heads,
                  p.n_kv_heads, p.n_vocab, static_cast<int>(p.about.size()), p.about.data());
    out += line;
  }
  return out;
}

int make_model_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("make-model", "--preset NAME [--type TYPE] -o FILE [options]", kOptions).c_str(), stdout);
    std::fputs(preset_help().c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty()) throw UsageError("unexpected argument '" + args.positional()[0] + "'");
  const std::optional<std::string> preset_name = args.get("--preset");
  const std::optional<std::string> output = args.get("--output");
  if (!preset_name || !output) throw UsageError("make-model needs --preset NAME and -o FILE");
  const ModelPreset* preset = find_model_preset(*preset_name);
  if (preset == nullptr) {
    throw UsageError("option --preset: unknown preset '" + *preset_name + "' (known: " + model_preset_names() + ")");
  }
  const std::string type_name = args.get_or("--type", "f16");
  const std::optional<FileType> ftype = file_type_from_name(type_name);
  if (!ftype) throw UsageError("option --type: unknown type '" + type_name + "' (known: " + file_type_names() + ")");
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));

  MakeModelOptions options;
  options.preset = *preset;
  options.preset.n_layers = static_cast<int32_t>(args.get_int("--layers", preset->n_layers, 1, 4096));
  options.ftype = *ftype;
  options.pure = args.has("--pure");
  options.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
  std::optional<io::GgufFile> vocab;
  if (const std::optional<std::string> v = args.get("--vocab-from")) {
    vocab = io::GgufFile::open(*v);
    options.vocab_from = &*vocab;
  }

  io::OutputFile out = open_output(*output, "-o", true);
  ThreadPool pool(threads);
  const auto start = std::chrono::steady_clock::now();
  uint64_t total_bytes = 0;
  {
    ProgressBar bar("make-model " + std::string(preset->name) + " " + std::string(file_type_name(*ftype)));
    make_model(options, out, pool, [&](const MadeTensor&, uint64_t done, uint64_t total) {
      total_bytes = done;
      bar.update(done, total);
    });
  }
  out.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "wrote %s: %.1f MiB of tensors in %.1f s (%d threads)\n", out.name().c_str(),
               static_cast<double>(total_bytes) / (1024.0 * 1024.0), seconds, threads);
  return 0;
}

}  // namespace

int make_model_command(int argc, char** argv) { return make_model_main(argc, argv); }

}  // namespace tokamak::cli
