// Telemetry: the Prometheus metrics on their own listener are exact (pusher-js and the SDK do a
// known amount of work, the counters say exactly that), metrics.prefix renames them, and pprof
// is served only when pprof.addr is set.
//
// Each test uses its own app, so its per-app counters start at zero whatever ran before.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  RawClient,
  connectClient,
  disconnectClient,
  record,
  subscribe,
  waitForBind,
  startServer,
  stopServer,
  cleanupAll,
  scrapeMetrics,
  expectMetrics,
  metricKey,
  freePort,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

const app = (id, extra = {}) => ({
  id,
  key: `${id}-key`,
  secret: `${id}-secret`,
  enable_client_messages: true,
  enable_user_authentication: false,
  ...extra,
});

const A_PUSHERJS = app('m-pusherjs');
const A_BYTES = app('m-bytes');
const A_REFUSED = app('m-refused', { limits: { max_connections: 1 } });
const A_EXCL = app('m-excl');
const A_OTHER = app('m-other', { limits: { max_channels_per_conn: 2 } });

const NODE_MAX = 3;

let server; // default metrics settings, no pprof
let renamed; // metrics.prefix soketi_, pprof on, max_connections 3, max_message_bytes 2048
let pprofPort;

before(async () => {
  pprofPort = await freePort();
  [server, renamed] = await Promise.all([
    startServer({ apps: [A_PUSHERJS, A_BYTES, A_REFUSED, A_EXCL, A_OTHER] }),
    startServer({
      apps: [A_OTHER],
      config: {
        metrics: { prefix: 'soketi_' },
        pprof: { addr: `127.0.0.1:${pprofPort}` },
        max_connections: NODE_MAX,
        max_message_bytes: 2048,
      },
    }),
  ]);
});
afterEach(async () => {
  cleanupAll();
  if (!server.exitInfo) await server.waitConnections(0);
  if (!renamed.exitInfo) await renamed.waitConnections(0);
});
after(async () => {
  cleanupAll();
  await stopServer(server);
  await stopServer(renamed);
});

const k = (name, appId) => metricKey(name, appId === undefined ? {} : { app_id: appId });

/** The body bytes the pusher SDK 5.3.4 sends for trigger(channels, event, data, params). */
function sdkTriggerBodyBytes(channels, event, data, params = {}) {
  const body = { name: event, data: typeof data === 'string' ? data : JSON.stringify(data), channels, ...params };
  return Buffer.byteLength(JSON.stringify(body));
}

/** Bytes of one unmasked server frame carrying `payload` bytes (RFC 6455 §5.2). */
function frameBytes(payload) {
  return payload + (payload < 126 ? 2 : payload < 65536 ? 4 : 10);
}

test('the metrics listener serves Prometheus text on its own port, not on the WebSocket/REST port', async () => {
  const res = await fetch(server.metricsUrl, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/plain/);
  const text = await res.text();
  for (const name of [
    'herald_connected',
    'herald_new_connections_total',
    'herald_ws_messages_sent_total',
    'herald_http_calls_received_total',
    'herald_refused_connections_total',
    // herald_publish_latency_seconds is made at an app's first delivery (a node of 10,000
    // apps would otherwise hold 10,000 histograms from the start): the next test checks it.
    'herald_fanout_queue_depth',
    'herald_memory_guard_refusing',
    'go_goroutines',
    'process_resident_memory_bytes',
  ]) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), `${name} missing`);
  }
  // Every app has its per-app series from the start, at zero.
  const { samples } = await scrapeMetrics(server);
  for (const a of server.apps) assert.equal(samples.get(k('herald_connected', a.id)), 0, a.id);
  // Node figures agree with /health.
  const h = await server.health();
  assert.equal(samples.get('herald_max_connections'), h.body.connections.max);
  assert.equal(samples.get('herald_memory_guard_refusing'), 0);
  const onMain = await fetch(`${server.httpUrl}/metrics`, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(onMain.status, 404, 'metrics must not be served on the public port');
  await onMain.text();
});

test('pusher-js + SDK: connections, subscriptions, messages, REST calls and bytes are counted exactly', async () => {
  const A = A_PUSHERJS;
  const id = A.id;
  const sdk = server.sdk(A);
  const chAll = uniq('all-');
  const chOne = uniq('one-');
  const chPriv = uniq('private-m-');
  const nobody = uniq('nobody-');

  // N = 3 connections, M = 5 subscriptions on 3 channels.
  const c = [];
  for (let i = 0; i < 3; i++) c.push(await connectClient(server, { app: A }));
  const subs = [
    [0, chAll],
    [0, chOne],
    [1, chAll],
    [2, chAll],
    [2, chPriv],
  ];
  const chans = {};
  for (const [i, name] of subs) chans[`${i}:${name}`] = await subscribe(c[i], name);
  await expectMetrics(server, {
    [k('herald_connected', id)]: 3,
    [k('herald_new_connections_total', id)]: 3,
    [k('herald_new_disconnections_total', id)]: 0,
    [k('herald_subscriptions', id)]: 5,
    [k('herald_channels', id)]: 3,
    // pusher-js sent one pusher:subscribe per subscription and nothing else.
    [k('herald_ws_messages_received_total', id)]: 5,
    // connection_established x3 + subscription_succeeded x5.
    [k('herald_ws_messages_sent_total', id)]: 8,
    [k('herald_http_calls_received_total', id)]: 0,
  });

  // K = 4 SDK triggers: chAll (3 subscribers) twice, chOne (1), a channel nobody joined (0).
  const rec = {
    all: [0, 1, 2].map((i) => record(chans[`${i}:${chAll}`], 'ev')),
    one: record(chans[`0:${chOne}`], 'ev'),
  };
  const triggers = [
    [chAll, { n: 1 }],
    [chAll, 'plain string \u00e9'],
    [chOne, { n: 3, pad: 'x'.repeat(200) }],
    [nobody, { n: 4 }],
  ];
  let reqBytes = 0;
  let resBytes = 0;
  for (const [ch, data] of triggers) {
    const res = await sdk.trigger(ch, 'ev', data);
    assert.equal(res.status, 200);
    resBytes += Buffer.byteLength(await res.text());
    reqBytes += sdkTriggerBodyBytes([ch], 'ev', data);
  }
  for (const r of rec.all) {
    await r.next();
    await r.next();
  }
  await rec.one.next();
  const before = await expectMetrics(server, {
    [k('herald_http_calls_received_total', id)]: 4,
    [k('herald_http_received_bytes', id)]: reqBytes,
    [k('herald_http_transmitted_bytes', id)]: resBytes,
    // + 3 + 3 + 1 + 0 event frames.
    [k('herald_ws_messages_sent_total', id)]: 15,
    [k('herald_ws_messages_received_total', id)]: 5,
    // One observation per publish that reached subscribers: 3 (the empty channel has none).
    [metricKey('herald_publish_latency_seconds_count', { app_id: id })]: 3,
    [metricKey('herald_publish_latency_seconds_bucket', { app_id: id, le: '+Inf' })]: 3,
  });
  assert.ok(before.get(metricKey('herald_publish_latency_seconds_sum', { app_id: id })) > 0);
  // Bytes written: more than the payloads, and growing with them.
  assert.ok(before.get(k('herald_socket_transmitted_bytes', id)) > 3 * 3 + 200);

  // One pusher-js client leaves: its close frame is a received message, its two subscriptions
  // and the private channel (only it had joined) go.
  disconnectClient(c[2]);
  await expectMetrics(server, {
    [k('herald_connected', id)]: 2,
    [k('herald_new_connections_total', id)]: 3,
    [k('herald_new_disconnections_total', id)]: 1,
    [k('herald_subscriptions', id)]: 3,
    [k('herald_channels', id)]: 2,
    [k('herald_ws_messages_received_total', id)]: 6,
    [k('herald_ws_messages_sent_total', id)]: 15,
  });
  // The other apps saw none of this.
  await expectMetrics(server, {
    [k('herald_connected', A_OTHER.id)]: 0,
    [k('herald_new_connections_total', A_OTHER.id)]: 0,
    [k('herald_ws_messages_sent_total', A_OTHER.id)]: 0,
    [k('herald_http_calls_received_total', A_OTHER.id)]: 0,
  });
  disconnectClient(c[0]);
  disconnectClient(c[1]);
  await expectMetrics(server, {
    [k('herald_connected', id)]: 0,
    [k('herald_new_disconnections_total', id)]: 3,
    [k('herald_subscriptions', id)]: 0,
    [k('herald_channels', id)]: 0,
  });
});

test('raw client: WebSocket bytes both ways, pings and pongs (data and control) are counted exactly', async () => {
  const A = A_BYTES;
  const id = A.id;
  const name = uniq('bytes-');
  const a = await RawClient.connect(server, A.key);
  const b = await RawClient.connect(server, A.key);
  let sentPayload = 0; // bytes of the messages the clients sent
  const send = (client, obj) => {
    const s = JSON.stringify(obj);
    sentPayload += Buffer.byteLength(s);
    client.send(s);
  };
  send(a, { event: 'pusher:subscribe', data: { channel: name } });
  await a.waitFor('pusher_internal:subscription_succeeded', { channel: name });
  send(b, { event: 'pusher:subscribe', data: { channel: name } });
  await b.waitFor('pusher_internal:subscription_succeeded', { channel: name });
  send(a, { event: 'pusher:ping', data: {} });
  await a.waitFor('pusher:pong');
  // A WebSocket ping (control frame) with a 5-byte payload: answered with a pong frame.
  const pong = new Promise((resolve) => a.ws.once('pong', resolve));
  a.ws.ping(Buffer.from('hello'));
  assert.equal((await withDeadline(pong, WAIT_MS, 'WebSocket pong')).toString(), 'hello');
  sentPayload += 5;
  // An invalid message: answered with a pusher:error, the connection stays.
  send(b, { event: 'not-a-client-event', data: {} });
  await b.waitFor('pusher:error');
  // One REST publish to both.
  const res = await server.sdk(A).trigger(name, 'ev', { big: 'y'.repeat(300) });
  assert.equal(res.status, 200);
  await a.waitFor('ev', { channel: name });
  await b.waitFor('ev', { channel: name });

  // What the clients received, as frames: every text message, plus the 5-byte pong frame.
  let received = 0;
  let frames = 0;
  for (const m of [...a.messages, ...b.messages]) {
    received += frameBytes(Buffer.byteLength(m.raw));
    frames += 1;
  }
  received += frameBytes(5);
  frames += 1;
  assert.equal(frames, 2 + 2 + 1 + 1 + 1 + 2, `frames: ${a.describe()} ${b.describe()}`);
  await expectMetrics(server, {
    [k('herald_connected', id)]: 2,
    // subscribe, subscribe, pusher:ping, WebSocket ping, the invalid message.
    [k('herald_ws_messages_received_total', id)]: 5,
    [k('herald_socket_received_bytes', id)]: sentPayload,
    // established x2, subscription_succeeded x2, pusher:pong, WebSocket pong, pusher:error, ev x2.
    [k('herald_ws_messages_sent_total', id)]: 9,
    [k('herald_socket_transmitted_bytes', id)]: received,
    [k('herald_http_calls_received_total', id)]: 1,
  });
});

test('refusals are counted by reason, and refused connections are not counted as connections', async () => {
  const base = (await scrapeMetrics(server)).samples;
  const r = (reason) => metricKey('herald_refused_connections_total', { reason });
  // Unknown key: 4001.
  const unknown = await RawClient.open(server, 'no-such-key');
  assert.equal((await withDeadline(unknown.closed, WAIT_MS, 'unknown key closed')).code, 4001);
  // App quota (max_connections 1): the second is closed with 4004, twice.
  const first = await RawClient.connect(server, A_REFUSED.key);
  for (let i = 0; i < 2; i++) {
    const over = await RawClient.open(server, A_REFUSED.key);
    assert.equal((await withDeadline(over.closed, WAIT_MS, 'over-quota closed')).code, 4004);
  }
  await first.ping();
  await expectMetrics(server, {
    [r('app_not_found')]: base.get(r('app_not_found')) + 1,
    [r('app_full')]: base.get(r('app_full')) + 2,
    [r('origin')]: base.get(r('origin')),
    [r('ip_rate')]: base.get(r('ip_rate')),
    [r('memory')]: base.get(r('memory')),
    [r('node_full')]: base.get(r('node_full')),
    [r('draining')]: base.get(r('draining')),
    [k('herald_connected', A_REFUSED.id)]: 1,
    [k('herald_new_connections_total', A_REFUSED.id)]: 1,
    [k('herald_new_disconnections_total', A_REFUSED.id)]: 0,
    // connection_established and the pong of the one accepted connection only.
    [k('herald_ws_messages_sent_total', A_REFUSED.id)]: 2,
    herald_node_connections: 1,
  });
});

// BUG (reported to the lead): a publish that excludes one connection (a client event's sender,
// the SDK's socket_id, the joiner of a presence channel's member_added) still counts a frame
// for the excluded connection: fanout/worker.go opPublish adds len(subs) to `sent` although it
// skips c.num == m.excl. Unskip once fixed.
test('herald_ws_messages_sent_total does not count a frame for the connection a publish excludes', async () => {
  const A = A_EXCL;
  const id = A.id;
  const name = uniq('private-excl-');
  const a = await RawClient.connect(server, A.key);
  const b = await RawClient.connect(server, A.key);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  // established x2 + subscription_succeeded x2.
  await expectMetrics(server, { [k('herald_ws_messages_sent_total', id)]: 4 });
  // A client event: delivered to b only, never echoed to a.
  a.send({ event: 'client-x', channel: name, data: {} });
  await b.waitFor('client-x', { channel: name });
  // The SDK excluding a's socket: delivered to b only.
  await server.sdk(A).trigger(name, 'ev', 'd', { socket_id: a.socketId });
  await b.waitFor('ev', { channel: name });
  assert.ok(!a.seen('client-x') && !a.seen('ev'));
  await expectMetrics(server, { [k('herald_ws_messages_sent_total', id)]: 6 });
});

test('metrics.prefix soketi_: every herald metric is renamed, runtime metrics are not', async () => {
  const c = await connectClient(renamed, { app: A_OTHER });
  const ch = uniq('renamed-');
  await subscribe(c, ch);
  const res = await renamed.sdk(A_OTHER).trigger(ch, 'ev', 'x');
  assert.equal(res.status, 200);
  const samples = await expectMetrics(renamed, {
    [k('soketi_connected', A_OTHER.id)]: 1,
    [k('soketi_new_connections_total', A_OTHER.id)]: 1,
    [k('soketi_subscriptions', A_OTHER.id)]: 1,
    [k('soketi_http_calls_received_total', A_OTHER.id)]: 1,
    soketi_node_connections: 1,
    [metricKey('soketi_refused_connections_total', { reason: 'origin' })]: 0,
  });
  const herald = [...samples.keys()].filter((key) => key.startsWith('herald_'));
  assert.deepEqual(herald, [], 'no metric keeps the herald_ prefix');
  assert.ok(samples.has('go_goroutines'));
  assert.ok(samples.has('process_resident_memory_bytes'));
  // And the default server has no soketi_ names.
  const plain = (await scrapeMetrics(server)).samples;
  assert.deepEqual([...plain.keys()].filter((key) => key.startsWith('soketi_')), []);
});

test('existing limits, counted: channels per connection (4100), node full (4100), message size (1009)', async () => {
  const s = renamed;
  const id = A_OTHER.id;
  const r = (reason) => metricKey('soketi_refused_connections_total', { reason });
  const base = (await scrapeMetrics(s)).samples;
  const was = (key) => base.get(key);

  // max_channels_per_conn 2: pusher-js gets pusher:subscription_error 4100 for the third, and
  // keeps its two channels.
  const p = await connectClient(s, { app: A_OTHER });
  const one = uniq('cap-');
  const ch1 = await subscribe(p, one);
  await subscribe(p, uniq('cap-'));
  const third = p.subscribe(uniq('cap-'));
  const err = await waitForBind(third, 'pusher:subscription_error');
  assert.equal(err.status, 4100, JSON.stringify(err));
  assert.equal(p.connection.state, 'connected');

  // max_connections 3: two more fill the node, the fourth is closed with 4100.
  const r1 = await RawClient.connect(s, A_OTHER.key);
  const r2 = await RawClient.connect(s, A_OTHER.key);
  const over = await RawClient.open(s, A_OTHER.key);
  const close = await withDeadline(over.closed, WAIT_MS, 'connection over node capacity closed');
  assert.equal(close.code, 4100, `${JSON.stringify(close)} ${over.describe()}`);
  assert.ok(!over.seen('pusher:connection_established'));

  // max_message_bytes 2048: a larger message closes that socket with 1009, and frees its slot.
  r1.send({ event: 'pusher:ping', data: { pad: 'p'.repeat(3000) } });
  assert.equal((await withDeadline(r1.closed, WAIT_MS, 'close after an oversized message')).code, 1009);
  await s.waitConnections(2);
  const r3 = await RawClient.connect(s, A_OTHER.key);

  // The others never noticed.
  const got = record(ch1, 'ev');
  await r2.subscribeOk(one);
  await r3.subscribeOk(one);
  await s.sdk(A_OTHER).trigger(one, 'ev', 'x');
  await got.next();
  await r2.waitFor('ev', { channel: one });
  await r3.waitFor('ev', { channel: one });

  await expectMetrics(s, {
    [r('node_full')]: was(r('node_full')) + 1,
    [r('app_full')]: was(r('app_full')),
    [k('soketi_connected', id)]: 3,
    [k('soketi_new_connections_total', id)]: was(k('soketi_new_connections_total', id)) + 4,
    [k('soketi_new_disconnections_total', id)]: was(k('soketi_new_disconnections_total', id)) + 1,
    // p: 2 channels (one shared with r2 and r3); the refused subscription is not counted.
    [k('soketi_subscriptions', id)]: 4,
    [k('soketi_channels', id)]: 2,
    soketi_max_connections: NODE_MAX,
    soketi_node_connections: 3,
  });
});

test('pprof is off by default: nothing under /debug/pprof/ on the public or the metrics port', async () => {
  for (const base of [server.httpUrl, new URL(server.metricsUrl).origin]) {
    for (const p of ['/debug/pprof/', '/debug/pprof/goroutine?debug=1']) {
      const res = await fetch(`${base}${p}`, { signal: AbortSignal.timeout(WAIT_MS) });
      const text = await res.text();
      assert.equal(res.status, 404, `${base}${p} answered ${res.status}: ${text.slice(0, 200)}`);
    }
  }
  assert.doesNotMatch(server.output, /pprof listening/);
  assert.match(renamed.output, /pprof listening/);
});

test('pprof.addr: the goroutine profile and the index are served there, and only there', async () => {
  const base = `http://127.0.0.1:${pprofPort}`;
  const idx = await fetch(`${base}/debug/pprof/`, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(idx.status, 200);
  const idxText = await idx.text();
  for (const p of ['goroutine', 'heap', 'mutex', 'block']) assert.match(idxText, new RegExp(p));
  const gr = await fetch(`${base}/debug/pprof/goroutine?debug=1`, { signal: AbortSignal.timeout(WAIT_MS) });
  assert.equal(gr.status, 200);
  assert.match(await gr.text(), /^goroutine profile: total \d+/);
  // Not on the public port nor the metrics port.
  for (const other of [renamed.httpUrl, new URL(renamed.metricsUrl).origin]) {
    const res = await fetch(`${other}/debug/pprof/goroutine?debug=1`, { signal: AbortSignal.timeout(WAIT_MS) });
    await res.text();
    assert.equal(res.status, 404, other);
  }
});

test('metrics.enabled false: nothing listens on metrics.port', async () => {
  const off = await startServer({ apps: [A_OTHER], config: { metrics: { enabled: false } } });
  try {
    await connectClient(off, { app: A_OTHER });
    await assert.rejects(
      fetch(off.metricsUrl, { signal: AbortSignal.timeout(WAIT_MS) }),
      (e) => e.cause?.code === 'ECONNREFUSED',
      'the metrics port answered although metrics are disabled',
    );
    assert.doesNotMatch(off.output, /metrics listening/);
  } finally {
    cleanupAll();
    await stopServer(off);
  }
});

test('shutdown: SIGTERM stops both servers with exit status 0', async () => {
  assert.equal((await stopServer(server)).code, 0);
  assert.equal((await stopServer(renamed)).code, 0);
});
