// Presence channels: members, member_added/member_removed, one user on several sockets, limits.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  APP2,
  RawClient,
  connectClient,
  disconnectClient,
  record,
  subscribe,
  subscribeRejection,
  waitForBind,
  useServer,
  stopServer,
  uniq,
  hmacHex,
} from '../harness.mjs';

let server;
let sdk;

// app2 keeps max_presence_members 2; its connection quota is raised so these tests can open
// several sockets without tripping it (limits.test.mjs checks the quota itself).
const APP2_HERE = { ...APP2, limits: { max_presence_members: 2, max_connections: 20 } };

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
}, { apps: [APP1, APP2_HERE] });

const info = (id) => ({ name: `Name of ${id}`, tags: [id.length, 'x'] });

function member(server, id, opts = {}) {
  return connectClient(server, { presence: () => ({ user_id: id, user_info: info(id) }), ...opts });
}

function membersOf(channel) {
  const out = {};
  channel.members.each((m) => {
    out[m.id] = m.info;
  });
  return out;
}

test('presence: subscription_succeeded gives members.count, members.me and every member\'s info', async () => {
  const name = uniq('presence-members-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  assert.equal(chA.members.count, 1);
  assert.deepEqual(chA.members.me, { id: 'alice', info: info('alice') });

  const bob = await member(server, 'bob');
  const chB = bob.subscribe(name);
  const members = await waitForBind(chB, 'pusher:subscription_succeeded');
  assert.equal(members.count, 2);
  assert.deepEqual(chB.members.me, { id: 'bob', info: info('bob') });
  assert.deepEqual(membersOf(chB), { alice: info('alice'), bob: info('bob') });
});

test('presence raw: subscription_succeeded data is a JSON string {presence:{ids,hash,count}}', async () => {
  const name = uniq('presence-raw-');
  const a = await RawClient.connect(server);
  await a.subscribeOk(name, { channelData: { user_id: 'u-a', user_info: { n: 1 } } });
  const b = await RawClient.connect(server);
  const ok = await b.subscribeOk(name, { channelData: { user_id: 'u-b', user_info: { n: 2 } } });
  assert.equal(typeof ok.rawData, 'string');
  const p = ok.data.presence;
  assert.equal(p.count, 2);
  assert.deepEqual([...p.ids].sort(), ['u-a', 'u-b']);
  assert.deepEqual(p.hash, { 'u-a': { n: 1 }, 'u-b': { n: 2 } });
  // The first member is told about the second, as a JSON-string data.
  const added = await a.waitFor('pusher_internal:member_added', { channel: name });
  assert.equal(typeof added.rawData, 'string');
  assert.deepEqual(added.data, { user_id: 'u-b', user_info: { n: 2 } });
});

test('presence: a joining user -> pusher:member_added with info for those already there', async () => {
  const name = uniq('presence-added-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  const added = record(chA, 'pusher:member_added');
  const bob = await member(server, 'bob');
  await subscribe(bob, name);
  const got = await added.next();
  assert.deepEqual(got.data, { id: 'bob', info: info('bob') });
  assert.equal(chA.members.count, 2);
});

test('presence: a member disconnecting -> pusher:member_removed', async () => {
  const name = uniq('presence-disc-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  const removed = record(chA, 'pusher:member_removed');
  const bob = await member(server, 'bob');
  await subscribe(bob, name);
  disconnectClient(bob);
  const got = await removed.next();
  assert.equal(got.data.id, 'bob');
  assert.equal(chA.members.count, 1);
});

test('presence: a member unsubscribing -> pusher:member_removed', async () => {
  const name = uniq('presence-unsub-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  const removed = record(chA, 'pusher:member_removed');
  const bob = await member(server, 'bob');
  await subscribe(bob, name);
  bob.unsubscribe(name);
  const got = await removed.next();
  assert.equal(got.data.id, 'bob');
  assert.equal(bob.connection.state, 'connected');
});

test('presence: the same user_id on two sockets counts once (member_added once, count right)', async () => {
  const name = uniq('presence-dup-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  const added = record(chA, 'pusher:member_added');

  const bob1 = await member(server, 'bob');
  await subscribe(bob1, name);
  assert.equal((await added.next()).data.id, 'bob');

  const bob2 = await member(server, 'bob');
  const chB2 = await subscribe(bob2, name);
  assert.equal(chB2.members.count, 2, 'alice + bob, not bob twice');

  // Marker: a third distinct user. Alice must see carol next, not a second bob.
  const carol = await member(server, 'carol');
  const chC = await subscribe(carol, name);
  assert.equal((await added.next()).data.id, 'carol');
  assert.deepEqual(
    added.items.map((i) => i.data.id),
    ['bob', 'carol'],
  );
  assert.equal(chC.members.count, 3);
  const users = await (await sdk.get({ path: `/channels/${name}/users` })).json();
  assert.deepEqual(users.users.map((u) => u.id).sort(), ['alice', 'bob', 'carol']);
});

test('presence: member_removed only when the user\'s last socket leaves', async () => {
  const name = uniq('presence-last-');
  const alice = await member(server, 'alice');
  const chA = await subscribe(alice, name);
  const removed = record(chA, 'pusher:member_removed');
  const bob1 = await member(server, 'bob');
  await subscribe(bob1, name);
  const bob2 = await member(server, 'bob');
  await subscribe(bob2, name);
  const carol = await member(server, 'carol');
  await subscribe(carol, name);

  disconnectClient(bob1); // bob is still there through bob2
  disconnectClient(carol); // marker
  assert.equal((await removed.next()).data.id, 'carol');
  assert.deepEqual(
    removed.items.map((i) => i.data.id),
    ['carol'],
    'no member_removed for bob while bob2 is subscribed',
  );
  assert.equal(chA.members.count, 2);

  disconnectClient(bob2);
  assert.equal((await removed.next()).data.id, 'bob');
  assert.equal(chA.members.count, 1);
});

test('presence raw: member limit (app2: 2) -> third distinct user gets pusher:subscription_error status 4100', async () => {
  const name = uniq('presence-full-');
  const u1 = await RawClient.connect(server, APP2.key);
  await u1.subscribeOk(name, { channelData: { user_id: 'one', user_info: {} } });
  const u2 = await RawClient.connect(server, APP2.key);
  await u2.subscribeOk(name, { channelData: { user_id: 'two', user_info: {} } });
  const u3 = await RawClient.connect(server, APP2.key);
  const cd = JSON.stringify({ user_id: 'three', user_info: {} });
  u3.subscribe(name, { channel_data: cd, auth: `${APP2.key}:${hmacHex(APP2.secret, `${u3.socketId}:${name}:${cd}`)}` });
  const r = await subscribeRejection(u3, name);
  assert.equal(r.event, 'pusher:subscription_error', JSON.stringify(r.msg.frame));
  assert.equal(r.status, 4100, JSON.stringify(r.msg.frame));
  assert.ok(u3.isOpen);
  await u3.ping();
  // Nobody was told about the refused user.
  await u1.ping();
  assert.ok(!u1.seen((m) => m.event === 'pusher_internal:member_added' && m.data.user_id === 'three'));
});

test('presence: pusher-js emits pusher:subscription_error (4100) when the channel is full', async () => {
  const name = uniq('presence-full-pjs-');
  const a = await member(server, 'one', { app: APP2_HERE });
  await subscribe(a, name);
  const b = await member(server, 'two', { app: APP2_HERE });
  await subscribe(b, name);
  const c = await member(server, 'three', { app: APP2_HERE });
  const ch = c.subscribe(name);
  const err = await waitForBind(ch, 'pusher:subscription_error');
  assert.equal(err.status, 4100, JSON.stringify(err));
  assert.equal(c.connection.state, 'connected');
});

test('presence: a full channel still admits another socket of a user who is already a member', async () => {
  const name = uniq('presence-full-same-');
  const u1 = await RawClient.connect(server, APP2.key);
  await u1.subscribeOk(name, { channelData: { user_id: 'one', user_info: {} } });
  const u2 = await RawClient.connect(server, APP2.key);
  await u2.subscribeOk(name, { channelData: { user_id: 'two', user_info: {} } });
  const u1b = await RawClient.connect(server, APP2.key);
  const ok = await u1b.subscribeOk(name, { channelData: { user_id: 'one', user_info: {} } });
  assert.equal(ok.data.presence.count, 2);
});

test('presence raw: channel_data that does not match the signature is refused (401)', async () => {
  const name = uniq('presence-tamper-');
  const raw = await RawClient.connect(server);
  const signed = JSON.stringify({ user_id: 'honest', user_info: {} });
  const sent = JSON.stringify({ user_id: 'admin', user_info: {} });
  raw.subscribe(name, {
    channel_data: sent,
    auth: `${APP1.key}:${hmacHex(APP1.secret, `${raw.socketId}:${name}:${signed}`)}`,
  });
  const r = await subscribeRejection(raw, name);
  assert.equal(r.event, 'pusher:subscription_error', JSON.stringify(r.msg.frame));
  assert.equal(r.status, 401);
});

test('presence raw: subscribing without channel_data is refused', async () => {
  const name = uniq('presence-nodata-');
  const raw = await RawClient.connect(server);
  raw.subscribe(name, { auth: `${APP1.key}:${hmacHex(APP1.secret, `${raw.socketId}:${name}`)}` });
  const r = await subscribeRejection(raw, name);
  assert.ok(r.message && r.message.length > 0, JSON.stringify(r.msg.frame));
  await raw.ping();
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
