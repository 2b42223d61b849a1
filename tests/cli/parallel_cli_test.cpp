// Tensor and pipeline parallel across MPI processes, end to end: `mpirun
// --oversubscribe -np N tokamak ... --tp T --pp P` against the same command
// in one process (the independent reference: the unsplit forward pass).
//
// Logits (--matmul f32, f32 KV) must match bit for bit: pipeline stages run
// the same arithmetic, and on the f32 path tensor-parallel ranks continue one
// another's sums of wo and ffn_down in column order (Forward::
// project_across_ranks), the one sequential sum of one process. (An
// all-reduce of independent partial sums rounded differently: 1.5e-5 on
// stories260K.) Greedy text must be identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/forward_logits.h"
#include "common/test_data.h"

namespace tokamak {
namespace {

using testing::run_command;
using testing::temp_file;
using testing::tokamak_bin;
namespace fs = std::filesystem;

// mpirun -np n: oversubscribed (the suite runs on 2 cores), allowed as root
// (CI containers run as root).
std::vector<std::string> mpirun(int n) {
  return {TOKAMAK_MPIEXEC, "--oversubscribe", "--allow-run-as-root", "-np", std::to_string(n)};
}

// run_command() of an mpirun command line. Sanitized builds: the ranks run
// without LeakSanitizer. Open MPI leaks at exit from components it has
// unloaded by then, so their frames are "<unknown module>" and no suppression
// can name them; tokamak's own allocations on these paths are leak-checked by
// the single-process tests (only src/dist is not), and ASan and UBSan stay on.
testing::CommandResult run_mpi(const std::vector<std::string>& argv) {
  if (!testing::kSanitized) return run_command(argv);
  return run_command(argv, {"ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"});
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

struct Split {
  int np;
  std::vector<std::string> flags;
};
const Split kSplits[] = {{2, {"--tp", "2"}}, {2, {"--pp", "2"}}, {4, {"--tp", "2", "--pp", "2"}}};

// The logits of `ids` from `tokamak logits` on `model`, under mpirun when np > 0.
std::vector<float> logits(const fs::path& model, const std::vector<int32_t>& ids, int np,
                          const std::vector<std::string>& flags, bool incremental) {
  const fs::path out = temp_file("parallel_logits.f32");
  std::vector<std::string> argv = np > 0 ? mpirun(np) : std::vector<std::string>{};
  for (const std::string& a : std::vector<std::string>{tokamak_bin(), "logits", "-m", model, "--ids", join_ids(ids),
                                                       "-o", out, "-t", "1", "--matmul", "f32"}) {
    argv.push_back(a);
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (incremental) argv.push_back("--incremental");
  const auto r = np > 0 ? run_mpi(argv) : run_command(argv);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<float> got = r.exit_code == 0 ? testing::read_f32_file(out) : std::vector<float>{};
  fs::remove(out);
  return got;
}

// Each split of `splits` against one process, batched and token by token.
void expect_logits_match(const fs::path& model, const std::vector<Split>& splits) {
  const std::vector<int32_t> ids = testing::fixture_sequence("A");
  for (const bool incremental : {false, true}) {
    const std::vector<float> one = logits(model, ids, 0, {}, incremental);
    ASSERT_FALSE(one.empty());
    for (const Split& s : splits) {
      std::string label = model.filename().string() + " -np " + std::to_string(s.np);
      for (const std::string& f : s.flags) label += " " + f;
      if (incremental) label += " --incremental";
      const std::vector<float> split = logits(model, ids, s.np, s.flags, incremental);
      const float diff = testing::max_abs_diff(one, split);
      std::printf("%s: max |logit difference| %.3g\n", label.c_str(), diff);
      EXPECT_EQ(diff, 0.0f) << label;
    }
  }
}

TEST(ParallelCli, Stories260KLogitsMatchOneProcess) {
  // 8 query heads, 4 KV heads: --tp 2 and --tp 4 split them.
  std::vector<Split> splits(std::begin(kSplits), std::end(kSplits));
  splits.push_back({4, {"--tp", "4"}});
  expect_logits_match(testing::test_data("models/stories260K/stories260K.gguf"), splits);
}

TEST(ParallelCli, MicroLlamaLogitsMatchOneProcess) {
  // 8 heads, 2 KV heads; Q4_0's blocks of 32 split the 128 columns of wo a rank holds.
  for (const char* type : {"f32", "q4_0", "q8_0"}) {
    expect_logits_match(testing::test_data(std::string("fixtures/models/micro-llama-") + type + ".gguf"),
                        {std::begin(kSplits), std::end(kSplits)});
  }
}

TEST(ParallelCli, KQuantsSplitIntoStagesAndNameTheBlockThatHeadsCannotSplit) {
  const fs::path model = testing::test_data("fixtures/models/micro-llama-q4_k.gguf");
  expect_logits_match(model, {{2, {"--pp", "2"}}});
  // A rank's 4 heads x 32 = 128 columns of wo are half of a 256-value block.
  std::vector<std::string> argv = mpirun(2);
  for (const std::string& a : std::vector<std::string>{tokamak_bin(), "logits", "-m", model, "--ids", "1,2", "-o", "-",
                                                       "--tp", "2"}) {
    argv.push_back(a);
  }
  const auto r = run_mpi(argv);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("'blk.0.attn_output.weight' is q4_K, whose blocks hold 256 values: this rank's columns [0, 128)"),
            std::string::npos)
      << r.err;
}

TEST(ParallelCli, EachFamilyMatchesOneProcess) {
  // Their single KV head cannot split across tensor-parallel ranks: stages
  // split them (2 layers); the llama preset with 2 KV heads splits both ways.
  for (const char* preset : {"llama3-micro", "qwen2-micro", "smollm2-micro", "mistral-micro", "micro"}) {
    const fs::path model = temp_file(std::string("parallel_") + preset + ".gguf");
    const auto made = run_command({tokamak_bin(), "make-model", "--preset", preset, "--type", "f32", "-o", model,
                                   "--seed", "5", "-t", "2"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    std::vector<Split> splits = {{2, {"--pp", "2"}}};
    if (std::string(preset) == "micro") splits = {std::begin(kSplits), std::end(kSplits)};
    expect_logits_match(model, splits);
    fs::remove(model);
  }
}

TEST(ParallelCli, HeadCountsThatDoNotSplitAreErrorsNamingBoth) {
  const std::string model = testing::test_data("models/stories260K/stories260K.gguf").string();
  std::vector<std::string> argv = mpirun(3);
  for (const std::string& a :
       std::vector<std::string>{tokamak_bin(), "logits", "-m", model, "--ids", "1,2", "-o", "-", "--tp", "3"}) {
    argv.push_back(a);
  }
  const auto r = run_mpi(argv);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--tp 3 does not divide the model's 4 KV heads"), std::string::npos) << r.err;
  // A job whose size is not tp x pp.
  argv[4] = "2";
  const auto wrong = run_mpi(argv);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.err.find("--tp 3 x --pp 1 needs 3 MPI processes (mpirun -np 3); this job has 2"), std::string::npos)
      << wrong.err;
}

// mpirun's output forwarding ends a last line that has no newline with one.
std::string without_final_newline(std::string s) {
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(ParallelCli, GreedyTextIsTheSameAsOneProcess) {
  const std::string model = testing::test_data("models/stories260K/stories260K.gguf").string();
  const std::vector<std::string> run = {tokamak_bin(), "run", "-m", model, "-p", "Once upon a time", "-n", "80",
                                        "--temp", "0", "-t", "1"};
  const auto one = run_command(run);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_GT(one.out.size(), 100u);
  for (const Split& s : kSplits) {
    std::vector<std::string> argv = mpirun(s.np);
    argv.insert(argv.end(), run.begin(), run.end());
    argv.insert(argv.end(), s.flags.begin(), s.flags.end());
    const auto split = run_mpi(argv);
    ASSERT_EQ(split.exit_code, 0) << split.err;
    EXPECT_EQ(without_final_newline(split.out), without_final_newline(one.out)) << s.flags[0];
  }
}

TEST(ParallelCli, BatchOfSharedPrefixesIsTheSameAsOneProcess) {
  // Many sequences per step (micro-batches across the stages), prefix-cache
  // hits (adopted blocks) and finished sequences freed: every rank's pool
  // must follow rank 0's journal for the outputs to agree.
  const fs::path in = temp_file("parallel_batch.jsonl");
  {
    std::string lines;
    const char* prompts[] = {"Once upon a time", "Once upon a time, there was a little girl", "The cat sat",
                             "Once upon a time, there was a little boy named Tim"};
    for (int i = 0; i < 12; ++i) {
      lines += std::string(R"({"prompt": ")") + prompts[i % 4] + R"(", "max_tokens": )" + std::to_string(10 + 3 * i) +
               R"(, "temperature": 0})" + "\n";
    }
    FILE* f = std::fopen(in.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(lines.c_str(), f);
    std::fclose(f);
  }
  const std::string model = testing::test_data("models/stories260K/stories260K.gguf").string();
  const std::vector<std::string> batch = {tokamak_bin(), "batch", "-m", model, "-i", in, "-t", "1",
                                          "--max-num-seqs", "5", "--kv-memory", "2M"};
  const auto one = run_command(batch);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  for (const Split& s : kSplits) {
    std::vector<std::string> argv = mpirun(s.np);
    argv.insert(argv.end(), batch.begin(), batch.end());
    argv.insert(argv.end(), s.flags.begin(), s.flags.end());
    const auto split = run_mpi(argv);
    ASSERT_EQ(split.exit_code, 0) << split.err;
    EXPECT_EQ(split.out, one.out) << s.flags[0];
  }
  fs::remove(in);
}

}  // namespace
}  // namespace tokamak
