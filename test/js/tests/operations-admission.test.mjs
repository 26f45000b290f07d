// Admission control: per-address connection rate (4100), the memory guard (4100, /ready 503,
// pusher-js backs off), the handshake timeout (slow-loris sockets are dropped) and the per-app
// origin allow-list (4009). Each refusal is checked for its code, for leaving other clients
// alone, and for being counted exactly in herald_refused_connections_total.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import {
  APP1,
  RawClient,
  connectClient,
  makeClient,
  waitForBind,
  pusherJsErrorCode,
  record,
  subscribe,
  startServer,
  stopServer,
  cleanupAll,
  scrapeMetrics,
  expectMetrics,
  metricKey,
  eventually,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

const IP_RATE = 1; // connections per second per address
const IP_BURST = 3;

const ORIGINS_APP = {
  id: 'origins',
  key: 'origins-key',
  secret: 'origins-secret',
  enable_client_messages: false,
  enable_user_authentication: false,
  allowed_origins: ['https://good.example', '*.example.org'],
};

let ipServer; // connection_rate_per_ip 1, burst 3; default handshake_timeout (5s)
let memServer; // memory.limit_bytes far below the process's RSS: refuses everything
let hsServer; // handshake_timeout 1s; app with an origin allow-list

before(async () => {
  [ipServer, memServer, hsServer] = await Promise.all([
    startServer({ config: { connection_rate_per_ip: IP_RATE, connection_burst_per_ip: IP_BURST } }),
    startServer({ config: { memory: { limit_bytes: 1_000_000 } }, healthStatus: 'refusing' }),
    startServer({ config: { handshake_timeout: '1s' }, apps: [APP1, ORIGINS_APP] }),
  ]);
});
afterEach(async () => {
  cleanupAll();
  for (const s of [ipServer, memServer, hsServer]) if (!s.exitInfo) await s.waitConnections(0);
});
after(async () => {
  cleanupAll();
  await stopServer(ipServer);
  await stopServer(memServer);
  await stopServer(hsServer);
});

const refused = (reason) => metricKey('herald_refused_connections_total', { reason });
const perApp = (name, app = APP1) => metricKey(name, { app_id: app.id });

/**
 * Opens a raw socket and reports how the server answered: {established: RawClient} or
 * {refused: {code (close), errorCode (pusher:error), closeReason}}.
 */
async function attempt(server, key = APP1.key, wsOptions) {
  const c = await RawClient.open(server, key, { wsOptions });
  const first = await c.waitFor((m) => m.event === 'pusher:connection_established' || m.event === 'pusher:error');
  if (first.event === 'pusher:connection_established') {
    c.socketId = first.data.socket_id;
    return { established: c };
  }
  const close = await withDeadline(c.closed, WAIT_MS, 'close after pusher:error');
  assert.ok(!c.seen('pusher:connection_established'), c.describe());
  return { refused: { code: close.code, errorCode: first.data.code, message: first.data.message } };
}

// ---------------------------------------------------------------------------------------------
// Per-address connection rate

test('per-IP rate: over the burst an address is refused with pusher:error + close 4100; others and open sockets are unaffected', async () => {
  // Attempts in batches of IP_BURST + 3 at once, until one is refused: the burst (3) is
  // accepted, then one more per second the batch takes to arrive. A batch that takes more
  // than three seconds (a very busy machine) may be accepted whole; the next one is tried.
  const open = [];
  const refusals = [];
  const batches = [];
  await eventually(
    async () => {
      const t0 = Date.now();
      const results = await Promise.all(Array.from({ length: IP_BURST + 3 }, () => attempt(ipServer)));
      const elapsed = Date.now() - t0;
      const accepted = results.filter((r) => r.established).length;
      // The bucket is full before the first batch; the rate bounds every batch.
      const most = (batches.length === 0 ? IP_BURST : 0) + Math.ceil((elapsed / 1000) * IP_RATE) + 1;
      batches.push({ accepted, elapsed, most });
      for (const r of results) {
        if (r.established) open.push(r.established);
        else refusals.push(r.refused);
      }
      return refusals.length > 0;
    },
    WAIT_MS,
    () => `a refusal from the per-IP rate (batches: ${JSON.stringify(batches)})`,
  );
  for (const b of batches) {
    assert.ok(b.accepted <= b.most, `${b.accepted} of ${IP_BURST + 3} accepted in ${b.elapsed} ms, want <= ${b.most}`);
  }
  assert.ok(open.length >= IP_BURST, `only ${open.length} accepted: ${JSON.stringify(batches)}`);
  for (const refusal of refusals) {
    assert.equal(refusal.errorCode, 4100, JSON.stringify(refusal));
    assert.equal(refusal.code, 4100, JSON.stringify(refusal));
    assert.match(refusal.message, /\S/);
  }

  // Another address is not limited by 127.0.0.1's bucket: its whole burst gets through now.
  const other = [];
  for (let i = 0; i < IP_BURST; i++) {
    const r = await attempt(ipServer, APP1.key, { localAddress: '127.0.0.2' });
    assert.ok(r.established, `127.0.0.2 refused: ${JSON.stringify(r.refused)}`);
    other.push(r.established);
  }
  // The connections already open from 127.0.0.1 are untouched and still served.
  const name = uniq('ip-');
  for (const c of [...open, ...other]) await c.subscribeOk(name);
  await ipServer.sdk().trigger(name, 'ev', 'x');
  for (const c of [...open, ...other]) await c.waitFor('ev', { channel: name });

  const accepted = open.length + other.length;
  await expectMetrics(ipServer, {
    [refused('ip_rate')]: refusals.length,
    [perApp('herald_connected')]: accepted,
    [perApp('herald_new_connections_total')]: accepted,
    herald_node_connections: accepted,
  });

  // 127.0.0.1 gets a token back within about a second: polled every 200 ms, a few refusals
  // at most (a slower machine polls less often, so refuses fewer).
  let refusedMore = 0;
  const codes = [];
  const back = await eventually(
    async () => {
      const r = await attempt(ipServer);
      if (r.refused) {
        codes.push(r.refused.code);
        refusedMore += 1;
        await new Promise((res) => setTimeout(res, 200));
        return false;
      }
      return r.established;
    },
    WAIT_MS,
    () => `127.0.0.1 accepted again (${refusedMore} refusals so far)`,
  );
  await back.ping();
  for (const code of codes) assert.equal(code, 4100, `refusal codes while waiting: ${codes}`);
  assert.ok(refusedMore <= 8, `${refusedMore} refusals while waiting for one token`);
  await expectMetrics(ipServer, {
    [refused('ip_rate')]: refusals.length + refusedMore,
    [perApp('herald_new_connections_total')]: accepted + 1,
    [refused('memory')]: 0,
    [refused('node_full')]: 0,
  });
});

// ---------------------------------------------------------------------------------------------
// Memory guard

test('memory guard over its limit: /ready 503, /health status refusing, metric 1', async () => {
  const ready = await fetch(`${memServer.httpUrl}/ready`, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(ready.status, 503);
  assert.deepEqual(await ready.json(), { ready: false, status: 'refusing' });
  const h = await memServer.health();
  assert.equal(h.status, 200);
  assert.equal(h.body.status, 'refusing');
  assert.equal(h.body.connections.current, 0);
  const m = await expectMetrics(memServer, { herald_memory_guard_refusing: 1 });
  assert.ok(m.get('process_resident_memory_bytes') > 1_000_000 * 0.9);
  // The healthy nodes say otherwise.
  const ok = await fetch(`${hsServer.httpUrl}/ready`, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), { ready: true });
  await expectMetrics(hsServer, { herald_memory_guard_refusing: 0 });
});

test('memory guard: a new connection gets pusher:error + close 4100; the REST API still works', async () => {
  const base = (await scrapeMetrics(memServer)).samples.get(refused('memory'));
  for (let i = 0; i < 2; i++) {
    const r = await attempt(memServer);
    assert.ok(r.refused, 'connection accepted by a refusing node');
    assert.equal(r.refused.errorCode, 4100);
    assert.equal(r.refused.code, 4100);
  }
  const res = await memServer.sdk().trigger(uniq('mem-'), 'ev', 'x');
  assert.equal(res.status, 200);
  await expectMetrics(memServer, {
    [refused('memory')]: base + 2,
    [perApp('herald_new_connections_total')]: 0,
    [perApp('herald_connected')]: 0,
    [perApp('herald_http_calls_received_total')]: 1,
  });
});

test('memory guard: pusher-js gets 4100, stays connecting and backs off (about one attempt a second)', async () => {
  const base = (await scrapeMetrics(memServer)).samples.get(refused('memory'));
  const client = makeClient(memServer);
  const states = [];
  client.connection.bind('state_change', ({ current }) => states.push(current));
  const errors = record(client.connection, 'error');
  // Three refusals in a row. pusher-js waits 1 s after each 4100 ('backoff') before it tries
  // again, so they are at least 1 s apart however slow the machine; a tight loop would make
  // them milliseconds apart.
  const ATTEMPTS = 3;
  for (let i = 0; i < ATTEMPTS; i++) {
    const e = await errors.next();
    assert.equal(pusherJsErrorCode(e.data), 4100, JSON.stringify(e.data));
  }
  const state = client.connection.state;
  client.disconnect();
  assert.ok(!states.includes('connected'), `states: ${states}`);
  assert.ok(['connecting', 'unavailable'].includes(state), `state ${state}; states ${states}`);
  const at = errors.items.map((e) => e.at);
  for (let i = 1; i < ATTEMPTS; i++) {
    // 50 ms for timer and clock granularity; a slow machine only makes the gap longer.
    assert.ok(at[i] - at[i - 1] >= 950, `attempts ${at[i] - at[i - 1]} ms apart: ${at.map((t) => t - at[0])}`);
  }
  for (const e of errors.items) assert.equal(pusherJsErrorCode(e.data), 4100, JSON.stringify(e.data));
  // Every refusal pusher-js saw was counted; one more may have been under way at disconnect.
  const seen = errors.items.length;
  const attempts = await eventually(
    async () => {
      const n = (await scrapeMetrics(memServer)).samples.get(refused('memory')) - base;
      return n >= seen ? n : false;
    },
    WAIT_MS,
    `herald_refused_connections_total{reason="memory"} >= ${base} + ${seen}`,
  );
  assert.ok(attempts <= seen + 1, `${attempts} refusals counted, pusher-js saw ${seen}`);
});

// ---------------------------------------------------------------------------------------------
// Handshake timeout

/** A raw TCP socket that writes `data` (maybe nothing) and then waits. */
function slowSocket(server, data) {
  // Taken before connecting: the server cannot have accepted the socket (and started its
  // timer) earlier, while the 'connect' event may come late on a loaded machine.
  const startedAt = Date.now();
  const s = net.connect({ host: '127.0.0.1', port: server.port });
  const info = { socket: s, received: '', closedAt: null, startedAt };
  info.connected = new Promise((resolve, reject) => {
    s.once('connect', () => {
      if (data) s.write(data);
      resolve();
    });
    s.once('error', reject);
  });
  s.on('error', () => {});
  s.on('data', (d) => {
    info.received += d.toString('latin1');
  });
  info.closed = new Promise((resolve) => {
    s.once('close', () => {
      info.closedAt = Date.now();
      resolve();
    });
  });
  return info;
}

test('handshake_timeout 1s: sockets that send nothing or half a request are dropped; other clients are fine', async () => {
  const before = await connectClient(hsServer);
  const name = uniq('hs-');
  const chBefore = await subscribe(before, name);

  const silent = slowSocket(hsServer);
  const half = slowSocket(hsServer, `GET /app/${APP1.key}?protocol=7 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n`);
  const control = slowSocket(ipServer); // default handshake_timeout: 5s
  await Promise.all([silent.connected, half.connected, control.connected]);

  // While they hang, a new pusher-js client connects and gets events.
  const during = await connectClient(hsServer);
  const chDuring = await subscribe(during, name);

  await withDeadline(Promise.all([silent.closed, half.closed]), WAIT_MS, 'slow sockets closed by the server');
  for (const [what, s] of [
    ['silent', silent],
    ['half request', half],
  ]) {
    const after = s.closedAt - s.startedAt;
    assert.ok(after >= 950, `${what} socket closed after ${after} ms, before the 1 s timeout`);
    assert.doesNotMatch(s.received, /101 Switching Protocols/, `${what}: ${s.received}`);
  }
  // The default timeout (5 s) is not 1 s: the same silent socket on the other node is still
  // open, or (on a machine slow enough that 5 s have passed) was closed no sooner than that.
  const controlAfter = control.closedAt === null ? null : control.closedAt - control.startedAt;
  assert.ok(
    controlAfter === null || controlAfter >= 4500,
    `a silent socket was closed after ${controlAfter} ms by a node with the default handshake_timeout (5 s)`,
  );
  control.socket.destroy();

  const got = [record(chBefore, 'ev'), record(chDuring, 'ev')];
  await hsServer.sdk().trigger(name, 'ev', { ok: 1 });
  for (const g of got) assert.deepEqual((await g.next()).data, { ok: 1 });
  assert.equal(before.connection.state, 'connected');
  // The dropped sockets never became connections.
  await expectMetrics(hsServer, { [perApp('herald_connected')]: 2 });
});

// ---------------------------------------------------------------------------------------------
// Origin allow-list

test('allowed_origins: listed origins and no Origin connect; others get pusher:error + close 4009', async () => {
  const base = (await scrapeMetrics(hsServer)).samples;
  const cases = [
    ['https://good.example', true],
    ['https://chat.example.org', true], // *.example.org, any scheme
    ['http://a.b.example.org', true],
    [undefined, true], // no Origin header (server SDKs, native apps)
    ['https://evil.example', false],
    ['http://good.example', false], // the scheme is part of the origin
    ['https://good.example:8443', false], // and so is the port
    ['https://example.org', false], // *.example.org is subdomains only
  ];
  const accepted = [];
  for (const [origin, ok] of cases) {
    const r = await attempt(hsServer, ORIGINS_APP.key, origin ? { origin } : undefined);
    if (ok) {
      assert.ok(r.established, `${origin} refused: ${JSON.stringify(r.refused)}`);
      accepted.push(r.established);
    } else {
      assert.ok(r.refused, `${origin} accepted`);
      assert.equal(r.refused.errorCode, 4009, `${origin}: ${JSON.stringify(r.refused)}`);
      assert.equal(r.refused.code, 4009, `${origin}: ${JSON.stringify(r.refused)}`);
    }
  }
  // pusher-js in Node sends no Origin: it connects.
  const pjs = await connectClient(hsServer, { app: ORIGINS_APP });
  // An app without an allow-list takes any origin.
  const free = await attempt(hsServer, APP1.key, { origin: 'https://evil.example' });
  assert.ok(free.established, JSON.stringify(free.refused));
  // The accepted connections work.
  const name = uniq('orig-');
  const ch = await subscribe(pjs, name);
  for (const c of accepted) await c.subscribeOk(name);
  const got = record(ch, 'ev');
  await hsServer.sdk(ORIGINS_APP).trigger(name, 'ev', 'x');
  await got.next();
  for (const c of accepted) await c.waitFor('ev', { channel: name });

  const nRefused = cases.filter(([, ok]) => !ok).length;
  await expectMetrics(hsServer, {
    [refused('origin')]: base.get(refused('origin')) + nRefused,
    [perApp('herald_connected', ORIGINS_APP)]: accepted.length + 1,
    [perApp('herald_new_connections_total', ORIGINS_APP)]: accepted.length + 1,
    [refused('app_not_found')]: base.get(refused('app_not_found')),
  });
});

test('shutdown: SIGTERM stops the three servers with exit status 0', async () => {
  assert.equal((await stopServer(ipServer)).code, 0);
  assert.equal((await stopServer(memServer)).code, 0);
  assert.equal((await stopServer(hsServer)).code, 0);
});
