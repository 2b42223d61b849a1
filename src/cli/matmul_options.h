// --matmul, shared by the commands that run the forward pass directly (logits,
// perplexity): native (activations in the weights' partner format, as
// llama.cpp) or f32 (f32 activations: the fixtures' dequantize-then-f32
// arithmetic); and --isa (logits, perplexity, bench, run), which forces a kernel
// variant, e.g. the AVX2 path on an AVX-512 host.
#pragma once

#include "cli/args.h"
#include "kernels/matmul.h"

namespace tokamak::cli {

inline constexpr OptionSpec kMatmulOption = {
    "--matmul", "MODE", "native: activations in the weights' partner format, as llama.cpp (default); f32: f32 activations"};

inline constexpr OptionSpec kIsaOption = {
    "--isa", "NAME", "kernel variant: scalar, avx2, avx_vnni, avx512, avx512_vnni, avx512_bf16, neon (default: the best this CPU runs)"};

// --matmul and --isa (where the command declares it). Throws UsageError
// naming the value when --matmul is neither native nor f32, or --isa names
// no variant or one this binary or CPU cannot run (the message lists those it can).
kernels::MatmulOptions matmul_options_from_args(const ParsedArgs& args);

}  // namespace tokamak::cli
