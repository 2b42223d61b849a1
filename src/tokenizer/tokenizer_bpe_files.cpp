// A byte-level BPE Tokenizer from vocab.json + merges files (GPT-2's
// encoder.json / vocab.bpe layout, also Hugging Face's vocab.json / merges.txt).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tokamak {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(path.string() + ": read error");
  return ss.str();
}

// {"piece": id, ...} into pieces[id]; ids must be distinct, holes become
// unused empty pieces.
std::vector<std::string> read_vocab_json(const std::filesystem::path& path) {
  const std::string where = path.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not JSON: " + e.what());
  }
  if (!j.is_object() || j.empty()) throw Error(where + ": expected a non-empty JSON object {\"piece\": id}");
  constexpr int64_t kMaxTokens = int64_t{1} << 24;
  std::vector<std::string> pieces;
  std::vector<bool> seen;
  for (const auto& [piece, id_json] : j.items()) {
    if (!id_json.is_number_integer()) throw Error(where + ": the id of '" + piece + "' is not an integer");
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= kMaxTokens) {
      throw Error(where + ": the id of '" + piece + "' is " + std::to_string(id) + ", outside [0, 2^24)");
    }
    if (static_cast<size_t>(id) >= pieces.size()) {
      pieces.resize(static_cast<size_t>(id) + 1);
      seen.resize(static_cast<size_t>(id) + 1);
    }
    if (seen[id]) throw Error(where + ": id " + std::to_string(id) + " is given to two pieces");
    seen[id] = true;
    pieces[id] = piece;
  }
  return pieces;
}

std::vector<std::string> read_merges(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  std::vector<std::string> merges;
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (first && line.rfind("#version", 0) == 0) {
      first = false;
      continue;
    }
    first = false;
    if (line.empty()) continue;
    if (line.find(' ', 1) == std::string::npos) {
      throw Error(path.string() + ": merge " + std::to_string(merges.size()) + " '" + line +
                  "' is not two pieces separated by a space");
    }
    merges.push_back(std::move(line));
  }
  if (merges.empty()) throw Error(path.string() + ": no merges");
  return merges;
}

}  // namespace

std::vector<std::string> Tokenizer::llama3_special_tokens() {
  std::vector<std::string> names = {
      "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
      "<|finetune_right_pad_id|>", "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
      "<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
  };
  for (int i = 3; i <= 247; ++i) names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  return names;
}

Tokenizer Tokenizer::from_bpe_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges_path,
                                   std::string_view pre_name, const std::vector<std::string>& special_tokens) {
  PreTokenizer pre = PreTokenizer::from_name(pre_name);
  Vocab vocab;
  vocab.pieces = read_vocab_json(vocab_json);
  const size_t n_regular = vocab.pieces.size();
  vocab.types.assign(n_regular, TokenType::Normal);
  for (size_t i = 0; i < n_regular; ++i) {
    if (vocab.pieces[i].empty()) vocab.types[i] = TokenType::Unused;
  }
  for (const std::string& s : special_tokens) {
    if (s.empty()) throw Error("tokenizer: an empty special token");
    vocab.pieces.push_back(s);
    vocab.types.push_back(TokenType::Control);
  }
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  vocab.add_bos = pre.add_bos();
  vocab.add_space_prefix = false;

  Tokenizer tokenizer(Kind::Bpe, std::move(vocab));
  Vocab& v = tokenizer.vocab_;
  const auto first_of = [&](std::initializer_list<const char*> texts) {
    for (const char* t : texts) {
      if (const int32_t id = v.find(t); id >= 0) return id;
    }
    return int32_t{-1};
  };
  v.bos = first_of({"<|begin_of_text|>", "<s>", "<|endoftext|>"});
  v.eos = first_of({"<|end_of_text|>", "</s>", "<|endoftext|>"});
  for (const int32_t id : {v.bos, v.eos}) {
    if (id >= 0 && v.types[id] != TokenType::Control) {
      // GPT-2's <|endoftext|> sits among the regular pieces; it is a control token all the same.
      v.types[id] = TokenType::Control;
      tokenizer.special_ids_.insert(tokenizer.special_ids_.begin(), id);
      std::stable_sort(tokenizer.special_ids_.begin(), tokenizer.special_ids_.end(),
                       [&v](int32_t a, int32_t b) { return v.pieces[a].size() > v.pieces[b].size(); });
    }
  }
  if (v.bos < 0) v.add_bos = false;
  tokenizer.pre_ = std::move(pre);
  tokenizer.merges_ = bpe::Merges::build(v, read_merges(merges_path));
  tokenizer.find_end_tokens();
  return tokenizer;
}

}  // namespace tokamak
