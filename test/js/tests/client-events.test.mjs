// Client events (client-*): delivered to the other subscribers of private/presence channels,
// never echoed, carry user_id on presence, refused (4301) everywhere else.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  APP2,
  RawClient,
  connectClient,
  record,
  subscribe,
  useServer,
  stopServer,
  uniq,
} from '../harness.mjs';

let server;
let sdk;

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
});

test('private: a pusher-js client event reaches the other subscriber and is not echoed to the sender', async () => {
  const name = uniq('private-chat-');
  const sender = await connectClient(server);
  const receiver = await connectClient(server);
  const chS = await subscribe(sender, name);
  const chR = await subscribe(receiver, name);
  const echo = record(chS, 'client-typing');
  const got = record(chR, 'client-typing');
  const payload = { who: 'sender', text: 'h\u00e9llo' };
  assert.equal(chS.trigger('client-typing', payload), true);
  const ev = await got.next();
  assert.deepEqual(ev.data, payload);
  // Marker through the server to the sender: it arrives, the echo never did.
  const marker = record(chS, 'marker');
  await sdk.trigger(name, 'marker', 'm');
  await marker.next();
  assert.equal(echo.items.length, 0, 'client event echoed to its sender');
});

test('presence: client events carry user_id (pusher-js metadata) and are not echoed', async () => {
  const name = uniq('presence-chat-');
  const pres = (id) => () => ({ user_id: id, user_info: { id } });
  const alice = await connectClient(server, { presence: pres('alice') });
  const bob = await connectClient(server, { presence: pres('bob') });
  const chA = await subscribe(alice, name);
  const chB = await subscribe(bob, name);
  const echo = record(chA, 'client-wave');
  const got = record(chB, 'client-wave');
  chA.trigger('client-wave', { hi: 1 });
  const ev = await got.next();
  assert.deepEqual(ev.data, { hi: 1 });
  assert.deepEqual(ev.meta, { user_id: 'alice' });
  const marker = record(chA, 'marker');
  await sdk.trigger(name, 'marker', 'm');
  await marker.next();
  assert.equal(echo.items.length, 0, 'client event echoed to its sender');
});

test('presence raw: the relayed client event frame has event, channel, JSON-string data and user_id', async () => {
  const name = uniq('presence-rawce-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name, { channelData: { user_id: 'ua', user_info: {} } });
  await b.subscribeOk(name, { channelData: { user_id: 'ub', user_info: {} } });
  a.send({ event: 'client-x', channel: name, data: { k: 'v' } });
  const m = await b.waitFor('client-x', { channel: name });
  assert.equal(m.user_id, 'ua');
  assert.deepEqual(m.data, { k: 'v' });
});

async function expect4301(sender, name, event = 'client-nope') {
  sender.send({ event, channel: name, data: { x: 1 } });
  const err = await sender.waitFor('pusher:error');
  assert.equal(err.data.code, 4301, `pusher:error ${err.raw}`);
  assert.equal(typeof err.data.message, 'string');
  assert.ok(sender.isOpen, 'a refused client event does not close the socket');
  await sender.ping();
  return err;
}

test('public channel: a client event gets pusher:error 4301 and is not delivered', async () => {
  const name = uniq('pub-ce-');
  const sender = await RawClient.connect(server);
  const other = await RawClient.connect(server);
  await sender.subscribeOk(name);
  await other.subscribeOk(name);
  await expect4301(sender, name);
  await sdk.trigger(name, 'marker', 'm');
  await other.waitFor('marker', { channel: name });
  assert.ok(!other.seen('client-nope'), 'client event on a public channel was delivered');
});

test('app with client messages disabled (app2): pusher:error 4301, not delivered', async () => {
  const name = uniq('private-app2-');
  const sender = await RawClient.connect(server, APP2.key);
  const other = await RawClient.connect(server, APP2.key);
  await sender.subscribeOk(name);
  await other.subscribeOk(name);
  await expect4301(sender, name);
  await server.sdk(APP2).trigger(name, 'marker', 'm');
  await other.waitFor('marker', { channel: name });
  assert.ok(!other.seen('client-nope'));
});

test('client event on a channel the sender has not subscribed: pusher:error 4301, not delivered', async () => {
  const name = uniq('private-notsub-');
  const sender = await RawClient.connect(server);
  const other = await RawClient.connect(server);
  await other.subscribeOk(name);
  await expect4301(sender, name);
  await sdk.trigger(name, 'marker', 'm');
  await other.waitFor('marker', { channel: name });
  assert.ok(!other.seen('client-nope'));
});

test('a client-sent event whose name does not start with client- is never delivered', async () => {
  const name = uniq('private-noprefix-');
  const sender = await RawClient.connect(server);
  const other = await RawClient.connect(server);
  await sender.subscribeOk(name);
  await other.subscribeOk(name);
  sender.send({ event: 'not-a-client-event', channel: name, data: { x: 1 } });
  sender.send({ event: 'pusher:made-up', channel: name, data: { x: 1 } });
  await sender.ping();
  await sdk.trigger(name, 'marker', 'm');
  await other.waitFor('marker', { channel: name });
  assert.ok(!other.seen('not-a-client-event'), 'non client- event relayed');
  assert.ok(!other.seen('pusher:made-up'), 'pusher:* event relayed');
  assert.ok(sender.isOpen);
});

test('private: many client events from one sender arrive in order', async () => {
  const name = uniq('private-order-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  for (let i = 0; i < 8; i++) a.send({ event: 'client-seq', channel: name, data: { i } });
  const got = [];
  for (let i = 0; i < 8; i++) got.push((await b.waitFor('client-seq', { channel: name })).data.i);
  assert.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7]);
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
