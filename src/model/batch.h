// One step's work for the forward pass: a flat list of tokens, each with its
// sequence and position, and whether its logits are wanted. Tokens of many
// sequences mix freely; a single prompt is just a batch of one sequence.
#pragma once

#include <cstdint>
#include <vector>

namespace tokamak {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_ids;
  std::vector<uint8_t> want_logits;

  void add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    want_logits.push_back(logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    want_logits.clear();
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
};

}  // namespace tokamak
