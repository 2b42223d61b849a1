// tokamak tokenize: the token ids of a text. Works on vocabulary-only GGUF
// files (no tensors are needed), on llama2.c checkpoints with -z, and on a
// byte-level BPE vocab.json + merges pair (GPT-2's encoder.json / vocab.bpe).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/args.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/llama2c.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"-m,--model", "FILE", "GGUF file (a vocabulary-only one is enough) or llama2.c .bin"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"--vocab-json", "FILE", "byte-level BPE vocabulary {\"piece\": id} (instead of -m)"},
    {"--merges", "FILE", "its merges, one \"left right\" per line (with --vocab-json)"},
    {"--pre", "NAME", "pre-tokenizer for --vocab-json, as tokenizer.ggml.pre (default llama3)"},
    {"--specials", "SET", "special tokens after the vocabulary: llama3 | none (default: llama3 with --pre llama3)"},
    {"-p,--prompt", "TEXT", "the text to tokenize"},
    {"--ids", "", "print only a JSON array of ids: [1, 2, 3]"},
    {"--no-bos", "", "do not add BOS even if the vocabulary asks for it"},
    {"--parse-special", "", "match special-token texts (e.g. </s>) in the text"},
    {"-h,--help", "", "show this help"},
};

// A piece as a JSON-ish quoted string, with control bytes escaped.
std::string quoted(const std::string& piece) {
  std::string out = "'";
  for (const unsigned char ch : piece) {
    if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "'";
}

int tokenize_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("tokenize", "(-m MODEL | --vocab-json FILE --merges FILE) -p TEXT [--ids] [--no-bos]", kOptions)
                   .c_str(),
               stdout);
    return 0;
  }
  const std::optional<std::string> model_path = args.get("--model");
  const std::optional<std::string> vocab_json = args.get("--vocab-json");
  const std::optional<std::string> text = args.get("--prompt");
  if ((!model_path && !vocab_json) || !text) {
    throw UsageError("tokenize needs -m MODEL (or --vocab-json FILE --merges FILE) and -p TEXT");
  }

  std::optional<Tokenizer> tokenizer;
  if (vocab_json) {
    const std::optional<std::string> merges = args.get("--merges");
    if (model_path) throw UsageError("give either -m or --vocab-json, not both");
    if (!merges) throw UsageError("--vocab-json needs --merges FILE");
    const std::string pre = args.get_or("--pre", "llama3");
    const std::string specials = args.get_or("--specials", pre == "llama3" ? "llama3" : "none");
    if (specials != "llama3" && specials != "none") throw UsageError("option --specials: '" + specials + "' is not one of llama3, none");
    tokenizer = Tokenizer::from_bpe_files(*vocab_json, *merges, pre,
                                          specials == "llama3" ? Tokenizer::llama3_special_tokens()
                                                               : std::vector<std::string>{});
  } else {
    std::FILE* f = std::fopen(model_path->c_str(), "rb");
    if (f == nullptr) throw Error(*model_path + ": cannot open the model file: " + std::strerror(errno));
    char magic[4] = {};
    const size_t got = std::fread(magic, 1, 4, f);
    std::fclose(f);
    if (got == 4 && std::string(magic, 4) == "GGUF") {
      if (args.has("--tokenizer")) throw UsageError("-z/--tokenizer is for llama2.c checkpoints; this GGUF file carries its own vocabulary");
      tokenizer = Tokenizer::from_gguf(io::GgufFile::open(*model_path));
    } else {
      const Model model = Model::load(*model_path);
      tokenizer = load_tokenizer(model, *model_path, args.get("--tokenizer"));
    }
  }
  const bool add_bos = tokenizer->add_bos() && !args.has("--no-bos");
  const std::vector<int32_t> ids = tokenizer->encode(*text, add_bos, args.has("--parse-special"));
  if (args.has("--ids")) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? ", " : "") + std::to_string(ids[i]);
    std::printf("%s]\n", line.c_str());
    return 0;
  }
  // Each id with the text it adds (special tokens shown as their text).
  int32_t prev = -1;
  for (const int32_t id : ids) {
    std::printf("%6d -> %s\n", id, quoted(tokenizer->decode_piece(prev, id, true)).c_str());
    prev = id;
  }
  return 0;
}

}  // namespace

int tokenize_command(int argc, char** argv) { return tokenize_main(argc, argv); }

}  // namespace tokamak::cli
