// Cluster-wide presence: herald nodes sharing one bus (NATS, Redis; 2 and 3 nodes) show a
// presence channel's members the same on every node. subscription_succeeded lists the members
// of every node; member_added comes once per user however many sockets and nodes it joins from,
// and member_removed only when its last socket anywhere leaves (counted on the raw frames, which
// pusher-js would otherwise deduplicate); max_presence_members counts the whole cluster; the REST
// users list, user_count and subscription_count agree on every node.
//
// State reaches the other nodes asynchronously (within milliseconds): before a subscribe that
// must see earlier members, the test waits until the node it goes to lists them over REST.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { APP1, APP2, connectClient, disconnectClient, subscribe, uniq, waitForBind } from '../harness.mjs';
import {
  CLUSTER_SHAPES,
  memberIds,
  presenceFrames,
  untilRestEverywhere,
  useCluster,
  userIdsView,
} from '../cluster.mjs';

// app2 keeps max_presence_members 2; its connection quota is raised so a test can open several
// sockets without tripping it.
const APP2_HERE = { ...APP2, limits: { max_presence_members: 2, max_connections: 20 } };

const info = (id) => ({ name: `Name of ${id}` });
const sorted = (ids) => [...ids].sort();
const count = (ids, id) => ids.filter((x) => x === id).length;

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let nodes;
    useCluster({ ...shape, apps: [APP1, APP2_HERE] }, (c) => {
      nodes = c.nodes;
    });
    const last = () => nodes.length - 1;

    /** A pusher-js client on node i whose presence channel_data is user id. */
    function member(i, id, app = APP1) {
      return connectClient(nodes[i], { app, presence: () => ({ user_id: id, user_info: info(id) }) });
    }

    /** Waits until node i lists exactly ids as channel's users (REST), i.e. it knows them. */
    function nodeKnows(i, channel, ids, app = APP1) {
      return untilRestEverywhere([nodes[i]], { path: `/channels/${channel}/users`, app, view: userIdsView, want: sorted(ids) });
    }

    /**
     * Connects user id to node i and subscribes it to channel, once node i lists knownBefore
     * (if given) as the channel's users; returns {id, node, client, ch, frames}.
     */
    async function join(i, id, channel, knownBefore) {
      const client = await member(i, id);
      const frames = presenceFrames(client, channel);
      if (knownBefore) await nodeKnows(i, channel, knownBefore);
      const ch = await subscribe(client, channel);
      return { id, node: i, client, ch, frames };
    }

    test('subscription_succeeded lists the members of every node; a user on two nodes is added once and removed with its last socket', async (t) => {
      const name = uniq('presence-cs-members-');
      // One observer per node, each joining once its node lists the earlier ones.
      const observers = [];
      for (let i = 0; i < nodes.length; i++) {
        const o = await join(i, `obs-${i}`, name, observers.map((x) => x.id));
        const want = sorted([...observers.map((x) => x.id), o.id]);
        assert.deepEqual(memberIds(o.ch), want, `obs-${i} (node ${i}): members from every node`);
        assert.equal(o.ch.members.count, want.length, `obs-${i}: members.count`);
        assert.deepEqual(sorted(o.frames.succeeded[0].ids), want, `obs-${i}: raw presence ids, each once`);
        assert.equal(o.frames.succeeded[0].count, want.length, `obs-${i}: raw presence count`);
        for (const x of observers) assert.deepEqual(o.ch.members.get(x.id).info, info(x.id), `obs-${i}: info of ${x.id}`);
        for (const x of observers) await x.frames.wait('added', o.id);
        observers.push(o);
      }
      const everyObserver = (kind, id) => Promise.all(observers.map((o) => o.frames.wait(kind, id)));

      // 'multi' joins on node 0, then with a second socket on node 1.
      const multiA = await join(0, 'multi', name);
      await everyObserver('added', 'multi');
      const multiB = await join(1, 'multi', name);
      const wantB = sorted([...observers.map((o) => o.id), 'multi']);
      assert.deepEqual(memberIds(multiB.ch), wantB, "multi's second socket (node 1): members");
      assert.equal(multiB.ch.members.count, wantB.length, "multi's second socket: members.count, multi once");
      assert.equal(count(multiB.frames.succeeded[0].ids, 'multi'), 1, 'raw presence ids list multi once');
      // Marker: j1 joins on node 1, after multi's second socket did.
      await join(1, 'j1', name);
      await everyObserver('added', 'j1');
      for (const o of observers) {
        assert.equal(count(o.frames.ids('added'), 'multi'), 1, `obs-${o.node}: member_added for multi once (${o.frames.ids('added')})`);
        assert.deepEqual(o.ch.members.get('multi').info, info('multi'), `obs-${o.node}: multi's info`);
      }

      // multi's socket on node 0 leaves: multi is still a member (node 1). Marker: j2 joins on node 0.
      disconnectClient(multiA.client);
      await join(0, 'j2', name);
      await everyObserver('added', 'j2');
      for (const o of observers) {
        assert.deepEqual(o.frames.ids('removed'), [], `obs-${o.node}: no member_removed while multi has a socket on node 1`);
        assert.ok(o.ch.members.get('multi'), `obs-${o.node}: multi still listed`);
      }

      // Its last socket (node 1) leaves: member_removed on every node, once. Marker: j3 on node 1.
      disconnectClient(multiB.client);
      await everyObserver('removed', 'multi');
      await join(1, 'j3', name);
      await everyObserver('added', 'j3');
      observers.forEach((o, k) => {
        const later = observers.slice(k + 1).map((x) => x.id);
        assert.deepEqual(o.frames.ids('added'), [...later, 'multi', 'j1', 'j2', 'j3'], `obs-${o.node}: every member_added, once`);
        assert.deepEqual(o.frames.ids('removed'), ['multi'], `obs-${o.node}: member_removed once, for the last socket`);
      });

      const final = sorted([...observers.map((o) => o.id), 'j1', 'j2', 'j3']);
      for (const o of observers) assert.deepEqual(memberIds(o.ch), final, `obs-${o.node}: final members`);
      const ms = await untilRestEverywhere(nodes, { path: `/channels/${name}/users`, view: userIdsView, want: final });
      t.diagnostic(`${shape.engine}/${shape.size}: REST users list right on every node ${ms} ms after the last join was seen`);
    });

    test('max_presence_members (app2: 2) counts the members of every node', async () => {
      const name = uniq('presence-cs-full-');
      const one = await member(0, 'one', APP2_HERE);
      const oneFrames = presenceFrames(one, name);
      await subscribe(one, name);
      await nodeKnows(1, name, ['one'], APP2_HERE);
      const two = await member(1, 'two', APP2_HERE);
      await subscribe(two, name);
      await untilRestEverywhere(nodes, { path: `/channels/${name}/users`, app: APP2_HERE, view: userIdsView, want: ['one', 'two'] });

      // A third user is refused on every node, also one with no member of its own.
      for (let i = 0; i < nodes.length; i++) {
        const three = await member(i, 'three', APP2_HERE);
        const err = await waitForBind(three.subscribe(name), 'pusher:subscription_error');
        assert.equal(err.status, 4100, `a third user on node ${i}: ${JSON.stringify(err)}`);
        assert.equal(three.connection.state, 'connected');
        disconnectClient(three);
      }

      // Another socket of a member is admitted, on the last node.
      const oneAgain = await member(last(), 'one', APP2_HERE);
      const chOneAgain = await subscribe(oneAgain, name);
      assert.deepEqual(memberIds(chOneAgain), ['one', 'two']);
      assert.equal(chOneAgain.members.count, 2);

      // Once 'two' has left, everywhere, a third user is admitted on the last node.
      disconnectClient(two);
      await untilRestEverywhere(nodes, { path: `/channels/${name}/users`, app: APP2_HERE, view: userIdsView, want: ['one'] });
      const three = await member(last(), 'three', APP2_HERE);
      const ch3 = await subscribe(three, name);
      assert.deepEqual(memberIds(ch3), ['one', 'three']);
      // The refused attempts were never announced: 'three' is announced once, as the last event.
      await oneFrames.wait('added', 'three');
      assert.deepEqual(oneFrames.ids('added'), ['two', 'three'], "member_added seen by 'one' (node 0)");
      assert.deepEqual(oneFrames.ids('removed'), ['two'], "member_removed seen by 'one' (node 0)");
    });

    test('REST: users, user_count and subscription_count of a presence channel agree on every node, also trigger info', async (t) => {
      const name = uniq('presence-cs-rest-');
      // 'a' on every node, 'b' on node 0, 'c' on the last node.
      const sockets = [];
      for (let i = 0; i < nodes.length; i++) sockets.push({ id: 'a', node: i, client: await member(i, 'a') });
      sockets.push({ id: 'b', node: 0, client: await member(0, 'b') });
      sockets.push({ id: 'c', node: last(), client: await member(last(), 'c') });
      for (const s of sockets) await subscribe(s.client, name);

      const expectState = async (users, subs) => {
        const took = await untilRestEverywhere(nodes, { path: `/channels/${name}/users`, view: userIdsView, want: users });
        const info = 'user_count,subscription_count';
        const occupied = users.length > 0;
        await untilRestEverywhere(nodes, {
          path: `/channels/${name}`,
          params: { info },
          // An unoccupied channel: only occupied is asserted (its counts are not specified).
          view: (j) => (j.occupied === false ? { occupied: false } : j),
          want: occupied ? { occupied, user_count: users.length, subscription_count: subs } : { occupied },
        });
        await untilRestEverywhere(nodes, {
          path: '/channels',
          params: { filter_by_prefix: name, info },
          want: { channels: occupied ? { [name]: { user_count: users.length, subscription_count: subs } } : {} },
        });
        return took;
      };

      const took = await expectState(['a', 'b', 'c'], sockets.length);
      t.diagnostic(`${shape.engine}/${shape.size}: users list right on every node ${took} ms after the last subscription_succeeded`);
      // Every node's view is settled: a trigger's info from each node says the same.
      for (let i = 0; i < nodes.length; i++) {
        const res = await nodes[i].sdk(APP1).trigger(name, 'ev', { i }, { info: 'user_count,subscription_count' });
        assert.deepEqual(await res.json(), { channels: { [name]: { user_count: 3, subscription_count: sockets.length } } }, `trigger info from node ${i}`);
      }

      // 'a' leaves node 0 (still on the others), 'b' leaves.
      for (const s of sockets.filter((x) => x.node === 0)) disconnectClient(s.client);
      await expectState(['a', 'c'], sockets.length - 2);

      // Everyone leaves: unoccupied and unlisted on every node.
      for (const s of sockets) disconnectClient(s.client);
      await expectState([], 0);
    });
  });
}
