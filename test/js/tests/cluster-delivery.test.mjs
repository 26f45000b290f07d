// Cluster delivery: herald nodes sharing one bus (NATS, Redis; 2 and 3 nodes) deliver client
// events, SDK publishes (trigger, multi-channel trigger, triggerBatch, socket_id exclusion)
// and sendToUser to pusher-js clients on every node, exactly once and in order.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { APP1, connectClient, record, subscribe, uniq, waitForBind, withDeadline, WAIT_MS } from '../harness.mjs';
import { CLUSTER_SHAPES, useCluster } from '../cluster.mjs';

const EVENTS = 50;
const range = (n) => Array.from({ length: n }, (_, i) => i);

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    let nodes;
    useCluster(shape, (c) => {
      cluster = c;
      nodes = c.nodes;
    });

    /** One pusher-js client connected straight to each node, in node order. */
    async function clientPerNode(opts = () => ({})) {
      const out = [];
      for (let i = 0; i < nodes.length; i++) out.push(await connectClient(nodes[i], opts(i)));
      return out;
    }

    /**
     * Sends `marker` from every node to channelName and waits until every channel in chans
     * has them all: what was published before (by a node, or a client of it) has had its chance.
     */
    async function markersFromEveryNode(chans, channelName) {
      const recs = chans.map((ch) => record(ch, 'marker'));
      for (let i = 0; i < nodes.length; i++) await nodes[i].sdk(APP1).trigger(channelName, 'marker', { from: i });
      for (const r of recs) {
        for (let i = 0; i < nodes.length; i++) await r.next();
        r.stop();
      }
    }

    test('the detailed /health of every node reports the bus engine, its node id and connected', async () => {
      const hs = await cluster.healths();
      hs.forEach((h, i) => {
        assert.equal(h.status, 200);
        assert.equal(h.body.status, 'ok', JSON.stringify(h.body));
        assert.ok(h.body.cluster, `node ${i} /health has no cluster section: ${JSON.stringify(h.body)}`);
        assert.equal(h.body.cluster.engine, shape.engine, JSON.stringify(h.body));
        assert.equal(h.body.cluster.node_id, nodes[i].nodeId, JSON.stringify(h.body));
        assert.equal(h.body.cluster.connected, true, JSON.stringify(h.body));
        assert.equal(typeof h.body.cluster.interests, 'number', JSON.stringify(h.body));
      });
    });

    for (const kind of ['private', 'presence']) {
      test(`${kind}: client events from each node reach the clients on every other node, never echoed`, async () => {
        const name = uniq(`${kind}-cluster-ce-`);
        const clients = await clientPerNode((i) => ({
          presence: () => ({ user_id: `u${i}`, user_info: { node: i } }),
        }));
        const chans = [];
        for (const c of clients) chans.push(await subscribe(c, name));
        const recs = chans.map((ch) => record(ch, 'client-hello'));
        for (let from = 0; from < clients.length; from++) {
          assert.equal(chans[from].trigger('client-hello', { from }), true, 'pusher-js sent the client event');
          for (let to = 0; to < clients.length; to++) {
            if (to === from) continue;
            const ev = await recs[to].next();
            assert.deepEqual(ev.data, { from }, `client on node ${to} got the event from node ${from}`);
            if (kind === 'presence') assert.deepEqual(ev.meta, { user_id: `u${from}` });
          }
        }
        await markersFromEveryNode(chans, name);
        recs.forEach((r, i) => {
          const got = r.items.map((x) => x.data.from);
          assert.deepEqual(
            got,
            range(clients.length).filter((f) => f !== i),
            `client on node ${i}: every other node's event exactly once, its own never`,
          );
        });
      });
    }

    /**
     * Subscribes one client per node to each channel, runs publish(i) for i in 0..EVENTS-1
     * (sequentially; the caller alternates nodes), and checks that every subscriber got
     * 0..EVENTS-1 on every channel, exactly once and in order.
     */
    async function expectInOrderEverywhere(channelNames, event, publish) {
      const clients = await clientPerNode();
      const subs = [];
      for (let i = 0; i < clients.length; i++) {
        for (const name of channelNames) {
          const ch = await subscribe(clients[i], name);
          subs.push({ node: i, name, ch, rec: record(ch, event) });
        }
      }
      for (let i = 0; i < EVENTS; i++) await publish(i);
      for (const s of subs) {
        await withDeadline(
          (async () => {
            for (let i = 0; i < EVENTS; i++) await s.rec.next(WAIT_MS);
          })(),
          WAIT_MS,
          () => `${EVENTS} '${event}' on ${s.name} at node ${s.node} (got ${JSON.stringify(s.rec.items.map((x) => x.data.i))})`,
        );
      }
      // Anything duplicated would be in flight before these markers.
      for (const name of channelNames) {
        await markersFromEveryNode(subs.filter((s) => s.name === name).map((s) => s.ch), name);
      }
      for (const s of subs) {
        assert.deepEqual(
          s.rec.items.map((x) => x.data.i),
          range(EVENTS),
          `subscriber on node ${s.node}, channel ${s.name}: every event exactly once, in publish order`,
        );
      }
    }

    test(`trigger: ${EVENTS} events sent alternately to each node reach every node once, in order`, async () => {
      const name = uniq('cluster-order-');
      const sdks = nodes.map((n) => n.sdk(APP1));
      await expectInOrderEverywhere([name], 'seq', async (i) => {
        const res = await sdks[i % sdks.length].trigger(name, 'seq', { i });
        assert.equal(res.status, 200);
      });
    });

    test(`multi-channel trigger: ${EVENTS} events on 3 channels, alternating nodes, once and in order`, async () => {
      const names = [uniq('cluster-multi-a-'), uniq('private-cluster-multi-b-'), uniq('cluster-multi-c-')];
      const sdks = nodes.map((n) => n.sdk(APP1));
      await expectInOrderEverywhere(names, 'multi', async (i) => {
        const res = await sdks[i % sdks.length].trigger(names, 'multi', { i });
        assert.equal(res.status, 200);
      });
    });

    test(`triggerBatch: ${EVENTS} events in batches of 5 over 2 channels, alternating nodes, once and in order`, async () => {
      const names = [uniq('cluster-batch-a-'), uniq('presence-cluster-batch-b-')];
      const sdks = nodes.map((n) => n.sdk(APP1));
      const clientsOpts = { presence: () => ({ user_id: uniq('bu-'), user_info: {} }) };
      // Presence channels need channel_data: connect with a presence authorizer.
      const clients = [];
      for (let i = 0; i < nodes.length; i++) clients.push(await connectClient(nodes[i], clientsOpts));
      const subs = [];
      for (let i = 0; i < clients.length; i++) {
        for (const name of names) {
          const ch = await subscribe(clients[i], name);
          subs.push({ node: i, name, ch, rec: record(ch, 'batched') });
        }
      }
      for (let b = 0; b < EVENTS / 5; b++) {
        const batch = [];
        for (let k = 0; k < 5; k++) {
          const i = b * 5 + k;
          for (const name of names) batch.push({ channel: name, name: 'batched', data: JSON.stringify({ i }) });
        }
        const res = await sdks[b % sdks.length].triggerBatch(batch);
        assert.equal(res.status, 200);
      }
      for (const s of subs) {
        await withDeadline(
          (async () => {
            for (let i = 0; i < EVENTS; i++) await s.rec.next(WAIT_MS);
          })(),
          WAIT_MS,
          () => `${EVENTS} batched events on ${s.name} at node ${s.node} (got ${JSON.stringify(s.rec.items.map((x) => x.data.i))})`,
        );
      }
      for (const name of names) {
        await markersFromEveryNode(subs.filter((s) => s.name === name).map((s) => s.ch), name);
      }
      for (const s of subs) {
        assert.deepEqual(
          s.rec.items.map((x) => x.data.i),
          range(EVENTS),
          `subscriber on node ${s.node}, channel ${s.name}: every batched event exactly once, in order`,
        );
      }
    });

    test('socket_id exclusion: a publish to node 0 skips only the excluded socket, which is on node 1', async () => {
      const names = [uniq('cluster-excl-a-'), uniq('private-cluster-excl-b-')];
      const excluded = await connectClient(nodes[1]);
      const others = [await connectClient(nodes[1]), ...(await clientPerNode())];
      const all = [excluded, ...others];
      const recs = [];
      for (const c of all) {
        for (const name of names) {
          const ch = await subscribe(c, name);
          recs.push({ client: c, name, ch, rec: record(ch, 'excl') });
        }
      }
      const socketId = excluded.connection.socket_id;
      const sdk = nodes[0].sdk(APP1);
      await sdk.trigger(names[0], 'excl', { how: 'single' }, { socket_id: socketId });
      await sdk.trigger(names, 'excl', { how: 'multi' }, { socket_id: socketId });
      await sdk.triggerBatch(
        names.map((channel) => ({ channel, name: 'excl', data: JSON.stringify({ how: 'batch' }), socket_id: socketId })),
      );
      for (const name of names) {
        await markersFromEveryNode(recs.filter((r) => r.name === name).map((r) => r.ch), name);
      }
      for (const r of recs) {
        const got = r.rec.items.map((x) => x.data.how);
        if (r.client === excluded) {
          assert.deepEqual(got, [], `the excluded socket (node 1) got events on ${r.name}`);
        } else {
          const want = r.name === names[0] ? ['single', 'multi', 'batch'] : ['multi', 'batch'];
          assert.deepEqual(got, want, `a socket other than the excluded one, on ${r.name}`);
        }
      }
    });

    /** Connects a pusher-js client to node, signs it in, waits for its user channel. */
    async function signedIn(node, user) {
      const client = await connectClient(node, { user });
      const userChannel = `#server-to-user-${user.id}`;
      const success = waitForBind(client, 'pusher:signin_success');
      const subscribed = new Promise((resolve) => {
        client.connection.bind('message', (m) => {
          if (m.event === 'pusher_internal:subscription_succeeded' && m.channel === userChannel) resolve();
        });
      });
      client.signin();
      await success;
      await withDeadline(subscribed, WAIT_MS, `subscription_succeeded on ${userChannel}`);
      return client;
    }

    test("sendToUser to node 0 reaches the user's connections on every node once, and no other user", async () => {
      const id = uniq('cluster-user-');
      const otherId = uniq('cluster-other-');
      const conns = [];
      for (let i = 0; i < nodes.length; i++) conns.push({ node: i, client: await signedIn(nodes[i], { id }) });
      const other = await signedIn(nodes[nodes.length - 1], { id: otherId });
      const recs = conns.map((c) => record(c.client.user, 'note'));
      const otherRec = record(other.user, 'note');
      const otherMarker = record(other.user, 'marker');
      const sdk = nodes[0].sdk(APP1);
      for (let k = 0; k < 3; k++) {
        const res = await sdk.sendToUser(id, 'note', { k });
        assert.equal(res.status, 200);
      }
      for (let i = 0; i < recs.length; i++) {
        for (let k = 0; k < 3; k++) {
          assert.deepEqual((await recs[i].next()).data, { k }, `user's connection on node ${conns[i].node}`);
        }
      }
      await sdk.sendToUser(otherId, 'marker', 'm');
      await otherMarker.next();
      assert.equal(otherRec.items.length, 0, 'another user got the event');
      const userMarkers = conns.map((c) => record(c.client.user, 'marker'));
      await sdk.sendToUser(id, 'marker', 'm');
      for (const m of userMarkers) await m.next();
      recs.forEach((r, i) => assert.equal(r.items.length, 3, `node ${conns[i].node}: each note exactly once`));
    });
  });
}
