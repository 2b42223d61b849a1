// 2^f for f in [-1/2, 1/2] as a degree-4 polynomial, relative error <= 3e-6
// (weighted least squares on Chebyshev nodes, then rounded to float): the
// softmax exp of the integer attention kernels, exp(x) = 2^n 2^f with
// n = round(x log2 e), whose weights are then rounded to 8 or 16 bits, so
// they need far less than Cephes' ~1e-7 (exp_cephes.h): 4 FMAs where its
// form takes 6 and a multiply and an add. Data only: include it outside any
// target region.
#pragma once

namespace tokamak::kernels::exp2_poly {

// c4 f^4 + c3 f^3 + ... + c0, Horner from c4.
inline constexpr float kPoly[] = {9.5605105162e-03f, 5.5917039514e-02f, 2.4024981260e-01f, 6.9312196970e-01f,
                                  9.9999916553e-01f};

}  // namespace tokamak::kernels::exp2_poly
