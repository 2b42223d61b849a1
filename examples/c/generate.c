/* Streams a greedy completion of a prompt through tokamak's C API.
 *   cc generate.c $(pkg-config --cflags --libs tokamak) -o generate
 *   ./generate model.gguf "Once upon a time" */
#include <stdio.h>
#include <tokamak.h>

static void print_text(void* user, const tokamak_delta* delta) {
  fwrite(delta->text, 1, delta->text_len, stdout);
  if (delta->finish_reason) snprintf(user, 16, "%s", delta->finish_reason); /* valid only here: copy */
}

int main(int argc, char** argv) {
  if (argc != 3) return fprintf(stderr, "usage: %s MODEL PROMPT\n", argv[0]), 2;
  tokamak_model* model = NULL;
  tokamak_engine* engine = NULL;
  tokamak_engine_options options;
  tokamak_engine_options_init(&options);
  options.kv_memory = "64M";
  tokamak_sampling_params params;
  tokamak_sampling_params_init(&params);
  params.temperature = 0.0f, params.max_tokens = 32;
  char finish[16] = "none";
  if (tokamak_model_load(argv[1], NULL, &model) != TOKAMAK_OK ||
      tokamak_engine_create(model, &options, &engine) != TOKAMAK_OK ||
      tokamak_generate(engine, argv[2], &params, print_text, finish) != TOKAMAK_OK) {
    fprintf(stderr, "error: %s\n", tokamak_last_error());
    return 1;
  }
  printf("\n[finish: %s]\n", finish);
  tokamak_engine_free(engine);
  tokamak_model_free(model);
  return 0;
}
