// Test harness for herald's real-client suite: builds and runs the herald binary, and gives the
// tests pusher-js clients, the `pusher` server SDK, a raw WebSocket client and a raw REST client.
//
// Every wait here is an event wait or a poll with a generous deadline (WAIT_MS); nothing sleeps
// for a fixed time to wait for something to happen, and a wait that times out says what it
// waited for and what it saw instead. The machines that run this suite are shared and busy: a
// deadline is there to end a test that will never pass, not to measure speed.

import { spawn, execFileSync } from 'node:child_process';
import { before, afterEach, after } from 'node:test';
import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import Pusher from 'pusher-js';
import PusherServer from 'pusher';
import WebSocket from 'ws';

export { Pusher, PusherServer, WebSocket };

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(HERE, '..', '..');

// ---------------------------------------------------------------------------------------------
// Apps

export const APP1 = Object.freeze({
  id: 'app-id',
  key: 'app-key',
  secret: 'app-secret',
  enable_client_messages: true,
  enable_user_authentication: true,
});

export const APP2 = Object.freeze({
  id: 'app2',
  key: 'app2-key',
  secret: 'app2-secret',
  enable_client_messages: false,
  enable_user_authentication: false,
  limits: { max_presence_members: 2, max_connections: 3 },
});

// 32 random-looking bytes, base64: the SDK's encryptionMasterKeyBase64 for encrypted channels.
export const MASTER_KEY_B64 = Buffer.from(
  createHash('sha256').update('herald-js-tests-master-key').digest(),
).toString('base64');

// ---------------------------------------------------------------------------------------------
// Small utilities

/**
 * The deadline of every wait for something that should happen: generous, because a loaded
 * machine may stall the server or this process for seconds. HERALD_TEST_WAIT_MS overrides it.
 */
export const WAIT_MS = Number(process.env.HERALD_TEST_WAIT_MS) || 20_000;

export const SOCKET_ID_RE = /^\d+\.\d+$/;

let uniqueCounter = 0;
/** A channel/user name unique within this process (and across files, thanks to the pid). */
export function uniq(prefix = '') {
  uniqueCounter += 1;
  return `${prefix}t${process.pid}-${uniqueCounter}-${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * Rejects after ms with a message naming what was awaited. `what` may be a function, called at
 * the deadline, so the message can say what was seen by then.
 */
export function withDeadline(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const desc = typeof what === 'function' ? what() : what;
      reject(new Error(`timed out after ${ms} ms waiting for ${desc}`));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Polls fn() until it returns a truthy value (returned) or the deadline passes; the error then
 * names what (a string, or a function called at the deadline) and fn's last result.
 */
export async function eventually(fn, ms, what, intervalMs = 25) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      const desc = typeof what === 'function' ? what() : what;
      throw new Error(`timed out after ${ms} ms waiting for ${desc} (last: ${fmt(last)})`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

function fmt(v) {
  if (v instanceof Error) return v.message;
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}

export function hmacHex(secret, str) {
  return createHmac('sha256', secret).update(str).digest('hex');
}

export function md5Hex(str) {
  return createHash('md5').update(str).digest('hex');
}

// Ports this process has handed out: never the same one twice (the kernel may give a port
// that was just probed and closed to the next probe).
const givenPorts = new Set();

/** A port free on 127.0.0.1 now, never one this process handed out before. */
export async function freePort() {
  for (;;) {
    const port = await new Promise((resolve, reject) => {
      const srv = net.createServer();
      srv.unref();
      srv.on('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const { port: p } = srv.address();
        srv.close(() => resolve(p));
      });
    });
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Building and running herald

let builtBin = null;
let buildDir = null;

/** Path of the herald binary: $HERALD_BIN, or built once per process from the repo root. */
export function heraldBinary() {
  if (process.env.HERALD_BIN) return process.env.HERALD_BIN;
  if (builtBin) return builtBin;
  buildDir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-bin-'));
  const out = path.join(buildDir, 'herald');
  try {
    execFileSync('go', ['build', '-o', out, './cmd/herald'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 300_000,
    });
  } catch (e) {
    const stderr = e.stderr ? e.stderr.toString() : '';
    throw new Error(`go build ./cmd/herald failed in ${REPO_ROOT}:\n${stderr || e.message}`);
  }
  builtBin = out;
  return out;
}

// A tiny YAML emitter for the config (objects, arrays of objects, scalars).
function yamlScalar(v) {
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}
export function toYaml(value, indent = '') {
  let out = '';
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item !== null && typeof item === 'object') {
        const body = toYaml(item, indent + '  ');
        out += `${indent}- ${body.slice(indent.length + 2)}`;
      } else {
        out += `${indent}- ${yamlScalar(item)}\n`;
      }
    }
    return out;
  }
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (v !== null && typeof v === 'object') {
      if (Array.isArray(v) && v.length === 0) {
        out += `${indent}${k}: []\n`;
      } else {
        out += `${indent}${k}:\n${toYaml(v, indent + '  ')}`;
      }
    } else {
      out += `${indent}${k}: ${yamlScalar(v)}\n`;
    }
  }
  return out;
}

const liveProcs = new Set();
const runDirs = new Set();
process.on('exit', () => {
  for (const d of runDirs) {
    try {
      rmSync(d, { recursive: true, force: true });
    } catch {}
  }
  // Last resort: never leave a server behind, even if a test file crashed.
  for (const p of liveProcs) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {}
  }
  if (buildDir && !process.env.HERALD_BIN) {
    try {
      rmSync(buildDir, { recursive: true, force: true });
    } catch {}
  }
});

export class HeraldServer {
  constructor({ port, config, apps, dir, bin }) {
    this.bin = bin; // the herald binary to run; undefined: heraldBinary()
    this.port = port;
    this.config = config;
    this.apps = apps;
    this.dir = dir;
    this.proc = null;
    this.output = '';
    this.exited = null; // promise of {code, signal}
    this.exitInfo = null;
  }

  get host() {
    return '127.0.0.1';
  }
  /** Whether the server speaks TLS (config tls.cert_file): wss:// and https://. */
  get tls() {
    return !!(this.config.tls && (this.config.tls.cert_file || this.config.tls.acme));
  }
  get wsUrl() {
    return `${this.tls ? 'wss' : 'ws'}://127.0.0.1:${this.port}`;
  }
  get httpUrl() {
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }
  get metricsUrl() {
    return `http://127.0.0.1:${this.config.metrics.port}/metrics`;
  }

  app(idOrKey) {
    const a = this.apps.find((x) => x.id === idOrKey || x.key === idOrKey);
    if (!a) throw new Error(`no app ${idOrKey}`);
    return a;
  }

  /**
   * Starts the process and waits until /health answers 200 with status this.healthStatus
   * ('ok' unless startServer was given another, e.g. 'refusing' for a node whose memory guard
   * refuses connections from the start).
   */
  async start() {
    const bin = this.bin ?? heraldBinary();
    const cfgPath = path.join(this.dir, `herald-${this.port}.yaml`);
    const cfg = { host: '127.0.0.1', port: this.port, ...this.config, apps: this.apps ?? undefined };
    writeFileSync(cfgPath, toYaml(cfg));
    this.configText = toYaml(cfg);
    this.output = '';
    this.exitInfo = null;
    const proc = spawn(bin, ['serve', '--config', cfgPath], {
      cwd: this.dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.proc = proc;
    liveProcs.add(proc);
    const keep = (chunk) => {
      this.output += chunk.toString();
      if (this.output.length > 200_000) this.output = this.output.slice(-100_000);
    };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    this.exited = new Promise((resolve) => {
      proc.on('exit', (code, signal) => {
        liveProcs.delete(proc);
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
    await this.waitHealthy(WAIT_MS, this.healthStatus ?? 'ok');
    return this;
  }

  async waitHealthy(ms, status = 'ok') {
    const end = Date.now() + ms;
    let last = 'no response';
    while (Date.now() < end) {
      if (this.exitInfo) {
        throw new Error(
          `herald exited before it was ready (code ${this.exitInfo.code}, signal ${this.exitInfo.signal}).\n` +
            `config:\n${this.configText}\noutput:\n${this.output}`,
        );
      }
      try {
        const res = await fetch(`${this.httpUrl}/health`, { signal: AbortSignal.timeout(5000) });
        const text = await res.text();
        last = `${res.status} ${text}`;
        if (res.status === 200) {
          const body = JSON.parse(text);
          if (body.status === status) return body;
        }
      } catch (e) {
        last = e.message;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`herald not healthy (status '${status}') after ${ms} ms (last: ${last}).\noutput:\n${this.output}`);
  }

  /** The public port's /health: {status, connections, channels}. */
  async health() {
    const res = await fetch(`${this.httpUrl}/health`, { signal: AbortSignal.timeout(WAIT_MS) });
    return { status: res.status, body: await res.json() };
  }

  /**
   * The metrics listener's /health: the whole report (the cluster bus and its nodes, the ingest
   * sources, the app store, the version), of which the public /health gives the status and the
   * counts only.
   */
  async detail() {
    const res = await fetch(`http://127.0.0.1:${this.config.metrics.port}/health`, { signal: AbortSignal.timeout(WAIT_MS) });
    return { status: res.status, body: await res.json() };
  }

  /** Waits until /health reports exactly n current connections. */
  async waitConnections(n, ms = WAIT_MS) {
    let seen = 'no answer yet';
    return eventually(
      async () => {
        const h = await this.health();
        seen = h.body.connections.current;
        return seen === n ? h.body : false;
      },
      ms,
      () => `/health connections.current == ${n} on ${this.httpUrl} (last seen: ${seen})`,
    );
  }

  /**
   * SIGTERM to this server's pid, wait for exit; returns {code, signal}. Kills it with SIGKILL
   * if it hangs. The deadline is generous: herald itself takes up to shutdown_timeout (5 s).
   */
  async stop(ms = 30_000) {
    if (!this.proc) return null;
    if (this.exitInfo) return this.exitInfo;
    try {
      this.proc.kill('SIGTERM');
    } catch {}
    let info;
    try {
      info = await withDeadline(this.exited, ms, `herald (pid ${this.proc.pid}) to exit after SIGTERM`);
    } catch (e) {
      try {
        this.proc.kill('SIGKILL');
      } catch {}
      await this.exited;
      throw new Error(`${e.message}\noutput:\n${this.output}`);
    }
    return info;
  }

  /** The pusher server SDK configured for this server and app. */
  sdk(app = APP1, extra = {}) {
    return new PusherServer({
      appId: app.id,
      key: app.key,
      secret: app.secret,
      host: '127.0.0.1',
      port: String(this.port),
      useTLS: this.tls,
      encryptionMasterKeyBase64: MASTER_KEY_B64,
      timeout: WAIT_MS,
      ...extra,
    });
  }
}

/**
 * Starts herald with the default two apps. opts.config overrides/extends top-level keys,
 * opts.apps replaces the app list, opts.port reuses a port (for restarts), opts.bin runs
 * another herald binary (an earlier release), opts.healthStatus is the /health status to wait
 * for (default 'ok'). Ports are free ports; if another process
 * takes one between the probe and herald's bind, herald exits with "address already in use"
 * and this starts it again on new ports (on the same port for a restart).
 */
export async function startServer(opts = {}) {
  let dir = opts.dir;
  if (!dir) {
    dir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-run-'));
    runDirs.add(dir);
  }
  // opts.apps === null: no apps in the file (an app store keeps them).
  const apps = opts.apps === null ? undefined : (opts.apps || [APP1, APP2]).map((a) => JSON.parse(JSON.stringify(a)));
  for (let attempt = 1; ; attempt++) {
    const port = opts.port ?? (await freePort());
    const config = {
      activity_timeout: '120s',
      pong_timeout: '30s',
      shutdown_timeout: '5s',
      ...(opts.config || {}),
      // No drain delay unless a test asks for one: SIGTERM closes the clients at once.
      shutdown: { drain_delay: '0s', ...((opts.config && opts.config.shutdown) || {}) },
      // Every server gets its own metrics port: the default 9601 would collide between servers.
      // opts.config.metrics adds to (or overrides) these keys, e.g. {prefix: 'soketi_'}.
      metrics: {
        host: '127.0.0.1',
        port: opts.metricsPort ?? (await freePort()),
        ...((opts.config && opts.config.metrics) || {}),
      },
    };
    const server = new HeraldServer({ port, config, apps, dir, bin: opts.bin });
    // The /health status start() waits for: 'ok' by default.
    if (opts.healthStatus) server.healthStatus = opts.healthStatus;
    try {
      await server.start();
      return server;
    } catch (e) {
      const inUse = server.exitInfo && /address already in use/i.test(server.output);
      if (!inUse || attempt >= 5) throw e;
      if (opts.port !== undefined) await new Promise((r) => setTimeout(r, 250 * attempt)); // poll interval
    }
  }
}

/** Stops a server and asserts (by throwing) that it exited with status 0. */
export async function stopServer(server) {
  if (!server) return;
  const info = await server.stop();
  if (!info || info.code !== 0) {
    throw new Error(
      `herald did not exit cleanly on SIGTERM: ${JSON.stringify(info)}\noutput:\n${server.output.slice(-5000)}`,
    );
  }
  return info;
}

// ---------------------------------------------------------------------------------------------
// pusher-js clients

// pusher-js in Node talks through its bundled faye-websocket. When pusher-js closes a socket
// that the server has already closed (it does so after a "refused" close code such as 4009 or
// 4004), faye still arms its 30 s close timer, which then does nothing but keeps the test
// process alive for 30 s. Unref that timer when the socket is already closed; behaviour is
// otherwise unchanged.
const FayeWebSocket = Pusher.Runtime.getWebSocketAPI();
const fayeClose = FayeWebSocket.prototype.close;
FayeWebSocket.prototype.close = function patchedClose(...args) {
  const alreadyClosed = this.readyState === 3;
  const result = fayeClose.apply(this, args);
  if (alreadyClosed && this._closeTimer && typeof this._closeTimer.unref === 'function') {
    this._closeTimer.unref();
  }
  return result;
};

const liveClients = new Set();

/**
 * A pusher-js client for server/app. `presence` is a function (channelName) => presence data
 * ({user_id, user_info}) used by the channel authorizer; `user` is the user object for signin.
 * `authorize` overrides the whole channel authorizer (params, cb).
 */
export function makeClient(server, { app = APP1, presence, user, authorize, sdk, options = {} } = {}) {
  const serverSdk = sdk || server.sdk(app);
  const client = new Pusher(app.key, {
    wsHost: '127.0.0.1',
    wsPort: server.port,
    forceTLS: false,
    enabledTransports: ['ws'],
    disableStats: true,
    cluster: 'mt1',
    channelAuthorization: {
      customHandler:
        authorize ||
        ((params, cb) => {
          try {
            const pd =
              params.channelName.startsWith('presence-') && presence
                ? presence(params.channelName)
                : undefined;
            cb(null, serverSdk.authorizeChannel(params.socketId, params.channelName, pd));
          } catch (e) {
            cb(e, null);
          }
        }),
    },
    userAuthentication: {
      customHandler: (params, cb) => {
        try {
          cb(null, serverSdk.authenticateUser(params.socketId, user));
        } catch (e) {
          cb(e, null);
        }
      },
    },
    ...options,
  });
  liveClients.add(client);
  return client;
}

/** makeClient + wait for state 'connected'. */
export async function connectClient(server, opts = {}, ms = WAIT_MS) {
  const client = makeClient(server, opts);
  await waitForState(client, 'connected', ms);
  return client;
}

export function waitForState(client, state, ms = WAIT_MS) {
  if (client.connection.state === state) return Promise.resolve();
  const seen = [client.connection.state];
  let cb;
  return withDeadline(
    new Promise((resolve) => {
      cb = ({ current }) => {
        seen.push(current);
        if (current === state) {
          client.connection.unbind('state_change', cb);
          resolve();
        }
      };
      client.connection.bind('state_change', cb);
    }),
    ms,
    () => `pusher-js state '${state}' (states seen: ${seen.join(' -> ')})`,
  ).catch((e) => {
    client.connection.unbind('state_change', cb);
    throw e;
  });
}

export function disconnectClient(client) {
  try {
    client.disconnect();
  } catch {}
  liveClients.delete(client);
}

export function disconnectAllClients() {
  for (const c of [...liveClients]) disconnectClient(c);
}

/**
 * Records every emission of `event` on a pusher-js bindable (channel, client, user,
 * connection) from now on. next(ms) resolves the next unconsumed one as {data, meta, at}
 * (at: Date.now() when it was emitted).
 */
export function record(target, event) {
  const items = [];
  const waiters = [];
  let consumed = 0;
  const cb = (data, meta) => {
    items.push({ data, meta, at: Date.now() });
    flush();
  };
  function flush() {
    while (waiters.length && consumed < items.length) {
      const w = waiters.shift();
      clearTimeout(w.timer);
      w.resolve(items[consumed++]);
    }
  }
  target.bind(event, cb);
  return {
    items,
    next(ms = WAIT_MS) {
      return new Promise((resolve, reject) => {
        const w = { resolve };
        w.timer = setTimeout(() => {
          const i = waiters.indexOf(w);
          if (i >= 0) waiters.splice(i, 1);
          reject(
            new Error(
              `timed out after ${ms} ms waiting for '${event}' #${consumed + 1} ` +
                `(got ${items.length} so far: ${fmt(items.map((x) => x.data)).slice(0, 1000)})`,
            ),
          );
        }, ms);
        waiters.push(w);
        flush();
      });
    },
    stop() {
      target.unbind(event, cb);
    },
  };
}

/** One emission of `event` on a pusher-js bindable, matching filter, within ms. */
export function waitForBind(target, event, ms = WAIT_MS, filter = () => true) {
  let cb;
  const other = []; // emissions the filter turned down
  return withDeadline(
    new Promise((resolve) => {
      cb = (data, meta) => {
        if (!filter(data, meta)) {
          other.push(data);
          return;
        }
        target.unbind(event, cb);
        resolve(data);
      };
      target.bind(event, cb);
    }),
    ms,
    () => `'${event}'` + (other.length ? ` (${other.length} that did not match: ${fmt(other).slice(0, 1000)})` : ' (none)'),
  ).catch((e) => {
    target.unbind(event, cb);
    throw e;
  });
}

/** Subscribes and waits for pusher:subscription_succeeded (rejects on subscription_error). */
export async function subscribe(client, name, ms = WAIT_MS) {
  const ch = client.subscribe(name);
  let onErr;
  const failed = new Promise((_, reject) => {
    onErr = (err) => reject(new Error(`subscription_error on ${name}: ${JSON.stringify(err)}`));
    ch.bind('pusher:subscription_error', onErr);
  });
  try {
    await Promise.race([waitForBind(ch, 'pusher:subscription_succeeded', ms), failed]);
  } finally {
    ch.unbind('pusher:subscription_error', onErr);
  }
  return ch;
}

// ---------------------------------------------------------------------------------------------
// Raw WebSocket client

function parseFrame(raw) {
  const msg = JSON.parse(raw);
  let data = msg.data;
  if (typeof data === 'string') {
    try {
      data = JSON.parse(data);
    } catch {}
  }
  return { event: msg.event, channel: msg.channel, data, rawData: msg.data, user_id: msg.user_id, frame: msg, raw };
}

export class RawClient {
  constructor(ws, app) {
    this.ws = ws;
    this.app = app;
    this.messages = [];
    this.consumed = new Set();
    this.waiters = [];
    this.closeInfo = null;
    this.socketId = null;
    this.established = null;
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.closeInfo = { code, reason: reason.toString() };
        resolve(this.closeInfo);
        this._check();
      });
    });
    ws.on('error', (e) => {
      this.error = e;
    });
    ws.on('message', (data, isBinary) => {
      let m;
      try {
        m = parseFrame(data.toString());
      } catch (e) {
        m = { event: undefined, unparsable: data.toString(), isBinary };
      }
      m.at = Date.now();
      this.messages.push(m);
      this._check();
    });
  }

  /**
   * Opens a socket to /app/{key}. Resolves once open (no handshake wait). wsOptions go to the
   * `ws` constructor: {origin} sends an Origin header, {localAddress: '127.0.0.2'} picks the
   * client address, {headers} adds others.
   */
  static open(
    server,
    key = APP1.key,
    { query = 'protocol=7&client=js&version=8.6.0&flash=false', path: p, wsOptions } = {},
  ) {
    const url = `${server.wsUrl}${p ?? `/app/${key}`}${query ? `?${query}` : ''}`;
    const ws = new WebSocket(url, wsOptions);
    const app = server.apps.find((a) => a.key === key) || { key };
    const client = new RawClient(ws, app);
    rawClients.add(client);
    return withDeadline(
      new Promise((resolve, reject) => {
        ws.once('open', () => resolve(client));
        ws.once('unexpected-response', (req, res) =>
          reject(new Error(`WebSocket upgrade refused with HTTP ${res.statusCode}`)),
        );
        ws.once('error', (e) => reject(e));
      }),
      WAIT_MS,
      `WebSocket open ${url}`,
    );
  }

  /** Opens and waits for pusher:connection_established. */
  static async connect(server, key = APP1.key, opts = {}) {
    const c = await RawClient.open(server, key, opts);
    const est = await c.waitFor('pusher:connection_established');
    c.established = est;
    c.socketId = est.data.socket_id;
    return c;
  }

  _match(m, pred) {
    if (typeof pred === 'string') return m.event === pred;
    return pred(m);
  }

  _check() {
    for (const w of [...this.waiters]) {
      const idx = this.messages.findIndex((m, i) => !this.consumed.has(i) && this._match(m, w.pred));
      if (idx >= 0) {
        this.consumed.add(idx);
        this.waiters.splice(this.waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.resolve(this.messages[idx]);
      } else if (this.closeInfo && !w.allowClosed) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        clearTimeout(w.timer);
        w.reject(
          new Error(
            `socket closed (${this.closeInfo.code} ${this.closeInfo.reason}) while waiting for ${w.what}; received: ${this.describe()}`,
          ),
        );
      }
    }
  }

  /**
   * Next unconsumed message matching pred (event name, or function of the parsed message),
   * optionally restricted to a channel.
   */
  waitFor(pred, { channel, ms = WAIT_MS } = {}) {
    const base = pred;
    const full =
      channel === undefined
        ? base
        : (m) => m.channel === channel && (typeof base === 'string' ? m.event === base : base(m));
    const what = typeof base === 'string' ? `'${base}'${channel ? ` on ${channel}` : ''}` : 'matching message';
    return new Promise((resolve, reject) => {
      const w = { pred: full, resolve, reject, what };
      w.timer = setTimeout(() => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}; received: ${this.describe()}`));
      }, ms);
      this.waiters.push(w);
      this._check();
    });
  }

  /** Marks every message received so far as consumed (waitFor will only see later ones). */
  drain() {
    this.messages.forEach((_, i) => this.consumed.add(i));
  }

  /** Whether any message ever received (consumed or not) matches pred. */
  seen(pred) {
    return this.messages.some((m) => this._match(m, pred));
  }

  filter(pred) {
    return this.messages.filter((m) => this._match(m, pred));
  }

  describe() {
    return JSON.stringify(this.messages.map((m) => m.raw ?? m.unparsable)).slice(0, 3000);
  }

  send(obj) {
    this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
  }

  sendBinary(buf) {
    this.ws.send(buf, { binary: true });
  }

  subscribe(channel, extra = {}) {
    this.send({ event: 'pusher:subscribe', data: { channel, ...extra } });
  }

  unsubscribe(channel) {
    this.send({ event: 'pusher:unsubscribe', data: { channel } });
  }

  /** Subscribes (computing auth with the app secret for private/presence) and waits for success. */
  async subscribeOk(channel, { channelData, ms = WAIT_MS } = {}) {
    const extra = {};
    if (channel.startsWith('private-') || channel.startsWith('presence-')) {
      let toSign = `${this.socketId}:${channel}`;
      if (channelData !== undefined) {
        extra.channel_data = typeof channelData === 'string' ? channelData : JSON.stringify(channelData);
        toSign += `:${extra.channel_data}`;
      }
      extra.auth = `${this.app.key}:${hmacHex(this.app.secret, toSign)}`;
    }
    this.subscribe(channel, extra);
    const m = await this.waitFor(
      (x) =>
        (x.event === 'pusher_internal:subscription_succeeded' && x.channel === channel) ||
        (x.event === 'pusher:subscription_error' && x.channel === channel) ||
        x.event === 'pusher:error',
      { ms },
    );
    if (m.event !== 'pusher_internal:subscription_succeeded') {
      throw new Error(`subscribe ${channel} failed: ${m.raw}`);
    }
    return m;
  }

  /** pusher:signin signed with the app secret; waits for pusher:signin_success. */
  async signinOk(userData, { ms = WAIT_MS } = {}) {
    const user_data = JSON.stringify(userData);
    const auth = `${this.app.key}:${hmacHex(this.app.secret, `${this.socketId}::user::${user_data}`)}`;
    this.send({ event: 'pusher:signin', data: { auth, user_data } });
    const m = await this.waitFor((x) => x.event === 'pusher:signin_success' || x.event === 'pusher:error', { ms });
    if (m.event !== 'pusher:signin_success') throw new Error(`signin failed: ${m.raw}`);
    return m;
  }

  /** ping -> pong round trip: proves the socket is open and the server is still reading it. */
  async ping(ms = WAIT_MS) {
    this.send({ event: 'pusher:ping', data: {} });
    return this.waitFor('pusher:pong', { ms });
  }

  get isOpen() {
    return this.ws.readyState === WebSocket.OPEN;
  }

  close() {
    try {
      this.ws.close();
    } catch {}
    rawClients.delete(this);
  }

  terminate() {
    try {
      this.ws.terminate();
    } catch {}
    rawClients.delete(this);
  }
}

const rawClients = new Set();

export function closeAllRaw() {
  for (const c of [...rawClients]) c.terminate();
}

/** Closes every client opened through the harness. */
export function cleanupAll() {
  disconnectAllClients();
  closeAllRaw();
}

// ---------------------------------------------------------------------------------------------
// A TCP proxy that can fail

const liveProxies = new Set();

/**
 * A TCP proxy on a free loopback port in front of target (anything with a .port: a
 * HeraldServer, a LoadBalancer), for a client whose network fails: stall() stops forwarding in
 * both directions while the connections stay open (what each side sent after it stays in the
 * proxy), and outage(ms) then drops every connection and refuses new ones (the listener is
 * closed) for ms before it listens again on the same port. log has one entry per accepted
 * connection: {at, open, dropped}.
 */
export class TcpProxy {
  constructor(target) {
    this.target = target;
    this.server = null;
    this.port = null;
    this.pairs = new Set();
    this.stalled = false;
    this.log = [];
  }

  async start() {
    if (this.port === null) this.port = await freePort();
    const end = Date.now() + WAIT_MS;
    for (let attempt = 1; ; attempt++) {
      const server = net.createServer((client) => this._accept(client));
      try {
        await new Promise((resolve, reject) => {
          server.once('error', reject);
          server.listen(this.port, '127.0.0.1', resolve);
        });
        this.server = server;
        liveProxies.add(this);
        return this;
      } catch (e) {
        // Listening again after an outage: the port was just released; poll until it binds.
        if (e.code !== 'EADDRINUSE' || Date.now() > end) throw e;
        await new Promise((r) => setTimeout(r, 20 * attempt)); // poll interval
      }
    }
  }

  _accept(client) {
    const entry = { at: Date.now(), open: true, dropped: false };
    this.log.push(entry);
    client.pause();
    client.on('error', () => {});
    const upstream = net.connect({ host: '127.0.0.1', port: this.target.port });
    upstream.pause();
    upstream.on('error', () => {});
    const pair = { client, upstream, entry, connected: false };
    this.pairs.add(pair);
    const end = () => {
      entry.open = false;
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    upstream.on('connect', () => {
      pair.connected = true;
      if (!this.stalled) this._forward(pair);
    });
  }

  _forward({ client, upstream }) {
    client.pipe(upstream);
    upstream.pipe(client);
    client.resume();
    upstream.resume();
  }

  /** Stops forwarding: nothing more goes through in either direction until the connections drop. */
  stall() {
    this.stalled = true;
    for (const { client, upstream } of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
    }
  }

  /** Drops every connection (what the proxy held is lost) and closes the listener. */
  async down() {
    const server = this.server;
    this.server = null;
    // close() stops accepting at once and calls back when the last connection has ended.
    const closed = server ? new Promise((resolve) => server.close(() => resolve())) : null;
    this._dropAll();
    this.stalled = false;
    if (closed) await closed;
  }

  _dropAll() {
    for (const pair of [...this.pairs]) {
      pair.entry.dropped = true;
      pair.client.destroy();
      pair.upstream.destroy();
    }
  }

  /**
   * Drops every connection and refuses new ones for ms, then listens again on the same port.
   * Resolves once it listens again, with {downAt, upAt} (Date.now()).
   */
  async outage(ms) {
    const downAt = Date.now();
    await this.down();
    const wait = downAt + ms - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait)); // the outage itself, not a wait for something
    await this.start();
    return { downAt, upAt: Date.now() };
  }

  /** Closes the listener and every connection. */
  async stop() {
    await this.down();
    liveProxies.delete(this);
  }
}

/** Stops every proxy started through the harness. */
export async function stopAllProxies() {
  for (const p of [...liveProxies]) await p.stop();
}

// ---------------------------------------------------------------------------------------------
// Raw REST

/**
 * Signs a REST request as docs/protocol.md describes ("Signing") and sends it. Options let a
 * test break one part (timestamp, bodyMd5, secret) to check the server refuses it.
 */
export async function restRequest(
  server,
  { app = APP1, method = 'GET', path: p, params = {}, body, timestamp, bodyMd5, secret, appId } = {},
) {
  const fullPath = `/apps/${appId ?? app.id}${p}`;
  const bodyStr = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const q = {
    auth_key: app.key,
    auth_timestamp: String(timestamp ?? Math.floor(Date.now() / 1000)),
    auth_version: '1.0',
    ...params,
  };
  if (bodyStr) q.body_md5 = bodyMd5 ?? md5Hex(bodyStr);
  const qs = Object.keys(q)
    .sort()
    .map((k) => `${k}=${q[k]}`)
    .join('&');
  const toSign = `${method.toUpperCase()}\n${fullPath}\n${qs}`;
  const sig = hmacHex(secret ?? app.secret, toSign);
  const url = `${server.httpUrl}${fullPath}?${qs}&auth_signature=${sig}`;
  const res = await fetch(url, {
    method,
    body: bodyStr,
    headers: bodyStr ? { 'content-type': 'application/json' } : {},
    signal: AbortSignal.timeout(WAIT_MS),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, text, json, headers: res.headers };
}

/** Parses the JSON body of an SDK (node-fetch) response. */
export async function sdkJson(resPromise) {
  const res = await resPromise;
  return res.json();
}

/** Runs an SDK call expected to fail; returns the RequestError (status, body). */
export async function sdkError(promiseOrFn) {
  try {
    const p = typeof promiseOrFn === 'function' ? promiseOrFn() : promiseOrFn;
    const res = await p;
    throw Object.assign(new Error(`expected the request to fail, got HTTP ${res && res.status}`), {
      unexpected: true,
    });
  } catch (e) {
    if (e.unexpected) throw e;
    return e;
  }
}

export { existsSync };

// ---------------------------------------------------------------------------------------------
// Assertion helpers shared by the tests

/**
 * Waits for the server's refusal of a subscription on a raw client: either
 * `pusher:subscription_error` on that channel or a `pusher:error`. Returns
 * {event, status|code, message, msg}. Throws if subscription_succeeded arrives instead.
 */
export async function subscribeRejection(raw, channel, ms = WAIT_MS) {
  const m = await raw.waitFor(
    (x) =>
      (x.event === 'pusher:subscription_error' && x.channel === channel) ||
      x.event === 'pusher:error' ||
      (x.event === 'pusher_internal:subscription_succeeded' && x.channel === channel),
    { ms },
  );
  if (m.event === 'pusher_internal:subscription_succeeded') {
    throw new Error(`expected ${channel} to be refused, got ${m.raw}`);
  }
  const d = m.data || {};
  return {
    event: m.event,
    status: d.status,
    code: d.code,
    message: m.event === 'pusher:error' ? d.message : d.error ?? d.message,
    msg: m,
  };
}

/** The Pusher code carried by a pusher-js connection 'error' payload (close or pusher:error). */
export function pusherJsErrorCode(err) {
  if (!err) return undefined;
  if (err.data && err.data.code !== undefined) return err.data.code;
  if (err.error && err.error.data && err.error.data.code !== undefined) return err.error.data.code;
  return undefined;
}

// useServer registers the lifecycle every test file shares: start one herald before the file's
// tests (opts as for startServer), clean up clients after each test, and stop the server after
// the last one (stopServer throws unless it exited 0). onStart receives the running server.
export function useServer(onStart, opts = {}) {
  let server;
  before(async () => {
    server = await startServer(opts);
    onStart(server);
  });
  afterEach(() => cleanupAll());
  after(async () => {
    cleanupAll();
    await stopServer(server);
  });
}

// ---------------------------------------------------------------------------------------------
// Prometheus metrics

/** Canonical sample key: name{a="x",b="y"} with label names sorted; bare name without labels. */
export function metricKey(name, labels = {}) {
  const ks = Object.keys(labels).sort();
  if (ks.length === 0) return name;
  return `${name}{${ks.map((k) => `${k}=${JSON.stringify(String(labels[k]))}`).join(',')}}`;
}

/** Parses the Prometheus text format into a Map of metricKey -> number (comments skipped). */
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (!m) throw new Error(`unparsable metrics line: ${line}`);
    const labels = {};
    if (m[2]) {
      const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
      let l;
      while ((l = re.exec(m[2]))) labels[l[1]] = JSON.parse(`"${l[2]}"`);
    }
    out.set(metricKey(m[1], labels), Number(m[3]));
  }
  return out;
}

/** GETs url (default server.metricsUrl) and returns {status, text, samples}. */
export async function scrapeMetrics(serverOrUrl) {
  const url = typeof serverOrUrl === 'string' ? serverOrUrl : serverOrUrl.metricsUrl;
  const res = await fetch(url, { signal: AbortSignal.timeout(WAIT_MS) });
  const text = await res.text();
  return { status: res.status, text, samples: res.status === 200 ? parseMetrics(text) : new Map() };
}

/**
 * Polls /metrics until every expected sample has exactly its value ({metricKey: number});
 * returns the samples. Counters are updated just after the frames they count are queued or
 * read, so a test that has seen the effect polls briefly for the count. On timeout the error
 * lists every sample that differs.
 */
export async function expectMetrics(server, expected, ms = WAIT_MS) {
  const end = Date.now() + ms;
  let diff = [];
  for (;;) {
    let samples = null;
    try {
      ({ samples } = await scrapeMetrics(server));
      diff = [];
      for (const [k, v] of Object.entries(expected)) {
        const got = samples.has(k) ? samples.get(k) : 'absent';
        if (got !== v) diff.push(`${k}: want ${v}, got ${got}`);
      }
    } catch (e) {
      // A scrape that fails (slow machine) is retried until the deadline.
      diff = [`scrape failed: ${e.message}`];
    }
    if (diff.length === 0) return samples;
    if (Date.now() > end) {
      throw new Error(`metrics still differ after ${ms} ms:\n  ${diff.join('\n  ')}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
