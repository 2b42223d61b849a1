// The HTTP server's threads (an httplib::TaskQueue): one thread serves one
// connection at a time. Threads start on demand, up to a limit, and an idle
// thread that finished last is the next one used (a stack, not a queue), so
// the threads and stacks in use follow the peak number of connections, not
// the limit: with a FIFO pool every thread would take turns and the resident
// memory of all of them would creep in. Connections beyond the limit wait
// for a thread, in order.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokamak::server {

class ConnectionPool : public httplib::TaskQueue {
 public:
  explicit ConnectionPool(size_t max_threads);
  ~ConnectionPool() override;
  void enqueue(std::function<void()> job) override;
  // Runs the queued jobs, then joins every thread.
  void shutdown() override;
  size_t threads() const;

 private:
  struct Worker {
    std::condition_variable wake;
    std::function<void()> job;
  };
  void run(Worker* self);

  const size_t max_threads_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::vector<Worker*> idle_;                // the most recently idle last
  std::deque<std::function<void()>> queued_; // waiting for a thread
  bool stopping_ = false;
};

}  // namespace tokamak::server
