// Weights that loading widens into another format (kernels/widen.h) keep the
// file's values: on small random models of IQ3_S and TQ1_0 matrices, the
// widened model computes the same logits as the file's own layout through the
// f32 reference matmul (both dequantize to the same floats, and agree with
// the plain f64 reference model), and its integer kernels agree with the
// compact format's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/forward_logits.h"
#include "common/reference_model.h"
#include "kernels/isa.h"
#include "kernels/widen.h"
#include "model/model.h"

namespace tokamak {
namespace {

using kernels::Isa;
using kernels::MatmulPrecision;

class WidenedWeights : public ::testing::TestWithParam<DType> {};

TEST_P(WidenedWeights, KeepTheFilesValuesAndMatchThePlainReference) {
  if (!kernels::isa_supported(Isa::kAvx2)) GTEST_SKIP() << "weights are widened for the x86 variants";
  const DType stored = GetParam();
  const DType widened = kernels::widened_type(stored, Isa::kAvx2).value();
  testing::RandomModelSpec spec = testing::head64_spec();
  spec.matrix_type = stored;
  const std::string path = ::testing::TempDir() + "/widened_" + std::string(dtype_name(stored)) + ".gguf";
  testing::write_random_model(spec, path);
  std::vector<int32_t> ids;
  for (int i = 0; i < 16; ++i) ids.push_back((i * 37 + 5) % spec.n_vocab);
  const std::vector<double> reference = testing::reference_logits(io::GgufFile::open(path), ids);

  // Mapped, and copied (where the compact bytes are given back after widening).
  for (const MapMode mode : {MapMode::kMapped, MapMode::kHugePageCopy}) {
    SCOPED_TRACE(mode == MapMode::kMapped ? "mapped" : "copied");
    const Model kept = Model::load(path, mode, kKeepLayout);
    const Model wide = Model::load(path, mode, Isa::kAvx2);
    ASSERT_EQ(kept.weights().layers[0].ffn_up.type, stored);
    ASSERT_EQ(wide.weights().layers[0].ffn_up.type, widened);
    EXPECT_EQ(wide.weights().output.type, widened);
    EXPECT_GT(wide.weight_bytes(), kept.weight_bytes());

    // Through the f32 reference matmul: the same floats in, the same logits
    // out, and those of the plain f64 model (f32 sums against f64: ~1e-6).
    testing::LogitsRun f32;
    f32.matmul = {Isa::kAvx2, MatmulPrecision::kF32};
    const std::vector<float> wide_f32 = testing::forward_logits(wide, ids, f32);
    EXPECT_EQ(wide_f32, testing::forward_logits(kept, ids, f32));
    ASSERT_EQ(wide_f32.size(), reference.size());
    double max_abs = 0.0, f32_diff = 0.0;
    for (size_t i = 0; i < reference.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(reference[i]));
      f32_diff = std::max(f32_diff, std::fabs(wide_f32[i] - reference[i]));
    }
    EXPECT_GT(max_abs, 0.5);  // the model is not degenerate
    EXPECT_LE(f32_diff, 1e-5 * max_abs);

    // The integer kernels of the widened format sum the same integers as the
    // compact format's (their float steps may run in another order).
    testing::LogitsRun quantized;
    quantized.matmul = {Isa::kAvx2, MatmulPrecision::kQuantized};
    EXPECT_LE(testing::max_abs_diff(testing::forward_logits(wide, ids, quantized), testing::forward_logits(kept, ids, quantized)),
              1e-6 * max_abs);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, WidenedWeights, ::testing::Values(DType::IQ3_S, DType::IQ3_XXS, DType::TQ1_0),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tokamak
