// Cephes' expf constants: 2^n * p(r) with x = n ln2 + r, |r| <= ln2 / 2, ln2
// split in two for the reduction. One table for the AVX2 form (exp_avx2.h) and
// the AVX-512 one (attention_avx512_ops.h), whose values must agree bit for
// bit. Data only: include it outside any target region.
#pragma once

#include <cstddef>   // size_t, for the forms' loops over kPoly
#include <iterator>  // std::size

namespace tokamak::kernels::cephes_exp {

inline constexpr float kMin = -87.33654f;  // ln(FLT_MIN): below, the result is 0
inline constexpr float kMax = 88.37626f;   // the AVX2 form's clamp
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
// p(r) = 1 + r + r^2 (c0 r^5 + c1 r^4 + ... + c5), Horner from c0.
inline constexpr float kPoly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                  4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace tokamak::kernels::cephes_exp
