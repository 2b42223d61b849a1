"""The Python module `tokamak` against references: `tokamak run` (the built
command line) for greedy text, stop strings and chat prompts, and each prompt
run alone for a batch of 32. Run by ctest (python_api) with PYTHONPATH at the
built module, TOKAMAK_BIN at the command line and TOKAMAK_TEST_DATA at ../shared."""
import os
import pathlib
import subprocess
import threading

import pytest

import tokamak

REPO = pathlib.Path(__file__).resolve().parents[3]
DATA = pathlib.Path(os.environ.get("TOKAMAK_TEST_DATA", REPO.parent / "shared"))
MODEL = str(DATA / "models" / "stories260K" / "stories260K.gguf")
BIN = os.environ.get("TOKAMAK_BIN", str(REPO / "build" / "release" / "tokamak"))


def run_cli(prompt, n, *extra):
    """`tokamak run`'s greedy text: the reference."""
    done = subprocess.run([BIN, "run", "-m", MODEL, "-p", prompt, "-n", str(n), "--temp", "0", *extra],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def greedy(max_tokens, **kw):
    return tokamak.SamplingParams(temperature=0, max_tokens=max_tokens, **kw)


@pytest.fixture(scope="module")
def llm():
    return tokamak.LLM(model=MODEL, kv_memory="64M", max_model_len=256, block_size=16,
                       enable_prefix_caching=True, threads=2)


def test_greedy_equals_tokamak_run(llm):
    [out] = llm.generate(["Once upon a time"], greedy(40))
    assert out.prompt == "Once upon a time"
    assert out.finished
    [c] = out.outputs
    assert c.text == run_cli("Once upon a time", 40)
    assert len(c.token_ids) == 40
    assert c.finish_reason == "length"
    assert c.logprobs is None


def test_n2_shares_the_prompt_and_samples_each_completion(llm):
    [g] = llm.generate("The cat", greedy(20, n=2))
    assert [c.index for c in g.outputs] == [0, 1]
    reference = run_cli("The cat", 20)
    assert [c.text for c in g.outputs] == [reference, reference]  # greedy: both take the same path
    sampled = tokamak.SamplingParams(temperature=1.0, max_tokens=20, n=2, seed=7)
    [a] = llm.generate("The cat", sampled)
    [b] = llm.generate("The cat", sampled)
    assert [c.text for c in a.outputs] == [c.text for c in b.outputs]  # one seed, one result
    assert a.outputs[0].token_ids != a.outputs[1].token_ids  # each completion its own RNG stream
    assert all(len(c.token_ids) == 20 for c in a.outputs)


def test_stop_strings(llm):
    full = run_cli("Once upon a time", 40)
    stop = full[len(full) // 2:len(full) // 2 + 4]
    [out] = llm.generate("Once upon a time", greedy(40, stop=[stop]))
    [c] = out.outputs
    assert c.text == full[:full.index(stop)]
    assert c.text == run_cli("Once upon a time", 40, "--stop", stop)
    assert c.finish_reason == "stop"


def test_chat_renders_the_template_and_replies(llm):
    messages = [{"role": "user", "content": "Tell me a story"}]
    # stories260K has no template of its own: ChatML, written out by hand.
    rendered = "<|im_start|>user\nTell me a story<|im_end|>\n<|im_start|>assistant\n"
    assert llm.apply_chat_template(messages) == rendered
    [out] = llm.chat(messages, greedy(24))
    assert out.prompt == rendered
    assert out.outputs[0].text == run_cli(rendered, 24, "--parse-special")
    assert len(out.outputs[0].token_ids) > 0
    two = llm.chat([messages, messages], greedy(24))
    assert [o.outputs[0].text for o in two] == [out.outputs[0].text] * 2


def test_streaming_yields_each_steps_text(llm):
    chunks = list(llm.stream("Once upon a time", greedy(40)))
    assert "".join(c.outputs[0].text for c in chunks if c.outputs) == run_cli("Once upon a time", 40)
    assert [c.finished for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert sum(len(c.outputs[0].token_ids) for c in chunks if c.outputs) == 40
    assert chunks[-1].outputs[0].finish_reason == "length"
    assert all(c.outputs[0].finish_reason is None for c in chunks[:-1] if c.outputs)


def test_stream_dropped_early_frees_its_request(llm):
    it = llm.stream("Once upon a time", greedy(40))
    next(it)
    del it  # aborts the request; the engine goes on serving others
    [out] = llm.generate("Once upon a time", greedy(8))
    assert len(out.outputs[0].token_ids) == 8


def test_speculative_decoding_keeps_greedy_text():
    """vLLM's speculative_config: a Q4_0 draft of the model, and prompt lookup; greedy text as `tokamak run`."""
    draft = str(DATA / "fixtures" / "models" / "stories260K-q4_0.gguf")
    want = run_cli("Once upon a time", 60)
    for config in ({"model": draft, "num_speculative_tokens": 4},
                   {"method": "ngram", "prompt_lookup_max": 2, "num_speculative_tokens": 3}):
        spec = tokamak.LLM(model=MODEL, kv_memory="64M", max_model_len=256, threads=2, speculative_config=config)
        [out] = spec.generate(["Once upon a time"], greedy(60))
        assert out.outputs[0].text == want, config
    with pytest.raises(tokamak.Error, match="unknown key 'draft'"):
        tokamak.LLM(model=MODEL, kv_memory="64M", speculative_config={"draft": draft})
    with pytest.raises(tokamak.Error, match="method 'eagle'"):
        tokamak.LLM(model=MODEL, kv_memory="64M", speculative_config={"method": "eagle"})


def test_missing_model_raises():
    with pytest.raises(tokamak.Error, match="/nonexistent/model.gguf does not exist"):
        tokamak.LLM(model="/nonexistent/model.gguf")


def test_bad_parameters_raise_with_the_value(llm):
    with pytest.raises(tokamak.Error, match="top_p"):
        llm.generate("Once", tokamak.SamplingParams(top_p=1.5))
    with pytest.raises(tokamak.Error, match="kv_cache_dtype 'q9'"):
        tokamak.LLM(model=MODEL, kv_cache_dtype="q9")
    with pytest.raises(tokamak.Error, match="no 'content'"):
        llm.chat([{"role": "user"}])


def test_logprobs(llm):
    assert tokamak.SamplingParams().logprobs is None and greedy(8, logprobs=2).logprobs == 2
    [out] = llm.generate("Once upon a time", greedy(8, logprobs=2))
    c = out.outputs[0]
    assert len(c.logprobs) == len(c.token_ids) == 8
    for token, probs in zip(c.token_ids, c.logprobs):
        assert token in probs and 1 <= len(probs) <= 3
        assert probs[token] == max(probs.values()) and all(v <= 0 for v in probs.values())


def test_batch_of_32_equals_each_prompt_alone(llm):
    subjects = ["cat", "dog", "girl", "boy", "bird", "tree", "fish", "king"]
    prompts = [f"{start} {s}" for start in ("Once upon a time there was a", "The little", "One day a", "Lily saw a")
               for s in subjects]
    assert len(prompts) == 32
    params = [tokamak.SamplingParams(temperature=0.8, top_k=40, max_tokens=24, seed=i) for i in range(32)]
    batch = llm.generate(prompts, params)
    for prompt, p, out in zip(prompts, params, batch):
        [alone] = llm.generate(prompt, p)
        assert out.prompt == prompt
        assert out.outputs[0].token_ids == alone.outputs[0].token_ids, prompt
        assert out.outputs[0].text == alone.outputs[0].text
    assert len({out.outputs[0].text for out in batch}) > 24  # 32 different continuations, not one


def test_gil_is_released_while_stepping(llm):
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    before = count[0]
    llm.generate(["Once upon a time"] * 8, greedy(120))
    during = count[0] - before
    stop.set()
    t.join(timeout=10)
    assert during > 1000  # the other thread ran while the engine stepped
