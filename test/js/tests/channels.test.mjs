// Public, private and private-encrypted channels with pusher-js and the server SDK.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  record,
  subscribe,
  subscribeRejection,
  waitForBind,
  useServer,
  stopServer,
  uniq,
  hmacHex,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

let server;
let sdk;

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
});

// ---- public -----------------------------------------------------------------------------------

test('public: pusher-js subscribe gets pusher:subscription_succeeded', async () => {
  const client = await connectClient(server);
  const name = uniq('pub-');
  const ch = client.subscribe(name);
  await waitForBind(ch, 'pusher:subscription_succeeded');
  assert.equal(ch.subscribed, true);
  assert.equal(ch.name, name);
});

test('public raw: pusher_internal:subscription_succeeded names the channel; no data or a JSON-string data', async () => {
  const raw = await RawClient.connect(server);
  const name = uniq('pub-raw-');
  raw.subscribe(name);
  const ok = await raw.waitFor('pusher_internal:subscription_succeeded', { channel: name });
  assert.equal(ok.channel, name);
  if (ok.rawData !== undefined) assert.equal(typeof ok.rawData, 'string', `data: ${ok.raw}`);
});

test('public: SDK trigger with string data reaches pusher-js with the exact string', async () => {
  const client = await connectClient(server);
  const name = uniq('pub-str-');
  const ch = await subscribe(client, name);
  const ev = record(ch, 'greeting');
  const payload = 'hello "world" \u00e9\u4e16 {not json';
  await sdk.trigger(name, 'greeting', payload);
  const got = await ev.next();
  assert.equal(got.data, payload);
});

test('public: SDK trigger with object data arrives as the same object (SDK JSON-encodes)', async () => {
  const client = await connectClient(server);
  const raw = await RawClient.connect(server);
  const name = uniq('pub-obj-');
  const ch = await subscribe(client, name);
  await raw.subscribeOk(name);
  const ev = record(ch, 'update');
  const payload = { a: 1, b: [true, null, 'x'], nested: { 'k-y': 'v\u00fc' }, n: 1.5 };
  await sdk.trigger(name, 'update', payload);
  const got = await ev.next();
  assert.deepEqual(got.data, payload);
  const frame = await raw.waitFor('update', { channel: name });
  assert.equal(typeof frame.rawData, 'string', 'channel event data is a JSON string on the wire');
  assert.deepEqual(JSON.parse(frame.rawData), payload);
  assert.equal(frame.frame.event, 'update');
});

test('public: 100 sequential triggers arrive in order', async () => {
  const client = await connectClient(server);
  const name = uniq('pub-order-');
  const ch = await subscribe(client, name);
  const got = [];
  let done;
  const all = new Promise((r) => (done = r));
  ch.bind('seq', (d) => {
    got.push(d.i);
    if (got.length === 100) done();
  });
  for (let i = 0; i < 100; i++) {
    await sdk.trigger(name, 'seq', { i });
  }
  await withDeadline(all, WAIT_MS, '100 events');
  assert.deepEqual(got, Array.from({ length: 100 }, (_, i) => i));
});

// ---- private ----------------------------------------------------------------------------------

test('private: pusher-js with SDK authorization subscribes and receives events', async () => {
  const client = await connectClient(server);
  const name = uniq('private-ok-');
  const ch = await subscribe(client, name);
  const ev = record(ch, 'secret-thing');
  await sdk.trigger(name, 'secret-thing', { ok: true });
  assert.deepEqual((await ev.next()).data, { ok: true });
});

test('private raw: wrong signature -> pusher:subscription_error status 401 on that channel; socket stays usable', async () => {
  const raw = await RawClient.connect(server);
  const name = uniq('private-bad-');
  const auth = `${APP1.key}:${hmacHex('wrong-secret', `${raw.socketId}:${name}`)}`;
  raw.subscribe(name, { auth });
  const err = await raw.waitFor(
    (m) => m.event === 'pusher:subscription_error' || m.event === 'pusher:error' || m.event === 'pusher_internal:subscription_succeeded',
  );
  assert.equal(err.event, 'pusher:subscription_error', `got ${err.raw}`);
  assert.equal(err.channel, name);
  assert.equal(err.data.status, 401, `data ${JSON.stringify(err.data)}`);
  assert.ok(raw.isOpen);
  await raw.ping();
  // The same channel with a correct signature now works on the same socket.
  await raw.subscribeOk(name);
});

test('private raw: missing auth -> pusher:subscription_error status 401', async () => {
  const raw = await RawClient.connect(server);
  const name = uniq('private-noauth-');
  raw.subscribe(name);
  const r = await subscribeRejection(raw, name);
  assert.equal(r.event, 'pusher:subscription_error', JSON.stringify(r.msg.frame));
  assert.equal(r.status, 401);
  await raw.ping();
});

test('private raw: a signature made for another socket_id is refused (401)', async () => {
  const raw = await RawClient.connect(server);
  const other = await RawClient.connect(server);
  const name = uniq('private-steal-');
  const stolen = sdk.authorizeChannel(other.socketId, name);
  raw.subscribe(name, { auth: stolen.auth });
  const r = await subscribeRejection(raw, name);
  assert.equal(r.event, 'pusher:subscription_error', JSON.stringify(r.msg.frame));
  assert.equal(r.status, 401);
});

test('private: pusher-js emits pusher:subscription_error when the server refuses the signature', async () => {
  const badSdk = server.sdk({ ...APP1, secret: 'not-the-secret' });
  const client = await connectClient(server, { sdk: badSdk });
  const name = uniq('private-pjs-bad-');
  const ch = client.subscribe(name);
  const succeeded = record(ch, 'pusher:subscription_succeeded');
  const err = await waitForBind(ch, 'pusher:subscription_error');
  assert.equal(err.status, 401, `error ${JSON.stringify(err)}`);
  assert.equal(succeeded.items.length, 0);
  assert.equal(client.connection.state, 'connected');
  // The connection still works for a channel it may join.
  await subscribe(client, uniq('pub-after-'));
});

// ---- private-encrypted ------------------------------------------------------------------------

test('private-encrypted: pusher-js decrypts an SDK trigger (SDK encryptionMasterKeyBase64 + shared_secret)', async () => {
  const client = await connectClient(server);
  const name = uniq('private-encrypted-');
  const ch = await subscribe(client, name);
  const ev = record(ch, 'sealed');
  const payload = { msg: 'for your eyes only', n: 42 };
  await sdk.trigger(name, 'sealed', payload);
  const got = await ev.next();
  assert.deepEqual(got.data, payload);
});

test('private-encrypted: the server relays the ciphertext untouched (raw subscriber sees nonce+ciphertext)', async () => {
  const raw = await RawClient.connect(server);
  const name = uniq('private-encrypted-raw-');
  await raw.subscribeOk(name);
  await sdk.trigger(name, 'sealed', { plaintextMarker: 'visible-secret' });
  const frame = await raw.waitFor('sealed', { channel: name });
  assert.equal(typeof frame.rawData, 'string');
  const env = JSON.parse(frame.rawData);
  assert.equal(typeof env.nonce, 'string');
  assert.equal(typeof env.ciphertext, 'string');
  assert.ok(!frame.rawData.includes('visible-secret'), 'no plaintext on the wire');
  assert.ok(!frame.rawData.includes('plaintextMarker'), 'no plaintext on the wire');
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
