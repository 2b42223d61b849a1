// The Engine's per-request state, shared by its two source files: engine.cpp
// (requests, the step loop) and engine_speculation.cpp (drafting and
// verifying). Internal to the engine layer.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/speculative.h"
#include "engine/stop_strings.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One completion's sampling and text state.
struct Completion {
  SeqId seq = -1;  // -1 once finished
  std::unique_ptr<sampling::SamplerChain> sampler;
  TextStream stream;
  StopStringMatcher stops;
  int64_t n_generated = 0;
  FinishReason finish = FinishReason::None;
  // Speculation: the draws of drafting and verification (a stream of its own,
  // so the sampler's stays what a run without speculation draws), and the
  // recent share of drafts accepted (the policy's input).
  sampling::RequestRng spec_rng{0};
  float acceptance = SpeculationPolicy::kInitialAcceptance;
};

// The drafts of one step: for each chunk of the plan, its index into
// proposals, or -1.
struct Engine::Drafts {
  std::vector<int32_t> of_chunk;
  std::vector<ProposalRequest> requests;
  std::vector<Proposal> proposals;
};

struct Engine::RequestState {
  int64_t id = 0;
  std::vector<int32_t> prompt;
  GenerationParams params;
  uint64_t seed = 0;                       // resolved
  std::vector<std::unique_ptr<Completion>> completions;  // [n]; index 1.. created by the fork
  bool forked = false;
  int32_t n_finished = 0;
};

}  // namespace tokamak::engine
