// Verification of drafted tokens (speculative decoding), after Leviathan et
// al. and Chen et al.: a drafted token x, proposed from the draft's
// distribution q, is accepted with probability min(1, p(x) / q(x)), p being
// the target's distribution at that position; a rejected one is replaced by a
// draw from norm(max(0, p - q)). The token that results is distributed as p
// exactly, whatever q is. p and q are the distributions after the request's
// own sampler chain (SamplerChain::distribution), so top-k, top-p, min-p and
// temperature hold under speculation too.
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/candidates.h"
#include "sampling/rng.h"

namespace tokamak::sampling {

// One drafted position: the token and the distribution it was drawn from
// (candidates with p set), or null for a proposal without one (prompt lookup:
// a point mass, q(token) = 1).
struct DraftedToken {
  int32_t token = -1;
  const Candidates* q = nullptr;
};

struct Verdict {
  bool accepted = false;
  int32_t token = -1;  // the drafted token when accepted, else its replacement
};

// p: the target's candidates with p set. Draws one or two uniforms from rng.
// `scratch` is a dense q by token id (grown as needed, left all zero).
Verdict accept_or_replace(const Candidates& p, const DraftedToken& drafted, RequestRng& rng,
                          std::vector<float>& scratch);

// The rule the engine verifies with; tests put a wrong one in its place to
// show that the distribution test catches it.
using AcceptRule = Verdict (*)(const Candidates& p, const DraftedToken& drafted, RequestRng& rng,
                               std::vector<float>& scratch);

// A token drawn from candidates with p set (inverse CDF at u in [0, 1)).
int32_t draw_token(const Candidates& p, double u);

// p(token) among the candidates (0 when absent). O(candidates).
float probability_of(const Candidates& p, int32_t token);

}  // namespace tokamak::sampling
