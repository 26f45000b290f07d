// Cache channels: the last event is replayed right after subscription_succeeded; an empty cache
// gives pusher:cache_miss.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  record,
  useServer,
  stopServer,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

let server;
let sdk;

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
});

/**
 * Subscribes with pusher-js and collects every event the channel emits, in order, until `until`
 * (event name) arrives. Returns the list of [event, data] pairs.
 */
async function subscribeAndCollect(client, name, until, ms = WAIT_MS) {
  const ch = client.subscribe(name);
  const log = [];
  let done;
  const finished = new Promise((r) => (done = r));
  ch.bind_global((event, data) => {
    log.push([event, data]);
    if (event === until) done();
    if (event === 'pusher:subscription_error') done();
  });
  await withDeadline(finished, ms, `'${until}' on ${name}`);
  return { ch, log };
}

async function lastEventReplayed(prefix, opts = {}) {
  const name = uniq(prefix);
  // Publish twice before anyone subscribes: only the last one is kept.
  await sdk.trigger(name, 'tick', { n: 1 });
  await sdk.trigger(name, 'tick', { n: 2 });
  const client = await connectClient(server, opts);
  const { ch, log } = await subscribeAndCollect(client, name, 'tick');
  const names = log.map(([e]) => e);
  assert.equal(names[0], 'pusher:subscription_succeeded', `order: ${JSON.stringify(log)}`);
  assert.deepEqual(log[log.length - 1], ['tick', { n: 2 }], `log: ${JSON.stringify(log)}`);
  assert.ok(!names.includes('pusher:cache_miss'), `no cache_miss when cached: ${names}`);
  // Marker: a live event afterwards arrives, and the older cached event never did.
  const ticks = record(ch, 'tick');
  await sdk.trigger(name, 'tick', { n: 3 });
  assert.deepEqual((await ticks.next()).data, { n: 3 });
  assert.equal(
    log.filter(([e, d]) => e === 'tick' && d && d.n === 1).length,
    0,
    'only the last event is replayed',
  );
}

test('cache-: the last published event is delivered right after subscription_succeeded', async () => {
  await lastEventReplayed('cache-');
});

test('private-cache-: the last published event is delivered after subscription_succeeded', async () => {
  await lastEventReplayed('private-cache-');
});

test('presence-cache-: the last published event is delivered after subscription_succeeded', async () => {
  await lastEventReplayed('presence-cache-', {
    presence: () => ({ user_id: 'cacher', user_info: { x: 1 } }),
  });
});

test('private-encrypted-cache-: the last event is replayed and pusher-js decrypts it', async () => {
  await lastEventReplayed('private-encrypted-cache-');
});

test('cache-: subscribing to an empty cache channel -> pusher-js emits pusher:cache_miss', async () => {
  const client = await connectClient(server);
  const name = uniq('cache-empty-');
  const { log } = await subscribeAndCollect(client, name, 'pusher:cache_miss');
  assert.deepEqual(
    log.map(([e]) => e),
    ['pusher:subscription_succeeded', 'pusher:cache_miss'],
  );
});

test('cache raw: empty cache channel -> subscription_succeeded then pusher:cache_miss on that channel', async () => {
  const raw = await RawClient.connect(server);
  const name = uniq('cache-rawmiss-');
  raw.subscribe(name);
  await raw.waitFor('pusher_internal:subscription_succeeded', { channel: name });
  const miss = await raw.waitFor((m) => m.event === 'pusher:cache_miss');
  assert.equal(miss.channel, name);
  const iSucc = raw.messages.findIndex((m) => m.event === 'pusher_internal:subscription_succeeded');
  const iMiss = raw.messages.indexOf(miss);
  assert.ok(iSucc < iMiss, 'cache_miss after subscription_succeeded');
});

test('non-cache channel: no cache_miss and no replay of earlier events', async () => {
  const name = uniq('plain-');
  await sdk.trigger(name, 'tick', { n: 1 });
  const raw = await RawClient.connect(server);
  await raw.subscribeOk(name);
  await sdk.trigger(name, 'marker', {});
  await raw.waitFor('marker', { channel: name });
  assert.ok(!raw.seen('pusher:cache_miss'));
  assert.ok(!raw.seen('tick'));
});

test('cache-: the cache is per channel and keeps the latest across subscribers', async () => {
  const name = uniq('cache-shared-');
  const a = await RawClient.connect(server);
  a.subscribe(name);
  await a.waitFor('pusher:cache_miss', { channel: name });
  await sdk.trigger(name, 'price', { p: 10 });
  await a.waitFor('price', { channel: name });
  const b = await RawClient.connect(server);
  b.subscribe(name);
  await b.waitFor('pusher_internal:subscription_succeeded', { channel: name });
  const replay = await b.waitFor('price', { channel: name });
  assert.deepEqual(replay.data, { p: 10 });
  // A new, unrelated cache channel is still empty.
  const other = uniq('cache-other-');
  b.subscribe(other);
  await b.waitFor('pusher:cache_miss', { channel: other });
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
