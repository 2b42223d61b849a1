// Converting a tensor's rows into another element type, in parallel: the one
// loop under `tokamak quantize` (rows from a file) and `tokamak make-model`
// (rows from a random generator). Memory: one row of floats per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace tokamak {

// Returns row `row` as ne0 floats: either a pointer to data that already
// exists, or `scratch` (ne0 floats, this thread's) after writing the row
// there. Runs on pool threads, so it must not throw.
using RowSource = std::function<const float*(int64_t row, float* scratch)>;

// out = n_rows rows of ne0 elements of `type`, row r = quantize_row(type, source(r)).
// Throws tokamak::Error before any work when `type` cannot be quantized to,
// ne0 is not a multiple of its block, or out has the wrong size. Rows are
// quantized one by one, so the bytes do not depend on the number of threads.
void convert_rows(ThreadPool& pool, DType type, int64_t ne0, int64_t n_rows, std::span<std::byte> out,
                  const RowSource& source);

}  // namespace tokamak
