// Activations for the matmul tests (tests/kernels).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tokamak::testing {

// Activations [tokens, k]. Exact: multiples of 1/8 with +-127/8 at the start
// of every 32 (so every Q8_0 and Q8_K block scale is exactly 1/8, and every
// product with a power-of-two-scaled weight is exact in f32). Else Gaussian,
// every 97th value 20x larger (outliers).
std::vector<float> make_activations(int64_t tokens, int64_t k, bool exact, std::mt19937& rng);

}  // namespace tokamak::testing
