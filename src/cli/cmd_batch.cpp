// tokamak batch: offline generation for a file of requests (vLLM's
// LLM.generate). Each line of the JSONL input is one request
// (engine/request_json.h); each comes back as one line of the output, in
// input order:
//
//   {"text": "...", "finish_reason": "stop", "prompt_tokens": 5, "completion_tokens": 31}
//   {"text": ["...", "..."], "finish_reason": ["length", "stop"], ...}     (n > 1)
//   {"error": "line 3: temperature = -1 is outside [0, 2]"}
//
// Blank lines are skipped. A bad line (bad JSON, a bad field, a prompt the
// engine cannot hold) gets its error line and the others still run; the exit
// status is then 1, so that a script notices without reading every line.
//
// The Engine holds a window of unfinished requests (2 x --max-num-seqs): its
// scheduler stays full, memory stays bounded by the window, and a line is
// written as soon as it and every line before it have finished.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/engine_options.h"
#include "cli/model_source.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/request_json.h"

namespace tokamak::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr OptionSpec kBatchOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin"},
    {"-hf", "REPO:FILE", "a GGUF file of a Hugging Face hub repo, cached in ~/.cache/tokamak"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"-i,--input", "FILE", "the requests, one JSON object per line; - = stdin"},
    {"-o,--output", "FILE", "the results, one JSON object per request line (default -: stdout)"},
};

// One non-blank input line and, once known, its output line.
struct Line {
  int64_t number = 0;  // 1-based, counting blank lines
  std::string text;
  std::optional<Json> output;
  bool logprobs = false;
  engine::RequestResult result;
};

std::vector<Line> read_lines(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw Error("cannot open the input file '" + path + "'");
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::vector<Line> lines;
  std::string text;
  for (int64_t number = 1; std::getline(in, text); ++number) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    lines.push_back(Line{number, std::move(text), std::nullopt, false, {}});
  }
  if (in.bad()) throw Error("cannot read the input file '" + path + "'");
  return lines;
}

Json logprobs_json(const Tokenizer& tokenizer, int32_t prev, const engine::CompletionResult& c) {
  Json out = Json::array();
  for (const sampling::Logprobs& lp : c.logprobs) {
    Json top = Json::array();
    for (const sampling::TokenLogprob& t : lp.top) {
      top.push_back({{"token", tokenizer.decode_piece(prev, t.token)}, {"id", t.token}, {"logprob", t.logprob}});
    }
    out.push_back({{"token", tokenizer.decode_piece(prev, lp.chosen.token)},
                   {"id", lp.chosen.token},
                   {"logprob", lp.chosen.logprob},
                   {"top_logprobs", std::move(top)}});
    prev = lp.chosen.token;
  }
  return out;
}

// The output object of a finished request: one completion as plain values,
// several as lists.
Json result_json(const Tokenizer& tokenizer, const Line& line, int32_t last_prompt_token) {
  const engine::RequestResult& r = line.result;
  Json text = Json::array(), finish = Json::array(), logprobs = Json::array();
  int64_t completion_tokens = 0;
  for (const engine::CompletionResult& c : r.completions) {
    text.push_back(c.text);
    finish.push_back(std::string(engine::finish_reason_name(c.finish)));
    completion_tokens += static_cast<int64_t>(c.token_ids.size());
    if (line.logprobs) logprobs.push_back(logprobs_json(tokenizer, last_prompt_token, c));
  }
  const bool one = r.completions.size() == 1;
  Json out = {{"text", one ? text[0] : text},
              {"finish_reason", one ? finish[0] : finish},
              {"prompt_tokens", r.prompt_tokens},
              {"completion_tokens", completion_tokens}};
  if (line.logprobs) out["logprobs"] = one ? logprobs[0] : logprobs;
  return out;
}

class Output {
 public:
  explicit Output(const std::string& path) : file_(path == "-" ? stdout : std::fopen(path.c_str(), "wb")), path_(path) {
    if (file_ == nullptr) throw Error("cannot write the output file '" + path + "'");
  }
  ~Output() {
    if (file_ != stdout) std::fclose(file_);
  }
  Output(const Output&) = delete;
  Output& operator=(const Output&) = delete;

  // Generated text may hold bytes that are not UTF-8 (a token that splits a
  // character at max_tokens): they are written as U+FFFD.
  void write(const Json& j) {
    const std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    if (std::fwrite(s.data(), 1, s.size(), file_) != s.size()) throw Error("cannot write to '" + path_ + "'");
  }
  void close() {
    if (std::fflush(file_) != 0) throw Error("cannot write to '" + path_ + "'");
  }

 private:
  std::FILE* file_;
  std::string path_;
};

int batch_main(int argc, char** argv) {
  const std::vector<OptionSpec> options = with_engine_options(kBatchOptions);
  const ParsedArgs args = ParsedArgs::parse(options, argc, argv);
  if (args.has("--help")) {
    std::string help = usage_text("batch", "-m MODEL -i requests.jsonl [-o out.jsonl] [options]", options);
    help += "\nrequest fields (OpenAI names; null = default):\n";
    for (const std::string& f : engine::request_json_fields()) help += "  " + f + "\n";
    std::fputs(help.c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty()) throw Error("unexpected argument '" + args.positional()[0] + "'");
  const std::optional<std::string> input = args.get("--input");
  if (!input) throw Error("batch needs -i REQUESTS.jsonl (see --help)");
  engine::EngineOptions engine_options = engine_options_from_args(args);
  const std::filesystem::path model_path = resolve_model_path(args);
  ParallelModel loaded(args, model_path);
  if (loaded.worker()) return loaded.serve(engine_options.threads);
  std::vector<Line> lines = read_lines(*input);
  Output output(args.get_or("--output", "-"));
  const Model& model = loaded.model();
  const Tokenizer tokenizer = load_tokenizer(model, model_path, args.get("--tokenizer"));
  const std::unique_ptr<Model> draft = load_draft_model(args, tokenizer, engine_options);
  engine::Engine engine(model, tokenizer, engine_options);

  const size_t window = 2 * static_cast<size_t>(engine.options().max_num_seqs);
  std::unordered_map<int64_t, size_t> line_of;      // request id -> index in lines
  // Request id -> its last prompt token, the context of the first token's text
  // in logprobs (a second tokenization, only for requests that ask for them).
  std::unordered_map<int64_t, int32_t> last_token;
  std::vector<int64_t> error_lines;
  size_t next_add = 0, next_write = 0, done = 0;
  ProgressBar bar("batch", stderr, std::chrono::milliseconds(0), "requests");
  const auto start = std::chrono::steady_clock::now();
  while (next_write < lines.size()) {
    while (next_add < lines.size() && line_of.size() < window) {
      Line& line = lines[next_add++];
      try {
        engine::Request request = engine::request_from_json(line.text);
        line.logprobs = request.params.logprobs;
        line.result.completions.resize(static_cast<size_t>(request.params.n));
        const int64_t id = engine.add_request(request);
        line_of.emplace(id, next_add - 1);
        if (line.logprobs) last_token.emplace(id, engine.tokenize_prompt(request.prompt).back());
      } catch (const Error& e) {
        line.output = Json{{"error", "line " + std::to_string(line.number) + ": " + e.what()}};
        error_lines.push_back(line.number);
        ++done;
      }
      line.text = std::string();  // parsed: its bytes are no longer needed
    }
    if (engine.has_unfinished()) {
      for (const engine::RequestOutput& o : engine.step()) {
        const auto it = line_of.find(o.request_id);
        if (it == line_of.end()) continue;
        Line& line = lines[it->second];
        engine::accumulate(line.result, o);
        if (o.finished) {
          const auto prev = last_token.find(o.request_id);
          line.output = result_json(tokenizer, line, prev == last_token.end() ? -1 : prev->second);
          line.result = {};
          last_token.erase(o.request_id);
          line_of.erase(it);
          ++done;
        }
      }
    }
    for (; next_write < lines.size() && lines[next_write].output; ++next_write) {
      output.write(*lines[next_write].output);
      lines[next_write].output.reset();
    }
    bar.update(done, lines.size());
  }
  output.close();
  bar.finish();

  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const engine::EngineStats& s = engine.stats();
  std::fprintf(stderr, "batch: %zu requests, %zu errors", lines.size(), error_lines.size());
  for (size_t i = 0; i < error_lines.size() && i < 10; ++i) {
    std::fprintf(stderr, "%s%lld", i == 0 ? " (lines " : ", ", static_cast<long long>(error_lines[i]));
  }
  if (!error_lines.empty()) std::fputs(error_lines.size() > 10 ? ", ...)" : ")", stderr);
  std::fprintf(stderr, "; %lld prompt tokens, %lld generated in %.2f s (%.1f tok/s), %lld preemptions\n",
               static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.generated_tokens), seconds,
               seconds > 0 ? static_cast<double>(s.generated_tokens) / seconds : 0.0,
               static_cast<long long>(s.preemptions));
  return error_lines.empty() ? 0 : 1;
}

}  // namespace

int batch_command(int argc, char** argv) { return batch_main(argc, argv); }

}  // namespace tokamak::cli
