// Perplexity and KL divergence (src/tools/perplexity.h): the PPL of a random
// model against a plain f64 computation from the independent reference
// decoder, the chunking rules of llama-perplexity, KL of a model against
// itself, and the checks on a reference file.
#include "tools/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>

#include "common/reference_model.h"
#include "common/test_data.h"
#include "core/error.h"
#include "core/percentile.h"
#include "io/gguf.h"

namespace tokamak {
namespace {

using testing::RandomModelSpec;
namespace fs = std::filesystem;

constexpr int32_t kBos = 1;

// A small model and 70 pseudo-random tokens: with n_ctx 16, 4 chunks and a tail of 6.
struct Fixture {
  fs::path path;
  std::shared_ptr<const io::GgufFile> file;
  Model model;
  std::vector<int32_t> tokens;
};

Fixture make_fixture(const std::string& name) {
  RandomModelSpec spec;
  spec.n_ctx = 64;
  const fs::path path = testing::temp_file(name + ".gguf");
  testing::write_random_model(spec, path);
  auto file = std::make_shared<const io::GgufFile>(io::GgufFile::open(path));
  Model model = Model::from_gguf(file);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 70; ++i) tokens.push_back((i * 29 + 7) % spec.n_vocab);
  return {path, file, std::move(model), tokens};
}

tools::EvalOptions f32_options(int32_t n_batch) {
  tools::EvalOptions options;
  options.n_batch = n_batch;
  options.kv.k_type = options.kv.v_type = kernels::KvType::F32;  // the reference keeps K/V exact
  options.kv.block_size = 8;
  return options;
}

// Sum of NLLs and their count through evaluate_chunks.
tools::NllStats engine_nll(const Fixture& f, const tools::ChunkPlan& plan, const tools::EvalOptions& options) {
  ThreadPool pool(2);
  tools::NllStats nll;
  std::vector<double> log_p;
  const size_t n_vocab = static_cast<size_t>(f.model.config().n_vocab);
  tools::evaluate_chunks(f.model, pool, f.tokens, kBos, plan, options,
                         [&](int32_t, std::span<const float> logits, std::span<const int32_t> targets) {
                           for (size_t i = 0; i < targets.size(); ++i) {
                             tools::log_softmax(logits.subspan(i * n_vocab, n_vocab), log_p);
                             nll.add(-log_p[static_cast<size_t>(targets[i])]);
                           }
                         });
  return nll;
}

TEST(Perplexity, MatchesAPlainF64ComputationFromTheReferenceDecoder) {
  const Fixture f = make_fixture("ppl_plain");
  const int32_t n_ctx = 16;
  const tools::ChunkPlan plan = tools::plan_chunks(static_cast<int64_t>(f.tokens.size()), n_ctx, -1);
  ASSERT_EQ(plan.n_chunks, 4);
  ASSERT_EQ(plan.first, 8);
  ASSERT_EQ(plan.n_scored(), 7);

  // By hand: each chunk from position 0 with BOS first; logits at positions
  // 8..14 predict the tokens at 9..15; PPL = exp(mean NLL).
  const int n_vocab = f.model.config().n_vocab;
  double sum = 0, sum2 = 0;
  int count = 0;
  for (int c = 0; c < 4; ++c) {
    std::vector<int32_t> chunk(f.tokens.begin() + c * n_ctx, f.tokens.begin() + (c + 1) * n_ctx);
    chunk[0] = kBos;
    const std::vector<double> logits = testing::reference_logits(*f.file, chunk);
    for (int p = 8; p <= 14; ++p) {
      const double* row = logits.data() + static_cast<size_t>(p) * n_vocab;
      double max = row[0];
      for (int i = 1; i < n_vocab; ++i) max = std::max(max, row[i]);
      double z = 0;
      for (int i = 0; i < n_vocab; ++i) z += std::exp(row[i] - max);
      const double nll = max + std::log(z) - row[chunk[p + 1]];
      sum += nll;
      sum2 += nll * nll;
      ++count;
    }
  }
  const double mean = sum / count;
  const double expected_ppl = std::exp(mean);
  const double expected_error = expected_ppl * std::sqrt((sum2 / count - mean * mean) / (count - 1));

  const tools::NllStats got = engine_nll(f, plan, f32_options(2048));
  EXPECT_EQ(got.count, 28);
  // f32 logits against f64: ~1e-5 per logit, far below 1e-4 relative PPL.
  EXPECT_NEAR(got.ppl(), expected_ppl, 1e-4 * expected_ppl);
  EXPECT_NEAR(got.ppl_error(), expected_error, 1e-3 * expected_error);
  EXPECT_GT(expected_error, 0.0);
  fs::remove(f.path);
}

// Chunks side by side, one chunk per pass, or a chunk over several passes:
// batch invariance makes the sums bitwise equal.
TEST(Perplexity, BatchSizeDoesNotChangeTheResult) {
  const Fixture f = make_fixture("ppl_batches");
  const tools::ChunkPlan plan = tools::plan_chunks(static_cast<int64_t>(f.tokens.size()), 16, -1);
  const tools::NllStats all = engine_nll(f, plan, f32_options(64));
  for (const int32_t n_batch : {16, 48, 5, 9}) {
    const tools::NllStats other = engine_nll(f, plan, f32_options(n_batch));
    EXPECT_EQ(other.count, all.count) << n_batch;
    EXPECT_EQ(other.sum, all.sum) << "n_batch " << n_batch;
  }
  fs::remove(f.path);
}

TEST(Perplexity, ChunkingEdges) {
  // llama-perplexity's rule: at least 2 * n_ctx tokens.
  try {
    (void)tools::plan_chunks(255, 128, -1);
    FAIL() << "255 tokens were accepted for -c 128";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("255 tokens"), std::string::npos) << what;
    EXPECT_NE(what.find("at least 256"), std::string::npos) << what;
  }
  EXPECT_EQ(tools::plan_chunks(256, 128, -1).n_chunks, 2);
  EXPECT_EQ(tools::plan_chunks(383, 128, -1).n_chunks, 2);  // the tail is dropped
  EXPECT_EQ(tools::plan_chunks(384, 128, -1).n_chunks, 3);
  EXPECT_EQ(tools::plan_chunks(10000, 128, 5).n_chunks, 5);
  EXPECT_EQ(tools::plan_chunks(10000, 128, 0).n_chunks, 78);
  // Odd n_ctx: first = 3, positions 3..5 scored.
  const tools::ChunkPlan odd = tools::plan_chunks(14, 7, -1);
  EXPECT_EQ(odd.first, 3);
  EXPECT_EQ(odd.n_scored(), 3);
  EXPECT_THROW((void)tools::plan_chunks(1000, 3, -1), Error);
}

TEST(Perplexity, PercentileInterpolates) {
  const std::vector<double> v = {1, 2, 3, 4, 5};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 4.6);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 5.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
}

TEST(KlDivergence, HandComputedPair) {
  // base p = (0.5, 0.5), model q = (0.25, 0.75):
  // KL = 0.5 ln(0.5/0.25) + 0.5 ln(0.5/0.75).
  const std::vector<float> base = {std::log(0.5f), std::log(0.5f)};
  const std::vector<float> logits = {std::log(0.25f) + 3.0f, std::log(0.75f) + 3.0f};  // any shift
  tools::KlStats kl;
  kl.add(base, logits, 0);
  const tools::KlStats::Summary s = kl.summary();
  EXPECT_NEAR(s.kl_mean, 0.5 * std::log(2.0) + 0.5 * std::log(0.5 / 0.75), 1e-6);
  EXPECT_NEAR(s.ppl, 4.0, 1e-5);       // -ln q(token 0) = ln 4
  EXPECT_NEAR(s.ppl_base, 2.0, 1e-5);  // -ln p(token 0) = ln 2
  EXPECT_NEAR(s.ppl_ratio, 2.0, 1e-5);
  EXPECT_EQ(s.top_agreement, 0.0);  // argmax p is 0 (first of the tie), argmax q is 1
}

// Writes a base file of the fixture's run with `options`.
tools::ChunkPlan write_base(const Fixture& f, const fs::path& path, const tools::EvalOptions& options) {
  const tools::ChunkPlan plan = tools::plan_chunks(static_cast<int64_t>(f.tokens.size()), 16, -1);
  ThreadPool pool(2);
  tools::KlBaseWriter writer(path, plan, f.model.config().n_vocab, f.tokens);
  std::vector<double> log_p;
  std::vector<float> rows;
  const size_t n_vocab = static_cast<size_t>(f.model.config().n_vocab);
  tools::evaluate_chunks(f.model, pool, f.tokens, kBos, plan, options,
                         [&](int32_t, std::span<const float> logits, std::span<const int32_t>) {
                           rows.resize(logits.size());
                           for (size_t i = 0; i * n_vocab < logits.size(); ++i) {
                             tools::log_softmax(logits.subspan(i * n_vocab, n_vocab), log_p);
                             std::copy(log_p.begin(), log_p.end(), rows.begin() + i * n_vocab);
                           }
                           writer.add_chunk(rows);
                         });
  writer.commit();
  return plan;
}

tools::KlStats::Summary compare(const Fixture& f, const tools::KlBase& base, const tools::EvalOptions& options) {
  ThreadPool pool(2);
  tools::KlStats kl;
  const size_t n_vocab = static_cast<size_t>(base.n_vocab());
  tools::evaluate_chunks(f.model, pool, base.tokens(), kBos, base.plan(), options,
                         [&](int32_t chunk, std::span<const float> logits, std::span<const int32_t> targets) {
                           for (size_t i = 0; i < targets.size(); ++i) {
                             kl.add(base.row(chunk, static_cast<int32_t>(i)), logits.subspan(i * n_vocab, n_vocab),
                                    targets[i]);
                           }
                         });
  return kl.summary();
}

TEST(KlDivergence, AModelAgainstItselfIsZero) {
  const Fixture f = make_fixture("kl_self");
  const fs::path path = testing::temp_file("kl_self.base");
  const tools::ChunkPlan plan = write_base(f, path, f32_options(2048));
  const tools::KlBase base = tools::KlBase::open(path);
  EXPECT_EQ(base.plan().n_chunks, plan.n_chunks);
  EXPECT_EQ(base.n_vocab(), f.model.config().n_vocab);
  EXPECT_EQ(fs::file_size(path), 32 + 4ull * 4 * 16 + 4ull * 4 * 7 * 64 + 8);
  const tools::KlStats::Summary self = compare(f, base, f32_options(2048));
  EXPECT_EQ(self.count, 28);
  EXPECT_LT(std::fabs(self.kl_mean), 1e-7);  // the base's log-probs are the same values rounded to f32
  EXPECT_LT(self.kl_max, 1e-6);
  EXPECT_EQ(self.top_agreement, 1.0);
  EXPECT_NEAR(self.ppl_ratio, 1.0, 1e-6);

  // Quantized KV moves the distribution: KL > 0, measurably.
  tools::EvalOptions q4 = f32_options(2048);
  q4.kv.k_type = q4.kv.v_type = kernels::KvType::Q4;
  const tools::KlStats::Summary lossy = compare(f, base, q4);
  EXPECT_GT(lossy.kl_mean, 1e-6);
  EXPECT_GE(lossy.kl_max, lossy.kl_p99);
  EXPECT_GE(lossy.kl_p99, lossy.kl_median);
  fs::remove(path);
  fs::remove(f.path);
}

TEST(KlDivergence, CorruptedBaseIsRejected) {
  const Fixture f = make_fixture("kl_corrupt");
  const fs::path path = testing::temp_file("kl_corrupt.base");
  write_base(f, path, f32_options(2048));
  std::string bytes = testing::read_text_file(path);
  const auto rewrite = [&](const std::string& content) { std::ofstream(path, std::ios::binary) << content; };
  const auto expect_error = [&](const std::string& needle) {
    try {
      (void)tools::KlBase::open(path);
      FAIL() << "accepted a base file that should fail with '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] = static_cast<char>(flipped[bytes.size() / 2] ^ 0x10);
  rewrite(flipped);
  expect_error("checksum mismatch");
  rewrite(bytes.substr(0, bytes.size() - 100));
  expect_error("truncated");
  std::string magic = bytes;
  magic[0] = 'X';
  rewrite(magic);
  expect_error("not a tokamak KL base file");
  rewrite(bytes);
  EXPECT_NO_THROW((void)tools::KlBase::open(path));
  fs::remove(path);
  fs::remove(f.path);
}

// Through the executable: a text too short names its token count and the
// need; a reference run and a comparison of the same model agree fully.
TEST(PerplexityCli, ShortTextAndSelfComparison) {
  const std::string model = testing::test_data("models/stories260K/stories260K.gguf").string();
  const auto short_text = testing::run_command(
      {testing::tokamak_bin(), "perplexity", "-m", model, "-p", "Once upon a time", "-c", "128", "-t", "2"});
  EXPECT_NE(short_text.exit_code, 0);
  EXPECT_NE(short_text.err.find("needs at least 256"), std::string::npos) << short_text.err;

  const fs::path text = testing::temp_file("ppl_cli.txt");
  {
    std::ofstream out(text);
    for (int i = 0; i < 40; ++i) out << "Once upon a time there was a little girl named Lily. She liked to play.\n";
  }
  const fs::path base = testing::temp_file("ppl_cli.base");
  const auto ref = testing::run_command({testing::tokamak_bin(), "perplexity", "-m", model, "-f", text.string(), "-c",
                                         "64", "-t", "2", "--kl-divergence-base", base.string()});
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_NE(ref.out.find("Final estimate: PPL = "), std::string::npos) << ref.out;
  const auto self = testing::run_command({testing::tokamak_bin(), "perplexity", "-m", model, "-t", "2",
                                          "--kl-divergence", "--kl-divergence-base", base.string()});
  ASSERT_EQ(self.exit_code, 0) << self.err;
  EXPECT_NE(self.out.find("Same top token     : 100.000 %"), std::string::npos) << self.out;
  EXPECT_NE(self.out.find("PPL ratio          : 1.000000"), std::string::npos) << self.out;
  fs::remove(text);
  fs::remove(base);
}

}  // namespace
}  // namespace tokamak
