// A client that missed 10 MiB recovers it all: pusher-js with the helper of clients/js, a
// channel whose rule keeps 10,000 events, 10,000 events of 1 KB published while the client is
// away (ten times the default outbound_buffer_bytes), and live events published while herald
// replays them. On one node, and on 2 nodes over Redis and over NATS (JetStream). The app sees
// every event once, in order, the live ones after the replayed ones, and one herald:recovered
// {recovered: true}.

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import { APP1, WAIT_MS, cleanupAll, eventually, makeClient, startServer, stopServer, subscribe, uniq, waitForState } from '../harness.mjs';
import { BUS_ENGINES, useCluster } from '../cluster.mjs';
import { HISTORY, watchPusherChannel, withRecovery } from '../recovery.mjs';

const MISSED = 10_000;
const LIVE = 200;
const APPS = [{ ...APP1, history: [{ channels: 'big-*', size: MISSED, ttl: '10m' }, ...HISTORY] }];
const PAD = 'x'.repeat(1000);

/** Publishes events from..to ({n, pad}) to channel, 10 to a batch_events call. */
async function publishRange(sdk, channel, from, to) {
  for (let n = from; n <= to; n += 10) {
    const batch = [];
    for (let k = n; k <= Math.min(n + 9, to); k++) batch.push({ channel, name: 'bid', data: JSON.stringify({ n: k, pad: PAD }) });
    await sdk.triggerBatch(batch);
  }
}

/**
 * The scenario on front (a node, or a cluster's balancer) with sdk: the client handles one
 * live event, disconnects, misses MISSED events, connects again; LIVE more events are
 * published from the moment it is back, during the replay.
 */
async function recoverTenMiB(t, { label, front, sdk }) {
  const client = withRecovery(makeClient(front, { sdk }));
  await waitForState(client, 'connected');
  const name = uniq('big-');
  const ch = await subscribe(client, name);
  const w = watchPusherChannel(ch, 'bid');
  await publishRange(sdk, name, 1, 1);
  await eventually(() => w.got.length === 1, WAIT_MS, () => `the first live event (handled ${w.got.length})`);
  client.disconnect();
  await waitForState(client, 'disconnected');
  const t0 = Date.now();
  await publishRange(sdk, name, 2, MISSED + 1);
  const publishMs = Date.now() - t0;
  const back = Date.now();
  // The live events start once herald has the resubscription (its replay is then fixed):
  // published earlier, each would push one missed event out of the 10,000 kept.
  let resubscribed = false;
  ch.bind('pusher:subscription_succeeded', () => {
    resubscribed = true;
  });
  client.connect();
  await eventually(() => resubscribed, WAIT_MS, () => `the resubscription (state ${client.connection.state})`);
  const live = publishRange(sdk, name, MISSED + 2, MISSED + 1 + LIVE);
  live.catch(() => {}); // awaited below; not unhandled if the test fails first
  await eventually(
    () => w.recovered.length >= 1,
    WAIT_MS * 3,
    () => `herald:recovered (state ${client.connection.state}; handled ${w.got.length})`,
  );
  const recoveredMs = Date.now() - back;
  assert.deepEqual(w.recovered, [{ recovered: true }], 'one herald:recovered, recovered');
  await live;
  const total = MISSED + 1 + LIVE;
  await eventually(() => w.got.length >= total, WAIT_MS * 3, () => `${total} events (handled ${w.got.length})`);
  const dup = w.got.length - new Set(w.got).size;
  assert.equal(w.got.length, total, `${total} events handled, not ${w.got.length} (${dup} duplicates)`);
  const wrong = w.got.findIndex((n, i) => n !== i + 1);
  assert.equal(wrong, -1, `every event once, in order: first out of place at ${wrong} (${w.got[wrong]})`);
  assert.ok(w.gotAtRecovered[0] >= MISSED + 1, `herald:recovered after the replayed events (${w.gotAtRecovered[0]} handled then)`);
  t.diagnostic(
    `${label}: ${MISSED} missed events of 1 KB published in ${publishMs} ms; recovered ${recoveredMs} ms after connect() ` +
      `(${w.gotAtRecovered[0]} handled then), then ${LIVE} live events published during the replay`,
  );
  client.disconnect();
}

describe('one node', () => {
  let server;
  before(async () => {
    server = await startServer({ apps: APPS });
  });
  afterEach(() => cleanupAll());
  after(async () => {
    cleanupAll();
    await stopServer(server);
  });
  test('a client that missed 10,000 events of 1 KB recovers all, once, in order, then the live ones', async (t) => {
    await recoverTenMiB(t, { label: 'one node', front: server, sdk: server.sdk(APP1) });
  });
});

for (const engine of BUS_ENGINES) {
  describe(`${engine}, 2 nodes`, () => {
    let cluster;
    useCluster({ engine, size: 2, apps: APPS }, (c) => {
      cluster = c;
    });
    test('a client that missed 10,000 events of 1 KB recovers all on either node, once, in order, then the live ones', async (t) => {
      // Published through node 1; the client comes back through the balancer.
      const front = { port: cluster.lb.port, sdk: (app, extra) => cluster.nodes[1].sdk(app, extra) };
      await recoverTenMiB(t, { label: `${engine}, 2 nodes`, front, sdk: cluster.nodes[1].sdk(APP1) });
    });
  });
}
