// The C API (include/tokamak.h) over the public C++ API: every entry point
// checks its handles and pointers, runs inside one try block, and turns an
// exception into a status and this thread's message. No exception crosses
// into C.
#include "tokamak.h"

#include <cinttypes>
#include <cstdio>
#include <new>
#include <string>

#include "api/handle_table.h"
#include "tokamak/tokamak.hpp"

namespace tokamak::api {
namespace {

// A failure with its own status (a bad handle or argument found here).
struct Failure {
  tokamak_status status;
  std::string message;
};

std::string& last_error() {
  thread_local std::string message;
  return message;
}

// The live handles. They live as long as the process, so that a handle can
// be checked after its object is gone: the one state the C API cannot keep
// in the caller's objects.
HandleTable<const Model>& models() {
  static HandleTable<const Model> table(0x4D);  // 'M'
  return table;
}
HandleTable<Engine>& engines() {
  static HandleTable<Engine> table(0x45);  // 'E'
  return table;
}

// Runs f; an exception becomes `failure` (or its own status) and the message.
template <class F>
tokamak_status guarded(tokamak_status failure, F&& f) {
  last_error().clear();
  try {
    f();
    return TOKAMAK_OK;
  } catch (const Failure& e) {
    last_error() = e.message;
    return e.status;
  } catch (const std::bad_alloc&) {
    last_error() = "out of memory";
    return TOKAMAK_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return failure;
  } catch (...) {
    last_error() = "unknown error";
    return TOKAMAK_ERROR_RUNTIME;
  }
}

// A handle as the message shows it: 0x4d00000100000001 (tag, generation, slot).
std::string hex(const void* handle) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, reinterpret_cast<uintptr_t>(handle));
  return text;
}

template <class T>
void require(const T* pointer, const char* what) {
  if (pointer == nullptr) throw Failure{TOKAMAK_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL"};
}

std::shared_ptr<const Model> model_of(tokamak_model* handle) {
  std::shared_ptr<const Model> m = models().get(reinterpret_cast<uintptr_t>(handle));
  if (!m) {
    throw Failure{TOKAMAK_ERROR_INVALID_HANDLE, "model handle " + hex(handle) +
                                                    " is not a live model (freed, or not from tokamak_model_load)"};
  }
  return m;
}

std::shared_ptr<Engine> engine_of(tokamak_engine* handle) {
  std::shared_ptr<Engine> e = engines().get(reinterpret_cast<uintptr_t>(handle));
  if (!e) {
    throw Failure{TOKAMAK_ERROR_INVALID_HANDLE, "engine handle " + hex(handle) +
                                                    " is not a live engine (freed, or not from tokamak_engine_create)"};
  }
  return e;
}

SamplingParams params_of(const tokamak_sampling_params* p) {
  tokamak_sampling_params defaults;
  if (p == nullptr) {
    tokamak_sampling_params_init(&defaults);
    p = &defaults;
  }
  SamplingParams s;
  s.temperature = p->temperature;
  s.top_p = p->top_p;
  s.top_k = p->top_k;
  s.min_p = p->min_p;
  s.repetition_penalty = p->repetition_penalty;
  s.presence_penalty = p->presence_penalty;
  s.frequency_penalty = p->frequency_penalty;
  s.max_tokens = p->max_tokens;
  if (p->seed != TOKAMAK_RANDOM_SEED) s.seed = p->seed;
  s.n = p->n;
  if (p->n_stop > 0) require(p->stop, "sampling params: stop (with n_stop > 0)");
  for (size_t i = 0; i < p->n_stop; ++i) {
    if (p->stop[i] == nullptr) {
      throw Failure{TOKAMAK_ERROR_INVALID_ARGUMENT, "sampling params: stop[" + std::to_string(i) + "] is NULL"};
    }
    s.stop.emplace_back(p->stop[i]);
  }
  s.ignore_eos = p->ignore_eos != 0;
  return s;
}

void deliver(const RequestOutput& o, tokamak_stream_callback callback, void* user) {
  for (const CompletionDelta& d : o.completions) {
    const tokamak_delta delta{o.request_id,       d.index,          d.text.c_str(),
                              d.text.size(),      d.token_ids.data(), d.token_ids.size(),
                              d.finish_reason.empty() ? nullptr : d.finish_reason.c_str()};
    callback(user, &delta);
  }
}

}  // namespace
}  // namespace tokamak::api

using namespace tokamak::api;

extern "C" {

const char* tokamak_version(void) { return version(); }
const char* tokamak_last_error(void) { return last_error().c_str(); }

const char* tokamak_status_name(tokamak_status status) {
  switch (status) {
    case TOKAMAK_OK: return "ok";
    case TOKAMAK_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case TOKAMAK_ERROR_INVALID_HANDLE: return "invalid handle";
    case TOKAMAK_ERROR_LOAD: return "load error";
    case TOKAMAK_ERROR_RUNTIME: return "runtime error";
    case TOKAMAK_ERROR_OUT_OF_MEMORY: return "out of memory";
  }
  return "unknown status";
}

tokamak_status tokamak_model_load(const char* path, const char* tokenizer_path, tokamak_model** out) {
  return guarded(TOKAMAK_ERROR_LOAD, [&] {
    require(out, "out");
    *out = nullptr;
    require(path, "path");
    auto model = std::make_shared<const Model>(Model::load(path, tokenizer_path ? tokenizer_path : ""));
    *out = reinterpret_cast<tokamak_model*>(models().add(std::move(model)));
  });
}

tokamak_status tokamak_model_free(tokamak_model* model) {
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    if (!models().remove(reinterpret_cast<uintptr_t>(model))) model_of(model);  // throws the handle's error
  });
}

tokamak_status tokamak_model_n_vocab(tokamak_model* model, int32_t* out) {
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    require(out, "out");
    *out = model_of(model)->n_vocab();
  });
}

void tokamak_engine_options_init(tokamak_engine_options* options) {
  if (options == nullptr) return;
  const EngineOptions d;
  *options = {nullptr, d.max_model_len, d.max_num_seqs, d.max_num_batched_tokens,
              d.block_size, d.enable_prefix_caching ? 1 : 0, "f16", d.threads};
}

tokamak_status tokamak_engine_create(tokamak_model* model, const tokamak_engine_options* options,
                                     tokamak_engine** out) {
  return guarded(TOKAMAK_ERROR_INVALID_ARGUMENT, [&] {
    require(out, "out");
    *out = nullptr;
    const std::shared_ptr<const Model> m = model_of(model);
    tokamak_engine_options o;
    tokamak_engine_options_init(&o);
    if (options != nullptr) o = *options;
    EngineOptions e;
    e.kv_memory = o.kv_memory ? o.kv_memory : "";
    e.max_model_len = o.max_model_len;
    e.max_num_seqs = o.max_num_seqs;
    e.max_num_batched_tokens = o.max_num_batched_tokens;
    e.block_size = o.block_size;
    e.enable_prefix_caching = o.enable_prefix_caching != 0;
    require(o.kv_cache_dtype, "options: kv_cache_dtype");
    e.kv_cache_dtype = o.kv_cache_dtype;
    e.threads = o.threads;
    *out = reinterpret_cast<tokamak_engine*>(engines().add(std::make_shared<Engine>(*m, e)));
  });
}

tokamak_status tokamak_engine_free(tokamak_engine* engine) {
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    if (!engines().remove(reinterpret_cast<uintptr_t>(engine))) engine_of(engine);  // throws the handle's error
  });
}

void tokamak_sampling_params_init(tokamak_sampling_params* params) {
  if (params == nullptr) return;
  const SamplingParams d;
  *params = {d.temperature, d.top_p, d.top_k, d.min_p, d.repetition_penalty, d.presence_penalty,
             d.frequency_penalty, d.max_tokens, TOKAMAK_RANDOM_SEED, d.n, nullptr, 0, 0};
}

tokamak_status tokamak_engine_add_request(tokamak_engine* engine, const char* prompt,
                                          const tokamak_sampling_params* params, int64_t* request_id) {
  return guarded(TOKAMAK_ERROR_INVALID_ARGUMENT, [&] {
    const std::shared_ptr<Engine> e = engine_of(engine);
    require(prompt, "prompt");
    const int64_t id = e->add_request(prompt, params_of(params));
    if (request_id != nullptr) *request_id = id;
  });
}

tokamak_status tokamak_engine_add_chat(tokamak_engine* engine, const tokamak_chat_message* messages,
                                       size_t n_messages, const tokamak_sampling_params* params,
                                       int64_t* request_id) {
  return guarded(TOKAMAK_ERROR_INVALID_ARGUMENT, [&] {
    const std::shared_ptr<Engine> e = engine_of(engine);
    if (n_messages > 0) require(messages, "messages (with n_messages > 0)");
    std::vector<ChatMessage> chat;
    for (size_t i = 0; i < n_messages; ++i) {
      if (messages[i].role == nullptr || messages[i].content == nullptr) {
        throw Failure{TOKAMAK_ERROR_INVALID_ARGUMENT, "messages[" + std::to_string(i) + "] has a NULL role or content"};
      }
      chat.push_back({messages[i].role, messages[i].content});
    }
    const int64_t id = e->add_chat_request(chat, params_of(params));
    if (request_id != nullptr) *request_id = id;
  });
}

tokamak_status tokamak_engine_abort(tokamak_engine* engine, int64_t request_id) {
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    if (!engine_of(engine)->abort(request_id)) {
      throw Failure{TOKAMAK_ERROR_INVALID_ARGUMENT,
                    "request " + std::to_string(request_id) + " is unknown or has finished"};
    }
  });
}

tokamak_status tokamak_engine_step(tokamak_engine* engine, tokamak_stream_callback callback, void* user,
                                   int32_t* has_unfinished) {
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    const std::shared_ptr<Engine> e = engine_of(engine);
    for (const RequestOutput& o : e->step()) {
      if (callback != nullptr) deliver(o, callback, user);
    }
    if (has_unfinished != nullptr) *has_unfinished = e->has_unfinished() ? 1 : 0;
  });
}

tokamak_status tokamak_generate(tokamak_engine* engine, const char* prompt, const tokamak_sampling_params* params,
                                tokamak_stream_callback callback, void* user) {
  int64_t id = 0;
  if (const tokamak_status s = tokamak_engine_add_request(engine, prompt, params, &id); s != TOKAMAK_OK) return s;
  return guarded(TOKAMAK_ERROR_RUNTIME, [&] {
    const std::shared_ptr<Engine> e = engine_of(engine);
    for (bool done = false; !done && e->has_unfinished();) {
      for (const RequestOutput& o : e->step()) {
        if (o.request_id != id) continue;
        if (callback != nullptr) deliver(o, callback, user);
        done = o.finished;
      }
    }
  });
}

}  // extern "C"
