// Watchlists: `watchlist` in the signed-in user_data; pusher-js's pusher.user.watchlist emits
// `online` / `offline` with {name, user_ids}: the status of every watched user on sign-in, then
// each change (a user's first connection signing in, its last one going).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  disconnectClient,
  hmacHex,
  record,
  waitForBind,
  useServer,
  uniq,
} from '../harness.mjs';

let server;

useServer((s) => {
  server = s;
});

/** Connects a pusher-js client as user and signs it in; watch, when given, records its watchlist. */
async function signedIn(user) {
  const client = await connectClient(server, { user });
  const online = record(client.user.watchlist, 'online');
  const offline = record(client.user.watchlist, 'offline');
  const success = waitForBind(client, 'pusher:signin_success');
  client.signin();
  await success;
  return { client, online, offline };
}

test('watchlist: the status on sign-in, then online and offline as watched users come and go', async () => {
  const [bob, cid, dee] = [uniq('bob-'), uniq('cid-'), uniq('dee-')];
  const b = await signedIn({ id: bob });
  const ann = await signedIn({ id: uniq('ann-'), watchlist: [bob, cid, dee] });
  assert.deepEqual((await ann.online.next()).data, { name: 'online', user_ids: [bob] });
  assert.deepEqual((await ann.offline.next()).data, { name: 'offline', user_ids: [cid, dee] });

  const c1 = await signedIn({ id: cid });
  assert.deepEqual((await ann.online.next()).data, { name: 'online', user_ids: [cid] });
  const c2 = await signedIn({ id: cid }); // a second tab: cid was online already
  disconnectClient(c1.client);
  disconnectClient(b.client);
  assert.deepEqual((await ann.offline.next()).data, { name: 'offline', user_ids: [bob] });
  disconnectClient(c2.client); // cid's last connection
  assert.deepEqual((await ann.offline.next()).data, { name: 'offline', user_ids: [cid] });
  assert.equal(ann.online.items.length, 2, `online events: ${JSON.stringify(ann.online.items)}`);
});

test('watchlist: a user without one gets no watchlist events', async () => {
  const watched = uniq('w-');
  const plain = await signedIn({ id: uniq('plain-') });
  const watcher = await signedIn({ id: uniq('watcher-'), watchlist: [watched] });
  await watcher.offline.next();
  await signedIn({ id: watched });
  await watcher.online.next(); // every event the change caused has been queued by now
  // A ping round trip on plain's connection: anything queued for it before came first.
  const pong = waitForBind(plain.client.connection, 'message', undefined, (m) => m.event === 'pusher:pong');
  plain.client.connection.send_event('pusher:ping', {});
  await pong;
  assert.equal(plain.online.items.length + plain.offline.items.length, 0);
});

test('watchlist raw: more than 100 user ids -> pusher:error 4009 naming the limit, close 4009', async () => {
  const raw = await RawClient.connect(server, APP1.key);
  const user_data = JSON.stringify({ id: uniq('big-'), watchlist: Array.from({ length: 101 }, (_, i) => `u${i}`) });
  const auth = `${APP1.key}:${hmacHex(APP1.secret, `${raw.socketId}::user::${user_data}`)}`;
  raw.send({ event: 'pusher:signin', data: { auth, user_data } });
  const err = await raw.waitFor('pusher:error');
  assert.equal(err.data.code, 4009);
  assert.match(err.data.message, /watchlist has 101 user ids, at most 100/);
  assert.equal((await raw.closed).code, 4009);
});
