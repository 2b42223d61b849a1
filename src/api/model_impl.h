// What a public tokamak::api::Model holds: the internal model, its tokenizer
// and its chat template, loaded once and shared (immutably) by every copy of
// the handle and every Engine made from it.
#pragma once

#include <memory>
#include <utility>

#include "core/error.h"
#include "model/model.h"
#include "tokamak/model.hpp"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::api {

struct Model::Impl {
  tokamak::Model model;
  Tokenizer tokenizer;
  ChatTemplate chat_template;
};

// Runs f, turning the library's internal errors into the public Error (same message).
template <class F>
decltype(auto) translate_errors(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const tokamak::Error& e) {
    throw Error(e.what());
  }
}

}  // namespace tokamak::api
