#include "dist/communicator.h"

#include <cstring>

namespace tokamak::dist {

void all_reduce_sum(Communicator& comm, float* data, int64_t n, std::vector<float>& scratch) {
  const int size = comm.size();
  if (size == 1) return;
  if (static_cast<int64_t>(scratch.size()) < size * n) scratch.resize(static_cast<size_t>(size * n));
  comm.all_gather(data, n, scratch.data());
  std::memcpy(data, scratch.data(), static_cast<size_t>(n) * sizeof(float));
  for (int r = 1; r < size; ++r) {
    const float* part = scratch.data() + static_cast<int64_t>(r) * n;
    for (int64_t i = 0; i < n; ++i) data[i] += part[i];
  }
}

}  // namespace tokamak::dist
