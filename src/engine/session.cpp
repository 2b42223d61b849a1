#include "engine/session.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "core/error.h"
#include "engine/stop_strings.h"
#include "kv/kv_memory.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::engine {
namespace {

int32_t blocks_for(const kv::KvLayout& layout, int32_t n_ctx, int64_t memory_bytes) {
  if (n_ctx <= 0) throw Error("context size must be positive, got " + std::to_string(n_ctx));
  layout.validate();
  if (memory_bytes > 0) return kv::blocks_for_bytes(layout, memory_bytes);
  const int32_t bs = layout.format.block_size;
  return (n_ctx + bs - 1) / bs + layout.recent_blocks();
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Session::Session(const Model& model, ThreadPool& pool, int32_t n_ctx, const kv::KvFormat& kv_format,
                 int64_t kv_memory_bytes)
    : model_(model),
      n_ctx_(n_ctx),
      kv_(kv_layout_for(model.config(), kv_format),
          blocks_for(kv_layout_for(model.config(), kv_format), n_ctx, kv_memory_bytes)),
      forward_(model, pool) {}

void Session::defer(int32_t token) {
  if (size() + 1 > n_ctx_) throw Error("context is full (" + std::to_string(n_ctx_) + " tokens)");
  tokens_.push_back(token);
}

void Session::truncate(int64_t n) {
  if (n < 0 || n > size()) {
    throw Error("cannot truncate a session of " + std::to_string(size()) + " tokens to " + std::to_string(n));
  }
  if (n < n_past_) {
    kv_.set_length(0, n);
    n_past_ = n;
  }
  tokens_.resize(static_cast<size_t>(n));
}

std::span<const float> Session::append(std::span<const int32_t> tokens) {
  const int64_t total = size() + static_cast<int64_t>(tokens.size());
  if (total > n_ctx_) {
    throw Error(std::to_string(total) + " tokens exceed the context size " + std::to_string(n_ctx_) +
                " (raise -c/--ctx-size)");
  }
  if (total == n_past_) throw Error("nothing to run: no new tokens");
  batch_.clear();
  for (int64_t i = n_past_; i < size(); ++i) {
    batch_.add(tokens_[static_cast<size_t>(i)], static_cast<int32_t>(i), 0, false);
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    batch_.add(tokens[i], static_cast<int32_t>(size() + static_cast<int64_t>(i)), 0, false);
  }
  batch_.want_logits.back() = 1;
  const std::span<const float> logits = forward_.run(batch_, kv_);  // throws before any change
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  n_past_ = size();
  return logits;
}

GenerateResult generate(Session& session, const Tokenizer& tokenizer, sampling::Sampler& sampler,
                        std::span<const int32_t> prompt, const GenerateOptions& options,
                        const std::function<void(std::string_view)>& on_text) {
  StopStringMatcher stops(options.stop);
  // Streams a piece through the stop strings; true when one completed.
  const auto emit = [&](const std::string& piece) {
    if (piece.empty()) return false;
    const StopStringMatcher::Output out = stops.push(piece);
    if (!out.text.empty()) on_text(out.text);
    return out.stopped;
  };

  GenerateResult result;
  result.n_prompt = static_cast<int64_t>(prompt.size());
  for (int32_t t : prompt) sampler.accept(t);  // prompt tokens count for penalties

  auto start = std::chrono::steady_clock::now();
  std::span<const float> logits = session.append(prompt);
  result.prefill_seconds = seconds_since(start);

  const int32_t prev = prompt.empty() ? -1 : prompt.back();
  TextStream stream(tokenizer, prev);
  start = std::chrono::steady_clock::now();
  if (options.n_predict == 0) result.stop = StopReason::MaxTokens;
  while (options.n_predict != 0) {
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
      result.stop = StopReason::Cancelled;
      break;
    }
    const int32_t token = sampler.sample(logits);
    ++result.n_generated;
    if (options.on_token) options.on_token(token);
    const bool end = tokenizer.is_end_of_generation(token) || (options.stop_at_bos && token == tokenizer.bos()) ||
                     std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) !=
                         options.stop_tokens.end();
    const bool stopped = !end && emit(stream.push(token));
    const bool last = end || stopped || (options.n_predict > 0 && result.n_generated >= options.n_predict);
    result.stop = end ? StopReason::EndOfGeneration : stopped ? StopReason::StopString : StopReason::MaxTokens;
    if (session.size() + 1 > session.n_ctx()) {  // no room even to keep the token
      if (!end && !stopped) result.stop = StopReason::ContextFull;
      break;
    }
    if (last) {
      session.defer(token);
      break;
    }
    const int32_t one[] = {token};
    logits = session.append(one);
    ++result.n_decoded;
  }
  if (!stops.stopped()) {
    // An unfinished UTF-8 tail may still complete a stop string; else what the
    // matcher held back as a possible stop prefix is text after all.
    if (emit(stream.flush())) {
      result.stop = StopReason::StopString;
    } else if (const std::string rest = stops.flush(); !rest.empty()) {
      on_text(rest);
    }
  }
  result.decode_seconds = seconds_since(start);
  return result;
}

}  // namespace tokamak::engine
