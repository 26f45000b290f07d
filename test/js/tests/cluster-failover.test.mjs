// Cluster failover: a node killed with SIGKILL under its pusher-js clients. The clients reach
// the cluster through a round-robin load balancer; those of the dead node reconnect through it
// to a live node, resubscribe and receive events published on any node, also on the dead node
// once it is restarted on its port.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { APP1, connectClient, record, subscribe, uniq, waitForBind, waitForState } from '../harness.mjs';
import { CLUSTER_SHAPES, useCluster } from '../cluster.mjs';

// pusher-js reconnects 1 s after a connection that ends without a close code; it still has to
// reach a live node, sign its private channel and subscribe again. Generous, for busy machines.
const RECONNECT_MS = 45_000;
const VICTIM = 1;

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    useCluster(shape, (c) => {
      cluster = c;
    });

    test('SIGKILL a node: its clients reconnect through the balancer to another node, resubscribe and receive from every node', async (t) => {
      const nodes = cluster.nodes;
      const pub = uniq('cluster-failover-');
      const priv = uniq('private-cluster-failover-');
      // Two clients per node through the balancer (round robin).
      const clients = [];
      for (let k = 0; k < 2 * shape.size; k++) {
        const { client, node } = await cluster.connectBalanced();
        const chans = [await subscribe(client, pub), await subscribe(client, priv)];
        const states = record(client.connection, 'state_change');
        clients.push({ client, node, chans, states, socketId: client.connection.socket_id });
      }
      const victims = clients.filter((c) => c.node === VICTIM);
      const survivors = clients.filter((c) => c.node !== VICTIM);
      assert.equal(victims.length, 2, `the balancer spread clients round robin: ${JSON.stringify(clients.map((c) => c.node))}`);

      // Every client is ready to be seen resubscribing before the kill.
      const resubscribed = victims.flatMap((v) =>
        v.chans.map((ch) => waitForBind(ch, 'pusher:subscription_succeeded', RECONNECT_MS)),
      );
      const logBefore = cluster.lb.log.length;
      const killedAt = Date.now();
      await cluster.killNode(VICTIM);
      for (const v of victims) await waitForState(v.client, 'connected', RECONNECT_MS);
      await Promise.all(resubscribed);
      t.diagnostic(`${shape.engine}/${shape.size}: the killed node's clients resubscribed ${Date.now() - killedAt} ms after SIGKILL`);

      const reconnects = cluster.lb.log.slice(logBefore);
      assert.equal(reconnects.length, victims.length, `one new connection per client of the killed node: ${JSON.stringify(reconnects)}`);
      for (const r of reconnects) assert.notEqual(r.backend, VICTIM, `reconnected to a live node: ${JSON.stringify(reconnects)}`);
      for (const v of victims) {
        assert.notEqual(v.client.connection.socket_id, v.socketId, 'a new socket id from the new node');
      }
      for (const s of survivors) {
        assert.equal(s.client.connection.state, 'connected');
        assert.deepEqual(s.states.items.map((x) => x.data), [], "a live node's client never left connected");
      }

      /** Publishes on node i to both channels; every client gets it on both. */
      async function everyoneGets(i, tag) {
        const recs = clients.flatMap((c) => c.chans.map((ch) => ({ c, ch, rec: record(ch, tag) })));
        const res = await cluster.nodes[i].sdk(APP1).trigger([pub, priv], tag, { from: i });
        assert.equal(res.status, 200);
        for (const r of recs) {
          const ev = await r.rec.next();
          assert.deepEqual(ev.data, { from: i }, `client first on node ${r.c.node}, channel ${r.ch.name}`);
          r.rec.stop();
        }
      }
      for (let i = 0; i < nodes.length; i++) {
        if (i !== VICTIM) await everyoneGets(i, `after-kill-${i}`);
      }

      // The killed node comes back on its port and delivers to clients now on other nodes.
      await cluster.restartNode(VICTIM);
      await cluster.waitBusConnected();
      for (let i = 0; i < cluster.nodes.length; i++) await everyoneGets(i, `after-restart-${i}`);

      // A client of the restarted node receives what other nodes publish.
      const fresh = await connectClient(cluster.nodes[VICTIM]);
      const freshCh = await subscribe(fresh, pub);
      const freshRec = record(freshCh, 'to-restarted');
      await cluster.nodes[0].sdk(APP1).trigger(pub, 'to-restarted', { ok: true });
      assert.deepEqual((await freshRec.next()).data, { ok: true });
    });
  });
}
