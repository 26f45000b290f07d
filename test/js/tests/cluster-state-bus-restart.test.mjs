// The cluster-wide state across a bus restart: herald nodes sharing one bus (NATS, Redis; 2 and
// 3 nodes) with a short heartbeat (cluster.heartbeat 500ms, cluster.node_timeout 3s, shorter
// than the outage). The bus server is stopped for 5 s while a presence member leaves and another
// joins, then started again on its port. Nobody is declared dead for the silence: the pusher-js
// subscribers get no member_removed or member_added for users who stayed, and exactly one for
// the user who left and the one who joined; the REST counts and member lists of every node, and
// every subscriber's member list, are right within 5 s of the bus's return (the time is printed).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { WAIT_MS, connectClient, disconnectClient, eventually, record, subscribe, uniq, waitForBind } from '../harness.mjs';
import {
  CLUSTER_SHAPES,
  FAST_HEARTBEAT,
  memberIds,
  presenceFrames,
  untilRestEverywhere,
  useCluster,
  userIdsView,
} from '../cluster.mjs';

const OUTAGE_MS = 5_000;
const RECOVERY_BOUND_MS = 5_000; // after the bus answers again

const info = (id) => ({ name: `Name of ${id}` });
const sorted = (ids) => [...ids].sort();

const measured = [];

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    useCluster({ ...shape, clusterConfig: FAST_HEARTBEAT }, (c) => {
      cluster = c;
    });

    function member(i, id) {
      return connectClient(cluster.nodes[i], { presence: () => ({ user_id: id, user_info: info(id) }) });
    }

    test(`bus stopped ${OUTAGE_MS / 1000} s: no member events for users who stayed; counts and member lists right on every node soon after`, async (t) => {
      const nodes = cluster.nodes;
      const last = nodes.length - 1;
      const pres = uniq('presence-cs-bus-');
      const pub = uniq('cs-bus-pub-');

      // An observer on every node (pres and pub), 'both' on node 0 and the last node, 'leaver' on node 0.
      const observers = [];
      for (let i = 0; i < nodes.length; i++) {
        const id = `obs-${i}`;
        const client = await member(i, id);
        const frames = presenceFrames(client, pres);
        const ch = await subscribe(client, pres);
        await subscribe(client, pub);
        for (const o of observers) await o.frames.wait('added', id);
        observers.push({ id, node: i, client, ch, frames, states: record(client.connection, 'state_change') });
      }
      const both = [await member(0, 'both'), await member(last, 'both')];
      for (const c of both) await subscribe(c, pres);
      const leaver = await member(0, 'leaver');
      await subscribe(leaver, pres);
      const allSaw = (kind, id) => Promise.all(observers.map((o) => o.frames.wait(kind, id)));
      await allSaw('added', 'both');
      await allSaw('added', 'leaver');
      const obsIds = observers.map((o) => o.id);
      await untilRestEverywhere(nodes, { path: `/channels/${pres}/users`, view: userIdsView, want: sorted([...obsIds, 'both', 'leaver']) });
      const base = observers.map((o) => ({ added: o.frames.added.length, removed: o.frames.removed.length }));

      await cluster.bus.stop();
      const downAt = Date.now();
      let lastHealth = [];
      await eventually(
        async () => {
          lastHealth = (await cluster.healths()).map((h) => h.body.cluster);
          return lastHealth.every((c) => c && c.connected === false);
        },
        WAIT_MS,
        () => `every node to report the bus down (last: ${JSON.stringify(lastHealth)})`,
      );

      // During the outage: 'leaver' leaves node 0, 'joiner' joins on the last node.
      disconnectClient(leaver);
      const joiner = await member(last, 'joiner');
      const joinerCh = joiner.subscribe(pres);
      const joined = waitForBind(joinerCh, 'pusher:subscription_succeeded', 2 * WAIT_MS);
      do {
        for (const o of observers) assert.equal(o.client.connection.state, 'connected', `obs on node ${o.node} during the outage`);
        await new Promise((r) => setTimeout(r, 250)); // poll interval
      } while (Date.now() - downAt < OUTAGE_MS);

      await cluster.bus.start();
      const upAt = Date.now();
      await joined;

      // Recovered: every node's REST answers and every subscriber's list are the cluster's.
      const want = sorted([...obsIds, 'both', 'joiner']);
      const subs = observers.length + 3;
      let seen = {};
      await eventually(
        async () => {
          seen = { lists: [...observers.map((o) => memberIds(o.ch)), memberIds(joinerCh)] };
          if (!seen.lists.every((l) => JSON.stringify(l) === JSON.stringify(want))) return false;
          await untilRestEverywhere(nodes, { path: `/channels/${pres}/users`, view: userIdsView, want, ms: 0 });
          await untilRestEverywhere(nodes, {
            path: `/channels/${pres}`,
            params: { info: 'user_count,subscription_count' },
            want: { occupied: true, user_count: want.length, subscription_count: subs },
            ms: 0,
          });
          await untilRestEverywhere(nodes, {
            path: `/channels/${pub}`,
            params: { info: 'subscription_count' },
            want: { occupied: true, subscription_count: observers.length },
            ms: 0,
          });
          return true;
        },
        2 * WAIT_MS,
        () => `member lists and REST counts right on every node after the bus came back (lists: ${JSON.stringify(seen)})`,
      );
      const recoveryMs = Date.now() - upAt;
      t.diagnostic(`${shape.engine}/${shape.size}: counts and member lists right on every node ${recoveryMs} ms after the bus answered again`);
      measured.push(`${shape.engine}/${shape.size} nodes: bus back -> state right everywhere ${recoveryMs} ms`);
      assert.ok(recoveryMs <= RECOVERY_BOUND_MS, `state right ${recoveryMs} ms after the bus came back, over ${RECOVERY_BOUND_MS} ms`);

      // Marker: a user joins on node 0; before it, each observer saw only the real comings and goings.
      const marker = await member(0, 'marker');
      await subscribe(marker, pres);
      await allSaw('added', 'marker');
      observers.forEach((o, k) => {
        assert.deepEqual(o.frames.ids('removed').slice(base[k].removed), ['leaver'], `obs on node ${o.node}: member_removed during and after the outage`);
        assert.deepEqual(sorted(o.frames.ids('added').slice(base[k].added)), ['joiner', 'marker'], `obs on node ${o.node}: member_added during and after the outage`);
        assert.deepEqual(o.states.items.map((x) => x.data), [], `obs on node ${o.node} never left connected`);
      });
      await cluster.waitBusConnected();
    });
  });
}

test('times measured', (t) => {
  for (const m of measured) t.diagnostic(m);
});
