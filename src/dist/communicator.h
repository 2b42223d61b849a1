// What a model split across processes needs from the processes' transport:
// a few collectives and point-to-point messages, behind an interface, so the
// model layer and single-process builds carry no MPI (dist/mpi/ implements it
// on Open MPI). Collectives that combine floats do it in rank order, so a
// result never depends on which rank's bytes arrived first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tokamak::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // out [size][n] <- every rank's in [n], in rank order, on every rank.
  virtual void all_gather(const float* in, int64_t n, float* out) = 0;
  // root's `bytes` bytes at data to every rank's data.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Starts sending and returns: the bytes must stay put until wait_sends().
  // Messages between two ranks arrive in the order they were sent.
  virtual void send(const void* data, int64_t bytes, int dest) = 0;
  virtual void recv(void* data, int64_t bytes, int source) = 0;
  virtual void wait_sends() = 0;
  // Ends every process of the job: for a failure while the others wait in a
  // collective (they would wait forever otherwise).
  [[noreturn]] virtual void abort(const std::string& why) = 0;
  // Seconds spent in this communicator's calls: moving bytes and waiting for
  // the other ranks to reach the call.
  virtual double seconds() const = 0;
};

// data [n] <- the sum over ranks of each rank's data, added in rank order
// ((d0 + d1) + d2) + ..., the same bits on every rank. scratch: [size * n].
void all_reduce_sum(Communicator& comm, float* data, int64_t n, std::vector<float>& scratch);

// Where this process sits when a model runs on tp x pp processes: pipeline
// stage s holds a contiguous run of layers, split across its tp ranks in the
// Megatron layout. World rank = stage * tp + tp_rank; world rank 0 (stage 0)
// schedules, samples and serves.
struct Parallel {
  Communicator* world = nullptr;   // every rank
  Communicator* tensor = nullptr;  // the tp ranks of this rank's stage
  int tp = 1;
  int pp = 1;

  int tp_rank() const { return world->rank() % tp; }
  int stage() const { return world->rank() / tp; }
  int world_rank(int stage, int tp_rank) const { return stage * tp + tp_rank; }
  // Seconds both communicators spent in their calls so far.
  double comm_seconds() const { return world->seconds() + (tensor != world ? tensor->seconds() : 0.0); }
};

}  // namespace tokamak::dist
