// --matmul, shared by the commands that run the forward pass directly (logits,
// perplexity): native (activations in the weights' partner format, as
// llama.cpp) or f32 (f32 activations: the fixtures' dequantize-then-f32 arithmetic).
#pragma once

#include "cli/args.h"
#include "kernels/matmul.h"

namespace tokamak::cli {

inline constexpr OptionSpec kMatmulOption = {
    "--matmul", "MODE", "native: activations in the weights' partner format, as llama.cpp (default); f32: f32 activations"};

// Throws UsageError naming the value when it is neither native nor f32.
kernels::MatmulOptions matmul_options_from_args(const ParsedArgs& args);

}  // namespace tokamak::cli
