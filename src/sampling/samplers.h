// The individual samplers, to build chains by hand (make_sampler() in
// sampler.h builds the usual ones). Their rules follow llama.cpp's samplers;
// each factory throws Error for a parameter outside its documented range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sampling/sampler.h"

namespace tokamak::sampling {

// --- logit adjusters (logit_adjust.cpp): change logits, keep order and set ---

// For every token t seen c > 0 times among the last `last_n` accepted tokens
// (0: none, -1: all): logit = logit <= 0 ? logit * repeat : logit / repeat,
// then logit -= c * frequency + presence. repeat > 0.
std::unique_ptr<Sampler> make_penalties(int last_n, float repeat, float frequency, float presence);

// logit[token] += bias for each entry (entries for one token add up); a bias of
// -inf bans the token. Tokens must lie in [0, n_vocab); biases not NaN or +inf.
std::unique_ptr<Sampler> make_logit_bias(int32_t n_vocab, std::vector<std::pair<int32_t, float>> bias);

// t > 0: logit /= t. t <= 0: keeps only the first maximal candidate.
std::unique_ptr<Sampler> make_temperature(float t);

// --- truncation (truncation.cpp): shrink the set, keep at least min_keep ---

// Keeps the k highest logits, sorted (k <= 0: no-op). Partial selection, O(n log k).
std::unique_ptr<Sampler> make_top_k(int k);
// Keeps the smallest highest-probability prefix whose mass is >= p (p >= 1: no-op).
std::unique_ptr<Sampler> make_top_p(float p, size_t min_keep = 1);
// Keeps tokens with probability >= p * the highest probability (p <= 0: no-op).
std::unique_ptr<Sampler> make_min_p(float p, size_t min_keep = 1);
// Locally typical sampling: orders by |-log p - entropy| and keeps the shortest
// prefix of that order whose mass is > p (p >= 1: no-op).
std::unique_ptr<Sampler> make_typical(float p, size_t min_keep = 1);

// --- selection (select.cpp, llama2c.cpp): set cur.selected ---

// The first candidate in logit_before order (max logit, lowest id).
std::unique_ptr<Sampler> make_greedy();
// Draws from softmax(logits) of the candidates with a RequestRng(seed).
std::unique_ptr<Sampler> make_dist(uint64_t seed);
// llama2.c's run.c sample() bit for bit, with Llama2cRng(seed): temperature == 0
// -> argmax; else logits /= temperature, softmax (float), one coin, then
// sample_mult when top_p <= 0 or >= 1, else sample_topp. Needs the full
// vocabulary in id order (only order-keeping samplers may run before it).
std::unique_ptr<Sampler> make_llama2c(float temperature, float top_p, uint64_t seed);

}  // namespace tokamak::sampling
