// What the test file and the soak share: start `tokamak serve` on a free
// loopback port and stop it, read a server-sent-event stream strictly, and read
// /metrics. Every wait here has a bound in time, so a hung server fails a run
// instead of hanging it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

// Each started server, so that a test file's after() hook can kill what is
// left even when a test failed half way.
const live = new Set();

// Starts `BIN serve -m MODEL --host 127.0.0.1 --port 0 ARGS...` and resolves
// once it printed `listening on http://HOST:PORT` and /health answers 200.
// Returns { url, pid, stop(signal) -> {code, signal}, exited, log() }.
export async function startServer({ bin, model, args = [], env = {}, timeoutMs = 30000 }) {
  const argv = ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0', ...args];
  const proc = spawn(bin, argv, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  live.add(proc);
  let stderr = '';
  const exited = new Promise((resolve) => {
    proc.on('exit', (code, signal) => { live.delete(proc); resolve({ code, signal }); });
  });
  const log = () => `\`tokamak ${argv.join(' ')}\` stderr:\n${stderr.slice(-4000)}`;
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening on' line within ${timeoutMs} ms; ${log()}`)), timeoutMs);
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (text) => {
      stderr += text;
      const m = /listening on (http:\/\/[^\s:]+:(\d+))/.exec(stderr);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    proc.on('error', (e) => { clearTimeout(timer); reject(new Error(`cannot start ${bin}: ${e.message}`)); });
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (code ${code}, signal ${signal}) before listening; ${log()}`));
    });
  });
  const server = {
    url, pid: proc.pid, exited, log,
    // Sends SIGNAL and waits (bounded) for the exit; SIGKILL if it does not come.
    async stop(signal = 'SIGTERM', waitMs = 10000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return exited;
      proc.kill(signal);
      const timer = setTimeout(() => proc.kill('SIGKILL'), waitMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
  // Ready means the model is loaded: /health answers 503 until then.
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await fetch(`${url}/health`).then((r) => r.status, () => 0);
    if (status === 200) return server;
    if (Date.now() > deadline) {
      await server.stop('SIGKILL');
      throw new Error(`/health still ${status} after ${timeoutMs} ms; ${log()}`);
    }
    await sleep(50);
  }
}

// Kills every server still running (the after() hook of a test file).
export function killAll() {
  for (const proc of live) proc.kill('SIGKILL');
}
process.on('exit', killAll);

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// POSTs BODY (an object, or a string sent as it is) and returns
// { status, json, text } with json null when the reply is not JSON.
export async function post(url, path, body, headers = {}) {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return reply(res);
}

export async function get(url, path, headers = {}) {
  return reply(await fetch(`${url}${path}`, { headers }));
}

async function reply(res) {
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: json stays null */ }
  return { status: res.status, json, text, headers: res.headers };
}

// Reads a server-sent-event body to its end, strictly: every event is
// `data: ...` lines or `: comment` lines ended by a blank line, every data is
// JSON until one `[DONE]`, which must be the last. Throws naming the first
// violation. Returns the parsed chunks in order.
export async function readSse(res, { onChunk } = {}) {
  if (res.status !== 200) throw new Error(`stream status ${res.status}: ${await res.text()}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/event-stream')) throw new Error(`stream content-type '${type}'`);
  const decoder = new TextDecoder();
  const chunks = [];
  let buffer = '';
  let done = false;
  const take = (event) => {
    for (const line of event.split('\n')) {
      if (line.startsWith(':')) continue;  // keep-alive comment
      if (!line.startsWith('data: ')) throw new Error(`SSE line neither 'data: ' nor comment: ${JSON.stringify(line)}`);
      const data = line.slice(6);
      if (done) throw new Error(`SSE data after [DONE]: ${JSON.stringify(data)}`);
      if (data === '[DONE]') { done = true; continue; }
      let chunk;
      try { chunk = JSON.parse(data); } catch { throw new Error(`SSE data is not JSON: ${JSON.stringify(data)}`); }
      chunks.push(chunk);
      onChunk?.(chunk);
    }
  };
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    for (let end; (end = buffer.indexOf('\n\n')) >= 0; buffer = buffer.slice(end + 2)) take(buffer.slice(0, end));
  }
  if (buffer.trim() !== '') throw new Error(`SSE body ends inside an event: ${JSON.stringify(buffer)}`);
  if (!done) throw new Error(`SSE body ended without data: [DONE] after ${chunks.length} chunks`);
  return chunks;
}

// The value of one Prometheus sample, e.g. metric(text,
// 'tokamak:request_success_total', 'finished_reason="abort"'); NaN when absent.
export function metric(text, name, labels = '') {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([^\s{]+)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (m && m[1] === name && (m[2] ?? '') === labels) return Number(m[3]);
  }
  return NaN;
}

// Running, waiting and KV use from /metrics.
export async function load(url) {
  const text = (await get(url, '/metrics')).text;
  return {
    running: metric(text, 'tokamak:num_requests_running'),
    waiting: metric(text, 'tokamak:num_requests_waiting'),
    kv: metric(text, 'tokamak:kv_cache_usage_perc'),
    text,
  };
}

// Polls /metrics until nothing runs or waits and the KV cache is empty, for at
// most WITHIN ms; returns the last reading (check it: it may not be idle).
export async function waitIdle(url, within = 2000) {
  const deadline = Date.now() + within;
  for (;;) {
    const now = await load(url);
    if ((now.running === 0 && now.waiting === 0 && now.kv === 0) || Date.now() > deadline) return now;
    await sleep(20);
  }
}

// Resident memory of process PID in KiB (VmRSS of /proc/PID/status).
export function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS in /proc/${pid}/status`);
  return Number(m[1]);
}
