// A dead node's share of the cluster-wide state: herald nodes sharing one bus (NATS, Redis; 2
// and 3 nodes) with a short heartbeat (cluster.heartbeat 500ms, cluster.node_timeout 3s). A
// node holding presence members is killed with SIGKILL: the pusher-js subscribers on the other
// nodes get exactly one member_removed per user who was only on the dead node, within
// node_timeout + heartbeat (+ a margin for a busy machine; the time is printed), none for a user
// who also has a socket on a live node, and the REST counts of the live nodes leave the dead
// node out. Restarted under the same node id, after it was noticed dead or at once, the node
// replaces its old share: nothing is counted twice. A node stopped with SIGTERM says goodbye:
// its members leave the other nodes at once, well before node_timeout.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { RawClient, connectClient, subscribe, uniq } from '../harness.mjs';
import {
  CLUSTER_SHAPES,
  FAST_HEARTBEAT,
  FAST_HEARTBEAT_MS,
  memberIds,
  presenceFrames,
  untilRestEverywhere,
  useCluster,
  userIdsView,
} from '../cluster.mjs';

const VICTIM = 1;
// What a busy machine may add to node_timeout + heartbeat: timers that fire late, the sweep.
const MARGIN_MS = 2_000;
const DEATH_BOUND_MS = FAST_HEARTBEAT_MS.nodeTimeout + FAST_HEARTBEAT_MS.heartbeat + MARGIN_MS;

const info = (id) => ({ name: `Name of ${id}` });
const sorted = (ids) => [...ids].sort();

const measured = [];

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    useCluster({ ...shape, clusterConfig: FAST_HEARTBEAT }, (c) => {
      cluster = c;
    });
    const survivorIdx = () => [...cluster.nodes.keys()].filter((i) => i !== VICTIM);
    const liveNodes = () => survivorIdx().map((i) => cluster.nodes[i]);

    function member(i, id) {
      return connectClient(cluster.nodes[i], { presence: () => ({ user_id: id, user_info: info(id) }) });
    }

    /**
     * A raw WebSocket member on node i, subscribed to channels (presence ones as user id). The
     * members of a node that is killed are raw: they die with it and never come back. A
     * pusher-js client would reconnect, and pusher-js's disconnect() during a reconnection
     * attempt does not always stop it (a failed attempt's deferred callback starts a new
     * one), so it could come back later, as a member, on the restarted node.
     */
    async function rawMember(i, id, channels) {
      const raw = await RawClient.connect(cluster.nodes[i]);
      for (const name of channels) {
        await raw.subscribeOk(name, name.startsWith('presence-') ? { channelData: { user_id: id, user_info: info(id) } } : {});
      }
      return raw;
    }

    /** One observer per live node, on pres (and the other channels given). */
    async function observe(pres, others = []) {
      const observers = [];
      for (const i of survivorIdx()) {
        const id = `obs-${i}`;
        const client = await member(i, id);
        const frames = presenceFrames(client, pres);
        const ch = await subscribe(client, pres);
        for (const o of observers) await o.frames.wait('added', id);
        for (const name of others) await subscribe(client, name);
        observers.push({ id, node: i, client, ch, frames });
      }
      return observers;
    }

    /** Every observer has had member_<kind> for each id. */
    const allSaw = (observers, kind, ids) =>
      Promise.all(observers.flatMap((o) => ids.map((id) => o.frames.wait(kind, id))));

    /** Polls the presence channel's users and counts on every node in nodes. */
    async function expectPresence(nodes, pres, users, subs) {
      const took = await untilRestEverywhere(nodes, { path: `/channels/${pres}/users`, view: userIdsView, want: sorted(users) });
      await untilRestEverywhere(nodes, {
        path: `/channels/${pres}`,
        params: { info: 'user_count,subscription_count' },
        want: { occupied: true, user_count: users.length, subscription_count: subs },
      });
      return took;
    }

    test('SIGKILL a node with presence members: one member_removed per user only it had, REST without it; restarted, counted once', async (t) => {
      const nodes = cluster.nodes;
      const pres = uniq('presence-cs-death-');
      const pub = uniq('cs-death-pub-');
      const lonely = uniq('cs-death-lonely-'); // subscribed on the victim only
      const observers = await observe(pres, [pub]);
      const obsIds = observers.map((o) => o.id);

      // On the victim: dead-1 and dead-2, and 'both', who then joins on node 0 too.
      await rawMember(VICTIM, 'dead-1', [pres, pub, lonely]);
      await rawMember(VICTIM, 'dead-2', [pres, pub]);
      await rawMember(VICTIM, 'both', [pres, pub]);
      await allSaw(observers, 'added', ['dead-1', 'dead-2', 'both']);
      const bothLive = await member(0, 'both');
      await subscribe(bothLive, pres);

      const before = [...obsIds, 'dead-1', 'dead-2', 'both'];
      await expectPresence(nodes, pres, before, observers.length + 4);
      await untilRestEverywhere(nodes, { path: `/channels/${pub}`, params: { info: 'subscription_count' }, want: { occupied: true, subscription_count: observers.length + 3 } });
      await untilRestEverywhere(nodes, { path: `/channels/${lonely}`, want: { occupied: true } });
      for (const o of observers) assert.deepEqual(memberIds(o.ch), sorted(before), `obs on node ${o.node} before the kill`);

      const killedAt = Date.now();
      await cluster.killNode(VICTIM);

      await allSaw(observers, 'removed', ['dead-1', 'dead-2']);
      const removedAfter = Math.max(
        ...observers.flatMap((o) => o.frames.removed.filter((r) => r.id.startsWith('dead-')).map((r) => r.at - killedAt)),
      );
      t.diagnostic(`${shape.engine}/${shape.size}: member_removed on every live node ${removedAfter} ms after SIGKILL (bound ${DEATH_BOUND_MS} ms)`);
      measured.push(`${shape.engine}/${shape.size} nodes: SIGKILL -> member_removed everywhere ${removedAfter} ms`);
      assert.ok(
        removedAfter <= DEATH_BOUND_MS,
        `member_removed ${removedAfter} ms after SIGKILL, over node_timeout + heartbeat + ${MARGIN_MS} ms = ${DEATH_BOUND_MS} ms`,
      );

      // Marker: a user joins on node 0 after the dead node's members were dropped.
      const marker = await member(0, 'marker');
      await subscribe(marker, pres);
      await allSaw(observers, 'added', ['marker']);
      const after = [...obsIds, 'both', 'marker'];
      for (const o of observers) {
        assert.deepEqual(sorted(o.frames.ids('removed')), ['dead-1', 'dead-2'], `obs on node ${o.node}: one member_removed per dead user, none for 'both'`);
        assert.deepEqual(memberIds(o.ch), sorted(after), `obs on node ${o.node}: members after the kill`);
        assert.equal(o.ch.members.count, after.length);
      }

      // The live nodes' REST answers leave the dead node out.
      await expectPresence(liveNodes(), pres, after, observers.length + 2);
      await untilRestEverywhere(liveNodes(), { path: `/channels/${pub}`, params: { info: 'subscription_count' }, want: { occupied: true, subscription_count: observers.length } });
      await untilRestEverywhere(liveNodes(), { path: `/channels/${lonely}`, want: { occupied: false } });
      await untilRestEverywhere(liveNodes(), { path: '/channels', params: { filter_by_prefix: lonely }, want: { channels: {} } });
      t.diagnostic(`${shape.engine}/${shape.size}: live nodes' REST without the dead node by ${Date.now() - killedAt} ms after SIGKILL`);

      // Restarted with the same node id: its old share stays dropped, its new one counts once.
      await cluster.restartNode(VICTIM);
      await cluster.waitBusConnected();
      await untilRestEverywhere([nodes[VICTIM]], { path: `/channels/${pres}/users`, view: userIdsView, want: sorted(after) });
      const back = await member(VICTIM, 'dead-1');
      const backCh = await subscribe(back, pres);
      await subscribe(back, pub);
      const final = [...after, 'dead-1'];
      assert.deepEqual(memberIds(backCh), sorted(final), 'dead-1 back on the restarted node: its members');
      assert.equal(backCh.members.count, final.length);
      const both2 = await member(VICTIM, 'both');
      await subscribe(both2, pres);
      const marker2 = await member(VICTIM, 'marker-2');
      await subscribe(marker2, pres);
      await allSaw(observers, 'added', ['marker-2']);
      observers.forEach((o, k) => {
        const later = obsIds.slice(k + 1);
        assert.deepEqual(
          o.frames.ids('added'),
          [...later, 'dead-1', 'dead-2', 'both', 'marker', 'dead-1', 'marker-2'],
          `obs on node ${o.node}: every member_added, once ('both' never again)`,
        );
      });
      await expectPresence(nodes, pres, [...final, 'marker-2'], observers.length + 5);
      await untilRestEverywhere(nodes, { path: `/channels/${pub}`, params: { info: 'subscription_count' }, want: { occupied: true, subscription_count: observers.length + 1 } });
      await untilRestEverywhere(nodes, { path: `/channels/${lonely}`, want: { occupied: false } });
    });

    test('SIGKILL and an immediate restart under the same node id: the old share is replaced, not added to', async (t) => {
      const nodes = cluster.nodes;
      const pres = uniq('presence-cs-quick-');
      const observers = await observe(pres);
      const obsIds = observers.map((o) => o.id);
      for (const id of ['gone', 'returner']) await rawMember(VICTIM, id, [pres]);
      await allSaw(observers, 'added', ['gone', 'returner']);
      await expectPresence(nodes, pres, [...obsIds, 'gone', 'returner'], observers.length + 2);

      const killedAt = Date.now();
      await cluster.killNode(VICTIM);
      await cluster.restartNode(VICTIM);
      await cluster.waitBusConnected();
      const restartedAfter = Date.now() - killedAt;
      const returner = await member(VICTIM, 'returner');
      await subscribe(returner, pres);

      await allSaw(observers, 'removed', ['gone']);
      const removedAfter = Math.max(...observers.map((o) => o.frames.removed.find((r) => r.id === 'gone').at - killedAt));
      t.diagnostic(
        `${shape.engine}/${shape.size}: restarted ${restartedAfter} ms after SIGKILL; member_removed for the user it lost ` +
          `on every live node ${removedAfter} ms after SIGKILL (bound ${DEATH_BOUND_MS} ms)`,
      );
      measured.push(`${shape.engine}/${shape.size} nodes: SIGKILL + restart -> member_removed everywhere ${removedAfter} ms`);
      assert.ok(removedAfter <= DEATH_BOUND_MS, `member_removed ${removedAfter} ms after SIGKILL, over ${DEATH_BOUND_MS} ms`);

      const final = [...obsIds, 'returner'];
      await expectPresence(nodes, pres, final, observers.length + 1);
      // Marker: a user joins on the restarted node.
      const marker = await member(VICTIM, 'marker');
      await subscribe(marker, pres);
      await allSaw(observers, 'added', ['marker']);
      const returnerEvents = observers.map((o) =>
        [...o.frames.removed.map((r) => ({ ...r, kind: 'removed' })), ...o.frames.added.map((a) => ({ ...a, kind: 'added' }))]
          .filter((e) => e.id === 'returner' && e.at >= killedAt)
          .sort((a, b) => a.at - b.at)
          .map((e) => e.kind),
      );
      t.diagnostic(`${shape.engine}/${shape.size}: 'returner' as seen by each live node's observer: ${JSON.stringify(returnerEvents)}`);
      for (const o of observers) {
        const removed = o.frames.ids('removed');
        const added = o.frames.ids('added');
        assert.deepEqual(removed.filter((id) => id !== 'returner'), ['gone'], `obs on node ${o.node}: member_removed for 'gone' once`);
        // 'returner' was away for a moment: no event, or member_removed then member_added, once each.
        const gap = removed.filter((id) => id === 'returner').length;
        assert.ok(gap <= 1, `obs on node ${o.node}: member_removed for 'returner' at most once (${removed})`);
        assert.equal(added.filter((id) => id === 'returner').length, 1 + gap, `obs on node ${o.node}: member_added for 'returner' (${added})`);
        assert.deepEqual(memberIds(o.ch), sorted([...final, 'marker']), `obs on node ${o.node}: members`);
        assert.equal(o.ch.members.count, final.length + 1);
      }
      await expectPresence(nodes, pres, [...final, 'marker'], observers.length + 2);
    });

    test('SIGTERM a node with presence members: the others drop its share at once, not after node_timeout', async (t) => {
      const nodes = cluster.nodes;
      const pres = uniq('presence-cs-goodbye-');
      const observers = await observe(pres);
      const obsIds = observers.map((o) => o.id);
      for (const id of ['leaving', 'both']) await rawMember(VICTIM, id, [pres]);
      await allSaw(observers, 'added', ['leaving', 'both']);
      const bothLive = await member(0, 'both');
      await subscribe(bothLive, pres);
      await expectPresence(nodes, pres, [...obsIds, 'leaving', 'both'], observers.length + 3);

      const stoppedAt = Date.now();
      const exit = await nodes[VICTIM].stop();
      assert.equal(exit.code, 0, `node ${VICTIM} exit after SIGTERM: ${JSON.stringify(exit)}`);
      await allSaw(observers, 'removed', ['leaving']);
      const removedAfter = Math.max(...observers.map((o) => o.frames.removed.find((r) => r.id === 'leaving').at - stoppedAt));
      await expectPresence(liveNodes(), pres, [...obsIds, 'both'], observers.length + 1);
      const restAfter = Date.now() - stoppedAt;
      t.diagnostic(`${shape.engine}/${shape.size}: after SIGTERM, member_removed on every live node in ${removedAfter} ms, REST right by ${restAfter} ms`);
      measured.push(`${shape.engine}/${shape.size} nodes: SIGTERM -> member_removed everywhere ${removedAfter} ms`);
      assert.ok(removedAfter < FAST_HEARTBEAT_MS.nodeTimeout, `member_removed ${removedAfter} ms after SIGTERM: not before node_timeout`);

      // Marker: a user joins on node 0; 'both' (still on node 0) was never removed.
      const marker = await member(0, 'marker');
      await subscribe(marker, pres);
      await allSaw(observers, 'added', ['marker']);
      for (const o of observers) assert.deepEqual(o.frames.ids('removed'), ['leaving'], `obs on node ${o.node}: member_removed`);
      await cluster.restartNode(VICTIM);
      await cluster.waitBusConnected();
    });
  });
}

test('times measured', (t) => {
  for (const m of measured) t.diagnostic(m);
});
