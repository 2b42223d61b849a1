#include "server/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tokamak::server {
namespace {

// As Prometheus clients print numbers: an integral value with ".0"
// ("10.0", as vLLM's bucket labels read), else the shortest text that reads
// back as the same double ("0.025", "1e-05").
std::string number(double x) {
  char buf[32];
  if (x == std::floor(x) && std::fabs(x) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.1f", x);
    return buf;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double value) { out += name + " " + number(value) + "\n"; }

const std::string kPrefix = "tokamak:";

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  sample(out, name + "_sum", sum_);
  out += name + "_count " + std::to_string(count_) + "\n";
}

// vLLM's bucket bounds, so that quantiles read the same on both.
Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0, 160.0, 640.0, 2560.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
            960.0, 1920.0, 7680.0}) {}

void Metrics::set_engine(const EngineGauges& gauges) {
  const std::lock_guard lock(mutex_);
  gauges_ = gauges;
}

EngineGauges Metrics::engine() const {
  const std::lock_guard lock(mutex_);
  return gauges_;
}

void Metrics::observe_ttft(double seconds) {
  const std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::observe_itl(double seconds) {
  const std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}

void Metrics::finish_request(engine::FinishReason reason, double e2e_seconds) {
  const std::lock_guard lock(mutex_);
  const size_t i = reason == engine::FinishReason::Stop ? 0 : reason == engine::FinishReason::Length ? 1 : 2;
  ++success_[i];
  e2e_.observe(e2e_seconds);
}

std::string Metrics::render() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  const auto gauge = [&](const char* name, const char* help, double value) {
    header(out, kPrefix + name, "gauge", help);
    sample(out, kPrefix + name, value);
  };
  const auto counter = [&](const char* name, const char* help, int64_t value) {
    header(out, kPrefix + name, "counter", help);
    sample(out, kPrefix + name, static_cast<double>(value));
  };
  gauge("num_requests_running", "Requests being computed (prefill or decode).", static_cast<double>(gauges_.running));
  gauge("num_requests_waiting", "Requests waiting to be scheduled.", static_cast<double>(gauges_.waiting));
  gauge("kv_cache_usage_perc", "KV-cache usage: blocks held by sequences over all blocks (1 = full).", gauges_.kv_usage);
  counter("prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", gauges_.prefix_queries);
  counter("prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", gauges_.prefix_hits);
  counter("num_preemptions_total", "Sequences preempted (their KV freed, to be recomputed).", gauges_.preemptions);
  counter("prompt_tokens_total", "Prompt tokens admitted.", gauges_.prompt_tokens);
  counter("generation_tokens_total", "Tokens generated.", gauges_.generation_tokens);
  counter("spec_decode_num_drafts_total", "Sequence-steps that drafted tokens (speculative decoding).", gauges_.spec_drafts);
  counter("spec_decode_num_draft_tokens_total", "Tokens drafted.", gauges_.spec_draft_tokens);
  counter("spec_decode_num_accepted_tokens_total", "Drafted tokens accepted.", gauges_.spec_accepted_tokens);
  const std::string per_position = kPrefix + "spec_decode_num_accepted_tokens_per_pos_total";
  header(out, per_position, "counter", "Drafted tokens accepted, by their position in the draft (0 first).");
  for (size_t i = 0; i < gauges_.spec_accepted_per_position.size(); ++i) {
    out += per_position + "{position=\"" + std::to_string(i) + "\"} " +
           std::to_string(gauges_.spec_accepted_per_position[i]) + "\n";
  }
  const std::string success = kPrefix + "request_success_total";
  header(out, success, "counter", "Finished requests by finish reason.");
  const char* reasons[] = {"stop", "length", "abort"};
  for (size_t i = 0; i < success_.size(); ++i) {
    out += success + "{finished_reason=\"" + reasons[i] + "\"} " + std::to_string(success_[i]) + "\n";
  }
  const auto histogram = [&](const char* name, const char* help, const Histogram& h) {
    header(out, kPrefix + name, "histogram", help);
    h.render(kPrefix + name, out);
  };
  histogram("time_to_first_token_seconds", "Time from the request's arrival to its first token.", ttft_);
  histogram("inter_token_latency_seconds", "Time between consecutive tokens of a completion.", itl_);
  histogram("e2e_request_latency_seconds", "Time from the request's arrival to its end.", e2e_);
  return out;
}

}  // namespace tokamak::server
