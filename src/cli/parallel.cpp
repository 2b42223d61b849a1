#include "cli/parallel.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "dist/communicator.h"
#include "model/forward.h"
#ifdef TOKAMAK_MPI
#include "dist/mpi/mpi_communicator.h"
#endif

namespace tokamak::cli {

#ifdef TOKAMAK_MPI
struct ParallelModel::Mpi {
  dist::MpiRuntime runtime;
  std::unique_ptr<dist::MpiCommunicator> world = dist::MpiCommunicator::world();
  std::unique_ptr<dist::MpiCommunicator> tensor;
  dist::Parallel parallel;
};

namespace {

// Every rank learns whether any failed; all then throw the lowest failing
// rank's message, so no rank waits for a step that will never come.
void agree(dist::Communicator& world, const std::string& error) {
  const float mine = error.empty() ? 0.0f : 1.0f;
  std::vector<float> all(static_cast<size_t>(world.size()));
  world.all_gather(&mine, 1, all.data());
  for (int r = 0; r < world.size(); ++r) {
    if (all[static_cast<size_t>(r)] == 0.0f) continue;
    int64_t size = static_cast<int64_t>(error.size());
    world.broadcast(&size, sizeof size, r);
    std::string message(static_cast<size_t>(size), '\0');
    if (world.rank() == r) message = error;
    world.broadcast(message.data(), size, r);
    throw Error(r == 0 ? message : "rank " + std::to_string(r) + ": " + message);
  }
}

}  // namespace
#else
struct ParallelModel::Mpi {};
#endif

bool ParallelModel::requested(const ParsedArgs& args) {
  return args.get_int("--tp", 1, 1, 4096) * args.get_int("--pp", 1, 1, 4096) > 1;
}

ParallelModel::ParallelModel(const ParsedArgs& args, const std::filesystem::path& path, RepackFor repack) {
  const int tp = static_cast<int>(args.get_int("--tp", 1, 1, 4096));
  const int pp = static_cast<int>(args.get_int("--pp", 1, 1, 4096));
  if (tp * pp == 1) {
    model_ = std::make_unique<Model>(Model::load(path, MapMode::kAuto, repack));
    return;
  }
#ifdef TOKAMAK_MPI
  mpi_ = std::make_unique<Mpi>();
  dist::MpiCommunicator& world = *mpi_->world;
  rank_ = world.rank();
  std::string error;
  if (world.size() != tp * pp) {
    error = "--tp " + std::to_string(tp) + " x --pp " + std::to_string(pp) + " needs " + std::to_string(tp * pp) +
            " MPI processes (mpirun -np " + std::to_string(tp * pp) + "); this job has " + std::to_string(world.size());
  } else {
    mpi_->tensor = world.split(rank_ / tp, rank_ % tp);
    mpi_->parallel = {&world, mpi_->tensor.get(), tp, pp};
    try {
      model_ = std::make_unique<Model>(Model::load_shard(path, mpi_->parallel, repack));
    } catch (const Error& e) {
      error = e.what();
    }
  }
  try {
    agree(world, error);
  } catch (const Error&) {
    if (rank_ == 0) throw;
    failed_ = true;
  }
#else
  throw Error("--tp " + std::to_string(tp) + " / --pp " + std::to_string(pp) +
              " split the model across MPI processes, and this build has no MPI (install libopenmpi-dev, reconfigure)");
#endif
}

ParallelModel::~ParallelModel() {
#ifdef TOKAMAK_MPI  // without MPI there are no other ranks (mpi_ stays null)
  if (!mpi_ || rank_ != 0 || !model_) return;
  try {
    Forward::stop_steps(*model_);
  } catch (const std::exception& e) {
    mpi_->world->abort(std::string("cannot end the other ranks: ") + e.what());
  }
#endif
}

int ParallelModel::serve(int threads) {
  // The failure is rank 0's to report (it throws the agreed message). A
  // worker that exited non-zero first would make mpirun abort the job, and
  // rank 0's message was then sometimes lost in the teardown (a third of the
  // runs on a loaded 2-core host); the job's status is rank 0's non-zero one.
  if (failed_) return 0;
  ThreadPool pool(threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  Forward::serve_steps(*model_, pool);
  return 0;
}

}  // namespace tokamak::cli
