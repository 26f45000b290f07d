// Presence churn across a cluster: 3 herald nodes on one bus (NATS, Redis). 60 pusher-js clients,
// 20 on each node, join and leave a few presence channels (each client its own user id, one
// channel at a time: subscribe, wait for pusher:subscription_succeeded, unsubscribe) paced at
// about 500 joins per second in total for 10 s. The rate reached is printed, not asserted (the
// machine is shared and small); the test asserts that at least 2,000 joins happened and none
// failed. One watcher per node stays subscribed to one of the churned channels with a fixed
// user id the whole time.
//
// Then every churner leaves (unsubscribe, then disconnect): on every node GET /channels lists
// only the watchers' channel, with the watchers as its users, every other channel is
// unoccupied, and each watcher's pusher-js members are exactly the watchers. Then the watchers
// leave and no presence channel is left on any node. On the raw frames, each watcher got exactly
// one member_added and one member_removed per join of its channel by each churner.
//
// The cluster runs with cluster.heartbeat 500ms and node_timeout 3s, as the other cluster-state
// files. Every wait is an event wait or a poll with the harness's deadline (WAIT_MS); the only
// timed pauses are the pacing of the joins.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { WAIT_MS, connectClient, disconnectClient, eventually, subscribe, uniq } from '../harness.mjs';
import {
  BUS_ENGINES,
  FAST_HEARTBEAT,
  memberIds,
  presenceFrames,
  untilRestEverywhere,
  useCluster,
  userIdsView,
} from '../cluster.mjs';

const SIZE = 3;
const CHURNERS = 60; // pusher-js connections, spread evenly over the nodes
const CHANNELS = 4; // presence channels churned; the watchers sit on the first
const RATE = 500; // target joins per second, in total
const CHURN_MS = 10_000;
const MIN_JOINS = 2_000;

const info = (id) => ({ name: `Name of ${id}` });
const sorted = (ids) => [...ids].sort();
const pause = (ms) => new Promise((r) => setTimeout(r, ms)); // pacing only, never to wait for something

function percentile(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

for (const engine of BUS_ENGINES) {
  describe(`${engine}, ${SIZE} nodes`, () => {
    let nodes;
    useCluster({ engine, size: SIZE, clusterConfig: FAST_HEARTBEAT }, (c) => {
      nodes = c.nodes;
    });

    /** A connected pusher-js client on node i whose presence channel_data is user id. */
    function member(i, id) {
      return connectClient(nodes[i], { presence: () => ({ user_id: id, user_info: info(id) }) });
    }

    test(`${CHURNERS} pusher-js clients join and leave presence channels at ~${RATE}/s for ${CHURN_MS / 1000} s; nothing is left behind on any node`, async (t) => {
      const base = uniq('presence-churn-');
      const channels = Array.from({ length: CHANNELS }, (_, c) => `${base}-${c}`);
      const watched = channels[0];

      // One watcher per node on the watched channel, each joining once the earlier ones are
      // known everywhere (so its subscription_succeeded already lists them).
      const watchers = [];
      for (let i = 0; i < nodes.length; i++) {
        const id = `watch-${i}`;
        const client = await member(i, id);
        const frames = presenceFrames(client, watched);
        const ch = await subscribe(client, watched);
        watchers.push({ id, node: i, client, ch, frames });
        await untilRestEverywhere(nodes, {
          path: `/channels/${watched}/users`,
          view: userIdsView,
          want: sorted(watchers.map((w) => w.id)),
        });
      }
      const watcherIds = sorted(watchers.map((w) => w.id));

      // The churners: churner k on node k % SIZE, user id churn-k.
      const churners = await Promise.all(
        Array.from({ length: CHURNERS }, async (_, k) => {
          const id = `churn-${k}`;
          return { id, k, node: k % nodes.length, client: await member(k % nodes.length, id), watchedJoins: 0 };
        }),
      );

      // Churner k's n-th join is due at t0 + (k / CHURNERS + n) * period: RATE joins per second
      // in total, staggered over the clients. A client that is late joins at once.
      const period = (CHURNERS / RATE) * 1000;
      const latencies = [];
      const errors = [];
      const perNode = Array(nodes.length).fill(0);
      let joins = 0;
      const t0 = Date.now();
      const end = t0 + CHURN_MS;
      await Promise.all(
        churners.map(async (c) => {
          for (let n = 0; ; n++) {
            const due = t0 + (c.k / CHURNERS + n) * period;
            if (due >= end) return;
            const wait = due - Date.now();
            if (wait > 0) await pause(wait);
            const name = channels[(c.k + n) % CHANNELS];
            const started = Date.now();
            try {
              await subscribe(c.client, name);
            } catch (e) {
              errors.push(`${c.id} (node ${c.node}) join ${n} of ${name}: ${e.message}`);
              return;
            }
            latencies.push(Date.now() - started);
            joins += 1;
            perNode[c.node] += 1;
            if (name === watched) c.watchedJoins += 1;
            c.client.unsubscribe(name);
          }
        }),
      );
      const churnMs = Date.now() - t0;
      const achieved = Math.round((joins * 1000) / churnMs);
      t.diagnostic(
        `${engine}/${SIZE}: ${joins} joins in ${churnMs} ms = ${achieved} joins/s (target ${RATE}); ` +
          `per node ${perNode.join('/')}; subscription_succeeded after p50 ${percentile(latencies, 50)} ms, ` +
          `p99 ${percentile(latencies, 99)} ms, max ${percentile(latencies, 100)} ms`,
      );
      assert.deepEqual(errors, [], 'every join succeeded');
      assert.ok(joins >= MIN_JOINS, `at least ${MIN_JOINS} joins (got ${joins})`);

      // Every churner leaves: its last channel was unsubscribed in the loop; now it disconnects.
      const leftAt = Date.now();
      for (const c of churners) disconnectClient(c.client);

      // Only the watchers' channel is left, with the watchers as its only users, on every node.
      await untilRestEverywhere(nodes, {
        path: '/channels',
        params: { filter_by_prefix: 'presence-', info: 'user_count' },
        want: { channels: { [watched]: { user_count: watchers.length } } },
      });
      const settledMs = Date.now() - leftAt;
      await untilRestEverywhere(nodes, { path: `/channels/${watched}/users`, view: userIdsView, want: watcherIds });
      for (const name of channels.slice(1)) {
        await untilRestEverywhere(nodes, {
          path: `/channels/${name}`,
          view: (j) => ({ occupied: j.occupied }),
          want: { occupied: false },
        });
      }
      // Each watcher's pusher-js members: exactly the watchers (the last member_removed frames
      // may still be on their way, so poll).
      for (const w of watchers) {
        await eventually(
          () => JSON.stringify(memberIds(w.ch)) === JSON.stringify(watcherIds),
          WAIT_MS,
          () => {
            const left = memberIds(w.ch).filter((id) => !watcherIds.includes(id));
            // The last raw frame each left-behind churner got on this watcher's socket.
            const lastFrame = left.map((id) => {
              const a = w.frames.added.filter((x) => x.id === id);
              const r = w.frames.removed.filter((x) => x.id === id);
              return `${id}: ${a.length} added, ${r.length} removed, last added at +${a.length ? a[a.length - 1].at - t0 : '-'} ms, last removed at +${r.length ? r[r.length - 1].at - t0 : '-'} ms`;
            });
            return `${w.id} (node ${w.node}) pusher-js members to be ${JSON.stringify(watcherIds)} ` +
              `(members: ${JSON.stringify(memberIds(w.ch))}; left behind: ${JSON.stringify(lastFrame)})`;
          },
        );
        assert.equal(w.ch.members.count, watchers.length, `${w.id}: members.count`);
        assert.equal(w.client.connection.state, 'connected', `${w.id}: still connected`);
      }
      // On the raw frames (polled: the last may be in flight): a watcher got one member_added
      // and one member_removed per join of each churner on its own node; for a churner on
      // another node, as many member_removed as member_added and no more than its joins: a
      // join and leave that both happen within the time the state takes to reach the other
      // nodes may never appear there (docs/cluster.md: eventually consistent).
      for (const w of watchers) {
        let wrong = [];
        await eventually(
          () => {
            wrong = churners
              .map((c) => ({
                id: c.id,
                local: c.node === w.node,
                joins: c.watchedJoins,
                added: w.frames.added.filter((x) => x.id === c.id).length,
                removed: w.frames.removed.filter((x) => x.id === c.id).length,
              }))
              .filter((x) => x.added !== x.removed || x.added > x.joins || (x.local && x.added !== x.joins));
            return wrong.length === 0;
          },
          WAIT_MS,
          () => `${w.id} (node ${w.node}): member_added and member_removed balanced per churner, one per join on the watcher's node (wrong: ${JSON.stringify(wrong)})`,
        );
      }
      const seen = watchers.map((w) => `${w.id}: ${w.frames.added.length} member_added, ${w.frames.removed.length} member_removed`);
      t.diagnostic(`${engine}/${SIZE}: REST right on every node ${settledMs} ms after the churners left; raw frames: ${seen.join('; ')}`);

      // The watchers leave: no presence channel on any node, every channel unoccupied.
      for (const w of watchers) {
        w.client.unsubscribe(watched);
        disconnectClient(w.client);
      }
      await untilRestEverywhere(nodes, {
        path: '/channels',
        params: { filter_by_prefix: 'presence-', info: 'user_count' },
        want: { channels: {} },
      });
      for (const name of channels) {
        await untilRestEverywhere(nodes, {
          path: `/channels/${name}`,
          view: (j) => ({ occupied: j.occupied }),
          want: { occupied: false },
        });
      }
      await untilRestEverywhere(nodes, { path: `/channels/${watched}/users`, view: userIdsView, want: [] });
    });
  });
}
