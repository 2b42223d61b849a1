// `tokamak quantize`: a GGUF file rewritten with its weights in other types,
// following llama-quantize: the recipe of tools/quant_recipe.h, tensors in
// llama.cpp's order, all metadata copied and general.quantization_version /
// general.file_type set (moved to the end, as llama-quantize does). Tensors
// are converted one at a time (memory: the largest output tensor), the rows
// of each in parallel. With --pure the bytes equal llama-quantize --pure's.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "io/output_file.h"
#include "tools/quant_recipe.h"

namespace tokamak {

namespace io {
class GgufFile;
}

struct QuantizeOptions {
  FileType ftype = FileType::Q8_0;
  bool pure = false;  // every quantizable tensor gets the default type (fallbacks still apply)
};

// One tensor of the output: what it was, what it becomes.
struct TensorPlan {
  size_t input_index = 0;  // in the input file's tensor list
  std::string name;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  DType from = DType::F32;
  DType to = DType::F32;
  size_t bytes_from = 0;
  size_t bytes_to = 0;
};

// The output's tensors in order. Throws tokamak::Error (naming the file and
// tensor) when a conversion is impossible: an input type tokamak cannot read.
std::vector<TensorPlan> plan_quantization(const io::GgufFile& in, const QuantizeOptions& options);

// Writes the quantized copy of `in` to `out`, which the caller commits. `on_tensor`
// is called after each tensor is converted, with its index in the plan.
void quantize_gguf(const io::GgufFile& in, io::OutputFile& out, const QuantizeOptions& options,
                   ThreadPool& pool, const std::function<void(size_t, const TensorPlan&)>& on_tensor = {});

}  // namespace tokamak
