// A made-up SentencePiece ("llama") vocabulary for random-weight models, so
// that `tokamak run` can tokenize and print with them.
#pragma once

#include <cstdint>

namespace tokamak {

namespace io {
class GgufWriter;
}

// The smallest vocabulary: <unk>, <s>, </s> and the 256 byte tokens.
constexpr int32_t kMinSyntheticVocab = 3 + 256;

// Sets tokenizer.ggml.* in `w` for n_vocab pieces: 0 <unk>, 1 <s>, 2 </s>,
// 3..258 <0x00>..<0xFF>, then filler pieces "▁", "▁a", "a", "▁b", ... "▁aa",
// "aa", ... (every lowercase string by length) with decreasing scores, so
// text tokenizes into short pieces and bytes. Throws tokamak::Error when n_vocab <
// kMinSyntheticVocab.
void set_synthetic_vocab(io::GgufWriter& w, int32_t n_vocab);

}  // namespace tokamak
