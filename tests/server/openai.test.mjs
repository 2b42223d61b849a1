// `tokamak serve` against the official `openai` client (plain fetch where the
// client hides what is checked: raw SSE framing, error bodies, odd requests).
// Model: stories260K (vocab 512, no chat template, so chat is ChatML). The
// reference texts are llama2.c's: its greedy 200-token story from BOS, and the
// token ids of "Once upon a time" from an independent Python tokenizer
// (../shared/models/SOURCES.md). Each describe() starts its own server with
// the flags it tests; after() kills whatever is left, also on failure.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';
import { get, killAll, metric, post, readSse, sleep, startServer, waitIdle } from './server.mjs';

const bin = process.env.TOKAMAK_BIN;
const data = process.env.TOKAMAK_TEST_DATA;
if (!bin || !data) throw new Error('set TOKAMAK_BIN (the tokamak executable) and TOKAMAK_TEST_DATA (../shared); tests/server/run.sh does');
const model = `${data}/models/stories260K/stories260K.gguf`;
// llama2.c's `run stories260K.bin -t 0.0 -n 200`: 200 greedy tokens after BOS.
const GREEDY_200 = readFileSync(`${data}/models/stories260K/expected_greedy_t0_n200.txt`, 'utf8');
const ONCE_IDS = [403, 407, 261, 378];  // "Once upon a time", without BOS (1)
const T = { timeout: 30000 };

after(killAll);

const serve = (args, env) => startServer({ bin, model, args: ['-t', '1', ...args], env });
const client = (url, apiKey = 'none') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 30000 });
const chat = (content) => [{ role: 'user', content }];

// The OpenAI error body: {"error": {"message", "type", "param", "code"}}.
function assertError(res, status, { type, code, param } = {}) {
  assert.equal(res.status, status, `status: ${res.text}`);
  assert.ok(res.json && typeof res.json.error === 'object', `error body: ${res.text}`);
  const e = res.json.error;
  assert.deepEqual(Object.keys(e).sort(), ['code', 'message', 'param', 'type'], res.text);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  if (type !== undefined) assert.equal(e.type, type, res.text);
  if (code !== undefined) assert.equal(e.code, code, res.text);
  if (param !== undefined) assert.equal(e.param, param, res.text);
  return e;
}

function assertUsage(usage, prompt, completion) {
  const { prompt_tokens, completion_tokens, total_tokens } = usage ?? {};
  assert.deepEqual({ prompt_tokens, completion_tokens, total_tokens },
    { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
}

// Text per choice index and finish reasons of a client stream (chat or completion).
async function collect(stream) {
  const text = [], finish = [], chunks = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    for (const c of chunk.choices) {
      text[c.index] = (text[c.index] ?? '') + (c.delta ? (c.delta.content ?? '') : c.text);
      if (c.finish_reason) {
        assert.equal(finish[c.index], undefined, `choice ${c.index} finished twice`);
        finish[c.index] = c.finish_reason;
      }
    }
  }
  return { text, finish, chunks };
}

describe('default server', () => {
  let s, ai;
  before(async () => { s = await serve(['--max-model-len', '512']); ai = client(s.url); });
  after(() => s?.stop('SIGKILL'));

  test('/health is 200 and /v1/models lists the file stem', T, async () => {
    assert.equal((await get(s.url, '/health')).status, 200);
    const models = await ai.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['stories260K']);
    assert.equal(models.data[0].object, 'model');
  });

  test('completion, greedy from BOS, is llama2.c\'s story', T, async () => {
    const r = await ai.completions.create({ model: 'stories260K', prompt: '', max_tokens: 200, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.model, 'stories260K');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].index, 0);
    assert.equal(r.choices[0].text, GREEDY_200);
    assert.equal(r.choices[0].finish_reason, 'length');
    assertUsage(r.usage, 1, 200);
  });

  test('completion, streamed: the deltas add up to the same story', T, async () => {
    const stream = await ai.completions.create({ prompt: '', max_tokens: 200, temperature: 0, stream: true });
    const { text, finish, chunks } = await collect(stream);
    assert.deepEqual(text, [GREEDY_200]);
    assert.deepEqual(finish, ['length']);
    assert.ok(chunks.length > 10, `${chunks.length} chunks: not streamed token by token`);
    for (const c of chunks) {
      assert.equal(c.object, 'text_completion');
      assert.equal(c.id, chunks[0].id);
    }
  });

  test('chat, greedy: streamed deltas equal the non-streamed message', T, async () => {
    const req = { messages: chat('Tell me a story about a cat.'), max_tokens: 48, temperature: 0 };
    const whole = await ai.chat.completions.create(req);
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].message.role, 'assistant');
    const content = whole.choices[0].message.content;
    assert.ok(content.length > 0);
    const { text, finish, chunks } = await collect(await ai.chat.completions.create({ ...req, stream: true }));
    assert.deepEqual(text, [content]);
    assert.deepEqual(finish, [whole.choices[0].finish_reason]);
    assert.equal(chunks[0].choices[0].delta.role, 'assistant');
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  });

  test('n = 2: greedy gives the story twice; sampled, two different texts', T, async () => {
    const greedy = await ai.completions.create({ prompt: '', max_tokens: 200, temperature: 0, n: 2 });
    assert.deepEqual(greedy.choices.map((c) => [c.index, c.text]), [[0, GREEDY_200], [1, GREEDY_200]]);
    assert.equal(greedy.usage.completion_tokens, 400);
    const req = { prompt: 'Once upon a time', max_tokens: 48, temperature: 1, seed: 42, n: 2 };
    const sampled = await ai.completions.create(req);
    assert.equal(sampled.choices.length, 2);
    assert.notEqual(sampled.choices[0].text, sampled.choices[1].text, 'n = 2 sampled the same text twice');
    const streamed = await collect(await ai.completions.create({ ...req, stream: true }));
    assert.deepEqual(streamed.text, sampled.choices.map((c) => c.text));
    assert.deepEqual(streamed.finish, sampled.choices.map((c) => c.finish_reason));
  });

  test('chat n = 2, streamed and not, seeded: the same two messages', T, async () => {
    const req = { messages: chat('Hi'), max_tokens: 32, temperature: 1, seed: 7, n: 2 };
    const whole = await ai.chat.completions.create(req);
    assert.deepEqual(whole.choices.map((c) => c.index), [0, 1]);
    const streamed = await collect(await ai.chat.completions.create({ ...req, stream: true }));
    assert.deepEqual(streamed.text, whole.choices.map((c) => c.message.content));
    assert.deepEqual(streamed.finish, whole.choices.map((c) => c.finish_reason));
  });

  test('completion logprobs: tokens, their logprobs, the top 3', T, async () => {
    const r = await ai.completions.create({ prompt: '', max_tokens: 20, temperature: 0, logprobs: 3 });
    const { text, logprobs: lp } = r.choices[0];
    assert.ok(GREEDY_200.startsWith(text));
    assert.equal(lp.tokens.length, 20);
    assert.equal(lp.tokens.join(''), text);
    assert.equal(lp.token_logprobs.length, 20);
    assert.equal(lp.top_logprobs.length, 20);
    for (let i = 0; i < 20; ++i) {
      const top = lp.top_logprobs[i];
      const values = Object.values(top);
      assert.ok(values.length >= 1 && values.length <= 3, JSON.stringify(top));
      assert.ok(values.every((v) => v <= 0));
      assert.ok(values.reduce((a, v) => a + Math.exp(v), 0) <= 1 + 1e-5, `top probabilities add past 1: ${JSON.stringify(top)}`);
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(top[lp.tokens[i]] - lp.token_logprobs[i]) < 1e-5, `token ${i} '${lp.tokens[i]}' not in ${JSON.stringify(top)}`);
      assert.ok(Math.abs(Math.max(...values) - lp.token_logprobs[i]) < 1e-5);
    }
  });

  test('chat logprobs: content[j] with token, logprob and top_logprobs, streamed too', T, async () => {
    const req = { messages: chat('Hi'), max_tokens: 16, temperature: 0, logprobs: true, top_logprobs: 3, ignore_eos: true };
    const r = await ai.chat.completions.create(req);
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, 16);
    assert.equal(content.map((c) => c.token).join(''), r.choices[0].message.content);
    for (const c of content) {
      assert.equal(typeof c.logprob, 'number');
      assert.ok(c.logprob <= 0);
      assert.equal(c.top_logprobs.length, 3);
      const tops = c.top_logprobs.map((t) => t.logprob);
      assert.deepEqual(tops, [...tops].sort((a, b) => b - a), 'top_logprobs not most likely first');
      assert.equal(c.top_logprobs[0].token, c.token);
      assert.ok(Math.abs(tops[0] - c.logprob) < 1e-5);
    }
    const { chunks } = await collect(await ai.chat.completions.create({ ...req, stream: true }));
    const streamed = chunks.flatMap((k) => k.choices.flatMap((c) => c.logprobs?.content ?? []));
    assert.deepEqual(streamed.map((c) => c.token), content.map((c) => c.token));
  });

  test('stop strings: the text ends before the stop, finish_reason "stop"', T, async () => {
    const cases = [['Lily'], 'red ball', ['zzz', ', there']];
    for (const stop of cases) {
      const first = Math.min(...[stop].flat().map((s) => GREEDY_200.indexOf(s)).filter((i) => i >= 0));
      const want = GREEDY_200.slice(0, first);
      const req = { prompt: '', max_tokens: 200, temperature: 0, stop };
      const r = await ai.completions.create(req);
      assert.equal(r.choices[0].text, want, `stop ${JSON.stringify(stop)}`);
      assert.equal(r.choices[0].finish_reason, 'stop');
      const streamed = await collect(await ai.completions.create({ ...req, stream: true }));
      assert.deepEqual(streamed.text, [want], `streamed, stop ${JSON.stringify(stop)}`);
      assert.deepEqual(streamed.finish, ['stop']);
    }
    const base = { messages: chat('Tell me a story.'), max_tokens: 64, temperature: 0, ignore_eos: true };
    const full = (await ai.chat.completions.create(base)).choices[0].message.content;
    const stop = full.slice(20, 26);
    const r = await ai.chat.completions.create({ ...base, stop });
    assert.equal(r.choices[0].message.content, full.slice(0, full.indexOf(stop)), `chat stop ${JSON.stringify(stop)}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
  });

  test('seeded sampling repeats exactly, alone and beside other requests', T, async () => {
    const req = { prompt: 'Once upon a time', max_tokens: 64, temperature: 1, seed: 42, ignore_eos: true };
    const one = (await ai.completions.create(req)).choices[0].text;
    assert.equal((await ai.completions.create(req)).choices[0].text, one);
    const others = [1, 2, 3, 4].map((seed) => ai.completions.create({ ...req, seed, max_tokens: 200, stream: seed % 2 === 0 }));
    const chats = [5, 6].map((seed) => ai.chat.completions.create({ messages: chat('Go'), max_tokens: 100, temperature: 1, seed }));
    await sleep(1);
    const beside = ai.completions.create(req);
    const settled = await Promise.all([beside, ...others, ...chats]);
    for (const other of settled.slice(1, 5)) if (other.controller) await collect(other);
    assert.equal(settled[0].choices[0].text, one, 'seed 42 gave another text while other requests ran');
    const streamed = await collect(await ai.completions.create({ ...req, stream: true }));
    assert.deepEqual(streamed.text, [one]);
    assert.notEqual((await ai.completions.create({ ...req, seed: 43 })).choices[0].text, one, 'seed 43 gave seed 42\'s text');
    const chatReq = { messages: chat('Hello'), max_tokens: 32, temperature: 1, seed: 42 };
    const c1 = (await ai.chat.completions.create(chatReq)).choices[0].message.content;
    assert.equal((await ai.chat.completions.create(chatReq)).choices[0].message.content, c1);
  });

  test('stream_options.include_usage: a last chunk with choices [] and usage, then [DONE]', T, async () => {
    // Raw SSE, so the framing itself is checked: data lines, [DONE], the end.
    const res = await fetch(`${s.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 12, ignore_eos: true, stream: true,
        stream_options: { include_usage: true } }),
    });
    const chunks = await readSse(res);
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assertUsage(last.usage, 5, 12);
    assert.equal(chunks.slice(0, -1).filter((c) => c.usage).length, 0, 'usage before the last chunk');
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');
    // The client, on chat: its stream ends (on [DONE]) with the usage chunk last.
    const { chunks: cc } = await collect(await ai.chat.completions.create({
      messages: chat('Hi'), max_tokens: 5, ignore_eos: true, stream: true, stream_options: { include_usage: true } }));
    assert.deepEqual(cc.at(-1).choices, []);
    assert.equal(cc.at(-1).usage.completion_tokens, 5);
    assert.equal(cc.at(-1).usage.total_tokens, cc.at(-1).usage.prompt_tokens + 5);
  });

  test('max_tokens / max_completion_tokens with ignore_eos: "length", exactly that many tokens', T, async () => {
    const r = await ai.completions.create({ prompt: 'Once upon a time', max_tokens: 7, ignore_eos: true });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 7);
    const c = await ai.chat.completions.create({ messages: chat('Hi'), max_completion_tokens: 9, ignore_eos: true });
    assert.equal(c.choices[0].finish_reason, 'length');
    assert.equal(c.usage.completion_tokens, 9);
    // 400 tokens with ignore_eos is what the long requests below rely on.
    const long = await ai.completions.create({ prompt: '', max_tokens: 400, ignore_eos: true, temperature: 0.8 });
    assert.equal(long.usage.completion_tokens, 400);
  });

  test('/tokenize and /detokenize round trip; chat prompts count as chat completions do', T, async () => {
    const withBos = await post(s.url, '/tokenize', { prompt: 'Once upon a time' });
    assert.equal(withBos.status, 200, withBos.text);
    assert.deepEqual(withBos.json.tokens, [1, ...ONCE_IDS]);
    assert.equal(withBos.json.count, 5);
    assert.equal(withBos.json.max_model_len, 512);
    const bare = await post(s.url, '/tokenize', { prompt: 'Once upon a time', add_special_tokens: false });
    assert.deepEqual(bare.json.tokens, ONCE_IDS);
    const back = await post(s.url, '/detokenize', { tokens: ONCE_IDS });
    assert.equal(back.status, 200, back.text);
    assert.equal(back.json.prompt, 'Once upon a time');
    const story = GREEDY_200.slice(0, 120);
    const ids = (await post(s.url, '/tokenize', { prompt: story, add_special_tokens: false })).json.tokens;
    assert.equal((await post(s.url, '/detokenize', { tokens: ids })).json.prompt, story);
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }];
    const counted = await post(s.url, '/tokenize', { messages });
    assert.equal(counted.status, 200, counted.text);
    const used = await ai.chat.completions.create({ messages, max_tokens: 1 });
    assert.equal(counted.json.count, used.usage.prompt_tokens);
    assert.equal(counted.json.tokens.length, counted.json.count);
  });

  test('400: wrong type, out of range, malformed JSON; unknown fields are ignored', T, async () => {
    const hot = assertError(await post(s.url, '/v1/completions', { prompt: 'x', temperature: 'hot' }), 400,
      { type: 'invalid_request_error', param: 'temperature' });
    assert.match(hot.message, /temperature/);
    assert.match(hot.message, /hot/);
    const five = assertError(await post(s.url, '/v1/chat/completions', { messages: chat('x'), temperature: 5 }), 400,
      { type: 'invalid_request_error', param: 'temperature' });
    assert.match(five.message, /5/);
    assertError(await post(s.url, '/v1/completions', { prompt: 'x', n: 'two' }), 400, { param: 'n' });
    assertError(await post(s.url, '/v1/completions', { prompt: 'x', max_tokens: -1 }), 400, { param: 'max_tokens' });
    assertError(await post(s.url, '/v1/chat/completions', { messages: 'Hi' }), 400, { param: 'messages' });
    assertError(await post(s.url, '/v1/completions', '{"prompt": "x",'), 400, { type: 'invalid_request_error' });
    assertError(await post(s.url, '/tokenize', '[1, 2'), 400, { type: 'invalid_request_error' });
    const ignored = await post(s.url, '/v1/completions', { prompt: 'x', max_tokens: 2, no_such_field: { a: 1 } });
    assert.equal(ignored.status, 200, ignored.text);
    // The client raises the 400 as its BadRequestError with the server's body.
    await assert.rejects(ai.completions.create({ prompt: 'x', temperature: 5 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
  });

  test('404: unknown model, unknown route', T, async () => {
    assertError(await post(s.url, '/v1/completions', { model: 'gpt-4', prompt: 'x' }), 404,
      { type: 'not_found_error', code: 'model_not_found' });
    await assert.rejects(ai.chat.completions.create({ model: 'gpt-4', messages: chat('x') }),
      (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
    assertError(await get(s.url, '/v1/nothing'), 404, { type: 'not_found_error' });
    assertError(await post(s.url, '/v1/nothing', {}), 404, { type: 'not_found_error' });
  });

  test('/metrics counts tokens and finish reasons, under vLLM\'s names', T, async () => {
    const names = ['num_requests_running', 'num_requests_waiting', 'kv_cache_usage_perc', 'prefix_cache_queries_total',
      'prefix_cache_hits_total', 'num_preemptions_total', 'prompt_tokens_total', 'generation_tokens_total',
      'request_success_total', 'time_to_first_token_seconds', 'inter_token_latency_seconds', 'e2e_request_latency_seconds'];
    const before = (await waitIdle(s.url)).text;
    for (const n of names) assert.match(before, new RegExp(`^tokamak:${n}(_bucket|_sum|_count)?[{ ]`, 'm'), `no tokamak:${n}`);
    await ai.completions.create({ prompt: 'Once upon a time', max_tokens: 10, ignore_eos: true });
    const now = (await waitIdle(s.url)).text;
    const delta = (name, labels) => metric(now, name, labels) - (metric(before, name, labels) || 0);
    assert.equal(delta('tokamak:prompt_tokens_total'), 5);
    assert.equal(delta('tokamak:generation_tokens_total'), 10);
    assert.equal(delta('tokamak:request_success_total', 'finished_reason="length"'), 1);
    assert.equal(delta('tokamak:e2e_request_latency_seconds_count'), 1);
  });

  test('a stream cut by the client: aborted, its KV blocks free again', T, async () => {
    const aborted = (text) => metric(text, 'tokamak:request_success_total', 'finished_reason="abort"') || 0;
    const before = aborted((await waitIdle(s.url)).text);
    // Four long streams (2 x 400 tokens each) so that a cut lands mid-generation.
    const cut = async (i) => {
      const stream = await ai.completions.create({ prompt: 'Once upon a time', max_tokens: 400, n: 2, ignore_eos: true,
        temperature: 1, seed: i, stream: true });
      let chunks = 0;
      for await (const chunk of stream) {
        assert.ok(chunk.choices.length > 0);
        if (++chunks === 3) { stream.controller.abort(); break; }
      }
      return chunks;
    };
    assert.deepEqual(await Promise.all([0, 1, 2, 3].map(cut)), [3, 3, 3, 3]);
    const idle = await waitIdle(s.url, 2000);
    assert.equal(idle.running, 0, 'tokamak:num_requests_running 2 s after the cut');
    assert.equal(idle.waiting, 0);
    assert.equal(idle.kv, 0, 'tokamak:kv_cache_usage_perc 2 s after the cut');
    const after = aborted(idle.text);
    assert.ok(after - before >= 1, `finished_reason="abort" went ${before} -> ${after}: no request was aborted`);
    // The server still serves.
    assert.equal((await ai.completions.create({ prompt: '', max_tokens: 200, temperature: 0 })).choices[0].text, GREEDY_200);
  });
});

describe('--max-model-len 64 --max-request-bytes 4096 --served-model-name tiny', () => {
  let s;
  before(async () => { s = await serve(['--max-model-len', '64', '--max-request-bytes', '4096', '--served-model-name', 'tiny']); });
  after(() => s?.stop('SIGKILL'));

  test('a prompt over max_model_len is a 400 naming both numbers', T, async () => {
    const prompt = 'Once upon a time there was a cat. '.repeat(8);
    const n = (await post(s.url, '/tokenize', { prompt })).json.count;
    assert.ok(n > 64, `${n} tokens`);
    const e = assertError(await post(s.url, '/v1/completions', { prompt, max_tokens: 1 }), 400, { type: 'invalid_request_error' });
    assert.match(e.message, new RegExp(`\\b${n}\\b`), `message does not name the prompt's ${n} tokens`);
    assert.match(e.message, /\b64\b/, 'message does not name max_model_len 64');
    const c = await post(s.url, '/v1/chat/completions', { messages: chat(prompt), max_tokens: 1 });
    assertError(c, 400, { type: 'invalid_request_error' });
    assert.match(c.json.error.message, /\b64\b/);
  });

  test('413 for a body over --max-request-bytes; just under it is served', T, async () => {
    assertError(await post(s.url, '/v1/completions', { prompt: 'a'.repeat(5000), max_tokens: 1 }), 413,
      { type: 'invalid_request_error', code: 'request_too_large' });
    const small = await post(s.url, '/v1/completions', { prompt: 'Once', max_tokens: 1, pad: ' '.repeat(3900) });
    assert.equal(small.status, 200, small.text);
  });

  test('--served-model-name: listed, accepted, the file stem is not', T, async () => {
    assert.deepEqual((await get(s.url, '/v1/models')).json.data.map((m) => m.id), ['tiny']);
    const ok = await post(s.url, '/v1/completions', { model: 'tiny', prompt: 'Once', max_tokens: 2 });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.model, 'tiny');
    assertError(await post(s.url, '/v1/completions', { model: 'stories260K', prompt: 'x' }), 404, { code: 'model_not_found' });
  });
});

describe('API keys', () => {
  const key = 'sk-tokamak-test-0123456789';
  for (const [how, args, env] of [['--api-key', ['--api-key', key], {}], ['TOKAMAK_API_KEY', [], { TOKAMAK_API_KEY: key }]]) {
    test(`${how}: 401 without the key or with a wrong one; /health and /metrics open`, T, async () => {
      const s = await serve(args, env);
      try {
        const body = { prompt: 'Once', max_tokens: 2 };
        const auth = { type: 'authentication_error', code: 'invalid_api_key' };
        assertError(await post(s.url, '/v1/completions', body), 401, auth);
        assertError(await post(s.url, '/v1/completions', body, { authorization: 'Bearer wrong' }), 401, auth);
        assertError(await post(s.url, '/v1/completions', body, { authorization: `Bearer ${key}x` }), 401, auth);
        assertError(await get(s.url, '/v1/models'), 401, auth);
        await assert.rejects(client(s.url, 'wrong').chat.completions.create({ messages: chat('x'), max_tokens: 2 }),
          (e) => e instanceof OpenAI.AuthenticationError && e.code === 'invalid_api_key');
        const r = await client(s.url, key).completions.create(body);
        assert.equal(r.usage.completion_tokens > 0, true);
        assert.equal((await get(s.url, '/health')).status, 200);
        assert.equal((await get(s.url, '/metrics')).status, 200);
      } finally {
        await s.stop('SIGKILL');
      }
    });
  }
});

describe('--max-num-seqs 1 --max-queue 1', () => {
  let s;
  before(async () => { s = await serve(['--max-num-seqs', '1', '--max-queue', '1', '--max-model-len', '512']); });
  after(() => s?.stop('SIGKILL'));

  test('429 once one runs and one waits; the admitted ones finish', T, async () => {
    const body = { prompt: 'Once upon a time', max_tokens: 400, ignore_eos: true, temperature: 1 };
    const replies = await Promise.all(Array.from({ length: 12 }, () => post(s.url, '/v1/completions', body)));
    const full = replies.filter((r) => r.status === 429);
    const served = replies.filter((r) => r.status === 200);
    assert.equal(full.length + served.length, 12, replies.map((r) => `${r.status} ${r.text}`).join('\n'));
    assert.ok(full.length >= 1, 'no 429 from 12 concurrent long requests with room for 2');
    assert.ok(served.length >= 2, `${served.length} served: the running one and the waiting one should be`);
    for (const r of full) assertError(r, 429, { type: 'rate_limit_error', code: 'queue_full' });
    for (const r of served) assert.equal(r.json.usage.completion_tokens, 400);
    const idle = await waitIdle(s.url);
    assert.deepEqual([idle.running, idle.waiting, idle.kv], [0, 0, 0]);
  });
});

describe('SIGTERM', () => {
  test('503 for new requests, in-flight ones finish, exit 0', T, async () => {
    const s = await serve(['--max-model-len', '512']);
    try {
      // Six streams of 2 x 400 tokens keep the server busy past the signal.
      const body = { prompt: 'Once upon a time', max_tokens: 400, n: 2, ignore_eos: true, temperature: 1, stream: true,
        stream_options: { include_usage: true } };
      // SIGTERM once every stream has its first chunk: all six are in flight
      // (on a loaded machine the last ones can take a while to be admitted).
      let open = 6;
      const firsts = [];
      const streams = Array.from({ length: open }, (_, i) => {
        let started;
        firsts.push(new Promise((resolve) => { started = resolve; }));
        return fetch(`${s.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ ...body, seed: i }) })
          .then((res) => readSse(res, { onChunk: started }))
          .then((chunks) => ({ chunks }), (error) => { started(); return { error }; })
          .finally(() => --open);
      });
      await Promise.all(firsts);
      process.kill(s.pid, 'SIGTERM');
      // A request may still beat the signal's handling, but once one got 503,
      // every later one must. Three of them, then quiet: the streams' ends must
      // not depend on new traffic.
      const late = [];
      for (let i = 0; i < 200 && open > 0 && late.length < 3; ++i) {
        const r = await post(s.url, '/v1/completions', { prompt: 'x', max_tokens: 2 }).catch((e) => {
          if (open > 0) throw new Error(`a request after SIGTERM got no reply (${e.cause?.code ?? e.message}) while ${open} streams ran`);
          return null;
        });
        if (r && (r.status !== 200 || late.length > 0)) late.push(r);
        await sleep(5);
      }
      assert.ok(late.length > 0, 'no request got a 503 while the streams ran');
      for (const r of late) assertError(r, 503, { type: 'service_unavailable', code: 'shutting_down' });
      for (const [i, { chunks, error }] of (await Promise.all(streams)).entries()) {
        assert.ifError(error && new Error(`in-flight stream ${i} after SIGTERM: ${error.message} (${error.cause?.message})`));
        const finish = chunks.flatMap((c) => c.choices.filter((x) => x.finish_reason).map((x) => [x.index, x.finish_reason]));
        assert.deepEqual(finish.sort(), [[0, 'length'], [1, 'length']]);
        assert.equal(chunks.at(-1).usage.completion_tokens, 800);
      }
      const exit = await Promise.race([s.exited, sleep(15000).then(() => 'no exit within 15 s')]);
      assert.deepEqual(exit, { code: 0, signal: null }, s.log());
    } finally {
      await s.stop('SIGKILL');
    }
  });
});
