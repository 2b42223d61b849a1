#include "tools/quantize_model.h"

#include <cstring>

#include "core/error.h"
#include "io/gguf.h"
#include "kernels/quants.h"
#include "tools/tensor_convert.h"

namespace tokamak {
namespace {

// GGML_QNT_VERSION: the block layouts this build writes.
constexpr uint32_t kQuantizationVersion = 2;

RecipeModel recipe_model(const io::GgufFile& in) {
  const std::optional<std::string> arch = in.get_string("general.architecture");
  if (!arch) throw Error(in.name() + ": missing metadata key 'general.architecture'");
  RecipeModel m;
  const std::optional<int64_t> n_layers = in.get_int(*arch + ".block_count");
  if (!n_layers || *n_layers <= 0 || *n_layers > (1 << 20)) {
    throw Error(in.name() + ": missing or invalid metadata '" + *arch + ".block_count'");
  }
  m.n_layers = static_cast<int32_t>(*n_layers);
  const int64_t heads = in.get_int(*arch + ".attention.head_count").value_or(1);
  const int64_t kv_heads = in.get_int(*arch + ".attention.head_count_kv").value_or(heads);
  m.n_gqa = heads > 0 && kv_heads > 0 && heads % kv_heads == 0 ? static_cast<int32_t>(heads / kv_heads) : 1;
  for (const io::GgufTensorInfo& t : in.tensors()) {
    if (t.name.find("attn_v.weight") != std::string::npos) ++m.n_attention_wv;
  }
  m.has_output = in.find_tensor("output.weight") != nullptr;
  return m;
}

}  // namespace

std::vector<TensorPlan> plan_quantization(const io::GgufFile& in, const QuantizeOptions& options) {
  if (in.tensors().empty()) throw Error(in.name() + ": the file has no tensors to quantize");
  QuantRecipe recipe(options.ftype, options.pure, recipe_model(in));
  std::vector<std::string> names;
  for (const io::GgufTensorInfo& t : in.tensors()) names.push_back(t.name);
  std::vector<TensorPlan> plan;
  for (size_t i : llama_tensor_order(names)) {
    const io::GgufTensorInfo& t = in.tensors()[i];
    TensorPlan p{i, t.name, t.n_dims, t.ne, t.type, t.type, t.n_bytes, t.n_bytes};
    p.to = recipe.type_for(t.name, t.ne, t.n_dims, t.type);
    if (p.to != p.from) {
      if (!kernels::can_dequantize(p.from)) {
        throw Error(in.name() + ": tensor '" + t.name + "' has type " + std::string(dtype_name(p.from)) +
                    ", which tokamak cannot convert from");
      }
      p.bytes_to = row_bytes(p.to, t.ne[0]) * static_cast<size_t>(t.ne[1] * t.ne[2] * t.ne[3]);
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

void quantize_gguf(const io::GgufFile& in, io::OutputFile& out, const QuantizeOptions& options,
                   ThreadPool& pool, const std::function<void(size_t, const TensorPlan&)>& on_tensor) {
  const std::vector<TensorPlan> plan = plan_quantization(in, options);
  io::GgufWriter w;
  for (const io::GgufKeyValue& kv : in.metadata()) w.set(kv.key, kv.value);
  for (const char* key : {"split.no", "split.count", "split.tensors.count"}) w.remove(key);
  w.remove("general.quantization_version");
  w.set_u32("general.quantization_version", kQuantizationVersion);
  w.remove("general.file_type");
  w.set_u32("general.file_type", static_cast<uint32_t>(options.ftype));
  for (const TensorPlan& p : plan) {
    w.declare_tensor(p.name, p.to, std::vector<int64_t>(p.ne.begin(), p.ne.begin() + p.n_dims));
  }
  w.write(out, [&](size_t index, std::span<std::byte> bytes) {
    const TensorPlan& p = plan[index];
    const TensorView src = in.view(in.tensors()[p.input_index]);
    if (p.to == p.from) {
      std::memcpy(bytes.data(), src.data, bytes.size());
    } else {
      const int64_t ne0 = p.ne[0];
      convert_rows(pool, p.to, ne0, src.n_rows(), bytes, [&](int64_t row, float* scratch) -> const float* {
        if (src.type == DType::F32) return reinterpret_cast<const float*>(src.row(row));
        kernels::dequantize_row(src.type, src.row(row), scratch, ne0);
        return scratch;
      });
    }
    if (on_tensor) on_tensor(index, p);
  });
}

}  // namespace tokamak
