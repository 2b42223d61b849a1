// The pre-tokenizer of a byte-level BPE vocabulary: cuts text into words
// before merges run, by the regexes that GGUF `tokenizer.ggml.pre` names.
// Each regex of the list cuts every piece the previous ones left (matches and
// the stretches between them both become pieces), as llama.cpp applies them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace tokamak {

// Words as one buffer of UTF-8 bytes and their end offsets.
struct Words {
  std::string bytes;
  std::vector<size_t> ends;  // word i is bytes[ends[i-1], ends[i])
  size_t size() const { return ends.size(); }
  std::string_view operator[](size_t i) const {
    const size_t b = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(b, ends[i] - b);
  }
};

class PreTokenizer {
 public:
  // The pre-tokenizer `name` (a tokenizer.ggml.pre value; "" means "default",
  // as llama.cpp falls back). Throws Error for a name it does not know.
  static PreTokenizer from_name(std::string_view name);
  // The names from_name() knows, for messages and tests.
  static std::vector<std::string_view> known_names();

  // Appends the words of `text` to `out`. Bytes that are not valid UTF-8
  // come out as U+FFFD, one per byte (llama.cpp does the same).
  // Cost: O(n) in the text for these patterns (see regex.h).
  void split(std::string_view text, Words& out) const;

  const std::string& name() const { return name_; }
  // Whether a word that is a token as a whole skips merging (Llama 3,
  // Tekken: their merges cannot always rebuild such a word).
  bool ignore_merges() const { return ignore_merges_; }
  // Whether the model expects BOS before a prompt when the file does not say.
  bool add_bos() const { return add_bos_; }

 private:
  std::string name_;
  std::vector<regex::Regex> regexes_;
  bool ignore_merges_ = false;
  bool add_bos_ = false;
};

}  // namespace tokamak
