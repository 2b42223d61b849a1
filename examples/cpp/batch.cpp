// Runs a batch of prompts through one tokamak Engine (continuous batching:
// every step decodes all of them together) and prints each completion.
//   cmake -S . -B build -DCMAKE_PREFIX_PATH=/where/tokamak/is/installed && cmake --build build
//   build/batch model.gguf "Once upon a time" "The cat" "A dragon"
#include <cstdio>
#include <string>
#include <vector>

#include <tokamak/tokamak.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL PROMPT...\n", argv[0]);
    return 2;
  }
  try {
    const tokamak::api::Model model = tokamak::api::Model::load(argv[1]);
    tokamak::api::EngineOptions options;
    options.kv_memory = "64M";
    tokamak::api::Engine engine(model, options);

    tokamak::api::SamplingParams params;
    params.temperature = 0.0f;  // greedy: the same text as `tokamak run --temp 0`
    params.max_tokens = 24;
    const std::vector<std::string> prompts(argv + 2, argv + argc);
    const std::vector<tokamak::api::RequestResult> results = engine.generate(prompts, params);
    for (size_t i = 0; i < results.size(); ++i) {
      const tokamak::api::Completion& c = results[i].completions.at(0);
      std::printf("[%zu] %s%s  (%zu tokens, %s)\n", i, prompts[i].c_str(), c.text.c_str(), c.token_ids.size(),
                  c.finish_reason.c_str());
    }
  } catch (const tokamak::api::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
