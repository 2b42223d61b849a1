// --tp / --pp: a command's model split across MPI ranks, `mpirun -np N
// tokamak CMD ... --tp T --pp P` with N = T x P. Every rank runs the same
// command line: rank 0 goes on with the command (scheduler, sampling,
// tokenizer, HTTP); the others serve forward steps until rank 0 is done.
#pragma once

#include <filesystem>
#include <memory>

#include "cli/args.h"
#include "model/model.h"

namespace tokamak::cli {

inline constexpr OptionSpec kParallelOptions[] = {
    {"--tp", "N", "tensor parallel: split each layer's heads, FFN and vocabulary across N MPI ranks (under mpirun)"},
    {"--pp", "M", "pipeline parallel: split the layers into M stages of --tp ranks each (mpirun -np N x M)"},
};

class ParallelModel {
 public:
  // Without --tp/--pp above 1: Model::load(path). Else starts MPI and loads
  // this rank's shard (Model::load_shard). Throws tokamak::Error on rank 0
  // when any rank fails to load (a rank count that is not tp x pp, a head
  // count that does not split, a missing file) or when the build has no MPI;
  // the other ranks then return 1 from serve() without output.
  // `repack`: the kernel variant the weights are laid out for (Model::load).
  ParallelModel(const ParsedArgs& args, const std::filesystem::path& path, RepackFor repack = kernels::best_isa());
  // Whether the flags ask for more than one process.
  static bool requested(const ParsedArgs& args);
  // Rank 0: ends the other ranks' serve(); then MPI ends on every rank.
  ~ParallelModel();
  ParallelModel(const ParallelModel&) = delete;
  ParallelModel& operator=(const ParallelModel&) = delete;

  const Model& model() const { return *model_; }
  // A rank other than 0: the command returns serve(threads) and does nothing else.
  bool worker() const { return rank_ != 0; }
  // The exit status of a rank other than 0, once rank 0 is done (0 when the
  // model did not load: rank 0 reports that); threads <= 0: all cores.
  int serve(int threads);

 private:
  struct Mpi;  // the MPI runtime and communicators (parallel.cpp)
  std::unique_ptr<Mpi> mpi_;
  std::unique_ptr<Model> model_;
  int rank_ = 0;
  bool failed_ = false;  // a worker whose shard (or another rank's) did not load
};

}  // namespace tokamak::cli
