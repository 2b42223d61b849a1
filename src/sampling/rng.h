// Random number generators of the samplers. Each request owns its own
// generator: draws for one request never move another's stream, so a request
// samples the same tokens alone or in a batch.
#pragma once

#include <cstdint>
#include <random>

namespace tokamak::sampling {

// The default generator: mt19937_64 (its output sequence is fixed by the C++
// standard) turned into doubles by our own code, not by std:: distributions,
// whose algorithms differ between standard libraries.
class RequestRng {
 public:
  explicit RequestRng(uint64_t seed) : gen_(seed) {}
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 gen_;
};

// llama2.c's xorshift generator (run.c random_u32 / random_f32), bit for bit.
// The state starts as the seed itself; a zero state stays zero forever.
class Llama2cRng {
 public:
  explicit Llama2cRng(uint64_t seed) : state_(seed) {}
  uint32_t next_u32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  }
  // In [0, 1): the top 24 bits of next_u32() over 2^24, in float as run.c does.
  float next_f32() { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace tokamak::sampling
