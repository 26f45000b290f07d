// Recovery additions to the harness, shared by tests/recovery*.test.mjs: the apps with history
// rules, the helper from clients/js, a publisher at a steady rate through the pusher SDK, and
// the scenario the product requirement describes: a client loses its connection while events
// are published, comes back, and its app has seen every event once, in publish order.

import assert from 'node:assert/strict';

import { APP1, APP2, WAIT_MS, eventually, record } from './harness.mjs';
import { withRecovery, positionOf } from '../../clients/js/index.js';

export { withRecovery, positionOf };

/**
 * The history rules of both test apps (docs/protocol.md, "History and recovery"): the first
 * rule that matches a channel applies. small-* keeps 5 events and brief-* keeps events for
 * 1 s, for the positions that are too old.
 */
export const HISTORY = Object.freeze([
  { channels: 'auction-*', size: 1000, ttl: '10m' },
  { channels: 'presence-room-*', size: 1000, ttl: '10m' },
  { channels: 'private-*', size: 1000, ttl: '10m' },
  { channels: 'small-*', size: 5, ttl: '10m' },
  { channels: 'brief-*', size: 1000, ttl: '1s' },
]);

/** APP1 and APP2 with HISTORY: positions are per app, the same channel names in both. */
export const RECOVERY_APPS = Object.freeze([
  { ...APP1, history: HISTORY },
  { ...APP2, history: HISTORY },
]);

/**
 * How long a test waits for pusher-js to be back after its connection failed. With the helper's
 * reconnect schedule (clients/js/README.md, "Reconnecting") it is back within about a second of
 * the server being reachable; on pusher-js's own ({reconnect: false}), an attempt refused (the
 * proxy's outage) makes it wait for its fixed 15 s strategy timeout (see README.md). Generous,
 * for busy machines.
 */
export const RECONNECT_MS = 60_000;

/**
 * Publishes event with data {n} (n = 1, 2, ...) to channels (a name or a list) at rate per
 * second, each publish awaited before the next so that n is the publish order, through the
 * SDKs in turn (sdks[0] for n = 1, sdks[1] for n = 2, ...). published is the last n the server
 * accepted. stop() ends it and resolves that n; a publish that fails ends it and makes stop()
 * throw with the error.
 */
export function publishAtRate(sdks, { channels, event, rate = 50 }) {
  const state = { published: 0, error: null, stopped: false };
  const interval = 1000 / rate;
  const start = Date.now();
  const done = (async () => {
    for (let n = 1; !state.stopped; n++) {
      try {
        await sdks[(n - 1) % sdks.length].trigger(channels, event, { n });
      } catch (e) {
        state.error = new Error(`publish #${n} failed: ${e.status ?? ''} ${e.body ?? e.message}`);
        state.stopped = true;
        break;
      }
      state.published = n;
      const wait = start + n * interval - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait)); // pacing: the publish rate
    }
  })();
  state.stop = async () => {
    state.stopped = true;
    await done;
    if (state.error) throw state.error;
    return state.published;
  };
  return state;
}

/**
 * What the app sees on one channel: listen(cb) registers the app's handler for the published
 * event, onRecovered(cb) one for herald:recovered (pusher-js: channel.bind; Echo: .listen).
 * Returns {name, got: [n...], recovered: [data...]}.
 */
export function watchChannel(name, { listen, onRecovered }) {
  const w = { name, got: [], recovered: [], gotAtRecovered: [] };
  listen((data) => w.got.push(data.n));
  onRecovered((data) => {
    w.recovered.push(data);
    w.gotAtRecovered.push(w.got.length);
  });
  return w;
}

/** watchChannel for a pusher-js channel. */
export function watchPusherChannel(channel, event) {
  return watchChannel(channel.name, {
    listen: (cb) => channel.bind(event, cb),
    onRecovered: (cb) => channel.bind('herald:recovered', cb),
  });
}

const upTo = (n) => Array.from({ length: n }, (_, i) => i + 1);

/**
 * The requirement's scenario. pusher (with withRecovery) is connected and subscribed to the
 * channels of watches; events are published at 50/s through sdks to channels; once the app has
 * handled 50 of each, disrupt() breaks the client's connection (and resolves when the
 * disruption is over, with whatever it wants printed). Then pusher-js reconnects, each channel
 * gets herald:recovered {recovered: true} once, the live stream goes on, and after the
 * publisher stops and a marker has come through, each channel's handler has seen 1..N exactly,
 * in order. Returns {total, missed, recoveredAfterMs}.
 */
export async function recoverThrough(t, { label, pusher, watches, sdks, channels, event, disrupt, sendMarker }) {
  const states = record(pusher.connection, 'state_change');
  const pub = publishAtRate(sdks, { channels, event });
  const counts = () => watches.map((w) => `${w.name}: ${w.got.length}`).join(', ');
  try {
    await eventually(
      () => watches.every((w) => w.got.length >= 50),
      WAIT_MS,
      () => `50 live events on every channel (published ${pub.published}; handled ${counts()})`,
    );
    const info = await disrupt(pub);
    const handledAtDrop = Math.min(...watches.map((w) => w.got.length));
    const publishedAtDrop = pub.published;
    const backFrom = Date.now();
    await eventually(
      () => states.items.some((s) => s.data.previous === 'connected'),
      WAIT_MS,
      () => `pusher-js to notice the disruption (states: ${JSON.stringify(states.items.map((s) => s.data))})`,
    );
    await eventually(
      () => watches.every((w) => w.recovered.length >= 1),
      RECONNECT_MS,
      () =>
        `herald:recovered on every channel (state ${pusher.connection.state}; recovered: ` +
        `${JSON.stringify(watches.map((w) => w.recovered))}; handled ${counts()}; published ${pub.published})`,
    );
    const recoveredAfterMs = Date.now() - backFrom;
    for (const w of watches) assert.deepEqual(w.recovered, [{ recovered: true }], `${w.name}: herald:recovered`);
    const publishedAtRecovered = pub.published;
    // The live stream goes on after the recovery.
    await eventually(
      () => watches.every((w) => w.got.length >= publishedAtRecovered + 25),
      WAIT_MS,
      () => `25 live events after the recovery (published ${pub.published}; handled ${counts()})`,
    );
    const total = await pub.stop();
    // Everything before the marker has been delivered when the marker has.
    const markers = watches.map((w) => eventually(() => w.got.includes(0), WAIT_MS, `the marker on ${w.name}`));
    await sendMarker();
    await Promise.all(markers);
    for (const w of watches) {
      assert.deepEqual(w.recovered, [{ recovered: true }], `${w.name}: one herald:recovered, recovered`);
      const got = w.got.slice(0, -1);
      const dup = got.length - new Set(got).size;
      assert.deepEqual(
        got,
        upTo(total),
        `${w.name}: every one of ${total} events once, in order (${got.length} handled, ${dup} duplicates, first differences at ` +
          `${got.findIndex((n, i) => n !== i + 1)})`,
      );
    }
    const missed = publishedAtRecovered - handledAtDrop;
    assert.ok(missed > 0, `events were published while the client was away (${missed})`);
    t.diagnostic(
      `${label}: ${total} events per channel; ${publishedAtDrop - handledAtDrop} not handled when the disruption ended, ` +
        `${missed} by the time it had recovered, ${recoveredAfterMs} ms after the disruption ended; ${info ?? ''}`,
    );
    return { total, missed, recoveredAfterMs };
  } finally {
    states.stop();
    if (!pub.stopped) await pub.stop().catch(() => {});
  }
}

/**
 * The proxy's failure of the requirement: it stalls while 50 more events are published (they
 * reach the proxy and stay there), then drops every connection and refuses new ones for
 * outageMs.
 */
export function stallThenOutage(proxy, outageMs = 10_000) {
  return async (pub) => {
    proxy.stall();
    const from = pub.published;
    await eventually(() => pub.published >= from + 50, WAIT_MS, () => `50 publishes during the stall (published ${pub.published})`);
    const { downAt, upAt } = await proxy.outage(outageMs);
    return `the proxy refused connections for ${upAt - downAt} ms`;
  };
}
