#include "server/connection_pool.h"

namespace tokamak::server {

ConnectionPool::ConnectionPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> job) {
  const std::lock_guard lock(mutex_);
  if (stopping_) return;  // httplib enqueues nothing after it stopped accepting
  if (!idle_.empty()) {
    Worker* w = idle_.back();
    idle_.pop_back();
    w->job = std::move(job);
    w->wake.notify_one();
  } else if (threads_.size() < max_threads_) {
    Worker* w = workers_.emplace_back(std::make_unique<Worker>()).get();
    w->job = std::move(job);
    threads_.emplace_back([this, w] { run(w); });
  } else {
    queued_.push_back(std::move(job));
  }
}

void ConnectionPool::run(Worker* self) {
  std::unique_lock lock(mutex_);
  while (true) {
    if (!self->job && !queued_.empty()) {
      self->job = std::move(queued_.front());
      queued_.pop_front();
    }
    if (self->job) {
      std::function<void()> job = std::move(self->job);
      self->job = nullptr;
      lock.unlock();
      job();
      lock.lock();
      continue;
    }
    if (stopping_) return;
    idle_.push_back(self);
    self->wake.wait(lock, [&] { return self->job || stopping_; });
    // Woken by shutdown() while idle: leave the idle stack.
    if (!self->job) std::erase(idle_, self);
  }
}

void ConnectionPool::shutdown() {
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (Worker* w : idle_) w->wake.notify_one();
  }
  for (std::thread& t : threads_) t.join();
}

size_t ConnectionPool::threads() const {
  const std::lock_guard lock(mutex_);
  return threads_.size();
}

}  // namespace tokamak::server
