// Recovery on one node, with pusher-js and the helper of clients/js (withRecovery): a client
// behind a proxy that stalls and then refuses connections for 10 s while 50 events/s are
// published gets every event once and in order; a position past the rule's size or ttl, or
// from before a restart, gets herald:recovered {recovered: false, reason} and the live events.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  TcpProxy,
  WAIT_MS,
  cleanupAll,
  eventually,
  makeClient,
  record,
  restRequest,
  startServer,
  stopAllProxies,
  stopServer,
  subscribe,
  uniq,
  waitForState,
} from '../harness.mjs';
import {
  RECOVERY_APPS,
  positionOf,
  recoverThrough,
  stallThenOutage,
  watchPusherChannel,
  withRecovery,
} from '../recovery.mjs';

let server;

before(async () => {
  server = await startServer({ apps: RECOVERY_APPS });
});
afterEach(() => cleanupAll());
after(async () => {
  cleanupAll();
  await stopAllProxies();
  await stopServer(server);
});

/** A pusher-js client with the helper, connected to front (a server or a proxy before one). */
async function recoveringClient(front) {
  const client = withRecovery(makeClient({ port: front.port, sdk: (app, extra) => server.sdk(app, extra) }));
  await waitForState(client, 'connected');
  return client;
}

test('behind a proxy that stalls, then drops and refuses connections for 10 s, at 50 events/s: every event once, in order, and herald:recovered', async (t) => {
  const proxy = await new TcpProxy(server).start();
  const client = await recoveringClient(proxy);
  const name = uniq('auction-');
  const ch = await subscribe(client, name);
  const sdk = server.sdk(APP1);
  await recoverThrough(t, {
    label: 'one node',
    pusher: client,
    watches: [watchPusherChannel(ch, 'bid')],
    sdks: [sdk],
    channels: name,
    event: 'bid',
    disrupt: stallThenOutage(proxy),
    sendMarker: () => sdk.trigger(name, 'bid', { n: 0 }),
  });
  assert.equal(proxy.log.length >= 2, true, `the client connected through the proxy again: ${JSON.stringify(proxy.log)}`);
});

/**
 * A client follows channel, handles event 1, disconnects while `whileAway` runs, connects
 * again: returns the herald:recovered it got and the events its handler saw, then checks that
 * the live stream goes on.
 */
async function awayAndBack(name, whileAway) {
  const client = await recoveringClient(server);
  const ch = await subscribe(client, name);
  const sdk = server.sdk(APP1);
  const got = [];
  ch.bind('bid', (d) => got.push(d.n));
  await sdk.trigger(name, 'bid', { n: 1 });
  await eventually(() => got.length === 1, WAIT_MS, () => `event 1 on ${name} (got ${got})`);
  const before = positionOf(client, name);
  assert.equal(before.offset, 1, `the position of event 1: ${JSON.stringify(before)}`);
  client.disconnect();
  await whileAway(sdk);
  const recovered = record(ch, 'herald:recovered');
  client.connect();
  const r = (await recovered.next()).data;
  const replayed = [...got];
  await sdk.trigger(name, 'bid', { n: 100 });
  await eventually(() => got.includes(100), WAIT_MS, () => `the live event after the recovery on ${name} (got ${got})`);
  return { client, r, replayed, got, before };
}

test('a position past the rule size (5): herald:recovered {recovered: false, reason: "too_old"}, nothing replayed, the live events go on', async () => {
  const name = uniq('small-');
  const { client, r, replayed, got, before } = await awayAndBack(name, async (sdk) => {
    for (let n = 2; n <= 12; n++) await sdk.trigger(name, 'bid', { n });
  });
  assert.deepEqual(r, { recovered: false, reason: 'too_old' });
  assert.deepEqual(replayed, [1], 'nothing replayed');
  assert.deepEqual(got, [1, 100]);
  assert.deepEqual(positionOf(client, name), { epoch: before.epoch, offset: 13 });
});

test('a position past the rule ttl (1 s): herald:recovered {recovered: false, reason: "too_old"}, the live events go on', async () => {
  const name = uniq('brief-');
  const { r, replayed, got } = await awayAndBack(name, async (sdk) => {
    await sdk.trigger(name, 'bid', { n: 2 });
    // Until event 2 has expired too: the REST history of the channel keeps nothing.
    await eventually(
      async () => {
        const res = await restRequest(server, { path: `/channels/${name}/history` });
        return res.status === 200 && res.json.latest === 2 && res.json.events.length === 0 ? res : false;
      },
      WAIT_MS,
      `events 1 and 2 of ${name} to expire (ttl 1 s)`,
      100,
    );
  });
  assert.deepEqual(r, { recovered: false, reason: 'too_old' });
  assert.deepEqual(replayed, [1]);
  assert.deepEqual(got, [1, 100]);
});

test('the node restarted (its history lost): herald:recovered {recovered: false, reason: "epoch_changed"}, the live events go on', async () => {
  let solo = await startServer({ apps: RECOVERY_APPS });
  try {
    const client = withRecovery(makeClient(solo));
    await waitForState(client, 'connected');
    const name = uniq('auction-');
    const ch = await subscribe(client, name);
    const sdk = solo.sdk(APP1);
    const got = [];
    ch.bind('bid', (d) => got.push(d.n));
    for (let n = 1; n <= 3; n++) await sdk.trigger(name, 'bid', { n });
    await eventually(() => got.length === 3, WAIT_MS, () => `3 events (got ${got})`);
    const before = positionOf(client, name);
    assert.equal(before.offset, 3);

    client.disconnect();
    await stopServer(solo);
    solo = await startServer({ apps: RECOVERY_APPS, port: solo.port });
    const recovered = record(ch, 'herald:recovered');
    client.connect();
    assert.deepEqual((await recovered.next()).data, { recovered: false, reason: 'epoch_changed' });
    const after = positionOf(client, name);
    assert.notEqual(after.epoch, before.epoch, 'a new epoch');
    assert.equal(after.offset, 0, 'the channel has had no event in the new epoch');

    await solo.sdk(APP1).trigger(name, 'bid', { n: 4 });
    await eventually(() => got.length === 4, WAIT_MS, () => `the live event (got ${got})`);
    assert.deepEqual(got, [1, 2, 3, 4]);
    assert.deepEqual(positionOf(client, name), { epoch: after.epoch, offset: 1 });
  } finally {
    cleanupAll();
    await stopServer(solo);
  }
});
