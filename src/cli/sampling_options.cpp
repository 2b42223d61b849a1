#include "cli/sampling_options.h"

#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"

namespace tokamak::cli {

sampling::SamplingParams sampling_params_from_args(const ParsedArgs& args) {
  sampling::SamplingParams p;
  constexpr double kBig = 1e9;
  p.temperature = static_cast<float>(args.get_float("--temp", p.temperature, 0.0, kBig));
  p.top_k = static_cast<int>(args.get_int("--top-k", p.top_k, 0, std::numeric_limits<int>::max()));
  p.top_p = static_cast<float>(args.get_float("--top-p", p.top_p, 0.0, 1.0));
  p.min_p = static_cast<float>(args.get_float("--min-p", p.min_p, 0.0, 1.0));
  p.typical_p = static_cast<float>(args.get_float("--typical", p.typical_p, 0.0, 1.0));
  p.repeat_penalty = static_cast<float>(args.get_float("--repeat-penalty", p.repeat_penalty, 0.0, kBig));
  if (p.repeat_penalty <= 0.0f) {  // it divides positive logits: the sampler's range is (0, inf)
    throw UsageError("option --repeat-penalty: " + args.get_or("--repeat-penalty", "") +
                     " is outside (0, 1e+09]; 1 turns the penalty off");
  }
  p.repeat_last_n = static_cast<int>(args.get_int("--repeat-last-n", p.repeat_last_n, -1, 1 << 30));
  p.frequency_penalty = static_cast<float>(args.get_float("--frequency-penalty", 0.0, -kBig, kBig));
  p.presence_penalty = static_cast<float>(args.get_float("--presence-penalty", 0.0, -kBig, kBig));
  for (const std::string& item : args.get_all("--logit-bias")) {
    const size_t eq = item.find('=');
    char* end_id = nullptr;
    char* end_bias = nullptr;
    const long id = eq == std::string::npos ? -1 : std::strtol(item.c_str(), &end_id, 10);
    const std::string bias_text = eq == std::string::npos ? "" : item.substr(eq + 1);
    const float bias = std::strtof(bias_text.c_str(), &end_bias);
    if (eq == std::string::npos || end_id != item.c_str() + eq || id < 0 || bias_text.empty() || *end_bias != '\0') {
      throw UsageError("option --logit-bias: '" + item + "' is not ID=BIAS");
    }
    p.logit_bias.emplace_back(static_cast<int32_t>(id), bias);
  }
  if (args.has("--seed")) {  // -1 = random, as llama.cpp
    const int64_t seed = args.get_int("--seed", -1, -1, std::numeric_limits<int64_t>::max());
    p.seed = seed < 0 ? sampling::kRandomSeed : static_cast<uint64_t>(seed);
  }
  const std::string rng = args.get_or("--rng", "default");
  if (rng == "llama2c") {
    p.rng = sampling::SamplingParams::Rng::Llama2c;
  } else if (rng != "default") {
    throw UsageError("option --rng: '" + rng + "' is not one of default, llama2c");
  }
  return p;
}

}  // namespace tokamak::cli
