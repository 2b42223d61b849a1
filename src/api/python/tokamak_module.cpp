// The Python module `tokamak` (pybind11) over the public C++ API, shaped as
// vLLM's offline API:
//
//   llm = tokamak.LLM(model="stories260K.gguf", kv_memory="64M")
//   outputs = llm.generate(["Once upon a time"], tokamak.SamplingParams(temperature=0, max_tokens=32))
//   print(outputs[0].outputs[0].text)
//
// One Engine per LLM, driven under the LLM's mutex with the GIL released, so
// other Python threads run while it steps. Outputs are routed by request id:
// a generate() in one thread and a stream in another each see only their own.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tokamak/tokamak.hpp"

namespace py = pybind11;
using namespace tokamak::api;

namespace {

// vLLM's CompletionOutput: one completion (or, from a stream, its new part).
struct PyCompletion {
  int32_t index = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::optional<std::string> finish_reason;  // None while running
  std::optional<std::vector<std::map<int32_t, float>>> logprobs;  // per token: {token id: logprob}, chosen first
};

// vLLM's RequestOutput.
struct PyRequestOutput {
  std::string request_id;
  std::optional<std::string> prompt;
  int64_t num_prompt_tokens = 0;
  std::vector<PyCompletion> outputs;
  bool finished = false;
};

PyCompletion completion_of(int32_t index, std::string text, std::vector<int32_t> ids, const std::string& finish,
                           const std::vector<TokenLogprobs>& logprobs, bool want_logprobs) {
  PyCompletion c{index, std::move(text), std::move(ids), std::nullopt, std::nullopt};
  if (!finish.empty()) c.finish_reason = finish;
  if (want_logprobs) {
    c.logprobs.emplace();
    for (const TokenLogprobs& t : logprobs) {
      std::map<int32_t, float>& m = c.logprobs->emplace_back();
      m[t.chosen.token] = t.chosen.logprob;
      for (const Logprob& l : t.top) m.emplace(l.token, l.logprob);
    }
  }
  return c;
}

struct LLMState {
  Model model;
  Engine engine;
  std::mutex mu;  // one thread drives the engine
  std::unordered_map<int64_t, std::deque<RequestOutput>> inbox;  // outputs of live requests, not yet taken

  LLMState(const Model& m, const EngineOptions& o) : model(m), engine(m, o) {}

  // With mu held: one step, its outputs to their requests' inboxes.
  void step_locked() {
    for (RequestOutput& o : engine.step()) {
      const auto it = inbox.find(o.request_id);
      if (it != inbox.end()) it->second.push_back(std::move(o));
    }
  }
  // With mu held: ends requests nobody will read.
  void drop_locked(const std::vector<int64_t>& ids) {
    for (const int64_t id : ids) {
      if (inbox.erase(id) > 0) engine.abort(id);
    }
  }
};

// A prompt: text, or a conversation.
using PromptInput = std::variant<std::string, std::vector<ChatMessage>>;

std::vector<ChatMessage> messages_of(const py::list& list) {
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const py::dict m = list[i].cast<py::dict>();
    for (const char* key : {"role", "content"}) {
      if (!m.contains(key)) throw Error("messages[" + std::to_string(i) + "] has no '" + key + "'");
    }
    out.push_back({m["role"].cast<std::string>(), m["content"].cast<std::string>()});
  }
  return out;
}

int64_t add(LLMState& s, const PromptInput& prompt, const SamplingParams& params) {
  if (const auto* text = std::get_if<std::string>(&prompt)) return s.engine.add_request(*text, params);
  return s.engine.add_chat_request(std::get<std::vector<ChatMessage>>(prompt), params);
}

// vLLM's speculative_config: {"model": "draft.gguf", "num_speculative_tokens": 5}
// or {"method": "ngram", "prompt_lookup_max": 3, "num_speculative_tokens": 5}.
void set_speculative(EngineOptions& o, const py::object& config) {
  if (config.is_none()) return;
  if (!py::isinstance<py::dict>(config)) throw Error("speculative_config must be a dict or None");
  std::string method;
  for (const auto& [key_object, value] : config.cast<py::dict>()) {
    const std::string key = py::str(key_object);
    if (key == "model") o.speculative_model = value.cast<std::string>();
    else if (key == "method") method = value.cast<std::string>();
    else if (key == "num_speculative_tokens") o.num_speculative_tokens = value.cast<int32_t>();
    else if (key == "prompt_lookup_max") o.prompt_lookup = value.cast<int32_t>();
    else throw Error("speculative_config: unknown key '" + key + "' (model, method, num_speculative_tokens, prompt_lookup_max)");
  }
  if (method == "ngram") {
    if (o.prompt_lookup == 0) o.prompt_lookup = 3;
  } else if (!method.empty() && method != "draft_model") {
    throw Error("speculative_config: method '" + method + "' is not ngram or draft_model");
  }
  if (method != "ngram" && o.speculative_model.empty()) {
    throw Error("speculative_config needs a \"model\" (a draft GGUF) or \"method\": \"ngram\"");
  }
}

class PyLLM {
 public:
  PyLLM(const std::string& model, const std::string& tokenizer, const py::object& kv_memory, int32_t max_model_len,
        int32_t block_size, bool enable_prefix_caching, const std::string& kv_cache_dtype, int threads,
        int32_t max_num_seqs, int32_t max_num_batched_tokens, const py::object& speculative_config) {
    EngineOptions o;
    set_speculative(o, speculative_config);
    if (!kv_memory.is_none()) o.kv_memory = py::str(kv_memory).cast<std::string>();  // 67108864 or "64M" or "80%"
    o.max_model_len = max_model_len;
    o.block_size = block_size;
    o.enable_prefix_caching = enable_prefix_caching;
    o.kv_cache_dtype = kv_cache_dtype;
    o.threads = threads;
    o.max_num_seqs = max_num_seqs;
    o.max_num_batched_tokens = max_num_batched_tokens;
    py::gil_scoped_release nogil;
    state_ = std::make_shared<LLMState>(Model::load(model, tokenizer), o);
  }

  // Runs every prompt to completion; results in order.
  std::vector<PyRequestOutput> run(const std::vector<PromptInput>& prompts, const std::vector<SamplingParams>& params) {
    std::vector<RequestResult> results(prompts.size());
    {
      py::gil_scoped_release nogil;
      const std::lock_guard lock(state_->mu);
      std::vector<int64_t> ids;
      try {
        for (size_t i = 0; i < prompts.size(); ++i) {
          ids.push_back(add(*state_, prompts[i], params[i]));
          state_->inbox[ids.back()];
        }
        size_t left = ids.size();
        while (left > 0) {
          if (!state_->engine.has_unfinished()) throw Error("the engine stopped with requests unfinished");
          state_->step_locked();
          for (size_t i = 0; i < ids.size(); ++i) {
            const auto it = state_->inbox.find(ids[i]);
            if (it == state_->inbox.end()) continue;  // finished before
            bool finished = false;
            for (; !it->second.empty(); it->second.pop_front()) {
              accumulate(results[i], it->second.front());
              finished = finished || it->second.front().finished;
            }
            if (finished) {
              state_->inbox.erase(it);
              --left;
            }
          }
        }
      } catch (...) {
        state_->drop_locked(ids);
        throw;
      }
    }
    std::vector<PyRequestOutput> out;
    for (size_t i = 0; i < prompts.size(); ++i) out.push_back(output_of(results[i], prompts[i], params[i]));
    return out;
  }

  std::shared_ptr<LLMState> state() const { return state_; }
  std::string render(const PromptInput& prompt) const {
    if (const auto* text = std::get_if<std::string>(&prompt)) return *text;
    return state_->model.apply_chat_template(std::get<std::vector<ChatMessage>>(prompt));
  }

 private:
  PyRequestOutput output_of(const RequestResult& r, const PromptInput& prompt, const SamplingParams& params) const {
    PyRequestOutput out{std::to_string(r.request_id), render(prompt), r.prompt_tokens, {}, true};
    for (const Completion& c : r.completions) {
      out.outputs.push_back(
          completion_of(c.index, c.text, c.token_ids, c.finish_reason, c.logprobs, params.logprobs >= 0));
    }
    return out;
  }

  std::shared_ptr<LLMState> state_;
};

// llm.stream(prompt, params): each step's new text of one request, as
// vLLM's RequestOutputKind.DELTA. Dropping the iterator early aborts the request.
class PyStream {
 public:
  PyStream(const PyLLM& llm, const PromptInput& prompt, const SamplingParams& params)
      : state_(llm.state()), prompt_(llm.render(prompt)), want_logprobs_(params.logprobs >= 0) {
    py::gil_scoped_release nogil;
    const std::lock_guard lock(state_->mu);
    id_ = add(*state_, prompt, params);
    state_->inbox[id_];
  }
  ~PyStream() {
    if (done_) return;
    py::gil_scoped_release nogil;
    const std::lock_guard lock(state_->mu);
    state_->drop_locked({id_});
  }
  PyStream(const PyStream&) = delete;
  PyStream& operator=(const PyStream&) = delete;

  PyRequestOutput next() {
    if (done_) throw py::stop_iteration();
    RequestOutput o;
    {
      py::gil_scoped_release nogil;
      const std::lock_guard lock(state_->mu);
      std::deque<RequestOutput>& queue = state_->inbox.at(id_);
      try {
        while (queue.empty()) state_->step_locked();
      } catch (...) {
        state_->drop_locked({id_});
        done_ = true;
        throw;
      }
      o = std::move(queue.front());
      queue.pop_front();
      if (o.finished) {
        state_->inbox.erase(id_);
        done_ = true;
      }
    }
    PyRequestOutput out{std::to_string(o.request_id), prompt_, o.prompt_tokens, {}, o.finished};
    for (CompletionDelta& d : o.completions) {
      out.outputs.push_back(completion_of(d.index, std::move(d.text), std::move(d.token_ids), d.finish_reason,
                                          d.logprobs, want_logprobs_));
    }
    return out;
  }

 private:
  std::shared_ptr<LLMState> state_;
  std::string prompt_;
  bool want_logprobs_;
  int64_t id_ = 0;
  bool done_ = false;
};

std::vector<SamplingParams> params_for(size_t n, const py::object& params) {
  if (params.is_none()) return std::vector<SamplingParams>(n);
  if (py::isinstance<SamplingParams>(params)) return std::vector<SamplingParams>(n, params.cast<SamplingParams>());
  std::vector<SamplingParams> list = params.cast<std::vector<SamplingParams>>();
  if (list.size() != n) {
    throw Error(std::to_string(list.size()) + " sampling params for " + std::to_string(n) + " prompts");
  }
  return list;
}

std::string repr_text(const std::string& s) { return py::repr(py::str(s)).cast<std::string>(); }

}  // namespace

PYBIND11_MODULE(tokamak, m) {
  m.doc() = "tokamak: LLM inference on the CPU, with vLLM's offline API (LLM, SamplingParams)";
  m.attr("__version__") = version();
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  py::class_<SamplingParams>(m, "SamplingParams")
      .def(py::init([](float temperature, float top_p, int32_t top_k, float min_p, int32_t max_tokens,
                       std::optional<uint64_t> seed, int32_t n, const py::object& stop,
                       std::optional<std::vector<int32_t>> stop_token_ids, bool ignore_eos,
                       std::optional<int32_t> logprobs, float repetition_penalty, float presence_penalty,
                       float frequency_penalty) {
             SamplingParams p;
             p.temperature = temperature;
             p.top_p = top_p;
             p.top_k = top_k;
             p.min_p = min_p;
             p.max_tokens = max_tokens;
             p.seed = seed;
             p.n = n;
             if (py::isinstance<py::str>(stop)) p.stop = {stop.cast<std::string>()};
             else if (!stop.is_none()) p.stop = stop.cast<std::vector<std::string>>();
             p.stop_token_ids = stop_token_ids.value_or(std::vector<int32_t>{});
             p.ignore_eos = ignore_eos;
             p.logprobs = logprobs.value_or(-1);
             p.repetition_penalty = repetition_penalty;
             p.presence_penalty = presence_penalty;
             p.frequency_penalty = frequency_penalty;
             return p;
           }),
           py::arg("temperature") = 1.0f, py::arg("top_p") = 1.0f, py::arg("top_k") = 0, py::arg("min_p") = 0.0f,
           py::arg("max_tokens") = 16, py::arg("seed") = py::none(), py::arg("n") = 1, py::arg("stop") = py::none(),
           py::arg("stop_token_ids") = py::none(), py::arg("ignore_eos") = false, py::arg("logprobs") = py::none(),
           py::arg("repetition_penalty") = 1.0f, py::arg("presence_penalty") = 0.0f,
           py::arg("frequency_penalty") = 0.0f)
      .def_readwrite("temperature", &SamplingParams::temperature)
      .def_readwrite("top_p", &SamplingParams::top_p)
      .def_readwrite("top_k", &SamplingParams::top_k)
      .def_readwrite("min_p", &SamplingParams::min_p)
      .def_readwrite("max_tokens", &SamplingParams::max_tokens)
      .def_readwrite("seed", &SamplingParams::seed)
      .def_readwrite("n", &SamplingParams::n)
      .def_readwrite("stop", &SamplingParams::stop)
      .def_readwrite("stop_token_ids", &SamplingParams::stop_token_ids)
      .def_readwrite("ignore_eos", &SamplingParams::ignore_eos)
      .def_property(
          "logprobs", [](const SamplingParams& p) { return p.logprobs < 0 ? std::nullopt : std::optional(p.logprobs); },
          [](SamplingParams& p, std::optional<int32_t> k) { p.logprobs = k.value_or(-1); })
      .def_readwrite("repetition_penalty", &SamplingParams::repetition_penalty)
      .def_readwrite("presence_penalty", &SamplingParams::presence_penalty)
      .def_readwrite("frequency_penalty", &SamplingParams::frequency_penalty)
      .def("__repr__", [](const SamplingParams& p) {
        return "SamplingParams(temperature=" + std::to_string(p.temperature) + ", top_p=" + std::to_string(p.top_p) +
               ", top_k=" + std::to_string(p.top_k) + ", max_tokens=" + std::to_string(p.max_tokens) +
               ", n=" + std::to_string(p.n) + ")";
      });

  py::class_<PyCompletion>(m, "CompletionOutput")
      .def_readonly("index", &PyCompletion::index)
      .def_readonly("text", &PyCompletion::text)
      .def_readonly("token_ids", &PyCompletion::token_ids)
      .def_readonly("finish_reason", &PyCompletion::finish_reason)
      .def_readonly("logprobs", &PyCompletion::logprobs)
      .def("__repr__", [](const PyCompletion& c) {
        return "CompletionOutput(index=" + std::to_string(c.index) + ", text=" + repr_text(c.text) +
               ", finish_reason=" + c.finish_reason.value_or("None") + ")";
      });

  py::class_<PyRequestOutput>(m, "RequestOutput")
      .def_readonly("request_id", &PyRequestOutput::request_id)
      .def_readonly("prompt", &PyRequestOutput::prompt)
      .def_readonly("num_prompt_tokens", &PyRequestOutput::num_prompt_tokens)
      .def_readonly("outputs", &PyRequestOutput::outputs)
      .def_readonly("finished", &PyRequestOutput::finished)
      .def("__repr__", [](const PyRequestOutput& r) {
        return "RequestOutput(request_id=" + r.request_id + ", outputs=" + std::to_string(r.outputs.size()) +
               " completions, finished=" + (r.finished ? "True" : "False") + ")";
      });

  py::class_<PyStream>(m, "Stream")
      .def("__iter__", [](PyStream& s) -> PyStream& { return s; })
      .def("__next__", &PyStream::next);

  py::class_<PyLLM>(m, "LLM")
      .def(py::init<const std::string&, const std::string&, const py::object&, int32_t, int32_t, bool,
                    const std::string&, int, int32_t, int32_t, const py::object&>(),
           py::arg("model"), py::arg("tokenizer") = "", py::arg("kv_memory") = py::none(),
           py::arg("max_model_len") = 0, py::arg("block_size") = 16, py::arg("enable_prefix_caching") = true,
           py::arg("kv_cache_dtype") = "f16", py::arg("threads") = 0, py::arg("max_num_seqs") = 256,
           py::arg("max_num_batched_tokens") = 2048, py::arg("speculative_config") = py::none())
      .def(
          "generate",
          [](PyLLM& llm, const py::object& prompts, const py::object& params) {
            std::vector<PromptInput> list;
            if (py::isinstance<py::str>(prompts)) list.emplace_back(prompts.cast<std::string>());
            else for (const py::handle p : prompts) list.emplace_back(p.cast<std::string>());
            return llm.run(list, params_for(list.size(), params));
          },
          py::arg("prompts"), py::arg("sampling_params") = py::none(),
          "Completes each prompt (a str or a list of them); a list of RequestOutput in order.")
      .def(
          "chat",
          [](PyLLM& llm, const py::list& messages, const py::object& params) {
            std::vector<PromptInput> list;
            const bool many = !messages.empty() && py::isinstance<py::list>(messages[0]);
            if (many) for (const py::handle c : messages) list.emplace_back(messages_of(c.cast<py::list>()));
            else list.emplace_back(messages_of(messages));
            return llm.run(list, params_for(list.size(), params));
          },
          py::arg("messages"), py::arg("sampling_params") = py::none(),
          "Replies to a conversation ([{'role': ..., 'content': ...}], or a list of them) through the chat template.")
      .def(
          "stream",
          [](PyLLM& llm, const py::object& prompt, const py::object& params) {
            PromptInput input;
            if (py::isinstance<py::str>(prompt)) input = prompt.cast<std::string>();
            else input = messages_of(prompt.cast<py::list>());
            return std::make_unique<PyStream>(llm, input, params_for(1, params)[0]);
          },
          py::arg("prompt"), py::arg("sampling_params") = py::none(),
          "An iterator of RequestOutput whose outputs hold each step's new text and tokens.")
      .def("apply_chat_template",
           [](const PyLLM& llm, const py::list& messages) { return llm.render(messages_of(messages)); });
}
