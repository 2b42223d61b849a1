// tokamak perplexity: PPL of a model over a text by llama-perplexity's method
// (tools/perplexity.h), and KL divergence against a saved reference run.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/matmul_options.h"
#include "cli/kv_options.h"
#include "cli/model_source.h"
#include "cli/prompt_input.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "tools/perplexity.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "model file (GGUF or llama2.c .bin)"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"-f,--file", "FILE", "the text to score; - is stdin (one trailing newline is dropped, as llama.cpp does)"},
    {"-p,--prompt", "TEXT", "the text to score, given inline (instead of -f)"},
    kPromptOptions[2], kPromptOptions[3],
    {"-c,--ctx-size", "N", "tokens per chunk (default 512); the second half of each chunk is scored"},
    {"-b,--batch-size", "N", "tokens per forward pass (default 2048): n_batch / n_ctx chunks side by side"},
    {"--chunks", "N", "score at most N chunks (default: all)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    kMatmulOption,
    kIsaOption,
    {"--kl-divergence-base", "FILE", "write the log-probabilities of this run to FILE (the reference for --kl-divergence)"},
    {"--kl-divergence", "", "compare with --kl-divergence-base FILE: KL, top-token agreement, PPL ratio (the text comes "
                            "from FILE; -f is not needed)"},
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    {"-h,--help", "", "show this help"},
};

// The reference run: PPL as llama-perplexity prints it, the log-probs saved
// when --kl-divergence-base is given.
int perplexity_run(const ParsedArgs& args, const Model& model, const Tokenizer& tokenizer, ThreadPool& pool,
                   const tools::EvalOptions& options, int32_t bos) {
  std::string text = read_prompt(args);
  // llama.cpp drops one trailing newline of a -f file.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.empty()) throw UsageError("perplexity needs a text: -f FILE (or -p TEXT)");
  const std::vector<int32_t> tokens = tokenizer.encode(text, tokenizer.add_bos());
  const auto n_ctx = static_cast<int32_t>(args.get_int("--ctx-size", 512, 1, 1 << 20));
  const auto max_chunks = static_cast<int32_t>(args.get_int("--chunks", -1, -1, 1 << 30));
  const tools::ChunkPlan plan = tools::plan_chunks(static_cast<int64_t>(tokens.size()), n_ctx, max_chunks);
  std::fprintf(stderr, "perplexity: %zu tokens, %d chunks of %d, scoring positions %d..%d of each\n", tokens.size(),
               plan.n_chunks, n_ctx, plan.first + 1, n_ctx - 1);

  std::optional<tools::KlBaseWriter> base;
  if (const std::optional<std::string> path = args.get("--kl-divergence-base")) {
    base.emplace(*path, plan, model.config().n_vocab, tokens);
  }
  tools::NllStats nll;
  std::vector<double> log_p;
  std::vector<float> chunk_log_p;
  const size_t n_vocab = static_cast<size_t>(model.config().n_vocab);
  tools::evaluate_chunks(model, pool, tokens, bos, plan, options,
                         [&](int32_t chunk, std::span<const float> logits, std::span<const int32_t> targets) {
                           chunk_log_p.resize(logits.size());
                           for (size_t i = 0; i < targets.size(); ++i) {
                             tools::log_softmax(logits.subspan(i * n_vocab, n_vocab), log_p);
                             nll.add(-log_p[static_cast<size_t>(targets[i])]);
                             std::copy(log_p.begin(), log_p.end(), chunk_log_p.begin() + i * n_vocab);
                           }
                           if (base) base->add_chunk(chunk_log_p);
                           std::printf("[%d]%.4f,", chunk + 1, nll.ppl());
                           std::fflush(stdout);
                         });
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f (%lld tokens scored)\n", nll.ppl(), nll.ppl_error(),
              static_cast<long long>(nll.count));
  if (base) base->commit();
  return 0;
}

int kl_run(const ParsedArgs& args, const Model& model, ThreadPool& pool, const tools::EvalOptions& options, int32_t bos) {
  const std::optional<std::string> path = args.get("--kl-divergence-base");
  if (!path) throw UsageError("--kl-divergence needs --kl-divergence-base FILE (written by a reference run)");
  const tools::KlBase base = tools::KlBase::open(*path);
  if (base.n_vocab() != model.config().n_vocab) {
    throw Error("kl-divergence base " + *path + " has a vocabulary of " + std::to_string(base.n_vocab()) +
                " tokens; the model has " + std::to_string(model.config().n_vocab));
  }
  tools::ChunkPlan plan = base.plan();
  const auto max_chunks = static_cast<int32_t>(args.get_int("--chunks", -1, -1, 1 << 30));
  if (max_chunks > 0) plan.n_chunks = std::min(plan.n_chunks, max_chunks);
  std::fprintf(stderr, "kl-divergence: %d chunks of %d from %s\n", plan.n_chunks, plan.n_ctx, path->c_str());
  tools::KlStats kl;
  const size_t n_vocab = static_cast<size_t>(base.n_vocab());
  tools::evaluate_chunks(model, pool, base.tokens(), bos, plan, options,
                         [&](int32_t chunk, std::span<const float> logits, std::span<const int32_t> targets) {
                           for (size_t i = 0; i < targets.size(); ++i) {
                             kl.add(base.row(chunk, static_cast<int32_t>(i)), logits.subspan(i * n_vocab, n_vocab),
                                    targets[i]);
                           }
                           std::printf("[%d]%.4f,", chunk + 1, kl.nll().ppl());
                           std::fflush(stdout);
                         });
  const tools::KlStats::Summary s = kl.summary();
  std::printf("\n%lld tokens scored\n", static_cast<long long>(s.count));
  std::printf("PPL                : %.6f +/- %.6f\n", s.ppl, s.ppl_error);
  std::printf("PPL(base)          : %.6f +/- %.6f\n", s.ppl_base, s.ppl_base_error);
  std::printf("PPL ratio          : %.6f +/- %.6f\n", s.ppl_ratio, s.ppl_ratio_error);
  std::printf("Mean KLD           : %.6f +/- %.6f\n", s.kl_mean, s.kl_mean_error);
  std::printf("Maximum KLD        : %.6f\n", s.kl_max);
  std::printf("99.9%% KLD          : %.6f\n", s.kl_p999);
  std::printf("99.0%% KLD          : %.6f\n", s.kl_p99);
  std::printf("90.0%% KLD          : %.6f\n", s.kl_p90);
  std::printf("Median KLD         : %.6f\n", s.kl_median);
  std::printf("Same top token     : %.3f %%\n", 100.0 * s.top_agreement);
  return 0;
}

int perplexity_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("perplexity", "-m MODEL -f TEXT [-c N_CTX] [-b N_BATCH] [--chunks N]", kOptions).c_str(),
               stdout);
    return 0;
  }
  const std::optional<std::string> model_path = args.get("--model");
  if (!model_path) throw UsageError("perplexity needs -m MODEL");
  const kernels::MatmulOptions matmul = matmul_options_from_args(args);
  const Model model = Model::load(*model_path, MapMode::kAuto, matmul.isa);
  const Tokenizer tokenizer = load_tokenizer(model, *model_path, args.get("--tokenizer"));
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  ThreadPool pool(threads);
  tools::EvalOptions options;
  options.n_batch = static_cast<int32_t>(args.get_int("--batch-size", 2048, 1, 1 << 20));
  // f16 KV by default, as llama.cpp's default cache type.
  options.kv = kv_format_from_args(args);
  options.matmul = matmul;
  // llama-perplexity puts BOS at each chunk's start when the vocabulary adds one.
  const int32_t bos = tokenizer.add_bos() ? tokenizer.bos() : -1;
  return args.has("--kl-divergence") ? kl_run(args, model, pool, options, bos)
                                     : perplexity_run(args, model, tokenizer, pool, options, bos);
}

}  // namespace

int perplexity_command(int argc, char** argv) { return perplexity_main(argc, argv); }

}  // namespace tokamak::cli
