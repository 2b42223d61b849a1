#include "engine/bench_serve.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/percentile.h"
#include "kv/prefix_key.h"

namespace tokamak::engine {
namespace {

// Counter-based draws: value i of stream s depends on (seed, s, i) alone, so
// one request's prompt does not shift when another's length changes.
enum Stream : uint64_t { kPromptLen = 1, kOutputLen, kSharedPrefix, kPromptTokens, kSamplingSeed, kWarmup };

uint64_t draw(uint64_t seed, Stream stream, uint64_t i) {
  return kv::mix64(kv::mix64(seed ^ (0x9E3779B97F4A7C15ull * stream)) + i);
}

int32_t draw_length(uint64_t seed, Stream stream, uint64_t i, const LengthRange& r) {
  const uint64_t width = static_cast<uint64_t>(r.max() - r.min()) + 1;
  return r.min() + static_cast<int32_t>(draw(seed, stream, i) % width);
}

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}


// Block slots the running sequences hold beyond their tokens, and all they hold.
struct SlotCount {
  int64_t wasted = 0;
  int64_t held = 0;
};

SlotCount count_slots(const Engine& engine) {
  const int64_t bs = engine.kv_cache().layout().format.block_size;
  SlotCount c;
  for (SeqId seq : engine.scheduler().running()) {
    const kv::BlockTable& t = engine.kv_cache().table(seq);
    const int64_t held = static_cast<int64_t>(t.blocks.size()) * bs;
    c.held += held;
    c.wasted += held - t.n_tokens;
  }
  return c;
}

}  // namespace

void validate(const ServeBenchOptions& o, int32_t max_model_len) {
  if (o.requests < 1) throw Error("bench-serve: --requests " + std::to_string(o.requests) + " must be >= 1");
  if (o.concurrency < 1) throw Error("bench-serve: --concurrency " + std::to_string(o.concurrency) + " must be >= 1");
  if (o.shared_prefix < 0) throw Error("bench-serve: --shared-prefix " + std::to_string(o.shared_prefix) + " must be >= 0");
  const auto check_range = [](const char* flag, const LengthRange& r, int32_t least) {
    if (r.spread < 0 || r.min() < least) {
      throw Error(std::string("bench-serve: ") + flag + " " + std::to_string(r.mean) + ":" + std::to_string(r.spread) +
                  " reaches below " + std::to_string(least));
    }
  };
  check_range("--prompt-len", o.prompt_len, o.shared_prefix > 0 ? 0 : 1);
  check_range("--output-len", o.output_len, 1);
  if (!std::isfinite(o.temperature) || o.temperature < 0) {
    throw Error("bench-serve: temperature " + std::to_string(o.temperature) + " must be >= 0");
  }
  const int64_t longest = int64_t{o.shared_prefix} + o.prompt_len.max() + o.output_len.max();
  if (longest > max_model_len) {
    throw Error("bench-serve: the longest request (" + std::to_string(o.shared_prefix) + " shared + " +
                std::to_string(o.prompt_len.max()) + " prompt + " + std::to_string(o.output_len.max()) +
                " output tokens = " + std::to_string(longest) + ") exceeds max_model_len = " +
                std::to_string(max_model_len));
  }
}

LatencyPercentiles latency_percentiles(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  return {percentile(samples, 50), percentile(samples, 90), percentile(samples, 99)};
}

std::vector<Request> make_serve_workload(const ServeBenchOptions& o, int32_t n_vocab) {
  if (n_vocab < 1) throw Error("bench-serve: n_vocab = " + std::to_string(n_vocab));
  const auto token = [&](Stream s, uint64_t i) { return static_cast<int32_t>(draw(o.seed, s, i) % static_cast<uint64_t>(n_vocab)); };
  std::vector<int32_t> prefix(static_cast<size_t>(o.shared_prefix));
  for (size_t i = 0; i < prefix.size(); ++i) prefix[i] = token(kSharedPrefix, i);

  std::vector<Request> requests(static_cast<size_t>(o.requests));
  uint64_t next_token = 0;  // position in the prompt-token stream
  for (size_t i = 0; i < requests.size(); ++i) {
    std::vector<int32_t> ids = prefix;
    const int32_t len = draw_length(o.seed, kPromptLen, i, o.prompt_len);
    for (int32_t k = 0; k < len; ++k) ids.push_back(token(kPromptTokens, next_token++));
    Request& r = requests[i];
    r.prompt = Prompt::from_ids(std::move(ids));
    r.params.max_tokens = draw_length(o.seed, kOutputLen, i, o.output_len);
    r.params.ignore_eos = true;
    sampling::SamplingParams& s = r.params.sampling;
    s.temperature = o.temperature;
    s.top_k = 0;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.seed = draw(o.seed, kSamplingSeed, i) >> 1;  // never kRandomSeed
  }
  return requests;
}

ServeBenchResult run_serve_bench(Engine& engine, const ServeBenchOptions& options) {
  if (engine.has_unfinished()) throw Error("bench-serve: the engine already has requests");
  validate(options, engine.max_model_len());
  const std::vector<Request> workload = make_serve_workload(options, engine.model().config().n_vocab);
  // One short request first, unmeasured: the first forward pass pays for
  // faulting the mapped weights in (seconds for a large model), which is no
  // part of serving. Its random ids share no block with the workload.
  Request warmup;
  std::vector<int32_t> warmup_ids(static_cast<size_t>(std::min(8, engine.max_model_len() - 1)));
  for (size_t i = 0; i < warmup_ids.size(); ++i) {
    warmup_ids[i] = static_cast<int32_t>(draw(options.seed, kWarmup, i) % static_cast<uint64_t>(engine.model().config().n_vocab));
  }
  warmup.prompt = Prompt::from_ids(std::move(warmup_ids));
  warmup.params.max_tokens = 1;
  warmup.params.ignore_eos = true;
  warmup.params.sampling.temperature = 0.0f;
  engine.add_request(warmup);
  while (engine.has_unfinished()) engine.step();

  const EngineStats before = engine.stats();
  const PrefixCacheStats prefix_before = engine.scheduler().prefix_stats();

  struct InFlight {
    Clock::time_point added;
    Clock::time_point last_token;
    int64_t tokens = 0;
  };
  std::unordered_map<int64_t, InFlight> in_flight;  // by request id
  std::vector<double> ttft_ms, itl_ms;
  ttft_ms.reserve(workload.size());
  ServeBenchResult res;
  SlotCount slots;
  size_t next = 0, finished = 0;
  const Clock::time_point start = Clock::now();
  Clock::time_point end = start;
  while (finished < workload.size()) {
    while (next < workload.size() && in_flight.size() < static_cast<size_t>(options.concurrency)) {
      const Clock::time_point added = Clock::now();
      in_flight.emplace(engine.add_request(workload[next]), InFlight{added, added, 0});
      res.prompt_tokens += static_cast<int64_t>(workload[next].prompt.ids.size());
      ++next;
    }
    const std::vector<RequestOutput> outputs = engine.step();
    const Clock::time_point now = Clock::now();
    const SlotCount c = count_slots(engine);
    slots.wasted += c.wasted;
    slots.held += c.held;
    for (const RequestOutput& o : outputs) {
      const auto it = in_flight.find(o.request_id);
      if (it == in_flight.end()) continue;
      InFlight& f = it->second;
      for (const CompletionDelta& d : o.completions) {
        for (size_t k = 0; k < d.token_ids.size(); ++k) {
          (f.tokens == 0 ? ttft_ms : itl_ms).push_back(ms_between(f.tokens == 0 ? f.added : f.last_token, now));
          f.last_token = now;
          ++f.tokens;
        }
      }
      if (o.finished) {
        res.output_tokens += f.tokens;
        in_flight.erase(it);
        ++finished;
        end = now;
      }
    }
  }

  const EngineStats& after = engine.stats();
  res.requests = static_cast<int32_t>(workload.size());
  res.seconds = std::chrono::duration<double>(end - start).count();
  if (res.seconds > 0) {
    res.output_tokens_per_s = static_cast<double>(res.output_tokens) / res.seconds;
    res.total_tokens_per_s = static_cast<double>(res.output_tokens + res.prompt_tokens) / res.seconds;
    res.requests_per_s = static_cast<double>(res.requests) / res.seconds;
  }
  res.ttft_ms = latency_percentiles(std::move(ttft_ms));
  res.itl_ms = latency_percentiles(std::move(itl_ms));
  res.peak_kv_usage = static_cast<double>(after.peak_used_blocks) / engine.kv_cache().pool().n_blocks();
  res.preemptions = after.preemptions - before.preemptions;
  res.spec_draft_tokens = after.spec_draft_tokens - before.spec_draft_tokens;
  res.spec_accepted_tokens = after.spec_accepted_tokens - before.spec_accepted_tokens;
  res.spec_accepted_per_position = after.spec_accepted_per_position;
  for (size_t i = 0; i < res.spec_accepted_per_position.size(); ++i) {
    res.spec_accepted_per_position[i] -= before.spec_accepted_per_position[i];
  }
  const PrefixCacheStats& prefix = engine.scheduler().prefix_stats();
  const int64_t queried = prefix.query_tokens - prefix_before.query_tokens;
  if (queried > 0) res.prefix_hit_rate = static_cast<double>(prefix.hit_tokens - prefix_before.hit_tokens) / queried;
  res.steps = after.steps - before.steps;
  const double step_s = after.step_seconds - before.step_seconds;
  // The draft model's passes are forward passes too (a step's overhead is the rest).
  const double forward_s = after.forward_seconds + after.draft_seconds - before.forward_seconds - before.draft_seconds;
  if (step_s > 0) res.overhead_fraction = 1.0 - forward_s / step_s;
  if (slots.held > 0) res.kv_waste = static_cast<double>(slots.wasted) / static_cast<double>(slots.held);
  return res;
}

}  // namespace tokamak::engine
