// Subscription counts (enable_subscription_count_event): pusher-js gets
// pusher:subscription_count and channel.subscriptionCount on every channel but presence ones,
// at most once a second per channel; an app without the switch gets none.

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
  useServer,
  uniq,
} from '../harness.mjs';

const COUNTING = { ...APP1, enable_subscription_count_event: true };

let server;
let sdk;

useServer(
  (s) => {
    server = s;
    sdk = s.sdk(APP1);
  },
  { apps: [COUNTING, APP2] },
);

/** Resolves with the next pusher:subscription_count data whose count is n. */
async function countOf(rec, n) {
  for (;;) {
    const { data } = await rec.next();
    if (data.subscription_count === n) return data;
  }
}

for (const kind of ['', 'private-', 'private-encrypted-', 'cache-']) {
  test(`${kind || 'public '}channel: counts as subscribers come and go`, async () => {
    const name = uniq(kind);
    const a = await connectClient(server);
    const chA = a.subscribe(name);
    const counts = record(chA, 'pusher:subscription_count');
    await subscribe(a, name);
    assert.deepEqual(await countOf(counts, 1), { subscription_count: 1 });
    const b = await connectClient(server);
    const bCounts = record(b.subscribe(name), 'pusher:subscription_count');
    await countOf(bCounts, 2);
    await countOf(counts, 2);
    assert.equal(chA.subscriptionCount, 2);
    disconnectClient(b);
    await countOf(counts, 1);
    assert.equal(chA.subscriptionCount, 1);
  });
}

test('presence channel: no subscription counts (member events count its members)', async () => {
  const name = uniq('presence-');
  const c = await connectClient(server, { presence: () => ({ user_id: uniq('u-') }) });
  const pres = c.subscribe(name);
  const counts = record(pres, 'pusher:subscription_count');
  await subscribe(c, name);
  // Two later rounds: a count for the presence channel would have been queued before either.
  for (const marker of [uniq('m1-'), uniq('m2-')]) {
    const rec = record(c.subscribe(marker), 'pusher:subscription_count');
    await subscribe(c, marker);
    await countOf(rec, 1);
  }
  // And an event on the presence channel itself, queued after anything sent there before.
  const got = record(pres, 'marker');
  await sdk.trigger(name, 'marker', 'm');
  await got.next();
  assert.equal(counts.items.length, 0, `presence channel got ${JSON.stringify(counts.items)}`);
});

test('an app without enable_subscription_count_event gets no counts', async () => {
  const name = uniq('plain-');
  const raw = await RawClient.connect(server, APP2.key);
  await raw.subscribeOk(name);
  // Two rounds on the counting app after the subscription, then an event on the channel:
  // any count queued for raw would have come before it.
  const watcher = await connectClient(server);
  for (const marker of [uniq('m1-'), uniq('m2-')]) {
    const rec = record(watcher.subscribe(marker), 'pusher:subscription_count');
    await countOf(rec, 1);
  }
  await server.sdk(APP2).trigger(name, 'marker', 'm');
  await raw.waitFor('marker', { channel: name });
  assert.equal(raw.filter('pusher_internal:subscription_count').length, 0, raw.describe());
});

test('40 joins at once: the first subscriber gets the counts coalesced, at most one a second', async () => {
  const name = uniq('crowd-');
  const first = await connectClient(server);
  const counts = record(first.subscribe(name), 'pusher:subscription_count');
  await countOf(counts, 1);
  const start = Date.now();
  const joiners = await Promise.all(Array.from({ length: 40 }, () => RawClient.connect(server, COUNTING.key)));
  for (const j of joiners) j.subscribe(name);
  await countOf(counts, 41);
  const seconds = (Date.now() - start) / 1000;
  const after = counts.items.length - 1; // the first one, 1, came before the joins
  assert.ok(after <= Math.floor(seconds) + 2, `${after} count events in ${seconds} s`);
});
