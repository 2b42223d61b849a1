// tokamak chat: an interactive conversation. Each turn renders the whole
// conversation with the model's chat template (ChatML when it has none) and
// prefills only what the session does not hold yet; the answer streams to
// stdout. Ctrl-C stops an answer, Ctrl-C or Ctrl-D at the prompt ends the
// chat. With stdin not a terminal, each line is a user turn and no prompt is shown.
// The template is tried on a first exchange at start-up, so that a template
// that rejects the conversation fails before the first turn. When the context
// is full the conversation ends there with status 1 (no context shift yet).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "cli/args.h"
#include "cli/engine_options.h"
#include "cli/kv_options.h"
#include "cli/model_source.h"
#include "cli/sampling_options.h"
#include "cli/std_streams.h"
#include "cli/terminal.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/chat_session.h"
#include "engine/session.h"
#include "io/gguf.h"
#include "sampling/sampler.h"
#include "tokenizer/chat_template.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin"},
    {"-hf", "REPO:FILE", "a GGUF file of a Hugging Face hub repo, cached in ~/.cache/tokamak"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"--system", "TEXT", "a system message before the conversation"},
    {"--chat-template-file", "FILE", "a Jinja chat template to use instead of the model's"},
    {"--jinja-date", "YYYY-MM-DD", "the date strftime_now() gives templates (default: today)"},
    {"-n,--n-predict", "N", "at most N tokens per answer (default 512; -1: until the end of the turn or context)"},
    {"-c,--ctx-size", "N", "context size in tokens, for the whole conversation (default: the model's, at most 4096)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    kSamplingOptions[0], kSamplingOptions[1], kSamplingOptions[2], kSamplingOptions[3], kSamplingOptions[4],
    kSamplingOptions[5], kSamplingOptions[6], kSamplingOptions[7], kSamplingOptions[8], kSamplingOptions[9],
    kSamplingOptions[10], kSamplingOptions[11],
    {"--stop", "STR", "also end an answer when its text contains STR (repeatable)"},
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    kKvCacheOptions[5],
    kSpeculativeOptions[0], kSpeculativeOptions[1], kSpeculativeOptions[2], kSpeculativeOptions[3],
    kSpeculativeOptions[4],
    {"-v,--verbose", "", "per turn on stderr: prompt tokens reused from the session and prefilled, speeds"},
    {"-h,--help", "", "show this help"},
};

// A bounded answer by default: a model that never ends its turn (a story model
// has no chat turns) would otherwise fill the whole context with one answer.
constexpr int64_t kDefaultAnswerTokens = 512;

// "2026-01-15" -> Unix seconds at 00:00 UTC.
int64_t parse_date(const std::string& text) {
  const auto digits = [&](size_t at, size_t n) {
    int v = 0;
    for (size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return -1;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  const bool shaped = text.size() == 10 && text[4] == '-' && text[7] == '-';
  const int y = shaped ? digits(0, 4) : -1, m = shaped ? digits(5, 2) : -1, d = shaped ? digits(8, 2) : -1;
  const std::chrono::year_month_day date{std::chrono::year(y), std::chrono::month(static_cast<unsigned>(m)),
                                         std::chrono::day(static_cast<unsigned>(d))};
  if (y < 0 || m < 0 || d < 0 || !date.ok()) throw UsageError("option --jinja-date: '" + text + "' is not a YYYY-MM-DD date");
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::sys_days(date).time_since_epoch()).count();
}

// The template of --chat-template-file, else the model's tokenizer.chat_template,
// else ChatML. `origin` says which, for messages.
ChatTemplate load_chat_template(const ParsedArgs& args, const Model& model, const Tokenizer& tokenizer,
                                std::string& origin) {
  std::optional<std::string> source;
  if (const std::optional<std::string> path = args.get("--chat-template-file")) {
    std::ifstream in(*path, std::ios::binary);
    if (!in) throw Error(*path + ": cannot open the chat template");
    std::ostringstream text;
    text << in.rdbuf();
    source = text.str();
    origin = *path;
  } else if (model.format() == ModelFormat::Gguf) {
    source = model.gguf()->get_string("tokenizer.chat_template");
    origin = "tokenizer.chat_template of the model";
  }
  if (!source || source->empty()) origin = "ChatML (the model has no chat template)";
  const auto text_of = [&](int32_t id) { return id >= 0 ? tokenizer.token_text(id) : std::string(); };
  try {
    return ChatTemplate::from_source(source, text_of(tokenizer.bos()), text_of(tokenizer.eos()));
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

void print(std::string_view text) { write_stdout(text); }

// Renders the conversation so far with a first user message, so that a
// template that rejects it (a system role it does not take, a missing
// variable) fails at start-up instead of on every turn.
void check_template(const ChatTemplate& chat_template, const std::string& origin,
                    const nlohmann::ordered_json& messages, std::optional<int64_t> now) {
  ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.messages.push_back({{"role", "user"}, {"content", "Hello"}});
  inputs.now_unix_seconds = now;
  try {
    (void)chat_template.render(inputs);
  } catch (const Error& e) {
    throw Error(origin + ": the chat template cannot render a first exchange" +
                (messages.empty() ? std::string() : " with this --system message") + ": " + e.what());
  }
}

int chat_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("chat", "[-m MODEL | -hf REPO:FILE] [--system TEXT] [options]", kOptions).c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty()) {
    throw UsageError("unexpected argument '" + args.positional()[0] + "' (chat reads its turns from stdin)");
  }
  const int64_t n_predict = args.get_int("--n-predict", kDefaultAnswerTokens, -1, std::numeric_limits<int32_t>::max());
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  sampling::SamplingParams sparams = sampling_params_from_args(args);
  sparams.seed = sampling::resolve_seed(sparams.seed);
  std::optional<int64_t> now;
  if (const std::optional<std::string> date = args.get("--jinja-date")) now = parse_date(*date);
  const bool verbose = args.has("--verbose");

  InterruptWatcher interrupts;  // before any other thread starts
  const std::filesystem::path model_path = resolve_model_path(args);
  const Model model = Model::load(model_path);
  const Tokenizer tokenizer = load_tokenizer(model, model_path, args.get("--tokenizer"));
  std::string template_origin;
  const ChatTemplate chat_template = load_chat_template(args, model, tokenizer, template_origin);
  if (chat_template.is_chatml_fallback()) {
    std::fputs("tokamak chat: note: the model has no chat template; using ChatML (--chat-template-file gives one)\n",
               stderr);
  }
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (const std::optional<std::string> system = args.get("--system")) {
    messages.push_back({{"role", "system"}, {"content", *system}});
  }
  check_template(chat_template, template_origin, messages, now);
  const ModelConfig& c = model.config();
  const int32_t n_ctx = context_size(args, c);
  // One conversation on the Engine; its prefix cache keeps the history's
  // blocks from turn to turn, so each turn computes only its new tokens.
  engine::EngineOptions eo;
  eo.kv_format = kv_format_for_sampling(args, sparams);
  eo.kv_memory.bytes = kv_memory_from_args(args);
  eo.max_model_len = n_ctx;
  eo.max_num_seqs = 1;
  eo.max_num_batched_tokens = std::max(n_ctx, 2048);
  eo.enable_prefix_caching = true;
  eo.threads = threads;
  speculative_options_from_args(args, eo.speculative);
  const std::unique_ptr<Model> draft = load_draft_model(args, tokenizer, eo);
  engine::Engine eng(model, tokenizer, eo);
  engine::ChatSession chat(eng);

  engine::GenerateOptions options;
  const std::string end_of_turn =
      engine::add_end_of_turn_stop(engine::end_of_turn_text(chat_template), tokenizer, options);
  engine::GenerationParams params;
  params.sampling = sparams;
  params.max_tokens = n_predict > 0 ? static_cast<int32_t>(n_predict) : -1;
  params.stop_at_bos = model.format() == ModelFormat::Llama2c;
  params.stop = args.get_all("--stop");
  params.stop.insert(params.stop.end(), options.stop.begin(), options.stop.end());
  params.stop_token_ids = options.stop_tokens;

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (verbose) {
    std::fprintf(stderr, "chat template: %s; end of turn: %s; context %d tokens; seed %llu\n", template_origin.c_str(),
                 end_of_turn.empty() ? "end-of-generation tokens" : end_of_turn.c_str(), n_ctx,
                 static_cast<unsigned long long>(sparams.seed));
  }
  if (interactive) std::fputs("Ctrl-C stops an answer; Ctrl-C or Ctrl-D at the prompt ends the chat.\n", stderr);

  LineReader input(STDIN_FILENO);
  for (int turn = 1;;) {
    if (interactive) print("> ");
    std::string line;
    const LineStatus status = input.read_line(line, interrupts.wake_fd());
    if (status != LineStatus::Line) {
      if (interactive) print("\n");
      return 0;
    }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    ChatTemplateInputs inputs;
    inputs.messages = messages;
    inputs.now_unix_seconds = now;
    std::string rendered;
    try {
      rendered = chat_template.render(inputs);
    } catch (const Error& e) {
      throw Error(template_origin + ": the chat template failed on turn " + std::to_string(turn) + ": " + e.what());
    }
    std::string answer;
    const engine::ChatTurnStats stats = chat.respond(rendered, params, &interrupts.flag(), [&](std::string_view text) {
      answer += text;
      print(text);
    });
    print("\n");
    messages.push_back({{"role", "assistant"}, {"content", answer}});
    const engine::GenerateResult& r = stats.result;
    if (r.stop == engine::StopReason::Cancelled) std::fputs("[answer stopped]\n", stderr);
    if (r.stop == engine::StopReason::ContextFull) {
      std::fprintf(stderr,
                   "tokamak chat: the context of %d tokens is full; the conversation ends here (start a new chat, "
                   "or raise -c)\n",
                   n_ctx);
      return 1;
    }
    if (verbose) {
      const double decode_tps = r.decode_seconds > 0 ? static_cast<double>(r.n_decoded) / r.decode_seconds : 0.0;
      std::fprintf(stderr,
                   "turn %d: prompt %lld tokens (reused %lld, prefilled %lld, computed %lld, %.1f ms); answer %lld "
                   "tokens (%.1f tok/s, stop: %s); held %lld\n",
                   turn, static_cast<long long>(stats.reused + stats.prefilled), static_cast<long long>(stats.reused),
                   static_cast<long long>(stats.prefilled), static_cast<long long>(stats.computed),
                   1000.0 * r.prefill_seconds,
                   static_cast<long long>(r.n_generated), decode_tps,
                   std::string(engine::stop_reason_name(r.stop)).c_str(), static_cast<long long>(chat.size()));
    }
    ++turn;
    interrupts.clear();
  }
}

}  // namespace

int chat_command(int argc, char** argv) { return chat_main(argc, argv); }

}  // namespace tokamak::cli
