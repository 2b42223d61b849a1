// dist::Communicator over Open MPI, and the process's MPI lifetime. Only the
// command line links this (libtokamak stays free of MPI).
#pragma once

#include <memory>
#include <vector>

#include <mpi.h>

#include "dist/communicator.h"

namespace tokamak::dist {

// MPI_Init_thread on construction, MPI_Finalize on destruction; one per
// process. MPI_THREAD_SERIALIZED: the server's engine thread makes the calls
// of each step while the main thread made the first and makes the last.
class MpiRuntime {
 public:
  // Throws tokamak::Error when MPI cannot start or lacks that thread level.
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
};

class MpiCommunicator final : public Communicator {
 public:
  // MPI_COMM_WORLD (not freed).
  static std::unique_ptr<MpiCommunicator> world();
  // The ranks of the same color, ordered by key (MPI_Comm_split).
  std::unique_ptr<MpiCommunicator> split(int color, int key) const;
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_gather(const float* in, int64_t n, float* out) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void send(const void* data, int64_t bytes, int dest) override;
  void recv(void* data, int64_t bytes, int source) override;
  void wait_sends() override;
  [[noreturn]] void abort(const std::string& why) override;
  double seconds() const override { return seconds_; }

 private:
  MpiCommunicator(MPI_Comm comm, bool owned);

  MPI_Comm comm_;
  bool owned_;  // freed on destruction (a split)
  int rank_ = 0;
  int size_ = 1;
  std::vector<MPI_Request> sends_;  // in flight until wait_sends()
  double seconds_ = 0.0;
};

}  // namespace tokamak::dist
