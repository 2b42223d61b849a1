// tokamak's public C++ API in one include: Model (weights, tokenizer, chat
// template) and Engine (continuous batching, sampling, streamed outputs).
// Link with tokamak::tokamak (CMake) or `pkg-config --libs tokamak`.
#pragma once

#include "tokamak/engine.hpp"
#include "tokamak/model.hpp"

namespace tokamak::api {
// The library's version, "MAJOR.MINOR.PATCH". Thread safe.
TOKAMAK_API const char* version();
}  // namespace tokamak::api
