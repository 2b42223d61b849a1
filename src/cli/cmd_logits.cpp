// tokamak logits: raw float32 logits [n_tokens, n_vocab] of a token sequence,
// row i computed after token i: the layout of ../shared/fixtures/logits.
#include <algorithm>
#include <cstdio>
#include <span>
#include <thread>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/matmul_options.h"
#include "cli/kv_options.h"
#include "cli/model_source.h"
#include "cli/parallel.h"
#include "cli/std_streams.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "model file (GGUF or llama2.c .bin)"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin, checked against the checkpoint as run does (ids need no text)"},
    {"--ids", "I,J,...", "comma-separated token ids"},
    {"-o,--output", "FILE", "where to write the float32 logits (- for stdout)"},
    {"-t,--threads", "N", "threads (default: all cores)"},
    {"--incremental", "", "feed the tokens one at a time through the KV cache"},
    kMatmulOption,
    kIsaOption,
    kParallelOptions[0], kParallelOptions[1],
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    {"-h,--help", "", "show this help"},
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT32_MAX) {
      throw UsageError("option --ids: '" + item + "' is not a token id (ids are integers >= 0, comma-separated)");
    }
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

int logits_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("logits", "-m MODEL --ids 1,2,3 -o OUT.f32", kOptions).c_str(), stdout);
    return 0;
  }
  const std::optional<std::string> model_path = args.get("--model");
  const std::optional<std::string> ids_text = args.get("--ids");
  const std::optional<std::string> out_path = args.get("--output");
  if (!model_path || !ids_text || !out_path) throw UsageError("logits needs -m MODEL, --ids and -o OUT");
  const std::vector<int32_t> ids = parse_ids(*ids_text);
  const int threads =
      static_cast<int>(args.get_int("--threads", std::max(1u, std::thread::hardware_concurrency()), 1, 1024));
  const kernels::MatmulOptions matmul = matmul_options_from_args(args);
  ParallelModel loaded(args, *model_path, matmul.isa);
  if (loaded.worker()) return loaded.serve(threads);
  io::OutputFile out = open_output(*out_path, "-o", true);
  const Model& model = loaded.model();
  const ModelConfig& c = model.config();
  if (const std::optional<std::string> z = args.get("--tokenizer")) (void)load_tokenizer(model, *model_path, z);
  for (const int32_t id : ids) {
    if (id >= c.n_vocab) {
      throw UsageError("option --ids: token " + std::to_string(id) + " is outside the vocabulary of " +
                       std::to_string(c.n_vocab) + " tokens");
    }
  }
  if (static_cast<int64_t>(ids.size()) > c.n_ctx_train) {
    throw Error(std::to_string(ids.size()) + " tokens exceed the model's context length " + std::to_string(c.n_ctx_train));
  }
  ThreadPool pool(threads);
  // F32 KV unless asked otherwise, like the reference fixtures of ../shared/fixtures/logits.
  kv::KvFormat f32;
  f32.k_type = f32.v_type = kernels::KvType::F32;
  const kv::KvLayout layout = kv_layout_for(model, kv_format_from_args(args, f32));
  layout.validate();
  kv::KvCache kv(layout, static_cast<int32_t>((ids.size() + layout.format.block_size - 1) / layout.format.block_size +
                                              layout.recent_blocks()));
  if (model.parallel() != nullptr) kv.start_journal();  // the other ranks' pools follow this one
  Forward forward(model, pool, matmul);
  std::vector<float> logits;
  logits.reserve(ids.size() * static_cast<size_t>(c.n_vocab));
  Batch batch;
  if (args.has("--incremental")) {
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.clear();
      batch.add(ids[i], static_cast<int32_t>(i), 0, true);
      const std::span<const float> row = forward.run(batch, kv);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  } else {
    for (size_t i = 0; i < ids.size(); ++i) batch.add(ids[i], static_cast<int32_t>(i), 0, true);
    const std::span<const float> rows = forward.run(batch, kv);
    logits.assign(rows.begin(), rows.end());
  }
  out.write(std::as_bytes(std::span<const float>(logits)));
  out.commit();
  return 0;
}

}  // namespace

int logits_command(int argc, char** argv) { return logits_main(argc, argv); }

}  // namespace tokamak::cli
