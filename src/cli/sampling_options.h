// The sampling flags shared by the commands that generate text (run, chat):
// temperature, truncations, penalties, logit bias, seed and RNG. A command
// lists kSamplingOptions' rows in its own option table.
#pragma once

#include "cli/args.h"
#include "sampling/sampler.h"

namespace tokamak::cli {

inline constexpr OptionSpec kSamplingOptions[] = {
    {"--temp", "T", "temperature; 0 = greedy (default 0.8)"},
    {"--top-k", "K", "keep the K most likely tokens; 0 = off (default 40)"},
    {"--top-p", "P", "nucleus sampling; 1 = off (default 0.95)"},
    {"--min-p", "P", "drop tokens below P x the top probability; 0 = off (default 0.05)"},
    {"--typical", "P", "locally typical sampling; 1 = off (default 1)"},
    {"--repeat-penalty", "X", "llama-style repetition penalty; 1 = off (default 1)"},
    {"--repeat-last-n", "N", "window of the penalties; -1 = all, 0 = off (default 64)"},
    {"--frequency-penalty", "X", "OpenAI frequency penalty (default 0)"},
    {"--presence-penalty", "X", "OpenAI presence penalty (default 0)"},
    {"--logit-bias", "ID=BIAS", "add BIAS to token ID's logit (repeatable; -inf bans)"},
    {"-s,--seed", "N", "RNG seed; -1 = random (default -1)"},
    {"--rng", "KIND", "default | llama2c (llama2.c's xorshift RNG and top-p procedure; implies --kv-type f32)"},
};

// The sampling parameters the flags ask for (the seed not yet resolved).
// Throws UsageError naming the flag, the value and its range for a bad one.
sampling::SamplingParams sampling_params_from_args(const ParsedArgs& args);

}  // namespace tokamak::cli
