// The soak: CLIENTS concurrent clients loop random chat and completion
// requests (mostly streamed; random max_tokens 1..128, temperature, stop
// strings, n = 2) for SECONDS against a `tokamak serve` this script starts on
// a free loopback port. It fails (exit 1, saying why) on any failed request
// (an HTTP error, a malformed chunk, a stream without [DONE], a reply that
// breaks its own request's limits), on resident memory at the end over 1.05 x
// what it was after the warm-up (the first 10% of the run, at least 3 s), on
// /metrics not showing 0 running, 0 waiting and an empty KV cache at the end,
// and on the server not exiting 0 after SIGTERM.
//   node soak.mjs --bin TOKAMAK --model stories260K.gguf [--clients 64] [--seconds 30] [--warmup S] [--threads 1] [--seed 1]
// --warmup: seconds before the first memory reading (default: 10% of the run, at least 3).
import { parseArgs } from 'node:util';
import { load, readSse, rssKiB, sleep, startServer, waitIdle } from './server.mjs';

const { values: opt } = parseArgs({
  options: {
    bin: { type: 'string', default: process.env.TOKAMAK_BIN },
    model: { type: 'string' },
    clients: { type: 'string', default: '64' },
    seconds: { type: 'string', default: '30' },
    warmup: { type: 'string' },
    threads: { type: 'string', default: '1' },
    seed: { type: 'string', default: '1' },
  },
});
const badArgs = (message) => { console.error(`soak: ${message}`); process.exit(2); };
const count = (name) => {
  const v = Number(opt[name]);
  if (!Number.isInteger(v) || v < 1) badArgs(`--${name} must be a positive integer, not '${opt[name]}'`);
  return v;
};
if (!opt.bin || !opt.model) badArgs('--bin (or TOKAMAK_BIN) and --model are required');
const clients = count('clients'), seconds = count('seconds'), threads = count('threads'), seed = count('seed');
const warmup = opt.warmup === undefined ? Math.max(3, seconds / 10) : count('warmup');
if (warmup >= seconds) badArgs(`--warmup ${warmup} must be shorter than --seconds ${seconds}`);

// mulberry32: a small seeded generator, so a failing mix can be replayed with --seed.
function random(state) {
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PROMPTS = ['Once upon a time', 'Lily and Tom went to the park.', 'The cat', '', 'One day, a little bird',
  'Tell me a story about a dog.', 'Why is the sky blue?'];
const STOPS = ['.', 'Lily', '\n', 'the', ['!', '?'], 'was a'];

// One random request: the body and what its reply must respect.
function randomRequest(rnd) {
  const pick = (list) => list[Math.floor(rnd() * list.length)];
  const chat = rnd() < 0.5;
  const body = { max_tokens: 1 + Math.floor(rnd() * 128), temperature: rnd() < 0.2 ? 0 : Math.round(rnd() * 150) / 100 };
  if (rnd() < 0.2) body.n = 2;
  if (rnd() < 0.25) body.stop = pick(STOPS);
  if (rnd() < 0.3) body.seed = Math.floor(rnd() * 1e6);
  if (rnd() < 0.2) body.ignore_eos = true;
  if (rnd() < 0.2) body.top_p = 0.9;
  if (rnd() < 0.2) body.top_k = 40;
  if (rnd() < 0.75) {
    body.stream = true;
    if (rnd() < 0.5) body.stream_options = { include_usage: true };
  }
  if (chat) body.messages = [{ role: 'user', content: pick(PROMPTS) }];
  else body.prompt = pick(PROMPTS);
  return { path: chat ? '/v1/chat/completions' : '/v1/completions', body, chat };
}

// Sends one request and checks the reply; returns the completion tokens
// (usage, or the content chunks of a stream without usage). Throws on a fault.
async function one(url, { path, body, chat }) {
  const n = body.n ?? 1;
  const res = await fetch(`${url}${path}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
    signal: AbortSignal.timeout(120000),
  });
  const object = chat ? (body.stream ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion';
  const finish = new Map();
  const finished = (c) => {
    if (c.index < 0 || c.index >= n) throw new Error(`choice index ${c.index} with n = ${n}`);
    if (!c.finish_reason) return;
    if (finish.has(c.index)) throw new Error(`choice ${c.index} finished twice`);
    if (!['stop', 'length'].includes(c.finish_reason)) throw new Error(`finish_reason '${c.finish_reason}'`);
    finish.set(c.index, c.finish_reason);
  };
  let usage = null, chunksWithText = 0;
  if (body.stream) {
    for (const chunk of await readSse(res)) {
      if (chunk.object !== object) throw new Error(`chunk object '${chunk.object}'`);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        finished(c);
        if ((chat ? c.delta?.content : c.text)?.length) ++chunksWithText;
      }
    }
    if (body.stream_options && !usage) throw new Error('include_usage without a usage chunk');
  } else {
    const text = await res.text();
    if (res.status !== 200) throw new Error(`status ${res.status}: ${text.slice(0, 300)}`);
    const reply = JSON.parse(text);
    if (reply.object !== object) throw new Error(`object '${reply.object}'`);
    if (reply.choices.length !== n) throw new Error(`${reply.choices.length} choices for n = ${n}`);
    reply.choices.forEach(finished);
    usage = reply.usage;
  }
  if (finish.size !== n) throw new Error(`${finish.size} of ${n} choices have a finish_reason`);
  if (!usage) return chunksWithText;
  const { completion_tokens: made, prompt_tokens: prompt, total_tokens: total } = usage;
  if (made > n * body.max_tokens) throw new Error(`completion_tokens ${made} over n x max_tokens ${n * body.max_tokens}`);
  if (total !== prompt + made) throw new Error(`total_tokens ${total} != ${prompt} + ${made}`);
  // ignore_eos without stop strings runs every choice to max_tokens.
  if (body.ignore_eos && !body.stop && made !== n * body.max_tokens) {
    throw new Error(`ignore_eos: completion_tokens ${made}, not n x max_tokens ${n * body.max_tokens}`);
  }
  return made;
}

const server = await startServer({ bin: opt.bin, model: opt.model,
  args: ['-t', String(threads), '--max-model-len', '512'] });
const mib = (kib) => (kib / 1024).toFixed(1);
const stats = { requests: 0, streamed: 0, tokens: 0, failures: [], peakRunning: 0, peakWaiting: 0 };
const start = Date.now();
const end = start + seconds * 1000;
const warmAt = start + warmup * 1000;

async function client(i) {
  const rnd = random(seed * 1000 + i);
  while (Date.now() < end) {
    const req = randomRequest(rnd);
    try {
      const made = await one(server.url, req);  // not `+= await`: that reads the sum before the wait
      stats.tokens += made;
    } catch (e) {
      stats.failures.push(`${req.path} ${JSON.stringify(req.body)}: ${e.message}`);
    }
    ++stats.requests;
    if (req.body.stream) ++stats.streamed;
  }
}

// Watches the load and takes the resident memory once the warm-up is over.
let rssWarm = null;
async function watch() {
  while (Date.now() < end) {
    const now = await load(server.url).catch(() => null);
    if (now) {
      stats.peakRunning = Math.max(stats.peakRunning, now.running);
      stats.peakWaiting = Math.max(stats.peakWaiting, now.waiting);
    }
    if (rssWarm === null && Date.now() >= warmAt) rssWarm = rssKiB(server.pid);
    await sleep(250);
  }
}

await Promise.all([watch(), ...Array.from({ length: clients }, (_, i) => client(i))]);
const idle = await waitIdle(server.url, 2000);
const rssEnd = rssKiB(server.pid);
const exit = await server.stop('SIGTERM', 30000);

const why = [];
if (stats.failures.length) why.push(`${stats.failures.length} failed requests, the first: ${stats.failures.slice(0, 5).join('\n  ')}`);
if (rssWarm === null) why.push('the run ended before the warm-up did');
else if (rssEnd > 1.05 * rssWarm) why.push(`resident memory grew from ${mib(rssWarm)} MiB after the warm-up to ${mib(rssEnd)} MiB (> 5%)`);
if (!(idle.running === 0 && idle.waiting === 0 && idle.kv === 0)) {
  why.push(`/metrics 2 s after the last reply: running ${idle.running}, waiting ${idle.waiting}, kv_cache_usage_perc ${idle.kv}`);
}
if (exit.code !== 0) why.push(`the server ended with code ${exit.code}, signal ${exit.signal} after SIGTERM`);
const growth = rssWarm ? ` (${(100 * (rssEnd / rssWarm - 1)).toFixed(1)}%)` : '';
console.log(`soak: ${clients} clients x ${seconds} s (warm-up ${warmup} s), seed ${seed}: ${stats.requests} requests (${stats.streamed} streamed), ` +
  `${stats.tokens} tokens, ${stats.failures.length} failures; RSS warm ${rssWarm ? mib(rssWarm) : '-'} MiB, end ${mib(rssEnd)} MiB${growth}; ` +
  `peak running ${stats.peakRunning}, waiting ${stats.peakWaiting}; KV ${idle.kv === 0 ? 'free' : idle.kv} at the end`);
if (why.length) {
  for (const w of why) console.error(`soak: FAIL: ${w}`);
  process.exit(1);
}
