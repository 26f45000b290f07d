// Admission and size limits: per-app connection quota (4004), node capacity (4100), event
// payload size, WebSocket message size.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  APP2,
  RawClient,
  makeClient,
  waitForBind,
  waitForState,
  pusherJsErrorCode,
  sdkError,
  startServer,
  stopServer,
  cleanupAll,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

const APP3 = {
  id: 'app3',
  key: 'app3-key',
  secret: 'app3-secret',
  enable_client_messages: true,
  enable_user_authentication: false,
  limits: { max_event_payload_bytes: 100 },
};

const NODE_MAX = 5;
const MAX_MESSAGE_BYTES = 4096;

let server; // default apps (app2: max_connections 3) + app3 (100-byte payloads)
let small; // a node with max_connections 5 and 4 KiB WebSocket messages

before(async () => {
  server = await startServer({ apps: [APP1, APP2, APP3] });
  small = await startServer({ config: { max_connections: NODE_MAX, max_message_bytes: MAX_MESSAGE_BYTES } });
});
afterEach(async () => {
  cleanupAll();
  // Let the servers uncount what this test opened before the next one counts again.
  if (!server.exitInfo) await server.waitConnections(0);
  if (!small.exitInfo) await small.waitConnections(0);
});
after(async () => {
  cleanupAll();
  await stopServer(server); // SIGTERM if still running; throws unless it exited 0
  await stopServer(small); // SIGTERM if still running; throws unless it exited 0
});

test('per-app quota (app2 max_connections 3): the 4th connection is closed with 4004', async () => {
  const open = [];
  for (let i = 0; i < 3; i++) open.push(await RawClient.connect(server, APP2.key));
  const fourth = await RawClient.open(server, APP2.key);
  const close = await withDeadline(fourth.closed, WAIT_MS, '4th app2 connection closed');
  assert.equal(close.code, 4004, `close ${JSON.stringify(close)}; received ${fourth.describe()}`);
  assert.ok(!fourth.seen('pusher:connection_established'), 'no handshake over quota');
  for (const c of open) await c.ping();
  // Another app is not affected by app2's quota.
  const other = await RawClient.connect(server, APP1.key);
  await other.ping();
});

test('per-app quota: closing a connection frees its slot', async () => {
  const open = [];
  for (let i = 0; i < 3; i++) open.push(await RawClient.connect(server, APP2.key));
  open[0].close();
  await server.waitConnections(2);
  const again = await RawClient.connect(server, APP2.key);
  await again.ping();
});

test('pusher-js over the per-app quota: error 4004 and no reconnect loop (state disconnected)', async () => {
  const open = [];
  for (let i = 0; i < 3; i++) open.push(await RawClient.connect(server, APP2.key));
  const client = makeClient(server, { app: APP2 });
  const states = [];
  client.connection.bind('state_change', ({ current }) => states.push(current));
  const err = await waitForBind(client.connection, 'error');
  assert.equal(pusherJsErrorCode(err), 4004, JSON.stringify(err));
  await waitForState(client, 'disconnected');
  assert.ok(!states.includes('connected'), `states ${states}`);
});

test('node capacity (max_connections 5): the 6th connection is closed with 4100; /health shows max 5', async () => {
  const h = await small.health();
  assert.equal(h.body.connections.max, NODE_MAX);
  const open = [];
  for (let i = 0; i < NODE_MAX; i++) open.push(await RawClient.connect(small, i % 2 ? APP2.key : APP1.key));
  const extra = await RawClient.open(small, APP1.key);
  const close = await withDeadline(extra.closed, WAIT_MS, 'connection over node capacity closed');
  assert.equal(close.code, 4100, `close ${JSON.stringify(close)}; received ${extra.describe()}`);
  const h2 = await small.health();
  assert.equal(h2.body.connections.current, NODE_MAX);
  for (const c of open) await c.ping();
});

test('REST: data over the app\'s max_event_payload_bytes (100) is refused with 413', async () => {
  const sdk = server.sdk(APP3);
  const err = await sdkError(() => sdk.trigger(uniq('small-'), 'ev', 'x'.repeat(101)));
  assert.equal(err.status, 413, `status ${err.status} body ${err.body}`);
  const ok = await sdk.trigger(uniq('small-'), 'ev', 'x'.repeat(100));
  assert.equal(ok.status, 200);
});

test('client event data over the app\'s payload limit -> pusher:error 4301, not delivered', async () => {
  const name = uniq('private-big-ce-');
  const a = await RawClient.connect(server, APP3.key);
  const b = await RawClient.connect(server, APP3.key);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  a.send({ event: 'client-big', channel: name, data: 'z'.repeat(500) });
  const err = await a.waitFor('pusher:error');
  assert.equal(err.data.code, 4301, err.raw);
  a.send({ event: 'client-small', channel: name, data: 'ok' });
  await b.waitFor('client-small', { channel: name });
  assert.ok(!b.seen('client-big'));
});

test('a WebSocket message over max_message_bytes closes the socket with 1009', async () => {
  const raw = await RawClient.connect(small);
  raw.send({ event: 'pusher:ping', data: { pad: 'p'.repeat(MAX_MESSAGE_BYTES + 100) } });
  const close = await withDeadline(raw.closed, WAIT_MS, 'close after oversized message');
  assert.equal(close.code, 1009, JSON.stringify(close));
});

test('shutdown: SIGTERM stops both servers with exit status 0', async () => {
  assert.equal((await stopServer(server)).code, 0);
  assert.equal((await stopServer(small)).code, 0);
});
