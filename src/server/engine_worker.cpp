#include "server/engine_worker.h"

#include <algorithm>

namespace tokamak::server {

void RequestChannel::wait_accepted() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return state_ != State::Queued; });
  if (error_ && id_ < 0) throw *error_;
}

bool RequestChannel::next(std::vector<engine::RequestOutput>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return !outputs_.empty() || state_ == State::Ended; });
  while (!outputs_.empty()) {
    out.push_back(std::move(outputs_.front()));
    outputs_.pop_front();
  }
  return !out.empty() || state_ != State::Ended;
}

std::optional<ApiError> RequestChannel::error() const {
  const std::lock_guard lock(mutex_);
  return error_;
}

void RequestChannel::accept(int64_t id) {
  const std::lock_guard lock(mutex_);
  id_ = id;
  state_ = State::Running;
  changed_.notify_all();
}

void RequestChannel::push(engine::RequestOutput output) {
  const std::lock_guard lock(mutex_);
  outputs_.push_back(std::move(output));
  changed_.notify_all();
}

void RequestChannel::end(std::optional<ApiError> error) {
  const std::lock_guard lock(mutex_);
  state_ = State::Ended;
  if (error) error_ = std::move(error);
  changed_.notify_all();
}

EngineWorker::EngineWorker(engine::Engine& engine, Metrics& metrics, WorkerOptions options)
    : engine_(engine),
      metrics_(metrics),
      options_(options),
      epoch_(std::chrono::steady_clock::now()),
      capacity_(static_cast<int64_t>(engine.options().max_num_seqs) + options.max_queue) {
  publish_gauges();
  thread_ = std::thread([this] { run(); });
}

EngineWorker::~EngineWorker() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
    draining_ = true;
    deadline_ = now();
  }
  wake_.notify_all();
  thread_.join();
}

double EngineWorker::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

std::shared_ptr<RequestChannel> EngineWorker::submit(engine::Request request) {
  auto channel = std::make_shared<RequestChannel>();
  channel->arrival_ = now();
  channel->request_ = std::move(request);
  {
    const std::lock_guard lock(mutex_);
    if (draining_) throw ApiError(503, "service_unavailable", "the server is shutting down", std::nullopt, "shutting_down");
    if (in_flight_ >= capacity_) {
      throw ApiError(429, "rate_limit_error",
                     "the server has " + std::to_string(in_flight_) + " requests in flight, its limit (max_num_seqs " +
                         std::to_string(engine_.options().max_num_seqs) + " + max_queue " +
                         std::to_string(options_.max_queue) + "); retry later",
                     std::nullopt, "queue_full");
    }
    ++in_flight_;
    incoming_.push_back(channel);
  }
  wake_.notify_all();
  return channel;
}

void EngineWorker::shutdown(double timeout) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  deadline_ = now() + timeout;
  wake_.notify_all();
  drained_.wait(lock, [&] { return in_flight_ == 0; });
}

void EngineWorker::admit(std::vector<std::shared_ptr<RequestChannel>>& incoming) {
  for (std::shared_ptr<RequestChannel>& c : incoming) {
    try {
      const int64_t id = engine_.add_request(c->request_);
      c->last_token_.assign(static_cast<size_t>(c->request_.params.n), -1.0);
      c->request_ = {};
      live_.emplace(id, c);
      c->accept(id);
    } catch (const std::exception& e) {
      // What add_request refuses with an Error is the request's own fault: a
      // prompt over max_model_len or the pool, token ids outside the
      // vocabulary. Anything else is ours; the engine thread lives on.
      const bool bad_request = dynamic_cast<const Error*>(&e) != nullptr;
      c->end(bad_request ? ApiError::bad_request(e.what())
                         : ApiError(500, "server_error", std::string("internal error: ") + e.what()));
      release();
    }
  }
  incoming.clear();
}

void EngineWorker::abort_cancelled(bool past_deadline) {
  const double t = now();
  for (auto& [id, c] : live_) {
    if (c->cancelled_.load() || past_deadline || t - c->arrival_ > options_.request_timeout) engine_.abort(id);
  }
}

void EngineWorker::dispatch(std::vector<engine::RequestOutput>& outputs) {
  const double t = now();
  for (engine::RequestOutput& out : outputs) {
    const auto it = live_.find(out.request_id);
    if (it == live_.end()) continue;
    const std::shared_ptr<RequestChannel> channel = it->second;
    for (const engine::CompletionDelta& d : out.completions) {
      // The request's reason: the "worst" of its completions' (abort > length > stop).
      channel->finish_ = std::max(channel->finish_, d.finish);
      if (d.token_ids.empty()) continue;
      double& last = channel->last_token_.at(static_cast<size_t>(d.index));
      if (last < 0) {
        if (d.index == 0) metrics_.observe_ttft(t - channel->arrival_);
      } else {
        metrics_.observe_itl(t - last);
      }
      last = t;
    }
    const bool finished = out.finished;
    channel->push(std::move(out));
    if (!finished) continue;
    metrics_.finish_request(channel->finish_, t - channel->arrival_);
    std::optional<ApiError> error;
    if (channel->finish_ == engine::FinishReason::Abort && !channel->cancelled_.load()) {
      error = draining_.load()
                  ? ApiError(503, "service_unavailable", "the server shut down before the request finished",
                             std::nullopt, "shutting_down")
                  : ApiError(504, "timeout",
                             "the request ran past the server's request timeout of " +
                                 std::to_string(static_cast<int64_t>(options_.request_timeout)) + " s",
                             std::nullopt, "request_timeout");
    }
    channel->end(std::move(error));
    live_.erase(it);
    release();
  }
}

void EngineWorker::release() {
  const std::lock_guard lock(mutex_);
  if (--in_flight_ == 0) drained_.notify_all();
}

void EngineWorker::publish_gauges() {
  EngineGauges g;
  const engine::Scheduler& s = engine_.scheduler();
  // Requests, not sequences: the completions of an n > 1 request share one request id.
  std::vector<int64_t> running;
  for (const engine::SeqId seq : s.running()) running.push_back(s.sequence(seq).request_id);
  std::sort(running.begin(), running.end());
  g.running = std::unique(running.begin(), running.end()) - running.begin();
  g.waiting = static_cast<int64_t>(live_.size()) - g.running;
  {
    std::lock_guard lock(mutex_);
    g.waiting += static_cast<int64_t>(incoming_.size());
  }
  const kv::BlockPool& pool = engine_.kv_cache().pool();
  g.kv_usage = pool.n_blocks() > 0 ? static_cast<double>(pool.n_used()) / pool.n_blocks() : 0.0;
  g.prefix_queries = s.prefix_stats().query_tokens;
  g.prefix_hits = s.prefix_stats().hit_tokens;
  const engine::EngineStats& stats = engine_.stats();
  g.preemptions = stats.preemptions;
  g.prompt_tokens = stats.prompt_tokens;
  g.generation_tokens = stats.generated_tokens;
  g.spec_drafts = stats.spec_drafts;
  g.spec_draft_tokens = stats.spec_draft_tokens;
  g.spec_accepted_tokens = stats.spec_accepted_tokens;
  g.spec_accepted_per_position = stats.spec_accepted_per_position;
  metrics_.set_engine(g);
}

void EngineWorker::run() {
  std::vector<std::shared_ptr<RequestChannel>> incoming;
  while (true) {
    bool past_deadline = false;
    {
      std::unique_lock lock(mutex_);
      // Idle: sleep until a request comes. Busy: check cancellations and
      // timeouts every step.
      wake_.wait(lock, [&] { return stop_ || !incoming_.empty() || !live_.empty(); });
      if (stop_ && live_.empty() && incoming_.empty()) break;
      incoming.swap(incoming_);
      past_deadline = deadline_ && now() >= *deadline_;
    }
    admit(incoming);
    abort_cancelled(past_deadline);
    if (engine_.has_unfinished()) {
      std::vector<engine::RequestOutput> outputs = engine_.step();
      dispatch(outputs);
    }
    publish_gauges();
  }
  drained_.notify_all();
}

}  // namespace tokamak::server
