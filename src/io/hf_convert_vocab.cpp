// tokenizer.json (+ tokenizer_config.json, config.json) -> GGUF tokenizer keys,
// following convert_hf_to_gguf.py and gguf-py's SpecialVocab:
//   byte-fallback BPE over U+2581 pieces (Llama 2, Mistral)  -> "llama"
//   byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM)           -> "gpt2" + merges
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_convert.h"

namespace tokamak::io {
namespace {

using json = nlohmann::json;

// GGUF token types (tokenizer.ggml.token_type).
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

// Byte-level BPE pre-tokenizer regexes by llama.cpp's tokenizer.ggml.pre name.
// llama.cpp identifies them by hashing a sample encoding, which needs the HF
// tokenizer itself; the regex (or the pre-tokenizer chain) identifies them too.
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 64 ? s.substr(0, 61) + "..." : s;
}

std::optional<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

const json* member(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && !j[key].is_null() ? &j[key] : nullptr;
}

std::string string_member(const json& j, const char* key) {
  const json* v = member(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

bool is_byte_piece(const std::string& s) {
  return s.size() == 6 && s.starts_with("<0x") && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
         std::isxdigit(static_cast<unsigned char>(s[4]));
}

// convert_hf_to_gguf.py's does_token_look_special: added tokens some models
// forget to mark special.
bool looks_special(const std::string& t) {
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (t.starts_with("<|") && t.ends_with("|>")) return true;
  if (t.starts_with("<\xEF\xBD\x9C") && t.ends_with("\xEF\xBD\x9C>")) return true;  // <｜...｜>
  return t.starts_with("<unused") && t.ends_with(">");
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

struct HfVocab {
  std::string file;                       // tokenizer.json, for errors
  std::vector<std::string> tokens;        // [n_vocab]
  std::vector<uint8_t> present;           // [n_vocab] 1: from the tokenizer
  std::vector<uint8_t> added;             // [n_vocab] 1: in added_tokens
  std::vector<uint8_t> special;           // [n_vocab] 1: added with "special": true
  size_t n_base = 0;                      // entries of model.vocab
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<std::string> merge_strings;                   // GGUF form "a b"
};

int64_t token_id(const json& v, const std::string& where, int64_t n_vocab) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() >= static_cast<uint64_t>(n_vocab)) {
    throw Error(where + " has id " + shown(v) + ", outside the model's vocab_size " + std::to_string(n_vocab));
  }
  return v.get<int64_t>();
}

HfVocab read_vocab(const json& tj, const std::string& file, int64_t n_vocab) {
  HfVocab v;
  v.file = file;
  const auto n = static_cast<size_t>(n_vocab);
  v.tokens.resize(n);
  v.present.assign(n, 0);
  v.added.assign(n, 0);
  v.special.assign(n, 0);
  const json* model = member(tj, "model");
  const json* vocab = model ? member(*model, "vocab") : nullptr;
  if (vocab == nullptr || !vocab->is_object()) throw Error(file + ": no model.vocab object");
  for (const auto& [text, id_value] : vocab->items()) {
    const auto id = static_cast<size_t>(token_id(id_value, file + ": model.vocab '" + text + "'", n_vocab));
    if (v.present[id]) throw Error(file + ": model.vocab gives id " + std::to_string(id) + " to two tokens");
    v.tokens[id] = text;
    v.present[id] = 1;
  }
  v.n_base = vocab->size();
  if (const json* added = member(tj, "added_tokens")) {
    if (!added->is_array()) throw Error(file + ": added_tokens " + shown(*added) + " is not an array");
    for (size_t i = 0; i < added->size(); ++i) {
      const json& a = (*added)[i];
      const std::string where = file + ": added_tokens[" + std::to_string(i) + "]";
      const json* content = member(a, "content");
      const json* id_value = member(a, "id");
      if (content == nullptr || !content->is_string() || id_value == nullptr) {
        throw Error(where + " = " + shown(a) + " needs a string content and an id");
      }
      const auto id = static_cast<size_t>(token_id(*id_value, where, n_vocab));
      v.tokens[id] = content->get<std::string>();
      v.present[id] = v.added[id] = 1;
      const json* sp = member(a, "special");
      v.special[id] = sp != nullptr && sp->is_boolean() && sp->get<bool>() ? 1 : 0;
    }
  }
  if (const json* merges = member(*model, "merges")) {
    if (!merges->is_array()) throw Error(file + ": model.merges is not an array");
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      const std::string where = file + ": model.merges[" + std::to_string(i) + "] = " + shown(m);
      if (m.is_string()) {  // "a b"
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos) {
          throw Error(where + " is not two tokens separated by one space");
        }
        v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        v.merge_strings.push_back(s);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        // transformers >= 4.45: pairs, whose parts may hold spaces; GGUF keeps
        // "a b" strings with such spaces written as U+0120, as llama.cpp does.
        v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        v.merge_strings.push_back(replace_all(v.merges.back().first, " ", "\xC4\xA0") + " " +
                                  replace_all(v.merges.back().second, " ", "\xC4\xA0"));
      } else {
        throw Error(where + " is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }
  return v;
}

// tokenizer.ggml.pre for a byte-level BPE tokenizer, or "" if not recognized.
std::string detect_pre(const json& tj) {
  const json* pre = member(tj, "pre_tokenizer");
  if (pre == nullptr) return "";
  std::vector<const json*> steps;
  if (string_member(*pre, "type") == "Sequence" && member(*pre, "pretokenizers") != nullptr &&
      (*pre)["pretokenizers"].is_array()) {
    for (const json& s : (*pre)["pretokenizers"]) steps.push_back(&s);
  } else {
    steps.push_back(pre);
  }
  std::vector<std::string> kinds;
  for (const json* s : steps) {
    const std::string type = string_member(*s, "type");
    if (type == "Split") {
      const json* pattern = member(*s, "pattern");
      const std::string regex = pattern ? string_member(*pattern, "Regex") : "";
      if (regex == kLlama3Regex) return "llama-bpe";
      if (regex == kQwen2Regex) return "qwen2";
      return "";
    }
    const json* use_regex = member(*s, "use_regex");
    const json* digits = member(*s, "individual_digits");
    if (type == "ByteLevel" && (use_regex == nullptr || *use_regex == true)) kinds.push_back("bytelevel-regex");
    else if (type == "Digits" && digits != nullptr && *digits == true) kinds.push_back("digits");
    else kinds.push_back(type);
  }
  if (kinds == std::vector<std::string>{"bytelevel-regex"}) return "gpt-2";
  if (kinds == std::vector<std::string>{"digits", "bytelevel-regex"}) return "smollm";
  return "";
}

// Whether an SPM-style tokenizer.json puts U+2581 before the text (the
// SentencePiece "dummy prefix").
bool spm_adds_space_prefix(const json& tj) {
  std::vector<const json*> parts;
  for (const char* key : {"normalizer", "pre_tokenizer"}) {
    const json* n = member(tj, key);
    if (n == nullptr) continue;
    parts.push_back(n);
    for (const char* list : {"normalizers", "pretokenizers"}) {
      if (const json* l = member(*n, list); l != nullptr && l->is_array()) {
        for (const json& e : *l) parts.push_back(&e);
      }
    }
  }
  for (const json* p : parts) {
    const std::string type = string_member(*p, "type");
    if (type == "Prepend" && string_member(*p, "prepend") == kSpace) return true;
    if (type == "Metaspace") {
      const std::string scheme = string_member(*p, "prepend_scheme");
      if (scheme == "always" || scheme == "first") return true;
      if (const json* a = member(*p, "add_prefix_space"); a != nullptr && *a == true) return true;
    }
  }
  return false;
}

// SpecialVocab: tokenizer_config's <typ>_token (looked up among added_tokens
// by content) and add_<typ>_token, then config.json's <typ>_token_id.
struct SpecialToken {
  const char* typ;
  const char* gguf_key;
};
constexpr SpecialToken kSpecials[] = {
    {"bos", "tokenizer.ggml.bos_token_id"},       {"eos", "tokenizer.ggml.eos_token_id"},
    {"unk", "tokenizer.ggml.unknown_token_id"},   {"sep", "tokenizer.ggml.seperator_token_id"},
    {"pad", "tokenizer.ggml.padding_token_id"},   {"cls", "tokenizer.ggml.cls_token_id"},
    {"mask", "tokenizer.ggml.mask_token_id"},
};

std::map<std::string, int64_t> special_ids(const json& tj, const json* tc, const json* config, int64_t n_vocab,
                                           std::vector<std::string>& notes) {
  std::map<std::string, int64_t> ids;
  const json* added = member(tj, "added_tokens");
  for (const SpecialToken& s : kSpecials) {
    const json* entry = tc ? member(*tc, (std::string(s.typ) + "_token").c_str()) : nullptr;
    std::string content;
    if (entry != nullptr && entry->is_string()) content = entry->get<std::string>();
    if (entry != nullptr && entry->is_object()) content = string_member(*entry, "content");
    if (content.empty() || added == nullptr || !added->is_array()) continue;
    for (const json& a : *added) {
      if (string_member(a, "content") == content && member(a, "id") && a["id"].is_number_unsigned()) {
        ids[s.typ] = a["id"].get<int64_t>();
        break;
      }
    }
  }
  for (const SpecialToken& s : kSpecials) {
    const json* v = config ? member(*config, (std::string(s.typ) + "_token_id").c_str()) : nullptr;
    // A list (Llama 3.1's eos_token_id) is skipped, as SpecialVocab does.
    if (v == nullptr || !v->is_number_integer() || ids.count(s.typ) != 0) continue;
    if (v->get<int64_t>() < 0 || v->get<int64_t>() >= n_vocab) {
      notes.push_back(std::string("config.json ") + s.typ + "_token_id " + shown(*v) + " is outside the vocabulary");
      continue;
    }
    ids[s.typ] = v->get<int64_t>();
  }
  return ids;
}

// tokenizer.chat_template (and named ones) as gguf-py's add_chat_template writes them.
void write_chat_template(const std::filesystem::path& dir, const json* tc, GgufWriter& out) {
  json tmpl = tc ? (member(*tc, "chat_template") ? (*tc)["chat_template"] : json()) : json();
  if (tmpl.is_null()) {
    if (std::ifstream in(dir / "chat_template.jinja", std::ios::binary); in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      tmpl = ss.str();
    } else if (const auto cj = read_json(dir / "chat_template.json"); cj && member(*cj, "chat_template")) {
      tmpl = (*cj)["chat_template"];
    }
  }
  if (tmpl.is_string()) {
    out.set_string("tokenizer.chat_template", tmpl.get<std::string>());
    return;
  }
  if (!tmpl.is_array()) return;
  std::vector<std::string> names;
  for (const json& choice : tmpl) {
    std::string name = string_member(choice, "name");
    const json* t = member(choice, "template");
    if (name.empty() || t == nullptr || !t->is_string()) continue;
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    if (name == "default") {
      out.set_string("tokenizer.chat_template", t->get<std::string>());
    } else {
      out.set_string("tokenizer.chat_template." + name, t->get<std::string>());
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  if (!names.empty()) out.set_string_array("tokenizer.chat_templates", names);
}

}  // namespace

std::string convert_hf_tokenizer(const std::filesystem::path& hf_dir, int64_t n_vocab, GgufWriter& out,
                                 std::vector<std::string>& notes) {
  const std::filesystem::path tj_path = hf_dir / "tokenizer.json";
  const std::optional<json> tj_opt = read_json(tj_path);
  if (!tj_opt) throw Error(tj_path.string() + ": cannot open (the converter reads the tokenizer from tokenizer.json)");
  const json& tj = *tj_opt;
  const std::string file = tj_path.string();
  const json* model = member(tj, "model");
  const std::string model_type = model ? string_member(*model, "type") : "";
  if (model_type != "BPE") {
    throw Error(file + ": model.type '" + model_type + "' is not supported (only BPE tokenizers convert)");
  }
  const std::optional<json> tc_opt = read_json(hf_dir / "tokenizer_config.json");
  const std::optional<json> config = read_json(hf_dir / "config.json");
  const json* tc = tc_opt && tc_opt->is_object() ? &*tc_opt : nullptr;

  const HfVocab v = read_vocab(tj, file, n_vocab);
  const std::map<std::string, int64_t> specials = special_ids(tj, tc, config ? &*config : nullptr, n_vocab, notes);
  const json* byte_fallback = member(*model, "byte_fallback");
  const bool spm = byte_fallback != nullptr && *byte_fallback == true;
  const auto n = static_cast<size_t>(n_vocab);
  std::vector<std::string> tokens(n);
  std::vector<int32_t> types(n);
  std::string tokenizer_model;

  if (spm) {
    // SentencePiece-style BPE. llama.cpp's converter gives every token of such
    // a tokenizer.json the score -1000, which loses the merge order its SPM
    // tokenizer merges by; SentencePiece ranks pieces by merge priority, so a
    // token formed by merge k scores -k, and tokens no merge forms score below
    // every merge (they are never merge results).
    tokenizer_model = "llama";
    std::unordered_map<std::string, size_t> id_of;
    for (size_t i = 0; i < n; ++i) {
      if (v.present[i]) id_of.emplace(v.tokens[i], i);
    }
    std::vector<float> scores(n, 0.0f);
    std::vector<uint8_t> scored(n, 0);
    for (size_t k = 0; k < v.merges.size(); ++k) {
      const auto it = id_of.find(v.merges[k].first + v.merges[k].second);
      if (it == id_of.end() || scored[it->second]) continue;
      scores[it->second] = -static_cast<float>(k);
      scored[it->second] = 1;
    }
    const std::string unk = string_member(*model, "unk_token");
    std::vector<uint8_t> special_id(n, 0);
    for (const auto& [typ, id] : specials) special_id[static_cast<size_t>(id)] = 1;
    for (size_t i = 0; i < n; ++i) {
      const bool is_special = (v.added[i] && v.special[i]) || special_id[i];
      tokens[i] = v.present[i] ? v.tokens[i] : "[PAD" + std::to_string(i) + "]";
      if (!v.present[i]) {
        types[i] = kUnused;
        scores[i] = -1000.0f;
      } else if (!unk.empty() && v.tokens[i] == unk) {
        types[i] = kUnknown;
      } else if (is_byte_piece(v.tokens[i])) {
        types[i] = kByte;
      } else if (is_special) {
        types[i] = kControl;
      } else if (v.added[i] && i >= v.n_base) {
        types[i] = kUserDefined;
        scores[i] = -1000.0f;
      } else {
        types[i] = kNormal;
        if (!scored[i]) scores[i] = -static_cast<float>(v.merges.size() + i);
      }
    }
    out.set_string("tokenizer.ggml.model", tokenizer_model);
    out.set_string("tokenizer.ggml.pre", "default");
    out.set_string_array("tokenizer.ggml.tokens", tokens);
    out.set_f32_array("tokenizer.ggml.scores", scores);
    out.set_i32_array("tokenizer.ggml.token_type", types);
  } else {
    const std::string decoder = member(tj, "decoder") ? string_member(tj["decoder"], "type") : "";
    if (decoder != "ByteLevel") {
      throw Error(file + ": a BPE tokenizer without byte_fallback needs the ByteLevel decoder, found '" + decoder +
                  "'");
    }
    tokenizer_model = "gpt2";
    std::string pre = detect_pre(tj);
    if (pre.empty()) {
      notes.push_back("the pre-tokenizer of " + file +
                      " is not one llama.cpp knows by name; wrote tokenizer.ggml.pre = default");
      pre = "default";
    }
    for (size_t i = 0; i < n; ++i) {
      if (!v.present[i]) {
        tokens[i] = "[PAD" + std::to_string(i) + "]";
        types[i] = kUnused;
      } else if (v.added[i]) {
        const bool control = v.special[i] || looks_special(v.tokens[i]);
        tokens[i] = control ? v.tokens[i] : replace_all(v.tokens[i], kSpace, " ");
        types[i] = control ? kControl : kUserDefined;
      } else {
        tokens[i] = v.tokens[i];
        types[i] = kNormal;
      }
    }
    if (v.merge_strings.empty()) notes.push_back(file + " has no merges: the vocabulary cannot tokenize");
    out.set_string("tokenizer.ggml.model", tokenizer_model);
    out.set_string("tokenizer.ggml.pre", pre);
    out.set_string_array("tokenizer.ggml.tokens", tokens);
    out.set_i32_array("tokenizer.ggml.token_type", types);
    out.set_string_array("tokenizer.ggml.merges", v.merge_strings);
  }

  for (const SpecialToken& s : kSpecials) {
    if (const auto it = specials.find(s.typ); it != specials.end()) {
      out.set_u32(s.gguf_key, static_cast<uint32_t>(it->second));
    }
  }
  if (tc != nullptr) {
    for (const char* typ : {"bos", "eos", "sep"}) {
      const json* add = member(*tc, (std::string("add_") + typ + "_token").c_str());
      if (add != nullptr && add->is_boolean()) {
        out.set_bool(std::string("tokenizer.ggml.add_") + typ + "_token", add->get<bool>());
      }
    }
  }
  if (spm) {
    const json* aps = tc ? member(*tc, "add_prefix_space") : nullptr;
    const bool prefix = aps != nullptr && aps->is_boolean() ? aps->get<bool>() : spm_adds_space_prefix(tj);
    out.set_bool("tokenizer.ggml.add_space_prefix", prefix);
  }
  write_chat_template(hf_dir, tc, out);
  return tokenizer_model;
}

}  // namespace tokamak::io
