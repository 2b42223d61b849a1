// tokamak bench: prefill and decode speed of a model beside the memory
// roofline (tools/bench.h), as a table or, with --json, one JSON object per
// line per test.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/parallel.h"
#include "cli/kv_options.h"
#include "cli/matmul_options.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "tools/bench.h"
#include "io/gguf.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "tools/quant_recipe.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin"},
    {"-p,--n-prompt", "N", "prefill test: one batch of N tokens; 0 = skip (default 512)"},
    {"-n,--n-gen", "N", "decode test: N tokens one at a time; 0 = skip (default 128)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    {"-r,--repetitions", "N", "measured runs of each test (default 5)"},
    {"--ctx", "N,M,...", "decode tests after these context lengths, filled with random K/V (default 0)"},
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    kIsaOption,
    kParallelOptions[0], kParallelOptions[1],
    {"--json", "", "one JSON object per line per test instead of the table"},
    {"-h,--help", "", "show this help"},
};

// What the file says it is: "Q4_K_M" from general.file_type, else the type
// of its first layer's ffn_up; with the format loading widened that to
// (kernels/widen.h): "TQ1_0 (as tq2_0)".
std::string model_type(const Model& model) {
  const TensorView& loaded = model.weights().layers.empty() ? model.weights().output : model.weights().layers[0].ffn_up;
  std::string named(dtype_name(loaded.type));
  std::string as;
  if (model.gguf()) {
    if (const io::GgufTensorInfo* info = model.gguf()->find_tensor(model.weights().layers.empty() ? "output.weight" : "blk.0.ffn_up.weight")) {
      named = dtype_name(info->type);
      if (info->type != loaded.type) as = " (as " + std::string(dtype_name(loaded.type)) + ")";
    }
    if (const std::optional<int64_t> ft = model.gguf()->get_int("general.file_type")) {
      if (*ft >= 0 && *ft <= UINT32_MAX) {
        if (const std::optional<FileType> t = file_type_from_id(static_cast<uint32_t>(*ft))) named = file_type_name(*t);
      }
    }
  }
  return named + as;
}

int64_t n_params(const Model& model) {
  const ModelWeights& w = model.weights();
  int64_t n = w.token_embd.n_elements() + w.output_norm.n_elements();
  if (!model.config().tied_output) n += w.output.n_elements();
  for (const LayerWeights& l : w.layers) {
    for (const TensorView* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
      n += t->n_elements();
    }
  }
  return n;
}

// "128,1024,8192" -> {128, 1024, 8192}; errors name --ctx and the item.
std::vector<int32_t> parse_contexts(const std::string& text) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > (1 << 24)) {
      throw UsageError("option --ctx: '" + item + "' is not a context length in [0, 16777216]");
    }
    out.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string size_text(size_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? fixed(mib / 1024.0, 2) + " GiB" : fixed(mib, 2) + " MiB";
}

std::string count_text(int64_t n) {
  const double v = static_cast<double>(n);
  return v >= 1e9 ? fixed(v / 1e9, 2) + " B" : fixed(v / 1e6, 2) + " M";
}

int bench_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("bench", "-m MODEL [-p 512] [-n 128] [--ctx 128,8192] [-t N] [-r 5] [--json]", kOptions).c_str(),
               stdout);
    return 0;
  }
  if (!args.positional().empty()) throw UsageError("unexpected argument '" + args.positional()[0] + "'");
  const std::optional<std::string> path = args.get("--model");
  if (!path) throw UsageError("bench needs -m MODEL");
  tools::BenchOptions options;
  options.n_prompt = static_cast<int32_t>(args.get_int("--n-prompt", options.n_prompt, 0, 1 << 20));
  options.n_gen = static_cast<int32_t>(args.get_int("--n-gen", options.n_gen, 0, 1 << 20));
  options.repetitions = static_cast<int>(args.get_int("--repetitions", options.repetitions, 1, 1000));
  if (options.n_prompt == 0 && options.n_gen == 0) throw UsageError("options -p and -n are both 0: nothing to measure");
  if (const std::optional<std::string> ctx = args.get("--ctx")) options.contexts = parse_contexts(*ctx);
  options.kv_format = kv_format_from_args(args);
  options.matmul = matmul_options_from_args(args);
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  const bool json = args.has("--json");

  // Weights repacked for the variant that runs (the AVX2 path on an AVX-512 host, say).
  ParallelModel loaded(args, *path, options.matmul.isa);
  if (loaded.worker()) return loaded.serve(threads);
  const Model& model = loaded.model();
  const int32_t n_ctx =
      std::max(options.n_prompt, options.n_gen + *std::max_element(options.contexts.begin(), options.contexts.end()));
  if (n_ctx > model.config().n_ctx_train) {
    std::fprintf(stderr, "note: %d positions exceed the model's training context %d\n", n_ctx,
                 model.config().n_ctx_train);
  }
  ThreadPool pool(threads);
  const std::vector<tools::BenchResult> results = tools::run_bench(model, pool, options);

  const std::string name = std::filesystem::path(*path).filename().string();
  const std::string type = model_type(model);
  if (json) {
    for (const tools::BenchResult& r : results) {
      nlohmann::json j = {
          {"model", name},
          {"type", type},
          {"params", n_params(model)},
          {"weight_bytes", r.weight_bytes},
          {"kv_bytes", r.kv_bytes},
          {"test", r.test},
          {"n_prompt", r.n_prompt},
          {"n_gen", r.n_gen},
          {"ctx", r.ctx},
          {"kv_type_k", kernels::kv_type_name(options.kv_format.k_type)},
          {"kv_type_v", kernels::kv_type_name(options.kv_format.v_type)},
          {"kv_recent", options.kv_format.recent},
          {"threads", r.threads},
          {"isa", kernels::isa_name(options.matmul.isa)},
          {"repetitions", options.repetitions},
          {"tokens_per_s", r.tokens_per_s.median},
          {"tokens_per_s_min", r.tokens_per_s.min},
          {"tokens_per_s_max", r.tokens_per_s.max},
          {"seconds_median", r.seconds.median},
          {"gflops", r.gflops},
          {"bandwidth_gbs", r.bandwidth_gbs},
          {"roofline_tokens_per_s", r.roofline_tokens_per_s},
          {"roofline_percent", 100.0 * r.roofline_fraction},
          {"compute_roofline_tokens_per_s", r.compute_roofline_tokens_per_s},
          {"binding_percent", 100.0 * r.binding_fraction},
      };
      if (model.parallel() != nullptr) j["comm_ms_per_pass"] = r.comm_ms_per_pass;
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  }
  std::printf("| model | weights | params | type | threads | test | t/s median | min | max | GFLOP/s | GB/s read | roofline t/s | %% of roofline | compute roofline t/s | %% of binding |\n");
  std::printf("|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const tools::BenchResult& r : results) {
    std::printf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name.c_str(),
                size_text(r.weight_bytes).c_str(), count_text(n_params(model)).c_str(), type.c_str(), r.threads,
                (r.ctx > 0 ? r.test + " @ ctx " + std::to_string(r.ctx) : r.test).c_str(),
                fixed(r.tokens_per_s.median, 2).c_str(), fixed(r.tokens_per_s.min, 2).c_str(),
                fixed(r.tokens_per_s.max, 2).c_str(), fixed(r.gflops, 1).c_str(), fixed(r.bandwidth_gbs, 1).c_str(),
                fixed(r.roofline_tokens_per_s, 1).c_str(), fixed(100.0 * r.roofline_fraction, 1).c_str(),
                fixed(r.compute_roofline_tokens_per_s, 1).c_str(), fixed(100.0 * r.binding_fraction, 1).c_str());
  }
  if (model.parallel() != nullptr) {
    for (const tools::BenchResult& r : results) {
      std::printf("%s: rank 0 spent %.3f ms per forward pass in communication (step broadcast, all-reduces, logits)\n",
                  r.test.c_str(), r.comm_ms_per_pass);
    }
  }
  const size_t l2 = kernels::l2_cache_bytes();
  const kernels::MatmulBlocks blocks = kernels::matmul_blocks(l2);
  std::printf("\nkernels: %s; L2 per core %s, GEMM blocks of %zu KiB weights x %zu KiB activations\n",
              std::string(kernels::isa_name(options.matmul.isa)).c_str(),
              l2 == 0 ? "unknown" : (std::to_string(l2 / 1024) + " KiB").c_str(), blocks.weight_bytes / 1024,
              blocks.act_bytes / 1024);
  std::printf("weights: the bytes one forward pass reads (the embedding is read a row per token, so it is left "
              "out);\nroofline: tokens/s if each pass only read them, and a decode step also the KV cache rows it "
              "attends, at the measured bandwidth (prefill: one read per batch, but prefill is compute bound);\n"
              "compute roofline: tokens/s if each pass only ran its weight products, and a decode step also its "
              "attention, at the speed their kernels reach on this machine with the data in cache (prefill: weights "
              "as 64-token GEMMs, attention left out); binding: the lower roofline\n");
  return 0;
}

}  // namespace

int bench_command(int argc, char** argv) { return bench_main(argc, argv); }

}  // namespace tokamak::cli
