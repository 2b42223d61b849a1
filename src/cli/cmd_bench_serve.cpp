// tokamak bench-serve: a seeded synthetic serving workload through the Engine
// (engine/bench_serve.h): throughput, TTFT and inter-token latency
// percentiles, KV use, preemptions and prefix-cache hits, as a table or, with
// --json, one JSON object.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/engine_options.h"
#include "dist/communicator.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "engine/bench_serve.h"
#include "engine/engine.h"
#include "server/bench_client.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kBenchServeOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin"},
    {"-hf", "REPO:FILE", "a GGUF file of a Hugging Face hub repo, cached in ~/.cache/tokamak"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"--requests", "N", "requests in the workload (default 64)"},
    {"--concurrency", "C", "requests in flight at once; a new one starts when one finishes (default 16)"},
    {"--prompt-len", "L[:S]", "prompt tokens after the shared prefix, uniform in [L-S, L+S] (default 128)"},
    {"--output-len", "O[:S]", "output tokens, exactly (EOS ignored), uniform in [O-S, O+S] (default 128)"},
    {"--shared-prefix", "P", "P token ids at the start of every prompt, the same for all (default 0)"},
    {"--seed", "S", "seed of the workload: lengths, prompt tokens, sampling (default 1)"},
    {"--temp", "T", "sampling temperature; 0 = greedy (default 0)"},
    {"--json", "", "print one JSON object instead of the table"},
    {"--url", "URL", "drive a running OpenAI-compatible server (http://HOST:PORT) over streaming HTTP instead of an "
                     "Engine in this process; -m gives the vocabulary for the prompts"},
    {"--api-key", "KEY", "with --url: the server's API key (also $TOKAMAK_API_KEY)"},
    {"--served-model-name", "NAME", "with --url: the \"model\" field of the requests (default: left out)"},
};

// "L" or "L:S" with 0 <= L, S <= 2^20.
engine::LengthRange parse_length(const std::string& flag, const std::string& text) {
  constexpr long kMax = 1 << 20;
  const auto number = [&](const std::string& item) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || v < 0 || v > kMax) {
      throw Error("option " + flag + ": '" + text + "' is not L or L:SPREAD with numbers in [0, " +
                  std::to_string(kMax) + "]");
    }
    return static_cast<int32_t>(v);
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return {number(text), 0};
  return {number(text.substr(0, colon)), number(text.substr(colon + 1))};
}

void print_common(const engine::ServeBenchResult& r) {
  std::printf("%-26s %.2f s\n", "duration", r.seconds);
  std::printf("%-26s %lld prompt, %lld output\n", "tokens", static_cast<long long>(r.prompt_tokens),
              static_cast<long long>(r.output_tokens));
  std::printf("%-26s %.2f\n", "requests/s", r.requests_per_s);
  std::printf("%-26s %.1f\n", "output tokens/s", r.output_tokens_per_s);
  std::printf("%-26s %.1f\n", "total tokens/s", r.total_tokens_per_s);
  std::printf("%-26s p50 %.1f  p90 %.1f  p99 %.1f\n", "TTFT ms", r.ttft_ms.p50, r.ttft_ms.p90, r.ttft_ms.p99);
  std::printf("%-26s p50 %.1f  p90 %.1f  p99 %.1f\n", "inter-token latency ms", r.itl_ms.p50, r.itl_ms.p90,
              r.itl_ms.p99);
  std::printf("%-26s %lld\n", "preemptions", static_cast<long long>(r.preemptions));
  std::printf("%-26s %.1f%%\n", "prefix-cache hit rate", 100.0 * r.prefix_hit_rate);
  if (r.spec_draft_tokens > 0) {
    std::printf("%-26s %lld drafted, %lld accepted (%.1f%%); by position:", "speculation",
                static_cast<long long>(r.spec_draft_tokens), static_cast<long long>(r.spec_accepted_tokens),
                100.0 * static_cast<double>(r.spec_accepted_tokens) / static_cast<double>(r.spec_draft_tokens));
    for (const int64_t n : r.spec_accepted_per_position) std::printf(" %lld", static_cast<long long>(n));
    std::printf("\n");
  }
}

nlohmann::ordered_json percentiles_json(const engine::LatencyPercentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

std::string range_text(const engine::LengthRange& r) {
  return r.spread > 0 ? std::to_string(r.mean) + "±" + std::to_string(r.spread) : std::to_string(r.mean);
}

// The figures both modes measure: throughput and client-side latency.
nlohmann::ordered_json common_json(const engine::ServeBenchResult& r, const engine::ServeBenchOptions& bench) {
  return {{"requests", r.requests},
          {"concurrency", bench.concurrency},
          {"seed", bench.seed},
          {"prompt_tokens", r.prompt_tokens},
          {"output_tokens", r.output_tokens},
          {"seconds", r.seconds},
          {"output_tokens_per_s", r.output_tokens_per_s},
          {"total_tokens_per_s", r.total_tokens_per_s},
          {"requests_per_s", r.requests_per_s},
          {"ttft_ms", percentiles_json(r.ttft_ms)},
          {"itl_ms", percentiles_json(r.itl_ms)},
          {"preemptions", r.preemptions},
          {"prefix_hit_rate", r.prefix_hit_rate},
          {"spec_draft_tokens", r.spec_draft_tokens},
          {"spec_accepted_tokens", r.spec_accepted_tokens},
          {"spec_accepted_per_position", r.spec_accepted_per_position}};
}

// --url: the same workload against a live server (server/bench_client.h).
int bench_url(const ParsedArgs& args, const std::string& url, const Model& model,
              const std::filesystem::path& model_path, const engine::ServeBenchOptions& bench) {
  server::HttpBenchTarget target;
  target.url = url;
  const char* env_key = std::getenv("TOKAMAK_API_KEY");
  target.api_key = args.get_or("--api-key", env_key != nullptr ? env_key : "");
  target.model = args.get_or("--served-model-name", "");
  const int32_t max_model_len = engine::default_max_model_len(
      model, static_cast<int32_t>(args.get_int("--max-model-len", 0, 1, 1 << 24)));
  const engine::ServeBenchResult r =
      server::run_http_serve_bench(target, bench, model.config().n_vocab, max_model_len);
  if (args.has("--json")) {
    nlohmann::ordered_json j = {{"url", url}, {"model", model_path.filename().string()}};
    j.update(common_json(r, bench));
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("bench-serve: %s, vocabulary of %s; %d requests, concurrency %d, prompt %s (+%d shared), output %s "
              "tokens, seed %llu\n\n",
              url.c_str(), model_path.filename().string().c_str(), r.requests, bench.concurrency,
              range_text(bench.prompt_len).c_str(), bench.shared_prefix, range_text(bench.output_len).c_str(),
              static_cast<unsigned long long>(bench.seed));
  print_common(r);
  return 0;
}

int bench_serve_main(int argc, char** argv) {
  const std::vector<OptionSpec> options = with_engine_options(kBenchServeOptions);
  const ParsedArgs args = ParsedArgs::parse(options, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("bench-serve",
                          "-m MODEL [--requests N] [--concurrency C] [--prompt-len L[:S]] [--output-len O[:S]] "
                          "[--shared-prefix P] [--seed S] [--json] [engine options]",
                          options)
                   .c_str(),
               stdout);
    return 0;
  }
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "'");
  engine::ServeBenchOptions bench;
  bench.requests = static_cast<int32_t>(args.get_int("--requests", bench.requests, 1, 1 << 24));
  bench.concurrency = static_cast<int32_t>(args.get_int("--concurrency", bench.concurrency, 1, 1 << 20));
  if (const auto t = args.get("--prompt-len")) bench.prompt_len = parse_length("--prompt-len", *t);
  if (const auto t = args.get("--output-len")) bench.output_len = parse_length("--output-len", *t);
  bench.shared_prefix = static_cast<int32_t>(args.get_int("--shared-prefix", 0, 0, 1 << 20));
  bench.seed = static_cast<uint64_t>(args.get_int("--seed", 1, 0, std::numeric_limits<int64_t>::max()));
  bench.temperature = static_cast<float>(args.get_float("--temp", 0.0, 0.0, 100.0));
  engine::EngineOptions engine_options = engine_options_from_args(args);

  const std::filesystem::path model_path = resolve_model_path(args);
  ParallelModel loaded(args, model_path);
  if (loaded.worker()) return loaded.serve(engine_options.threads);
  const Model& model = loaded.model();
  if (const std::optional<std::string> url = args.get("--url")) {
    return bench_url(args, *url, model, model_path, bench);
  }
  const Tokenizer tokenizer = load_tokenizer(model, model_path, args.get("--tokenizer"));
  const std::unique_ptr<Model> draft = load_draft_model(args, tokenizer, engine_options);
  engine::Engine engine(model, tokenizer, engine_options);
  const double comm_before = model.parallel() != nullptr ? model.parallel()->comm_seconds() : 0.0;
  const engine::ServeBenchResult r = engine::run_serve_bench(engine, bench);
  // Split across processes: rank 0's time in communication per engine step
  // (the step's broadcast, the all-reduces, the logits rows coming back).
  const double comm_ms_per_step =
      model.parallel() != nullptr ? 1e3 * (model.parallel()->comm_seconds() - comm_before) / std::max<int64_t>(1, r.steps)
                                  : 0.0;

  const engine::EngineOptions& eo = engine.options();
  const int32_t n_blocks = engine.kv_cache().pool().n_blocks();
  if (args.has("--json")) {
    nlohmann::ordered_json j = {{"model", model_path.filename().string()}, {"threads", eo.threads}};
    j.update(common_json(r, bench));
    j.update(nlohmann::ordered_json{{"peak_kv_usage", r.peak_kv_usage},
                                    {"kv_blocks", n_blocks},
                                    {"steps", r.steps},
                                    {"overhead_fraction", r.overhead_fraction},
                                    {"kv_waste", r.kv_waste}});
    if (model.parallel() != nullptr) j["comm_ms_per_step"] = comm_ms_per_step;
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("bench-serve: %s, %d threads; %d requests, concurrency %d, prompt %s (+%d shared), output %s tokens, "
              "seed %llu\n",
              model_path.filename().string().c_str(), eo.threads, r.requests, bench.concurrency,
              range_text(bench.prompt_len).c_str(), bench.shared_prefix, range_text(bench.output_len).c_str(),
              static_cast<unsigned long long>(bench.seed));
  std::printf("engine: max_model_len %d, max_num_seqs %d, max_num_batched_tokens %d, prefix caching %s, %d KV blocks "
              "of %d tokens\n\n",
              eo.max_model_len, eo.max_num_seqs, eo.max_num_batched_tokens, eo.enable_prefix_caching ? "on" : "off",
              n_blocks, eo.kv_format.block_size);
  std::printf("%-26s %lld steps\n", "engine steps", static_cast<long long>(r.steps));
  print_common(r);
  std::printf("%-26s %.1f%%\n", "peak KV use", 100.0 * r.peak_kv_usage);
  std::printf("%-26s %.2f%% of step time\n", "outside the forward pass", 100.0 * r.overhead_fraction);
  std::printf("%-26s %.2f%% of held slots\n", "KV waste", 100.0 * r.kv_waste);
  if (model.parallel() != nullptr) std::printf("%-26s %.3f ms per step (rank 0)\n", "communication", comm_ms_per_step);
  return 0;
}

}  // namespace

int bench_serve_command(int argc, char** argv) { return bench_serve_main(argc, argv); }

}  // namespace tokamak::cli
