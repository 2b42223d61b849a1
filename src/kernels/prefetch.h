// A software prefetch that the optimizer keeps.
//
// GCC 12 treats __builtin_prefetch (and _mm_prefetch) as free of side
// effects, so a loop whose only work is prefetching, such as the walk over
// a KV tile's runs of rows in attention_impl.h, is deleted whole at -O2 and
// -O3 (found in the disassembly: the attention kernels had no prefetch at
// all). A volatile asm statement cannot be removed.
#pragma once

namespace tokamak::kernels {

inline void prefetch_l1(const void* p) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Into L2 (and the outer levels), not L1.
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prfm pldl2keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

}  // namespace tokamak::kernels
