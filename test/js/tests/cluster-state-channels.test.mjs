// Cluster-wide channel state: herald nodes sharing one bus (NATS, Redis; 2 and 3 nodes) answer
// the REST channel queries (GET /channels, GET /channels/{name}, trigger's info) with the counts
// of the whole cluster on every node; terminateUserConnections sent to one node closes the
// user's pusher-js connections on every node (4009) and sendToUser reaches each of them; a cache
// channel's last event, published on one node, is replayed to a later subscriber on any node
// (also on a node restarted after the publish), and pusher:cache_miss comes only when nothing
// was published.
//
// Counts reach the other nodes asynchronously (within milliseconds): the REST checks poll every
// node with a deadline; a trigger's info is checked once every node's GET agrees.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  WAIT_MS,
  connectClient,
  eventually,
  disconnectClient,
  pusherJsErrorCode,
  record,
  subscribe,
  uniq,
  waitForBind,
  waitForState,
  withDeadline,
} from '../harness.mjs';
import { CLUSTER_SHAPES, untilRestEverywhere, useCluster } from '../cluster.mjs';

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    let nodes;
    useCluster(shape, (c) => {
      cluster = c;
      nodes = c.nodes;
    });
    const last = () => nodes.length - 1;

    test('subscription_count and occupancy of public and private channels are the whole cluster\'s on every node', async (t) => {
      const pub = uniq('cs-count-');
      const priv = uniq('private-cs-count-');
      // pub: two subscribers on node 0, one on every other node; priv: one, on the last node only.
      const pubClients = [];
      for (const i of [0, ...nodes.keys()]) {
        const c = await connectClient(nodes[i]);
        await subscribe(c, pub);
        pubClients.push({ node: i, c });
      }
      const privClient = await connectClient(nodes[last()]);
      await subscribe(privClient, priv);

      const expectCounts = async (pubCount, privCount) => {
        const one = (n) => (n > 0 ? { occupied: true, subscription_count: n } : { occupied: false });
        // An unoccupied channel: only occupied is asserted (its counts are not specified).
        const view = (j) => (j.occupied === false ? { occupied: false } : j);
        const took = await untilRestEverywhere(nodes, { path: `/channels/${pub}`, params: { info: 'subscription_count' }, view, want: one(pubCount) });
        await untilRestEverywhere(nodes, { path: `/channels/${priv}`, params: { info: 'subscription_count' }, view, want: one(privCount) });
        const listed = (n) => (n > 0 ? { subscription_count: n } : undefined);
        await untilRestEverywhere(nodes, {
          path: '/channels',
          params: { info: 'subscription_count' },
          view: (j) => ({ pub: j.channels[pub], priv: j.channels[priv] }),
          want: { pub: listed(pubCount), priv: listed(privCount) },
        });
        await untilRestEverywhere(nodes, {
          path: '/channels',
          params: { filter_by_prefix: priv, info: 'subscription_count' },
          want: { channels: privCount > 0 ? { [priv]: { subscription_count: privCount } } : {} },
        });
        return took;
      };

      const took = await expectCounts(nodes.length + 1, 1);
      t.diagnostic(`${shape.engine}/${shape.size}: subscription_count right on every node ${took} ms after the last subscription_succeeded`);
      for (let i = 0; i < nodes.length; i++) {
        const sdk = nodes[i].sdk(APP1);
        const resPub = await sdk.trigger(pub, 'ev', { i }, { info: 'subscription_count' });
        assert.deepEqual(await resPub.json(), { channels: { [pub]: { subscription_count: nodes.length + 1 } } }, `trigger info from node ${i}`);
        const resPriv = await sdk.trigger(priv, 'ev', { i }, { info: 'subscription_count' });
        assert.deepEqual(await resPriv.json(), { channels: { [priv]: { subscription_count: 1 } } }, `trigger info from node ${i}, a channel only the last node has`);
      }

      // Node 0's two subscribers leave.
      for (const p of pubClients.filter((x) => x.node === 0)) disconnectClient(p.c);
      await expectCounts(nodes.length - 1, 1);
      // Everyone leaves: unoccupied and unlisted everywhere.
      for (const p of pubClients) disconnectClient(p.c);
      disconnectClient(privClient);
      await expectCounts(0, 0);
    });

    /** Connects a pusher-js client to node i, signs it in as user, waits for its user channel. */
    async function signedIn(i, user) {
      const client = await connectClient(nodes[i], { user });
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

    test("terminateUserConnections sent to one node closes the user's pusher-js connections on every node with 4009, no one else's", async () => {
      const victim = uniq('cs-victim-');
      const bystander = uniq('cs-bystander-');
      const victims = [];
      const bystanders = [];
      for (let i = 0; i < nodes.length; i++) {
        victims.push(await signedIn(i, { id: victim }));
        bystanders.push(await signedIn(i, { id: bystander }));
      }
      // Each resolves to the close code pusher-js reports, or to the wait's failure (never rejects).
      const errors = victims.map((v) =>
        waitForBind(v.connection, 'error', WAIT_MS, (e) => pusherJsErrorCode(e) !== undefined).then(
          (e) => pusherJsErrorCode(e),
          (e) => e.message,
        ),
      );
      const bystanderStates = bystanders.map((b) => record(b.connection, 'state_change'));

      const res = await nodes[last()].sdk(APP1).terminateUserConnections(victim);
      assert.equal(res.status, 200);
      for (let i = 0; i < nodes.length; i++) {
        assert.equal(await errors[i], 4009, `the victim's connection on node ${i}`);
        // 4009 is in pusher-js's "refused" range: it does not reconnect.
        await waitForState(victims[i], 'disconnected');
      }
      // Marker: the bystander's connections still get their events, and never left connected.
      const notes = bystanders.map((b) => record(b.user, 'still-here'));
      await nodes[0].sdk(APP1).sendToUser(bystander, 'still-here', {});
      for (const n of notes) await n.next();
      bystanderStates.forEach((s, i) => assert.deepEqual(s.items.map((x) => x.data), [], `bystander on node ${i}`));
    });

    test("sendToUser to each node in turn reaches the user's two sockets on every node, once and in order", async () => {
      const id = uniq('cs-user-');
      const sockets = [];
      for (let i = 0; i < nodes.length; i++) {
        for (let k = 0; k < 2; k++) sockets.push({ node: i, client: await signedIn(i, { id }) });
      }
      const recs = sockets.map((s) => record(s.client.user, 'note'));
      const sent = [];
      for (let i = 0; i < nodes.length; i++) {
        for (let k = 0; k < 2; k++) {
          const res = await nodes[i].sdk(APP1).sendToUser(id, 'note', { from: i, k });
          assert.equal(res.status, 200);
          sent.push({ from: i, k });
        }
      }
      for (const r of recs) for (let k = 0; k < sent.length; k++) await r.next();
      const markers = sockets.map((s) => record(s.client.user, 'marker'));
      await nodes[last()].sdk(APP1).sendToUser(id, 'marker', {});
      for (const m of markers) await m.next();
      recs.forEach((r, k) =>
        assert.deepEqual(r.items.map((x) => x.data), sent, `socket ${k} (node ${sockets[k].node}): every note once, in order`),
      );
    });

    /**
     * Subscribes with pusher-js and collects every event on the channel, in order, until the
     * cached event `until` or pusher:cache_miss; returns {ch, log: [[event, data]]}.
     */
    async function subscribeAndCollect(client, name, until) {
      const ch = client.subscribe(name);
      const log = [];
      let done;
      const finished = new Promise((r) => (done = r));
      ch.bind_global((event, data) => {
        log.push([event, data]);
        if (event === until || event === 'pusher:cache_miss' || event === 'pusher:subscription_error') done();
      });
      await withDeadline(finished, WAIT_MS, () => `'${until}' or pusher:cache_miss on ${name} (got ${JSON.stringify(log)})`);
      return { ch, log };
    }

    const cacheClient = (i) => connectClient(nodes[i], { presence: () => ({ user_id: uniq('cacher-'), user_info: {} }) });

    for (const prefix of ['cache-', 'private-cache-', 'presence-cache-']) {
      test(`${prefix}: the last event, published on another node, is replayed to a later subscriber on every node`, async () => {
        const name = uniq(`${prefix}cs-`);
        // Nobody is subscribed anywhere: node 0 publishes, then the last node.
        await nodes[0].sdk(APP1).trigger(name, 'tick', { n: 1 });
        await nodes[last()].sdk(APP1).trigger(name, 'tick', { n: 2 });
        const subs = [];
        for (let i = 0; i < nodes.length; i++) {
          const { ch, log } = await subscribeAndCollect(await cacheClient(i), name, 'tick');
          // On presence-cache- channels, member events come and go with the other cachers
          // (one that joined on another node a moment ago may reach this node's state after
          // this subscriber's snapshot, then as a member_added): not what is checked here.
          const member = (e) => e === 'pusher:member_added' || e === 'pusher:member_removed';
          assert.deepEqual(
            log.filter(([e]) => !member(e)).map(([e, d]) => (e === 'tick' ? [e, d] : e)),
            ['pusher:subscription_succeeded', ['tick', { n: 2 }]],
            `subscriber on node ${i}: the last event replayed, no cache_miss`,
          );
          subs.push({ node: i, ch, log });
        }
        // Marker: a live event reaches all of them; nothing else came meanwhile.
        const ticks = subs.map((s) => record(s.ch, 'tick'));
        await nodes[0].sdk(APP1).trigger(name, 'tick', { n: 3 });
        for (const r of ticks) assert.deepEqual((await r.next()).data, { n: 3 });
        subs.forEach((s) =>
          assert.deepEqual(s.log.map(([e]) => e).filter((e) => e === 'tick' || e === 'pusher:cache_miss'), ['tick', 'tick'], `node ${s.node}`),
        );
      });
    }

    test('cache-: a node restarted after the publish still replays the last event to its subscribers', async () => {
      const name = uniq('cache-cs-restart-');
      await nodes[0].sdk(APP1).trigger(name, 'tick', { n: 1 });
      const exit = await nodes[last()].stop();
      assert.equal(exit.code, 0, `node ${last()} exit after SIGTERM: ${JSON.stringify(exit)}`);
      await cluster.restartNode(last());
      await cluster.waitBusConnected();
      const { log } = await subscribeAndCollect(await cacheClient(last()), name, 'tick');
      assert.deepEqual(
        log.map(([e, d]) => (e === 'tick' ? [e, d] : e)),
        ['pusher:subscription_succeeded', ['tick', { n: 1 }]],
        `a subscriber on the restarted node ${last()}`,
      );
    });

    test('cache-: pusher:cache_miss on every node while nothing was published; then a publish on one node is replayed on the others', async () => {
      const name = uniq('cache-cs-miss-');
      for (let i = 0; i < nodes.length; i++) {
        const { log } = await subscribeAndCollect(await cacheClient(i), name, 'tick');
        assert.deepEqual(log.map(([e]) => e), ['pusher:subscription_succeeded', 'pusher:cache_miss'], `subscriber on node ${i}`);
      }
      await nodes[0].sdk(APP1).trigger(name, 'tick', { n: 1 });
      // The publishing node answers once it keeps the event: its first subscriber after the
      // answer gets the replay.
      const first = await subscribeAndCollect(await cacheClient(0), name, 'tick');
      assert.deepEqual(
        first.log.map(([e, d]) => (e === 'tick' ? [e, d] : e)),
        ['pusher:subscription_succeeded', ['tick', { n: 1 }]],
        'the first subscriber on the publishing node after its answer',
      );
      // Every other node keeps the event once the bus has brought it there: a subscriber that
      // joins within that delay (milliseconds) may still get pusher:cache_miss, so a miss is
      // retried with a new client until the deadline; then the event must be the replay.
      for (let i = 1; i < nodes.length; i++) {
        let log = [];
        await eventually(async () => {
          const client = await cacheClient(i);
          ({ log } = await subscribeAndCollect(client, name, 'tick'));
          if (log.some(([e]) => e === 'pusher:cache_miss')) {
            client.disconnect();
            return false;
          }
          return true;
        }, WAIT_MS, () => `a later subscriber on node ${i} to get the replay (last: ${JSON.stringify(log)})`);
        assert.deepEqual(
          log.map(([e, d]) => (e === 'tick' ? [e, d] : e)),
          ['pusher:subscription_succeeded', ['tick', { n: 1 }]],
          `a later subscriber on node ${i}`,
        );
      }
    });
  });
}
