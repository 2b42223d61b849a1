#include "model/config.h"

#include "core/error.h"
#include "io/gguf.h"
#include "io/llama2c.h"

namespace tokamak {
namespace {

int32_t required_int(const io::GgufFile& f, const std::string& key) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) throw Error(f.name() + ": missing metadata key '" + key + "'");
  if (*v <= 0 || *v > (int64_t{1} << 30)) {
    throw Error(f.name() + ": metadata '" + key + "' = " + std::to_string(*v) + " is out of range");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const io::GgufFile& f) {
  ModelConfig c;
  const std::optional<std::string> arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.name() + ": missing metadata key 'general.architecture'");
  if (*arch != "llama") throw Error(f.name() + ": unsupported architecture '" + *arch + "' (supported: llama)");
  c.architecture = *arch;
  const std::string p = *arch + ".";
  c.n_embd = required_int(f, p + "embedding_length");
  c.n_layers = required_int(f, p + "block_count");
  c.n_heads = required_int(f, p + "attention.head_count");
  c.n_kv_heads = f.get_int(p + "attention.head_count_kv") ? required_int(f, p + "attention.head_count_kv") : c.n_heads;
  c.n_ff = required_int(f, p + "feed_forward_length");
  c.n_ctx_train = required_int(f, p + "context_length");
  if (c.n_heads > 0 && c.n_embd % c.n_heads != 0) {
    throw Error(f.name() + ": embedding_length " + std::to_string(c.n_embd) + " is not divisible by head_count " +
                std::to_string(c.n_heads));
  }
  c.head_dim = c.n_embd / c.n_heads;
  c.rope_dim = f.get_int(p + "rope.dimension_count") ? required_int(f, p + "rope.dimension_count") : c.head_dim;
  if (auto base = f.get_float(p + "rope.freq_base")) c.rope_freq_base = static_cast<float>(*base);
  if (auto eps = f.get_float(p + "attention.layer_norm_rms_epsilon")) c.rms_eps = static_cast<float>(*eps);
  const io::GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) throw Error(f.name() + ": missing tensor 'token_embd.weight'");
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.validate(f.name());
  return c;
}

ModelConfig ModelConfig::from_llama2c(const io::Llama2cConfig& l) {
  ModelConfig c;
  c.n_vocab = l.vocab_size;
  c.n_embd = l.dim;
  c.n_layers = l.n_layers;
  c.n_heads = l.n_heads;
  c.n_kv_heads = l.n_kv_heads;
  c.head_dim = l.dim / l.n_heads;
  c.n_ff = l.hidden_dim;
  c.n_ctx_train = l.seq_len;
  c.rope_dim = c.head_dim;
  c.tied_output = l.shared_classifier;
  c.validate("llama2.c checkpoint");
  return c;
}

void ModelConfig::validate(const std::string& source) const {
  auto fail = [&](const std::string& what) { throw Error(source + ": " + what); };
  if (n_vocab <= 0) fail("vocabulary size " + std::to_string(n_vocab) + " must be positive");
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    fail("head_count " + std::to_string(n_heads) + " is not a multiple of head_count_kv " + std::to_string(n_kv_heads));
  }
  if (rope_dim <= 0 || rope_dim > head_dim || rope_dim % 2 != 0) {
    fail("rope dimension count " + std::to_string(rope_dim) + " must be even and in (0, head_dim " +
         std::to_string(head_dim) + "]");
  }
  if (!(rms_eps > 0.0f)) fail("rms epsilon " + std::to_string(rms_eps) + " must be positive");
  if (!(rope_freq_base > 0.0f)) fail("rope freq_base " + std::to_string(rope_freq_base) + " must be positive");
}

}  // namespace tokamak
