#include "tokenizer/pretokenizer.h"

#include <initializer_list>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace tokamak {

namespace {

// The patterns come from each model's tokenizer.json, in the form llama.cpp
// runs them (ECMAScript: "(?i:'s|...)" spelled out as "'[sS]|...").

// GPT-2: contractions, words, numbers, other runs, spaces not before a word.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama 3 (tiktoken cl100k): numbers in groups of up to three, newlines kept apart.
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: as Llama 3 with single digits.
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kSeedCoder =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Tekken (Mistral Nemo) and GPT-4o: a word is upper-case letters then
// lower-case ones; "(?=[\p{L}])[^a-z]" is a letter that is not a-z.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// BLOOM, Poro, GPT-3 Finnish: a word runs to a space or one of . , ! ? … 。 ， 、 । ۔ ،
constexpr const char* kBloom = " ?[^(\\s|.,!?\u2026\u3002\uFF0C\u3001\u0964\u06D4\u060C)]+";
// DeepSeek LLM: upper/lower/title-case letters (the Unicode ranges of its
// tokenizer.json, which stop at an older Unicode than \p{L}), ASCII and
// full-width punctuation, CJK.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5"
    "\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA"
    "\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45"
    "\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE"
    "\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC"
    "\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3"
    "\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943]+";
constexpr const char* kDeepseekPunct = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr const char* kCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

struct Spec {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

// tokenizer.ggml.pre values and their regexes, as llama.cpp's llama-vocab.cpp
// assigns them.
const Spec kSpecs[] = {
    {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"}, {kLlama3}, true, true},
    {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
    {{"deepseek-llm"}, {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjk, R"(\p{N}+)"}},
    {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}},
    {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
    {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {R"(\p{N})", kGpt2}},
    {{"gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
      "a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4"},
     {kGpt2}},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "megrez", "hunyuan"}, {kQwen2}},
    {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
    {{"viking"}, {kBloom, R"(\p{N})"}},
    {{"tekken"}, {kTekken}, true, true},
    {{"gpt-4o", "llama4"}, {kGpt4o}},
    {{"seed-coder"}, {kSeedCoder}},
    {{"chameleon"},
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", R"(\p{N})",
      R"([\p{P}!-/:-@\[-`{-~])", kGpt2},
     false,
     true},
};

}  // namespace

PreTokenizer PreTokenizer::from_name(std::string_view name) {
  for (const Spec& spec : kSpecs) {
    for (const char* n : spec.names) {
      if (name != n) continue;
      PreTokenizer pre;
      pre.name_ = name.empty() ? "default" : std::string(name);
      for (const char* p : spec.patterns) pre.regexes_.push_back(regex::Regex::compile(p));
      pre.ignore_merges_ = spec.ignore_merges;
      pre.add_bos_ = spec.add_bos;
      return pre;
    }
  }
  throw Error("unknown pre-tokenizer '" + std::string(name) + "'");
}

std::vector<std::string_view> PreTokenizer::known_names() {
  std::vector<std::string_view> names;
  for (const Spec& spec : kSpecs) {
    for (const char* n : spec.names) {
      if (*n != '\0') names.emplace_back(n);
    }
  }
  return names;
}

void PreTokenizer::split(std::string_view text, Words& out) const {
  const std::vector<uint32_t> cps = unicode::decode_utf8(text);
  std::vector<uint32_t> folded(cps.size());
  std::vector<uint16_t> flags(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    flags[i] = unicode::flags(cps[i]);
    // What llama.cpp's std::regex sees: other spaces become VT, a space it knows.
    folded[i] = cps[i] > 0x7F && (flags[i] & unicode::kWhitespace) != 0 ? 0x0B : cps[i];
  }
  const regex::Text view{folded, flags};
  std::vector<regex::Range> ranges;
  if (!cps.empty()) ranges.push_back({0, cps.size()});
  regex::Matcher matcher;
  for (const regex::Regex& re : regexes_) matcher.split(re, view, ranges);
  out.bytes.reserve(out.bytes.size() + text.size());
  for (const regex::Range& r : ranges) {
    for (size_t i = r.begin; i < r.end; ++i) unicode::append_utf8(out.bytes, cps[i]);
    out.ends.push_back(out.bytes.size());
  }
}

}  // namespace tokamak
