#include "server/bench_client.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokamak::server {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Json request_body(const engine::Request& r, const HttpBenchTarget& target) {
  Json body = {{"prompt", r.prompt.ids},
               {"max_tokens", r.params.max_tokens},
               {"ignore_eos", true},
               {"temperature", r.params.sampling.temperature},
               {"top_p", 1.0},
               {"seed", r.params.sampling.seed},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (!target.model.empty()) body["model"] = target.model;
  return body;
}

struct Measured {
  std::vector<double> ttft_ms;
  std::vector<double> itl_ms;
  int64_t output_tokens = 0;
};

std::unique_ptr<httplib::Client> make_client(const HttpBenchTarget& target) {
  auto client = std::make_unique<httplib::Client>(target.url);
  if (!client->is_valid()) throw Error("bench-serve: --url " + target.url + " is not an http:// address");
  client->set_read_timeout(600, 0);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  return client;
}

httplib::Headers headers_of(const HttpBenchTarget& target) {
  httplib::Headers h;
  if (!target.api_key.empty()) h.emplace("Authorization", "Bearer " + target.api_key);
  return h;
}

// Sends one streamed request and records its timings; the SSE events are
// split on blank lines as they arrive.
void run_one(httplib::Client& client, const HttpBenchTarget& target, const engine::Request& r, Measured& m) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers_of(target);
  req.set_header("Content-Type", "application/json");
  req.body = request_body(r, target).dump();
  int status = 0;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  std::string pending, error_body;
  bool done = false;
  int64_t usage_tokens = -1, chunks = 0;
  const Clock::time_point sent = Clock::now();
  Clock::time_point last = sent;
  req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min<size_t>(size, 4096 - std::min<size_t>(4096, error_body.size())));
      return true;
    }
    pending.append(data, size);
    size_t end;
    while ((end = pending.find("\n\n")) != std::string::npos) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;  // a comment (keep-alive)
      const std::string payload = event.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const Json chunk = Json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (chunk.is_discarded()) throw Error("bench-serve: a chunk is not JSON: " + payload.substr(0, 200));
      if (chunk.contains("error")) throw Error("bench-serve: the server ended a stream with " + payload.substr(0, 400));
      if (chunk.contains("usage") && chunk["usage"].is_object()) {
        usage_tokens = chunk["usage"].value("completion_tokens", int64_t{-1});
      }
      const Json& choices = chunk.value("choices", Json::array());
      if (choices.empty() || choices[0].value("text", std::string()).empty()) continue;
      const Clock::time_point now = Clock::now();
      (chunks == 0 ? m.ttft_ms : m.itl_ms).push_back(ms_between(chunks == 0 ? sent : last, now));
      last = now;
      ++chunks;
    }
    return true;
  };
  const httplib::Result res = client.send(req);
  if (!res) throw Error("bench-serve: POST " + target.url + "/v1/completions failed: " + httplib::to_string(res.error()));
  if (status != 200) {
    throw Error("bench-serve: the server answered " + std::to_string(status) + ": " + error_body.substr(0, 400));
  }
  if (!done) throw Error("bench-serve: a stream ended without data: [DONE]");
  m.output_tokens += usage_tokens >= 0 ? usage_tokens : chunks;
}

// tokamak's counters from /metrics ("name value" lines); empty for another server.
std::map<std::string, double> scrape(httplib::Client& client, const HttpBenchTarget& target) {
  std::map<std::string, double> values;
  const httplib::Result res = client.Get("/metrics", headers_of(target));
  if (!res || res->status != 200) return values;
  std::istringstream lines(res->body);
  std::string name;
  double value = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    if (fields >> name >> value) values[name] = value;
  }
  return values;
}

}  // namespace

engine::ServeBenchResult run_http_serve_bench(const HttpBenchTarget& target, const engine::ServeBenchOptions& options,
                                              int32_t n_vocab, int32_t max_model_len) {
  engine::validate(options, max_model_len);
  const std::vector<engine::Request> workload = engine::make_serve_workload(options, n_vocab);
  std::unique_ptr<httplib::Client> control = make_client(target);
  {
    // One short request first, unmeasured, as offline (weights faulted in).
    engine::Request warmup;
    warmup.prompt = engine::Prompt::from_ids({0, 1, 2, 3});
    warmup.params.max_tokens = 1;
    warmup.params.sampling.temperature = 0.0f;
    warmup.params.sampling.seed = 0;
    Measured ignored;
    run_one(*control, target, warmup, ignored);
  }
  const std::map<std::string, double> before = scrape(*control, target);

  std::atomic<size_t> next{0};
  std::mutex mutex;  // guards `all` and `failure`
  Measured all;
  std::string failure;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> clients;
  const size_t n_clients = std::min<size_t>(static_cast<size_t>(options.concurrency), workload.size());
  for (size_t c = 0; c < n_clients; ++c) {
    clients.emplace_back([&] {
      Measured mine;
      try {
        const std::unique_ptr<httplib::Client> client = make_client(target);
        for (size_t i; (i = next.fetch_add(1)) < workload.size();) run_one(*client, target, workload[i], mine);
      } catch (const std::exception& e) {
        next.store(workload.size());  // the others stop after their current request
        const std::lock_guard lock(mutex);
        if (failure.empty()) failure = e.what();
      }
      const std::lock_guard lock(mutex);
      all.ttft_ms.insert(all.ttft_ms.end(), mine.ttft_ms.begin(), mine.ttft_ms.end());
      all.itl_ms.insert(all.itl_ms.end(), mine.itl_ms.begin(), mine.itl_ms.end());
      all.output_tokens += mine.output_tokens;
    });
  }
  for (std::thread& t : clients) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!failure.empty()) throw Error(failure);
  const std::map<std::string, double> after = scrape(*control, target);
  const auto delta = [&](const char* name) {
    const auto a = after.find(name), b = before.find(name);
    return a == after.end() || b == before.end() ? 0.0 : a->second - b->second;
  };

  engine::ServeBenchResult res;
  res.requests = static_cast<int32_t>(workload.size());
  for (const engine::Request& r : workload) res.prompt_tokens += static_cast<int64_t>(r.prompt.ids.size());
  res.output_tokens = all.output_tokens;
  res.seconds = seconds;
  res.output_tokens_per_s = static_cast<double>(res.output_tokens) / seconds;
  res.total_tokens_per_s = static_cast<double>(res.prompt_tokens + res.output_tokens) / seconds;
  res.requests_per_s = res.requests / seconds;
  res.ttft_ms = engine::latency_percentiles(all.ttft_ms);
  res.itl_ms = engine::latency_percentiles(all.itl_ms);
  res.preemptions = static_cast<int64_t>(delta("tokamak:num_preemptions_total"));
  res.spec_draft_tokens = static_cast<int64_t>(delta("tokamak:spec_decode_num_draft_tokens_total"));
  res.spec_accepted_tokens = static_cast<int64_t>(delta("tokamak:spec_decode_num_accepted_tokens_total"));
  for (int position = 0;; ++position) {
    const std::string name =
        "tokamak:spec_decode_num_accepted_tokens_per_pos_total{position=\"" + std::to_string(position) + "\"}";
    if (after.find(name) == after.end()) break;
    res.spec_accepted_per_position.push_back(static_cast<int64_t>(delta(name.c_str())));
  }
  const double queries = delta("tokamak:prefix_cache_queries_total");
  res.prefix_hit_rate = queries > 0 ? delta("tokamak:prefix_cache_hits_total") / queries : 0.0;
  return res;
}

}  // namespace tokamak::server
