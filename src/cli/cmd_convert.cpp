// tokamak convert: a Hugging Face model folder (config.json, *.safetensors,
// tokenizer.json) to one GGUF file with llama.cpp's names and keys.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/std_streams.h"
#include "core/error.h"
#include "io/hf_convert.h"

namespace tokamak::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {"--type", "TYPE", "weight matrix type: f32, f16 (default), bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K..q6_K"},
    {"--name", "NAME", "general.name (default: the folder's name)"},
    {"-h,--help", "", "show this help"},
};

int convert_main(int argc, char** argv) {
  const ParsedArgs args = ParsedArgs::parse(kOptions, argc, argv);
  if (args.has("--help")) {
    std::fputs(usage_text("convert", "HF_DIR OUT.gguf [--type f16|q8_0|...]   (OUT.gguf - writes to stdout)", kOptions).c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 2) {
    throw UsageError("convert needs HF_DIR and OUT.gguf, got " + std::to_string(args.positional().size()) +
                     " arguments");
  }
  io::HfConvertOptions options;
  const std::string type = args.get_or("--type", "f16");
  const std::optional<DType> t = dtype_from_name(type);
  if (!t) throw UsageError("option --type: '" + type + "' is not a tensor type");
  options.type = *t;
  options.name = args.get_or("--name", "");
  const std::string& in = args.positional()[0];
  const std::string& out = args.positional()[1];
  io::OutputFile out_file = open_output(out, "OUT.gguf", true);
  const io::HfConvertResult r = io::convert_hf_to_gguf(in, out_file, options);
  out_file.commit();
  for (const std::string& note : r.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  std::fprintf(stderr, "%s -> %s: %s (general.architecture %s), tokenizer %s, %lld tensors, %s\n", in.c_str(),
               out_file.name().c_str(), r.hf_architecture.c_str(), r.architecture.c_str(), r.tokenizer_model.c_str(),
               static_cast<long long>(r.n_tensors), std::string(dtype_name(options.type)).c_str());
  return 0;
}

}  // namespace

int convert_command(int argc, char** argv) { return convert_main(argc, argv); }

}  // namespace tokamak::cli
