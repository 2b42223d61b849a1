#include "cli/commands.h"

#include <array>

namespace tokamak::cli {

int batch_command(int argc, char** argv);
int serve_command(int argc, char** argv);
int bench_command(int argc, char** argv);
int bench_serve_command(int argc, char** argv);
int chat_command(int argc, char** argv);
int convert_command(int argc, char** argv);
int logits_command(int argc, char** argv);
int make_model_command(int argc, char** argv);
int perplexity_command(int argc, char** argv);
int quantize_command(int argc, char** argv);
int run_command(int argc, char** argv);
int tokenize_command(int argc, char** argv);

std::span<const Command> commands() {
  static constexpr std::array<Command, 12> kCommands{{
      {"run", "generate text from a prompt", run_command},
      {"chat", "talk with a model, turn by turn, in its chat template", chat_command},
      {"tokenize", "print the token ids of a text", tokenize_command},
      {"logits", "write the logits of a token sequence as raw float32", logits_command},
      {"quantize", "rewrite a GGUF model with its weights in another type", quantize_command},
      {"convert", "convert a Hugging Face model folder to GGUF", convert_command},
      {"perplexity", "measure a model's perplexity over a text (llama-perplexity's method) and KL divergence",
       perplexity_command},
      {"bench", "measure prefill and decode speed against the memory-bandwidth roofline", bench_command},
      {"batch", "generate for a JSONL file of requests, many at once (offline serving)", batch_command},
      {"serve", "an OpenAI-compatible HTTP server (completions, chat, streaming, metrics)", serve_command},
      {"bench-serve", "measure serving throughput and latency on a synthetic workload", bench_serve_command},
      {"make-model", "write a random-weight GGUF model in the shapes of a real one", make_model_command},
  }};
  return kCommands;
}

}  // namespace tokamak::cli
