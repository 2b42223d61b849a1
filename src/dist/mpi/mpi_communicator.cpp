#include "dist/mpi/mpi_communicator.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace tokamak::dist {
namespace {

// MPI counts are int: larger messages would need derived types, and no step
// of a model that fits one machine's memory per rank comes near 2 GiB.
int count_of(int64_t n, const char* what) {
  if (n < 0 || n > INT_MAX) throw Error(std::string("MPI ") + what + " of " + std::to_string(n) + " elements: over INT_MAX");
  return static_cast<int>(n);
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string(call) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

// Adds the time of the enclosing call to `total`.
class Timed {
 public:
  explicit Timed(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Timed() { total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

MpiRuntime::MpiRuntime() {
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error("MPI provides thread level " + std::to_string(provided) + ", below MPI_THREAD_SERIALIZED");
  }
  // Errors come back as codes (thrown by check()), not as an abort inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiRuntime::~MpiRuntime() { MPI_Finalize(); }

MpiCommunicator::MpiCommunicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  if (!sends_.empty()) MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE);
  if (owned_) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world() {
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(MPI_COMM_WORLD, false));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, int key) const {
  MPI_Comm sub = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(sub, true));
}

void MpiCommunicator::all_gather(const float* in, int64_t n, float* out) {
  const Timed timed(seconds_);
  const int count = count_of(n, "all-gather");
  check(MPI_Allgather(in, count, MPI_FLOAT, out, count, MPI_FLOAT, comm_), "MPI_Allgather");
}

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  const Timed timed(seconds_);
  check(MPI_Bcast(data, count_of(bytes, "broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
}

void MpiCommunicator::send(const void* data, int64_t bytes, int dest) {
  const Timed timed(seconds_);
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Isend(data, count_of(bytes, "send"), MPI_BYTE, dest, 0, comm_, &request), "MPI_Isend");
  sends_.push_back(request);
}

void MpiCommunicator::recv(void* data, int64_t bytes, int source) {
  const Timed timed(seconds_);
  const int count = count_of(bytes, "receive");
  MPI_Status status;
  check(MPI_Recv(data, count, MPI_BYTE, source, 0, comm_, &status), "MPI_Recv");
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (got != count) {
    throw Error("MPI_Recv from rank " + std::to_string(source) + ": " + std::to_string(got) + " bytes, expected " +
                std::to_string(count));
  }
}

void MpiCommunicator::wait_sends() {
  const Timed timed(seconds_);
  if (sends_.empty()) return;
  check(MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  sends_.clear();
}

void MpiCommunicator::abort(const std::string& why) {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  std::fprintf(stderr, "tokamak: rank %d: %s; ending every rank\n", world_rank, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

}  // namespace tokamak::dist
