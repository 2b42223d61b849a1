#include "sampling/speculative.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tokamak::sampling {

float probability_of(const Candidates& p, int32_t token) {
  if (p.ids_are_indices) return token >= 0 && static_cast<size_t>(token) < p.size() ? p[static_cast<size_t>(token)].p : 0.0f;
  for (const TokenData& t : p) {
    if (t.id == token) return t.p;
  }
  return 0.0f;
}

int32_t draw_token(const Candidates& p, double u) {
  if (p.empty()) throw Error("sampling: draw from no candidates");
  // As Dist draws: the target scaled by the actual sum of the float probabilities.
  double total = 0.0;
  for (const TokenData& t : p) total += t.p;
  const double target = u * total;
  double cdf = 0.0;
  size_t last_nonzero = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].p == 0.0f) continue;
    last_nonzero = i;
    cdf += p[i].p;
    if (target < cdf) return p[i].id;
  }
  return p[last_nonzero].id;
}

Verdict accept_or_replace(const Candidates& p, const DraftedToken& drafted, RequestRng& rng,
                          std::vector<float>& scratch) {
  const double p_x = probability_of(p, drafted.token);
  const double q_x = drafted.q == nullptr ? 1.0 : probability_of(*drafted.q, drafted.token);
  if (q_x <= 0.0) {
    throw Error("sampling: drafted token " + std::to_string(drafted.token) + " has probability 0 under its own draft");
  }
  if (rng.uniform() * q_x < p_x) return {true, drafted.token};  // u < p/q, without the division

  // The residual max(0, p - q), normalized. Zero outside p's support, so one
  // pass over p's candidates with q looked up by id in the dense scratch.
  if (drafted.q == nullptr) {
    if (scratch.size() <= static_cast<size_t>(drafted.token)) scratch.resize(static_cast<size_t>(drafted.token) + 1, 0.0f);
    scratch[static_cast<size_t>(drafted.token)] = 1.0f;
  } else {
    for (const TokenData& t : *drafted.q) {
      if (scratch.size() <= static_cast<size_t>(t.id)) scratch.resize(static_cast<size_t>(t.id) + 1, 0.0f);
      scratch[static_cast<size_t>(t.id)] = t.p;
    }
  }
  const auto q_of = [&](int32_t id) { return static_cast<size_t>(id) < scratch.size() ? scratch[static_cast<size_t>(id)] : 0.0f; };
  double total = 0.0;
  for (const TokenData& t : p) total += std::max(0.0, static_cast<double>(t.p) - q_of(t.id));
  int32_t token = -1;
  if (total > 0.0) {
    const double target = rng.uniform() * total;
    double cdf = 0.0;
    for (const TokenData& t : p) {
      const double r = std::max(0.0, static_cast<double>(t.p) - q_of(t.id));
      if (r == 0.0) continue;
      token = t.id;  // the last token with residual mass, should rounding leave target past the sum
      cdf += r;
      if (target < cdf) break;
    }
  } else {
    // p <= q everywhere means p == q up to rounding: a rejection had
    // probability ~0; p itself is the residual's limit.
    token = draw_token(p, rng.uniform());
  }
  if (drafted.q == nullptr) {
    scratch[static_cast<size_t>(drafted.token)] = 0.0f;
  } else {
    for (const TokenData& t : *drafted.q) scratch[static_cast<size_t>(t.id)] = 0.0f;
  }
  return {false, token};
}

}  // namespace tokamak::sampling
