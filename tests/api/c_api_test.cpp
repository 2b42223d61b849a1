// The C API (include/tokamak.h) as a C program sees it, linked with
// libtokamak alone: generation equals `tokamak run`, and every error path
// (missing or malformed file, bad options and parameters, freed, foreign and
// made-up handles) returns a status and a message instead of crashing. The
// ASan configuration runs this file too: a use after free would be reported.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_data.h"
#include "tokamak.h"

namespace {

using tokamak::testing::run_command;
using tokamak::testing::test_data;
using tokamak::testing::tokamak_bin;

std::string model_path() { return test_data("models/stories260K/stories260K.gguf").string(); }

struct Collected {
  std::vector<std::string> text;  // by completion index
  std::vector<std::string> finish;
  std::vector<int32_t> tokens;    // every token, in order of arrival
};

void collect(void* user, const tokamak_delta* d) {
  auto* c = static_cast<Collected*>(user);
  if (c->text.size() <= static_cast<size_t>(d->index)) c->text.resize(d->index + 1), c->finish.resize(d->index + 1);
  c->text[d->index].append(d->text, d->text_len);
  c->tokens.insert(c->tokens.end(), d->token_ids, d->token_ids + d->n_tokens);
  if (d->finish_reason != nullptr) c->finish[d->index] = d->finish_reason;
}

tokamak_sampling_params greedy(int32_t max_tokens) {
  tokamak_sampling_params p;
  tokamak_sampling_params_init(&p);
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(tokamak_model_load(model_path().c_str(), nullptr, &model_), TOKAMAK_OK) << tokamak_last_error();
    tokamak_engine_options o;
    tokamak_engine_options_init(&o);
    o.kv_memory = "16M";
    o.threads = 1;
    ASSERT_EQ(tokamak_engine_create(model_, &o, &engine_), TOKAMAK_OK) << tokamak_last_error();
  }
  void TearDown() override {
    tokamak_engine_free(engine_);
    tokamak_model_free(model_);
  }
  tokamak_model* model_ = nullptr;
  tokamak_engine* engine_ = nullptr;
};

TEST_F(CApi, GreedyTextEqualsTokamakRun) {
  const auto run = run_command({tokamak_bin().string(), "run", "-m", model_path(), "-p", "Once upon a time", "-n",
                                "40", "--temp", "0", "-t", "1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const tokamak_sampling_params p = greedy(40);
  Collected c;
  ASSERT_EQ(tokamak_generate(engine_, "Once upon a time", &p, collect, &c), TOKAMAK_OK) << tokamak_last_error();
  ASSERT_EQ(c.text.size(), 1u);
  EXPECT_EQ(c.text[0], run.out);
  EXPECT_EQ(c.finish[0], "length");
  EXPECT_EQ(c.tokens.size(), 40u);
}

TEST_F(CApi, StepStreamsTwoCompletionsAndStopStrings) {
  tokamak_sampling_params p = greedy(40);
  p.n = 2;
  int64_t id = -1;
  ASSERT_EQ(tokamak_engine_add_request(engine_, "Once upon a time", &p, &id), TOKAMAK_OK) << tokamak_last_error();
  Collected c;
  int32_t unfinished = 1;
  for (int steps = 0; unfinished && steps < 100; ++steps) {
    ASSERT_EQ(tokamak_engine_step(engine_, collect, &c, &unfinished), TOKAMAK_OK) << tokamak_last_error();
  }
  ASSERT_EQ(c.text.size(), 2u);
  EXPECT_EQ(c.text[0], c.text[1]);  // greedy: both completions take the same tokens
  const std::string full = c.text[0];
  ASSERT_GT(full.size(), 8u);
  // A stop string cuts the text before its first occurrence.
  const std::string stop = full.substr(full.size() / 2, 3);
  const char* stops[] = {stop.c_str()};
  p.n = 1;
  p.stop = stops;
  p.n_stop = 1;
  Collected s;
  ASSERT_EQ(tokamak_generate(engine_, "Once upon a time", &p, collect, &s), TOKAMAK_OK) << tokamak_last_error();
  EXPECT_EQ(s.text[0], full.substr(0, full.find(stop)));
  EXPECT_EQ(s.finish[0], "stop");
}

TEST(CApiErrors, MissingAndMalformedFiles) {
  tokamak_model* model = reinterpret_cast<tokamak_model*>(uintptr_t{1});
  EXPECT_EQ(tokamak_model_load("/nonexistent/model.gguf", nullptr, &model), TOKAMAK_ERROR_LOAD);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(std::string(tokamak_last_error()).find("/nonexistent/model.gguf"), std::string::npos) << tokamak_last_error();

  const std::string junk = tokamak::testing::temp_file("junk.gguf").string();
  std::ofstream(junk) << "GGUF but not really a model";
  EXPECT_EQ(tokamak_model_load(junk.c_str(), nullptr, &model), TOKAMAK_ERROR_LOAD);
  EXPECT_NE(std::string(tokamak_last_error()), "");
  std::remove(junk.c_str());

  EXPECT_EQ(tokamak_model_load(nullptr, nullptr, &model), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tokamak_last_error(), "path is NULL");
  EXPECT_EQ(tokamak_model_load(model_path().c_str(), nullptr, nullptr), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tokamak_last_error(), "out is NULL");
}

TEST_F(CApi, BadEngineOptionsNameTheValue) {
  struct Case {
    void (*edit)(tokamak_engine_options&);
    const char* in_message;
  };
  const Case cases[] = {
      {[](tokamak_engine_options& o) { o.kv_cache_dtype = "q9"; }, "q9"},
      {[](tokamak_engine_options& o) { o.kv_cache_dtype = nullptr; }, "kv_cache_dtype is NULL"},
      {[](tokamak_engine_options& o) { o.kv_memory = "lots"; }, "lots"},
      {[](tokamak_engine_options& o) { o.threads = -2; }, "threads = -2"},
      {[](tokamak_engine_options& o) { o.block_size = 0; }, "block size must be in [1, 4096], got 0"},
      {[](tokamak_engine_options& o) { o.max_num_seqs = 0; }, "max_num_seqs"},
  };
  for (const Case& c : cases) {
    tokamak_engine_options o;
    tokamak_engine_options_init(&o);
    o.kv_memory = "16M";
    c.edit(o);
    tokamak_engine* engine = nullptr;
    EXPECT_EQ(tokamak_engine_create(model_, &o, &engine), TOKAMAK_ERROR_INVALID_ARGUMENT) << c.in_message;
    EXPECT_EQ(engine, nullptr);
    EXPECT_NE(std::string(tokamak_last_error()).find(c.in_message), std::string::npos) << tokamak_last_error();
  }
}

TEST_F(CApi, BadRequestsNameTheValue) {
  struct Case {
    void (*edit)(tokamak_sampling_params&);
    const char* in_message;
  };
  static const char* const null_stop[] = {nullptr};
  const Case cases[] = {
      {[](tokamak_sampling_params& p) { p.top_p = 1.5f; }, "top_p"},
      {[](tokamak_sampling_params& p) { p.n = 0; }, "n = 0"},
      {[](tokamak_sampling_params& p) { p.max_tokens = 0; }, "max_tokens = 0"},
      {[](tokamak_sampling_params& p) { p.stop = null_stop, p.n_stop = 1; }, "stop[0] is NULL"},
      {[](tokamak_sampling_params& p) { p.stop = nullptr, p.n_stop = 2; }, "stop (with n_stop > 0) is NULL"},
  };
  for (const Case& c : cases) {
    tokamak_sampling_params p = greedy(8);
    c.edit(p);
    EXPECT_EQ(tokamak_engine_add_request(engine_, "Once", &p, nullptr), TOKAMAK_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tokamak_last_error()).find(c.in_message), std::string::npos) << tokamak_last_error();
  }
  const tokamak_sampling_params p = greedy(8);
  EXPECT_EQ(tokamak_engine_add_request(engine_, nullptr, &p, nullptr), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tokamak_last_error(), "prompt is NULL");
  EXPECT_EQ(tokamak_engine_add_chat(engine_, nullptr, 0, &p, nullptr), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tokamak_last_error()).find("no message"), std::string::npos) << tokamak_last_error();
  const tokamak_chat_message no_content{"user", nullptr};
  EXPECT_EQ(tokamak_engine_add_chat(engine_, &no_content, 1, &p, nullptr), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tokamak_last_error(), "messages[0] has a NULL role or content");
  EXPECT_EQ(tokamak_engine_abort(engine_, 12345), TOKAMAK_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tokamak_last_error(), "request 12345 is unknown or has finished");
  // Nothing was queued by the failed calls.
  int32_t unfinished = -1;
  EXPECT_EQ(tokamak_engine_step(engine_, nullptr, nullptr, &unfinished), TOKAMAK_OK);
  EXPECT_EQ(unfinished, 0);
}

TEST(CApiHandles, UseAfterFreeIsAnErrorNotACrash) {
  tokamak_model* model = nullptr;
  ASSERT_EQ(tokamak_model_load(model_path().c_str(), nullptr, &model), TOKAMAK_OK) << tokamak_last_error();
  tokamak_engine* engine = nullptr;
  tokamak_engine_options o;
  tokamak_engine_options_init(&o);
  o.kv_memory = "16M";
  ASSERT_EQ(tokamak_engine_create(model, &o, &engine), TOKAMAK_OK) << tokamak_last_error();

  // The engine keeps the model alive past its handle.
  ASSERT_EQ(tokamak_model_free(model), TOKAMAK_OK);
  const tokamak_sampling_params p = greedy(4);
  Collected c;
  EXPECT_EQ(tokamak_generate(engine, "Once", &p, collect, &c), TOKAMAK_OK) << tokamak_last_error();
  EXPECT_EQ(c.tokens.size(), 4u);

  int32_t n_vocab = 0;
  EXPECT_EQ(tokamak_model_n_vocab(model, &n_vocab), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(tokamak_last_error()).find("not a live model"), std::string::npos) << tokamak_last_error();
  EXPECT_EQ(tokamak_model_free(model), TOKAMAK_ERROR_INVALID_HANDLE);  // double free
  tokamak_engine* second = nullptr;
  EXPECT_EQ(tokamak_engine_create(model, &o, &second), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(second, nullptr);

  ASSERT_EQ(tokamak_engine_free(engine), TOKAMAK_OK);
  EXPECT_EQ(tokamak_engine_step(engine, nullptr, nullptr, nullptr), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_NE(std::string(tokamak_last_error()).find("not a live engine"), std::string::npos) << tokamak_last_error();
  EXPECT_EQ(tokamak_engine_add_request(engine, "Once", &p, nullptr), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_generate(engine, "Once", &p, collect, &c), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_engine_abort(engine, 0), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_engine_free(engine), TOKAMAK_ERROR_INVALID_HANDLE);

  // A new object in the freed slot does not revive the old handle.
  tokamak_model* again = nullptr;
  ASSERT_EQ(tokamak_model_load(model_path().c_str(), nullptr, &again), TOKAMAK_OK);
  EXPECT_NE(again, model);
  EXPECT_EQ(tokamak_model_n_vocab(model, &n_vocab), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_model_n_vocab(again, &n_vocab), TOKAMAK_OK);
  EXPECT_EQ(n_vocab, 512);
  // Handles of another kind, NULL and made-up values.
  EXPECT_EQ(tokamak_engine_free(reinterpret_cast<tokamak_engine*>(again)), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_model_n_vocab(nullptr, &n_vocab), TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_model_n_vocab(reinterpret_cast<tokamak_model*>(uintptr_t{0x1234}), &n_vocab),
            TOKAMAK_ERROR_INVALID_HANDLE);
  EXPECT_EQ(tokamak_model_free(again), TOKAMAK_OK);
}

TEST(CApiErrors, StatusNamesAndVersion) {
  EXPECT_STREQ(tokamak_status_name(TOKAMAK_ERROR_INVALID_HANDLE), "invalid handle");
  EXPECT_STREQ(tokamak_status_name(static_cast<tokamak_status>(99)), "unknown status");
  EXPECT_STREQ(tokamak_version(), "0.1.0");
}

}  // namespace
