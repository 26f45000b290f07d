// User authentication: pusher:signin, sendToUser (#server-to-user-{id}), refusals.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  APP2,
  RawClient,
  connectClient,
  record,
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

/** Connects a pusher-js client, signs it in, and waits until its user channel is subscribed. */
async function signedIn(user) {
  const client = await connectClient(server, { user });
  const userChannel = `#server-to-user-${user.id}`;
  const success = waitForBind(client, 'pusher:signin_success');
  const subscribed = new Promise((resolve) => {
    client.connection.bind('message', (m) => {
      if (m.event === 'pusher_internal:subscription_succeeded' && m.channel === userChannel) resolve();
    });
  });
  client.signin();
  const data = await success;
  await withDeadline(subscribed, WAIT_MS, `subscription_succeeded on ${userChannel}`);
  return { client, data };
}

test('signin: pusher-js signin() -> pusher:signin_success with the signed user_data', async () => {
  const user = { id: uniq('user-'), user_info: { name: 'Ann' } };
  const { client, data } = await signedIn(user);
  assert.equal(typeof data.user_data, 'string');
  assert.deepEqual(JSON.parse(data.user_data), user);
  assert.deepEqual(client.user.user_data, user);
});

test('signin: sdk.sendToUser reaches pusher.user.bind on the signed-in client', async () => {
  const user = { id: uniq('user-') };
  const { client } = await signedIn(user);
  const got = record(client.user, 'note');
  const res = await sdk.sendToUser(user.id, 'note', { hello: user.id });
  assert.equal(res.status, 200);
  assert.deepEqual((await got.next()).data, { hello: user.id });
});

test('signin: sendToUser reaches every connection of that user and no other user', async () => {
  const id = uniq('multi-');
  const otherId = uniq('other-');
  const a = await signedIn({ id });
  const b = await signedIn({ id });
  const o = await signedIn({ id: otherId });
  const ra = record(a.client.user, 'ping-user');
  const rb = record(b.client.user, 'ping-user');
  const ro = record(o.client.user, 'ping-user');
  const roMarker = record(o.client.user, 'marker');
  await sdk.sendToUser(id, 'ping-user', 'p');
  assert.equal((await ra.next()).data, 'p');
  assert.equal((await rb.next()).data, 'p');
  await sdk.sendToUser(otherId, 'marker', 'm');
  await roMarker.next();
  assert.equal(ro.items.length, 0, 'another user got the event');
});

test('signin raw: a bad signature -> pusher:error 4009, then close 4009', async () => {
  const raw = await RawClient.connect(server);
  const user_data = JSON.stringify({ id: 'mallory' });
  raw.send({
    event: 'pusher:signin',
    data: { auth: `${APP1.key}:${hmacHex('wrong-secret', `${raw.socketId}::user::${user_data}`)}`, user_data },
  });
  const err = await raw.waitFor('pusher:error');
  assert.equal(err.data.code, 4009, err.raw);
  const close = await withDeadline(raw.closed, WAIT_MS, 'close after bad signin');
  assert.equal(close.code, 4009);
  assert.ok(!raw.seen('pusher:signin_success'));
});

test('signin raw: user_data without an id -> pusher:error 4009', async () => {
  const raw = await RawClient.connect(server);
  const user_data = JSON.stringify({ user_info: { name: 'nobody' } });
  raw.send({
    event: 'pusher:signin',
    data: { auth: `${APP1.key}:${hmacHex(APP1.secret, `${raw.socketId}::user::${user_data}`)}`, user_data },
  });
  const err = await raw.waitFor((m) => m.event === 'pusher:error' || m.event === 'pusher:signin_success');
  assert.equal(err.event, 'pusher:error', err.raw);
  assert.equal(err.data.code, 4009, err.raw);
});

test('signin on an app with user authentication disabled (app2) -> pusher:error 4009', async () => {
  const raw = await RawClient.connect(server, APP2.key);
  const user_data = JSON.stringify({ id: 'someone' });
  raw.send({
    event: 'pusher:signin',
    data: { auth: `${APP2.key}:${hmacHex(APP2.secret, `${raw.socketId}::user::${user_data}`)}`, user_data },
  });
  const err = await raw.waitFor((m) => m.event === 'pusher:error' || m.event === 'pusher:signin_success');
  assert.equal(err.event, 'pusher:error', err.raw);
  assert.equal(err.data.code, 4009, err.raw);
});

test('a socket that is not signed in cannot receive a user\'s events via #server-to-user-{id}', async () => {
  const id = uniq('target-');
  const { client } = await signedIn({ id });
  const legit = record(client.user, 'secret-note');
  const spy = await RawClient.connect(server);
  spy.subscribe(`#server-to-user-${id}`);
  await spy.ping();
  await sdk.sendToUser(id, 'secret-note', 'for the user only');
  await legit.next();
  spy.drain(); // whatever the server answered to the refused subscribe is not under test here
  // Marker on a public channel the spy did join: the spy is served, the user event never came.
  const pub = uniq('spy-pub-');
  await spy.subscribeOk(pub);
  await sdk.trigger(pub, 'marker', 'm');
  await spy.waitFor('marker', { channel: pub });
  assert.ok(!spy.seen('secret-note'), 'user event delivered to a socket not signed in as that user');
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
