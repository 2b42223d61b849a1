// The Engine's flags, shared by the commands that serve many requests (batch,
// bench-serve): vLLM's names for the scheduler's limits and prefix caching,
// the KV cache flags of kv_options.h, and -t. A command lists kEngineOptions'
// rows in its own table.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cli/args.h"
#include "cli/kv_options.h"
#include "cli/parallel.h"
#include "engine/engine.h"

namespace tokamak::cli {

// Speculative decoding (engine/speculative.h): run and chat list these rows too.
inline constexpr OptionSpec kSpeculativeOptions[] = {
    {"--draft-model", "FILE", "speculative decoding: a draft model with this model's vocabulary proposes tokens"},
    {"--spec-ngram", "N", "speculative decoding by prompt lookup: propose what followed the last match of the final N tokens"},
    {"--draft-max", "N", "drafted tokens per sequence and step, at most; fewer as acceptance or batch calls (default 5)"},
    {"--draft-min", "N", "a sequence given fewer drafts than this drafts none (default 1)"},
    {"--draft-fixed", "", "draft --draft-max tokens every step (default: a depth from acceptance and batch size)"},
};

inline constexpr OptionSpec kEngineOptions[] = {
    {"-t,--threads", "N", "threads (default: all cores)"},
    {"--max-model-len", "N", "longest sequence, prompt and output (default: the model's context, at most 4096)"},
    {"--max-num-seqs", "N", "sequences running at once (default 256)"},
    {"--max-num-batched-tokens", "N", "tokens per step: decodes plus prompt chunks (default 2048)"},
    {"--enable-prefix-caching", "", "reuse the KV of prompt prefixes seen before (the default)"},
    {"--no-prefix-caching,--no-enable-prefix-caching", "", "compute every prompt in full"},
    kKvCacheOptions[0], kKvCacheOptions[1], kKvCacheOptions[2], kKvCacheOptions[3], kKvCacheOptions[4],
    {"--kv-memory", "BYTES|PCT",
     "KV cache memory: a size (4G, 512M) or a share of free RAM (80%); default: max-num-seqs sequences of "
     "max-model-len tokens, within half of free RAM"},
    kSpeculativeOptions[0], kSpeculativeOptions[1], kSpeculativeOptions[2], kSpeculativeOptions[3],
    kSpeculativeOptions[4],
    kParallelOptions[0], kParallelOptions[1],
};

// The option table of a command that runs an Engine: its own rows, then
// kEngineOptions, then -h/--help.
std::vector<OptionSpec> with_engine_options(std::span<const OptionSpec> own);

// The options the flags ask for. Throws tokamak::Error naming the flag and
// value of a bad one (range checks that need the model are the Engine's).
engine::EngineOptions engine_options_from_args(const ParsedArgs& args);

// --spec-ngram, --draft-max and --draft-min into `options`.
void speculative_options_from_args(const ParsedArgs& args, engine::SpeculativeOptions& options);

// The --draft-model file, loaded and checked against the target's vocabulary
// (an error names the first difference), set as options.speculative's draft.
// Null without the flag. The Engine must not outlive it.
std::unique_ptr<Model> load_draft_model(const ParsedArgs& args, const Tokenizer& target, engine::EngineOptions& options);

}  // namespace tokamak::cli
