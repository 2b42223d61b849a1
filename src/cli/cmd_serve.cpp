// tokamak serve: the OpenAI-compatible HTTP server (src/server). Listens
// first, so /health says 503 while the model loads; then one Engine on an
// engine thread, HTTP threads for the connections. SIGINT / SIGTERM drain:
// new requests get 503, running ones finish (up to --shutdown-timeout, then
// they are aborted), and the process exits 0.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <pthread.h>

#include "cli/args.h"
#include "cli/engine_options.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "engine/engine.h"
#include "server/engine_worker.h"
#include "server/http_server.h"
#include "server/metrics.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kServeOptions[] = {
    {"-m,--model", "FILE", "model file: GGUF or llama2.c .bin"},
    {"-hf", "REPO:FILE", "a GGUF file of a Hugging Face hub repo, cached in ~/.cache/tokamak"},
    {"-z,--tokenizer", "FILE", "llama2.c tokenizer.bin (for .bin checkpoints)"},
    {"--host", "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)"},
    {"--port", "PORT", "port to listen on; 0 = any free one (default 8080)"},
    {"--served-model-name", "NAME", "the model's name in the API (default: the file name without extension)"},
    {"--api-key", "KEY", "require \"Authorization: Bearer KEY\" (also $TOKAMAK_API_KEY); /health and /metrics stay open"},
    {"--max-queue", "N", "requests waiting beyond --max-num-seqs running ones; more get 429 (default 256)"},
    {"--max-request-bytes", "N", "largest request body; larger gets 413 (default 1048576)"},
    {"--request-timeout", "S", "seconds a request may take from arrival; then it is aborted (default 600)"},
    {"--shutdown-timeout", "S", "on SIGINT/SIGTERM, seconds running requests may finish (default 30)"},
};

// SIGINT and SIGTERM are blocked in every thread (the mask is inherited) and
// taken by sigwait in main, so no handler runs inside a library call.
sigset_t termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int serve_main(int argc, char** argv) {
  const std::vector<OptionSpec> options = with_engine_options(kServeOptions);
  const ParsedArgs args = ParsedArgs::parse(options, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("serve", "-m MODEL [--host ADDR] [--port PORT] [options]", options).c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty()) throw UsageError("unexpected argument '" + args.positional()[0] + "'");
  engine::EngineOptions engine_options = engine_options_from_args(args);
  // The whole pool resident from the start: short RAM fails now, not under
  // load, and resident memory stays flat while the prefix cache fills it.
  engine_options.reserve_kv_memory = true;
  server::ServerOptions server_options;
  server_options.host = args.get_or("--host", server_options.host);
  server_options.port = static_cast<int>(args.get_int("--port", server_options.port, 0, 65535));
  server_options.max_request_bytes =
      static_cast<size_t>(args.get_int("--max-request-bytes", 1 << 20, 64, int64_t{1} << 32));
  const char* env_key = std::getenv("TOKAMAK_API_KEY");
  server_options.api_key = args.get_or("--api-key", env_key != nullptr ? env_key : "");
  server::WorkerOptions worker_options;
  worker_options.max_queue = static_cast<int32_t>(args.get_int("--max-queue", worker_options.max_queue, 0, 1 << 20));
  worker_options.request_timeout = args.get_float("--request-timeout", worker_options.request_timeout, 0.001, 1e9);
  const double shutdown_timeout = args.get_float("--shutdown-timeout", 30.0, 0.0, 1e9);
  // A connection thread for every request the worker admits, and spare ones
  // for probes, metrics and requests it will refuse (429).
  server_options.http_threads = static_cast<int>(
      std::min<int64_t>(int64_t{engine_options.max_num_seqs} + worker_options.max_queue + 16, 4096));

  const sigset_t signals = termination_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The model's path is resolved (downloaded if need be) before listening:
  // the served name comes from it.
  const std::filesystem::path model_path = resolve_model_path(args);
  // Split across processes, every rank loads its shard before rank 0 listens
  // (the others never do); alone, the server listens while the model loads.
  std::optional<ParallelModel> loaded;
  if (ParallelModel::requested(args)) {
    loaded.emplace(args, model_path);
    if (loaded->worker()) return loaded->serve(engine_options.threads);
  }
  server_options.served_model_name = args.get_or("--served-model-name", model_path.stem().string());
  server::Metrics metrics;
  server::HttpServer http(server_options, metrics);
  const int port = http.bind();
  http.start();
  std::fprintf(stderr, "listening on http://%s:%d\n", server_options.host.c_str(), port);

  if (!loaded) loaded.emplace(args, model_path);
  const Model& model = loaded->model();
  const Tokenizer tokenizer = load_tokenizer(model, model_path, args.get("--tokenizer"));
  const std::unique_ptr<Model> draft = load_draft_model(args, tokenizer, engine_options);
  engine::Engine engine(model, tokenizer, engine_options);
  server::EngineWorker worker(engine, metrics, worker_options);
  http.attach(engine, worker);
  const kv::BlockPool& pool = engine.kv_cache().pool();
  std::fprintf(stderr, "serving %s as '%s' (max_model_len %d, max_num_seqs %d, KV cache %d blocks, %.1f MiB)\n",
               model_path.string().c_str(), server_options.served_model_name.c_str(), engine.max_model_len(),
               engine.options().max_num_seqs, pool.n_blocks(), static_cast<double>(pool.capacity_bytes()) / (1 << 20));

  int signal = 0;
  sigwait(&signals, &signal);
  std::fprintf(stderr, "%s: finishing running requests (at most %g s), refusing new ones\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM", shutdown_timeout);
  worker.shutdown(shutdown_timeout);
  http.drain(5.0);  // the streams' last chunks, usage and [DONE]
  http.stop();
  std::fprintf(stderr, "stopped\n");
  return 0;
}

}  // namespace

int serve_command(int argc, char** argv) { return serve_main(argc, argv); }

}  // namespace tokamak::cli
