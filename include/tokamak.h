/* tokamak's C API: load a model, run a continuous-batching engine over it,
 * stream the generated text through a callback.
 *
 * Handles are opaque and checked on every call: a freed, foreign or made-up
 * handle gives TOKAMAK_ERROR_INVALID_HANDLE, never a crash. Every function
 * returns a status; on failure tokamak_last_error() says what was wrong and
 * the value. Nothing here prints or exits.
 *
 *   tokamak_model* model;
 *   if (tokamak_model_load("stories260K.gguf", NULL, &model) != TOKAMAK_OK) puts(tokamak_last_error());
 */
#ifndef TOKAMAK_H
#define TOKAMAK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tokamak_status {
  TOKAMAK_OK = 0,
  TOKAMAK_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, an option or parameter out of range */
  TOKAMAK_ERROR_INVALID_HANDLE = 2,   /* a handle that was freed, or never came from this library */
  TOKAMAK_ERROR_LOAD = 3,             /* the model file is missing or malformed */
  TOKAMAK_ERROR_RUNTIME = 4,          /* the engine failed while running */
  TOKAMAK_ERROR_OUT_OF_MEMORY = 5
} tokamak_status;

typedef struct tokamak_model tokamak_model;   /* a loaded model; shareable between threads */
typedef struct tokamak_engine tokamak_engine; /* an engine; driven by one thread at a time */

/* The library's version, "MAJOR.MINOR.PATCH"; static storage. Thread safe. */
const char* tokamak_version(void);
/* The message of this thread's last failed call ("" if none); valid until this thread's next call. Thread safe. */
const char* tokamak_last_error(void);
/* The status's name, e.g. "invalid handle"; static storage. Thread safe. */
const char* tokamak_status_name(tokamak_status status);

/* Loads a GGUF file (tokenizer_path NULL) or a llama2.c checkpoint (tokenizer_path NULL: tokenizer.bin
 * beside it) into *out; the caller owns it (tokamak_model_free). Thread safe. */
tokamak_status tokamak_model_load(const char* path, const char* tokenizer_path, tokamak_model** out);
/* Releases the caller's model handle; engines made from it keep the model alive. Thread safe. */
tokamak_status tokamak_model_free(tokamak_model* model);
/* The vocabulary size into *out. Thread safe. */
tokamak_status tokamak_model_n_vocab(tokamak_model* model, int32_t* out);

typedef struct tokamak_engine_options {
  const char* kv_memory;          /* "256M", "4G", "80%"; NULL: enough for max_num_seqs full sequences */
  int32_t max_model_len;          /* 0: the model's context, at most 4096 */
  int32_t max_num_seqs;           /* sequences running at once */
  int32_t max_num_batched_tokens; /* tokens per step */
  int32_t block_size;             /* tokens per KV block */
  int32_t enable_prefix_caching;  /* nonzero: reuse the KV of shared prompt prefixes */
  const char* kv_cache_dtype;     /* "f32", "f16", "bf16", "q8", "q4" */
  int32_t threads;                /* 0: all cores */
} tokamak_engine_options;

/* Fills *options with the defaults. Thread safe. */
void tokamak_engine_options_init(tokamak_engine_options* options);
/* Makes an engine over model into *out (options NULL: the defaults); the caller owns it
 * (tokamak_engine_free). Strings in options are copied. Thread safe. */
tokamak_status tokamak_engine_create(tokamak_model* model, const tokamak_engine_options* options,
                                     tokamak_engine** out);
/* Ends every request and releases the engine; not while another thread drives it. */
tokamak_status tokamak_engine_free(tokamak_engine* engine);

#define TOKAMAK_RANDOM_SEED UINT64_MAX

typedef struct tokamak_sampling_params {
  float temperature; /* 0: greedy */
  float top_p;       /* 1: off */
  int32_t top_k;     /* 0: off */
  float min_p;       /* 0: off */
  float repetition_penalty, presence_penalty, frequency_penalty;
  int32_t max_tokens;        /* per completion; -1: until max_model_len */
  uint64_t seed;             /* TOKAMAK_RANDOM_SEED: a fresh one */
  int32_t n;                 /* completions of the prompt */
  const char* const* stop;   /* n_stop strings that end a completion; copied */
  size_t n_stop;
  int32_t ignore_eos;        /* nonzero: end-of-text does not end a completion */
} tokamak_sampling_params;

/* Fills *params with vLLM's defaults (temperature 1, max_tokens 16). Thread safe. */
void tokamak_sampling_params_init(tokamak_sampling_params* params);

typedef struct tokamak_chat_message {
  const char* role;
  const char* content;
} tokamak_chat_message;

/* Queues a prompt (params NULL: the defaults); its id into *request_id (may be NULL).
 * The engine copies everything. One thread per engine. */
tokamak_status tokamak_engine_add_request(tokamak_engine* engine, const char* prompt,
                                          const tokamak_sampling_params* params, int64_t* request_id);
/* Queues a conversation rendered with the model's chat template. One thread per engine. */
tokamak_status tokamak_engine_add_chat(tokamak_engine* engine, const tokamak_chat_message* messages,
                                       size_t n_messages, const tokamak_sampling_params* params,
                                       int64_t* request_id);
/* Ends a request; the next step reports it with finish_reason "abort". One thread per engine. */
tokamak_status tokamak_engine_abort(tokamak_engine* engine, int64_t request_id);

/* One completion's progress in one step; every pointer is valid only during the callback. */
typedef struct tokamak_delta {
  int64_t request_id;
  int32_t index;              /* which of the request's n completions */
  const char* text;           /* the new text, NUL-terminated; text_len bytes */
  size_t text_len;
  const int32_t* token_ids;   /* the tokens sampled this step */
  size_t n_tokens;
  const char* finish_reason;  /* NULL while running; then "stop", "length" or "abort" */
} tokamak_delta;

/* Called for each completion that changed; user is the pointer given with it. */
typedef void (*tokamak_stream_callback)(void* user, const tokamak_delta* delta);

/* One engine step; calls callback (may be NULL) for every delta, on this thread. *has_unfinished
 * (may be NULL) says whether requests remain. One thread per engine. */
tokamak_status tokamak_engine_step(tokamak_engine* engine, tokamak_stream_callback callback, void* user,
                                   int32_t* has_unfinished);
/* Queues prompt and steps until it finishes, calling callback for its deltas (other requests'
 * deltas are dropped). One thread per engine. */
tokamak_status tokamak_generate(tokamak_engine* engine, const char* prompt, const tokamak_sampling_params* params,
                                tokamak_stream_callback callback, void* user);

#ifdef __cplusplus
}
#endif

#endif /* TOKAMAK_H */
