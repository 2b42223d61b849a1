// Cost of one sample() per sampler, for Llama-2 (32k) and Llama-3 (128k)
// vocabularies. Each case is the sampler followed by greedy (or its own
// selection), so it includes loading the logits row into candidates, which the
// Greedy case measures alone. Target: the default chain well under 1 ms at 128k.
#include <benchmark/benchmark.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "sampling/sampler.h"
#include "sampling/samplers.h"

namespace tokamak::sampling {
namespace {

// Logits shaped like a language model's: a broad normal body and a few peaks.
std::vector<float> bench_logits(int n_vocab) {
  std::mt19937 gen(7);
  std::normal_distribution<float> body(0.0f, 2.0f);
  std::vector<float> l(n_vocab);
  for (float& x : l) x = body(gen);
  for (int i = 0; i < 20; ++i) l[gen() % n_vocab] = 12.0f + static_cast<float>(i) * 0.3f;
  return l;
}

using Make = std::function<std::unique_ptr<Sampler>(int32_t n_vocab)>;

std::unique_ptr<Sampler> then_greedy(std::unique_ptr<Sampler> s) {
  auto c = std::make_unique<SamplerChain>();
  c->add(std::move(s));
  c->add(make_greedy());
  return c;
}

void run(benchmark::State& state, const Make& make) {
  const int32_t n_vocab = static_cast<int32_t>(state.range(0));
  const auto logits = bench_logits(n_vocab);
  auto sampler = make(n_vocab);
  for (int32_t t = 0; t < 64; ++t) sampler->accept(t * 97 % n_vocab);  // a penalty window's worth
  for (auto _ : state) benchmark::DoNotOptimize(sampler->sample(logits));
  state.SetItemsProcessed(state.iterations());
}

void BM_Greedy(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_top_k(0)); }); }
void BM_Dist(benchmark::State& s) {
  run(s, [](int32_t) {
    auto c = std::make_unique<SamplerChain>();
    c->add(make_dist(1));
    return c;
  });
}
void BM_Temperature(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_temperature(0.8f)); }); }
void BM_TopK40(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_top_k(40)); }); }
void BM_TopP095(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_top_p(0.95f)); }); }
void BM_MinP005(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_min_p(0.05f)); }); }
void BM_Typical095(benchmark::State& s) { run(s, [](int32_t) { return then_greedy(make_typical(0.95f)); }); }
void BM_Penalties64(benchmark::State& s) {
  run(s, [](int32_t) { return then_greedy(make_penalties(64, 1.1f, 0.1f, 0.1f)); });
}
void BM_LogitBias(benchmark::State& s) {
  run(s, [](int32_t n) {
    std::vector<std::pair<int32_t, float>> bias;
    for (int32_t i = 0; i < 16; ++i) bias.push_back({i * 131 % n, i % 2 ? 1.0f : -INFINITY});
    return then_greedy(make_logit_bias(n, bias));
  });
}
void BM_Llama2c(benchmark::State& s) {
  run(s, [](int32_t n) {
    SamplingParams p;
    p.rng = SamplingParams::Rng::Llama2c;
    p.temperature = 1.0f;
    p.top_p = 0.9f;
    p.seed = 133742;
    return make_sampler(p, n);
  });
}
void BM_DefaultChain(benchmark::State& s) {
  run(s, [](int32_t n) {
    SamplingParams p;
    p.seed = 1;
    return make_sampler(p, n);
  });
}
void BM_DefaultChainPenalized(benchmark::State& s) {
  run(s, [](int32_t n) {
    SamplingParams p;
    p.seed = 1;
    p.repeat_penalty = 1.1f;
    p.frequency_penalty = 0.2f;
    p.presence_penalty = 0.2f;
    p.n_probs = 5;
    return make_sampler(p, n);
  });
}

#define TOKAMAK_VOCABS Arg(32000)->Arg(128256)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_Greedy)->TOKAMAK_VOCABS;
BENCHMARK(BM_Dist)->TOKAMAK_VOCABS;
BENCHMARK(BM_Temperature)->TOKAMAK_VOCABS;
BENCHMARK(BM_TopK40)->TOKAMAK_VOCABS;
BENCHMARK(BM_TopP095)->TOKAMAK_VOCABS;
BENCHMARK(BM_MinP005)->TOKAMAK_VOCABS;
BENCHMARK(BM_Typical095)->TOKAMAK_VOCABS;
BENCHMARK(BM_Penalties64)->TOKAMAK_VOCABS;
BENCHMARK(BM_LogitBias)->TOKAMAK_VOCABS;
BENCHMARK(BM_Llama2c)->TOKAMAK_VOCABS;
BENCHMARK(BM_DefaultChain)->TOKAMAK_VOCABS;
BENCHMARK(BM_DefaultChainPenalized)->TOKAMAK_VOCABS;

}  // namespace
}  // namespace tokamak::sampling
