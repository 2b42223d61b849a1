// tokamak run: generate text from a prompt, streamed to stdout; a summary of
// the run goes to stderr.
#include <cstdio>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/engine_options.h"
#include "cli/kv_options.h"
#include "cli/matmul_options.h"
#include "cli/model_source.h"
#include "cli/prompt_input.h"
#include "cli/std_streams.h"
#include "cli/parallel.h"
#include "cli/sampling_options.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "sampling/sampler.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin (default: the default model, see below)"},
    {"-hf", "REPO:FILE", "a GGUF file of a Hugging Face hub repo, cached in ~/.cache/tokamak"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    kPromptOptions[0], kPromptOptions[1], kPromptOptions[2], kPromptOptions[3],
    {"--parse-special", "", "match special-token texts (e.g. <|im_start|>) in the prompt"},
    {"--verbose-prompt", "", "list the prompt's tokens on stderr before generating"},
    {"-n,--n-predict", "N", "tokens to generate (default -1: until end of text or context)"},
    {"-c,--ctx-size", "N", "context size in tokens (default: the model's, at most 4096)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    kIsaOption,
    kSamplingOptions[0], kSamplingOptions[1], kSamplingOptions[2], kSamplingOptions[3], kSamplingOptions[4],
    kSamplingOptions[5], kSamplingOptions[6], kSamplingOptions[7], kSamplingOptions[8], kSamplingOptions[9],
    kSamplingOptions[10], kSamplingOptions[11],
    {"--stop", "STR", "stop when the text contains STR; it is not printed (repeatable)"},
    {"--n-probs", "N", "after the text, list each token's logprob and the top N alternatives on stderr"},
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    kKvCacheOptions[5],
    kParallelOptions[0], kParallelOptions[1],
    kSpeculativeOptions[0], kSpeculativeOptions[1], kSpeculativeOptions[2], kSpeculativeOptions[3],
    kSpeculativeOptions[4],
    {"-h,--help", "", "show this help"},
};

// A token's text for the logprobs table: quoted, with quotes, backslashes,
// control bytes and bytes that are not valid UTF-8 escaped.
std::string shown(std::string_view s) {
  std::string out = "\"";
  char hex[8];
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
    } else if (c >= 0x80) {
      const size_t len = c >= 0xF8 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
      size_t ok = len > 0 && i + len <= s.size() ? len : 0;
      for (size_t j = 1; j < ok; ++j) {
        if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) ok = 0;
      }
      if (ok == 0) {
        std::snprintf(hex, sizeof hex, "\\x%02X", c);
        out += hex;
      } else {
        out.append(s.substr(i, ok));
        i += ok;
        continue;
      }
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out + "\"";
}

// One generated token: the token before it (for its text) and its logprobs.
struct TokenProbs {
  int32_t prev;
  sampling::Logprobs probs;
};

// One line per generated token:
//   #3 "text" (id 261, logprob -0.0123) | top: "text" 261 -0.0123, "other" 317 -4.5678
// Logprobs are over the distribution the sampler's final step drew from.
void print_logprobs(const Tokenizer& tokenizer, const std::vector<TokenProbs>& tokens, int n_probs) {
  std::fprintf(stderr, "\nlogprobs of the %zu generated tokens (top %d after the sampler chain):\n", tokens.size(),
               n_probs);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& [prev, lp] = tokens[i];
    std::fprintf(stderr, "#%zu %s (id %d, logprob %.4f) | top:", i + 1,
                 shown(tokenizer.decode_piece(prev, lp.chosen.token)).c_str(), lp.chosen.token, lp.chosen.logprob);
    for (size_t k = 0; k < lp.top.size(); ++k) {
      std::fprintf(stderr, "%s%s %d %.4f", k ? ", " : " ", shown(tokenizer.decode_piece(prev, lp.top[k].token)).c_str(),
                   lp.top[k].token, lp.top[k].logprob);
    }
    std::fputc('\n', stderr);
  }
}

// llama.cpp's --verbose-prompt: the prompt's tokens, one per line, on stderr.
void print_prompt_tokens(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt) {
  std::fprintf(stderr, "prompt: %zu tokens\n", prompt.size());
  int32_t prev = -1;
  for (const int32_t id : prompt) {
    std::fprintf(stderr, "%6d -> %s\n", id, shown(tokenizer.decode_piece(prev, id, true)).c_str());
    prev = id;
  }
}

int run_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("run", "[-m MODEL | -hf REPO:FILE] [-p PROMPT | -f FILE] [options]", kOptions).c_str(),
               stdout);
    std::fputs("\nWithout -m or -hf, run uses the default model (stories260K, a tiny story model).\n"
               "The text goes to stdout, everything else to stderr.\n",
               stdout);
    return 0;
  }
  if (!args.positional().empty()) {
    throw UsageError("unexpected argument '" + args.positional()[0] + "' (the prompt goes after -p)");
  }
  const int64_t n_predict = args.get_int("--n-predict", -1, -1, std::numeric_limits<int32_t>::max());
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  sampling::SamplingParams sparams = sampling_params_from_args(args);
  sparams.n_probs = static_cast<int>(args.get_int("--n-probs", 0, 0, std::numeric_limits<int>::max()));
  sparams.seed = sampling::resolve_seed(sparams.seed);

  const kv::KvFormat kv_format = kv_format_for_sampling(args, sparams);
  const int64_t kv_memory = kv_memory_from_args(args);
  const std::filesystem::path model_path = resolve_model_path(args);
  const kernels::MatmulOptions matmul = matmul_options_from_args(args);
  ParallelModel loaded(args, model_path, matmul.isa);  // weights repacked for the variant that runs
  if (loaded.worker()) return loaded.serve(threads);
  const std::string prompt_text = read_prompt(args);
  const Model& model = loaded.model();
  const Tokenizer tokenizer = load_tokenizer(model, model_path, args.get("--tokenizer"));
  const ModelConfig& c = model.config();
  const int32_t n_ctx = context_size(args, c);
  const std::vector<int32_t> prompt = tokenizer.encode(prompt_text, tokenizer.add_bos(), args.has("--parse-special"));
  if (prompt.empty()) throw Error("the prompt is empty and the vocabulary has no BOS token to start from");
  if (args.has("--verbose-prompt")) print_prompt_tokens(tokenizer, prompt);

  // One request through the Engine: the same path as a server's, with room
  // for one sequence of n_ctx tokens.
  engine::EngineOptions eo;
  eo.kv_format = kv_format;
  eo.kv_memory.bytes = kv_memory;
  eo.max_model_len = n_ctx;
  eo.max_num_seqs = 1;
  eo.max_num_batched_tokens = std::max(n_ctx, 2048);  // a prompt prefills in one step
  eo.enable_prefix_caching = false;
  eo.threads = threads;
  eo.matmul = matmul;
  speculative_options_from_args(args, eo.speculative);
  const std::unique_ptr<Model> draft = load_draft_model(args, tokenizer, eo);
  engine::Engine eng(model, tokenizer, eo);
  engine::Request request;
  request.prompt = engine::Prompt::from_ids(prompt);
  engine::GenerationParams& gp = request.params;
  gp.sampling = sparams;
  gp.max_tokens = n_predict > 0 ? static_cast<int32_t>(n_predict) : -1;
  gp.stop = args.get_all("--stop");
  gp.stop_at_bos = model.format() == ModelFormat::Llama2c;  // as llama2.c's run.c does
  gp.logprobs = sparams.n_probs > 0;
  if (n_predict == 0) {  // nothing to generate: the prompt alone is the run
    std::fprintf(stderr, "\n\nprompt tokens: %zu; generated: 0 tokens (-n 0)\n", prompt.size());
    return 0;
  }
  eng.add_request(request);

  // Gathered during generation and printed after it, so that stdout's text
  // stays whole on a terminal.
  std::vector<TokenProbs> token_probs;
  TextOutput text_out;
  int32_t prev = prompt.back();
  int64_t n_generated = 0;
  engine::StopReason stop = engine::StopReason::MaxTokens;
  double prefill_seconds = 0.0, decode_seconds = 0.0;
  int64_t first_tokens = 0;  // sampled by the prefill step
  while (eng.has_unfinished()) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<engine::RequestOutput> outputs = eng.step();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The first step prefills the prompt (and samples the first token); each
    // later one decodes one token, or several with speculation.
    const bool prefill = n_generated == 0;
    if (prefill) prefill_seconds += dt;
    else decode_seconds += dt;
    for (const engine::RequestOutput& out : outputs) {
      for (const engine::CompletionDelta& d : out.completions) {
        for (size_t i = 0; i < d.token_ids.size(); ++i) {
          if (i < d.logprobs.size()) token_probs.push_back({prev, d.logprobs[i]});
          prev = d.token_ids[i];
        }
        n_generated += static_cast<int64_t>(d.token_ids.size());
        if (prefill) first_tokens += static_cast<int64_t>(d.token_ids.size());
        text_out.write(d.text);
        if (d.finish != engine::FinishReason::None) stop = d.stop;
      }
    }
  }
  text_out.finish();
  if (sparams.n_probs > 0) print_logprobs(tokenizer, token_probs, sparams.n_probs);
  const double prefill_tps = prefill_seconds > 0 ? static_cast<double>(prompt.size()) / prefill_seconds : 0.0;
  const double decode_tps =
      decode_seconds > 0 ? static_cast<double>(n_generated - first_tokens) / decode_seconds : 0.0;
  std::fprintf(stderr,
               "\n\nprompt tokens: %zu, prefill: %.1f tok/s; generated: %lld tokens, decode: %.1f tok/s "
               "(%d threads, seed %llu, stop: %s)\n",
               prompt.size(), prefill_tps, static_cast<long long>(n_generated), decode_tps, threads,
               static_cast<unsigned long long>(sparams.seed), std::string(engine::stop_reason_name(stop)).c_str());
  const engine::EngineStats& st = eng.stats();
  if (st.spec_draft_tokens > 0 || eo.speculative.enabled()) {
    std::fprintf(stderr, "speculation: %lld drafted, %lld accepted (%.1f%%)\n",
                 static_cast<long long>(st.spec_draft_tokens), static_cast<long long>(st.spec_accepted_tokens),
                 st.spec_draft_tokens > 0 ? 100.0 * static_cast<double>(st.spec_accepted_tokens) /
                                                static_cast<double>(st.spec_draft_tokens)
                                          : 0.0);
  }
  return 0;
}

}  // namespace

int run_command(int argc, char** argv) { return run_main(argc, argv); }

}  // namespace tokamak::cli
