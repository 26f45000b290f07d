// Connection handshake, ping/pong, refusals and malformed input.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  SOCKET_ID_RE,
  RawClient,
  connectClient,
  makeClient,
  waitForState,
  waitForBind,
  subscribe,
  subscribeRejection,
  pusherJsErrorCode,
  record,
  startServer,
  stopServer,
  cleanupAll,
  uniq,
  withDeadline,
  eventually,
  WAIT_MS,
} from '../harness.mjs';

let server;
let sdk;

before(async () => {
  server = await startServer();
  sdk = server.sdk(APP1);
});
afterEach(async () => {
  cleanupAll();
  // Let the server uncount this test's sockets so the next test starts from zero.
  if (!server.exitInfo) await server.waitConnections(0);
});
after(async () => {
  cleanupAll();
  await stopServer(server); // SIGTERM if still running; throws unless it exited 0
});

test('pusher-js connects: state connected and a socket_id like "123.456"', async () => {
  const client = makeClient(server);
  const states = record(client.connection, 'state_change');
  await waitForState(client, 'connected');
  assert.match(client.connection.socket_id, SOCKET_ID_RE);
  // new Pusher() starts connecting synchronously; the transition we can observe is the next one.
  const change = await states.next();
  assert.deepEqual(change.data, { previous: 'connecting', current: 'connected' });
});

test('raw: pusher:connection_established carries a JSON-string data with socket_id and activity_timeout', async () => {
  const raw = await RawClient.connect(server);
  const est = raw.established;
  assert.equal(est.event, 'pusher:connection_established');
  assert.equal(typeof est.rawData, 'string', 'data must be a JSON string (double-encoded)');
  assert.match(est.data.socket_id, SOCKET_ID_RE);
  assert.ok(Number.isInteger(est.data.activity_timeout), `activity_timeout ${est.data.activity_timeout}`);
  assert.ok(est.data.activity_timeout > 0);
  assert.equal(est.data.activity_timeout, 120, 'the configured activity_timeout (120s) in seconds');
  assert.equal(raw.messages.length, 1, 'nothing else before the client speaks');
});

test('every connection gets a distinct socket_id', async () => {
  const ids = new Set();
  for (let i = 0; i < 5; i++) {
    const raw = await RawClient.connect(server);
    ids.add(raw.socketId);
  }
  assert.equal(ids.size, 5);
});

test('raw: pusher:ping is answered with pusher:pong', async () => {
  const raw = await RawClient.connect(server);
  raw.send({ event: 'pusher:ping', data: {} });
  const pong = await raw.waitFor('pusher:pong');
  assert.equal(pong.event, 'pusher:pong');
  assert.equal(pong.channel, undefined);
  assert.ok(raw.isOpen);
});

test('raw: unknown app key is closed with code 4001', async () => {
  const raw = await RawClient.open(server, 'no-such-key');
  const close = await withDeadline(raw.closed, WAIT_MS, 'close of unknown-key socket');
  assert.equal(close.code, 4001, `close ${JSON.stringify(close)}; received ${raw.describe()}`);
  assert.ok(!raw.seen('pusher:connection_established'), 'no connection_established for an unknown key');
  for (const m of raw.filter('pusher:error')) {
    assert.equal(m.data.code, 4001, `pusher:error before close: ${m.raw}`);
  }
});

test('pusher-js with an unknown app key: error 4001 and it gives up (state disconnected, never connected)', async () => {
  const bad = { ...APP1, key: 'no-such-key' };
  const client = makeClient(server, { app: bad });
  const states = [];
  client.connection.bind('state_change', ({ current }) => states.push(current));
  const err = await waitForBind(client.connection, 'error');
  assert.equal(pusherJsErrorCode(err), 4001, `error payload ${JSON.stringify(err)}`);
  await waitForState(client, 'disconnected');
  assert.ok(!states.includes('connected'), `states: ${states}`);
});

test('invalid JSON text frame: pusher:error, and the connection stays usable', async () => {
  const raw = await RawClient.connect(server);
  raw.send('{"event": "pusher:subscribe", "data": ');
  const err = await raw.waitFor('pusher:error');
  assert.equal(typeof err.data, 'object', `pusher:error data is an object: ${err.raw}`);
  assert.equal(typeof err.data.message, 'string');
  assert.ok(err.data.message.length > 0);
  assert.ok(Number.isInteger(err.data.code), `code ${err.data.code}`);
  await raw.ping();
  const ch = uniq('after-bad-json-');
  await raw.subscribeOk(ch);
  assert.ok(raw.isOpen);
});

test('binary frame: pusher:error, and the connection stays usable', async () => {
  const raw = await RawClient.connect(server);
  raw.sendBinary(Buffer.from(JSON.stringify({ event: 'pusher:ping', data: {} })));
  const err = await raw.waitFor((m) => m.event === 'pusher:error' || m.event === 'pusher:pong');
  assert.equal(err.event, 'pusher:error', `binary frames are not supported; got ${err.raw}`);
  assert.equal(typeof err.data.message, 'string');
  assert.ok(err.data.message.length > 0);
  await raw.ping();
  assert.ok(raw.isOpen);
});

test('invalid channel name "bad channel!": refused with a message, connection stays usable', async () => {
  const raw = await RawClient.connect(server);
  raw.subscribe('bad channel!');
  const r = await subscribeRejection(raw, 'bad channel!');
  assert.equal(typeof r.message, 'string', JSON.stringify(r.msg.frame));
  assert.ok(r.message.length > 0, 'a clear message');
  const ok = uniq('after-bad-name-');
  await raw.subscribeOk(ok);
  assert.ok(raw.isOpen);
});

test('channel name of 201 characters is refused, connection stays usable', async () => {
  const raw = await RawClient.connect(server);
  const long = 'a'.repeat(201);
  raw.subscribe(long);
  const r = await subscribeRejection(raw, long);
  assert.ok(typeof r.message === 'string' && r.message.length > 0, JSON.stringify(r.msg.frame));
  await raw.ping();
  await raw.subscribeOk(uniq('after-long-'));
});

test('channel name limit is 164 characters (Pusher docs): 164 accepted, 165 refused', async () => {
  const raw = await RawClient.connect(server);
  const base = uniq('len-');
  const ok = base + 'x'.repeat(164 - base.length);
  const tooLong = base + 'y'.repeat(165 - base.length);
  assert.equal(ok.length, 164);
  assert.equal(tooLong.length, 165);
  await raw.subscribeOk(ok);
  raw.subscribe(tooLong);
  const r = await subscribeRejection(raw, tooLong);
  assert.ok(r.message && r.message.length > 0);
});

test('pusher-js: unsubscribe stops delivery on that channel (marker on another channel still arrives)', async () => {
  const client = await connectClient(server);
  const gone = uniq('unsub-');
  const stay = uniq('stay-');
  const chGone = await subscribe(client, gone);
  const chStay = await subscribe(client, stay);
  const goneEvents = record(chGone, 'ev');
  const stayEvents = record(chStay, 'ev');
  client.unsubscribe(gone);
  // Wait until the server has processed the unsubscribe: its channel info says unoccupied.
  await eventually(
    async () => {
      const res = await sdk.get({ path: `/channels/${gone}`, params: { info: 'subscription_count' } });
      const body = await res.json();
      return body.occupied === false;
    },
    WAIT_MS,
    `${gone} unoccupied after unsubscribe`,
  );
  await sdk.trigger(gone, 'ev', 'must-not-arrive');
  await sdk.trigger(stay, 'ev', 'marker');
  const m = await stayEvents.next();
  assert.equal(m.data, 'marker');
  assert.equal(goneEvents.items.length, 0, 'no event after unsubscribe');
});

test('GET /health reports status ok and the current connection count', async () => {
  const before = 0;
  await server.waitConnections(before);
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  const body = await server.waitConnections(before + 2);
  assert.equal(body.status, 'ok');
  assert.ok(Number.isInteger(body.connections.max), `max ${body.connections.max}`);
  a.close();
  b.close();
  await server.waitConnections(before);
});

test('the public /health tells the status and the counts only; the metrics listener\'s tells the rest', async () => {
  const pub = await server.health();
  assert.deepEqual(Object.keys(pub.body).sort(), ['channels', 'connections', 'status'], JSON.stringify(pub.body));
  const detail = await server.detail();
  assert.equal(detail.status, 200);
  assert.equal(detail.body.status, pub.body.status);
  assert.equal(typeof detail.body.version, 'string', JSON.stringify(detail.body));
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const c = await RawClient.connect(server);
  const info = await stopServer(server);
  assert.equal(info.code, 0);
  const close = await withDeadline(c.closed, WAIT_MS, 'client close on shutdown');
  assert.equal(close.code, 4200, `close ${JSON.stringify(close)}; received ${c.describe()}; server output:\n${server.output}`);
});
