// Recovery in a cluster of 2 nodes, on Redis and on NATS (JetStream), with pusher-js and the
// helper of clients/js: a client behind a proxy that stalls and then refuses connections for
// 10 s, and a client whose node is killed with SIGKILL, both while 50 events/s are published
// through both nodes (through the survivor after the kill), come back through the round-robin
// balancer, recover, and their app has seen every event once, in publish order.

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { APP1, TcpProxy, makeClient, stopAllProxies, subscribe, uniq, waitForState } from '../harness.mjs';
import { BUS_ENGINES, useCluster } from '../cluster.mjs';
import { RECOVERY_APPS, recoverThrough, stallThenOutage, watchPusherChannel, withRecovery } from '../recovery.mjs';

for (const engine of BUS_ENGINES) {
  describe(`${engine}, 2 nodes`, () => {
    let cluster;
    useCluster({ engine, size: 2, apps: RECOVERY_APPS }, (c) => {
      cluster = c;
    });

    test('behind a proxy that stalls, then drops and refuses connections for 10 s, at 50 events/s through both nodes: every event once, in order', async (t) => {
      // The proxy is in front of the balancer: the client comes back on the other node.
      const proxy = await new TcpProxy(cluster.lb).start();
      try {
        const client = withRecovery(makeClient({ port: proxy.port, sdk: (app, extra) => cluster.nodes[0].sdk(app, extra) }));
        await waitForState(client, 'connected');
        const first = cluster.lb.lastBackend;
        const name = uniq('auction-');
        const ch = await subscribe(client, name);
        const sdks = cluster.nodes.map((n) => n.sdk(APP1));
        await recoverThrough(t, {
          label: `${engine}, 2 nodes, proxy`,
          pusher: client,
          watches: [watchPusherChannel(ch, 'bid')],
          sdks,
          channels: name,
          event: 'bid',
          disrupt: stallThenOutage(proxy),
          sendMarker: () => sdks[0].trigger(name, 'bid', { n: 0 }),
        });
        const back = cluster.lb.lastBackend;
        t.diagnostic(`${engine}: on node ${first} before the outage, on node ${back} after`);
        assert.notEqual(back, first, `the balancer gave the reconnection the other node: ${JSON.stringify(cluster.lb.log)}`);
      } finally {
        await stopAllProxies();
      }
    });

    test('SIGKILL of the node the client is on, mid-stream: it reconnects through the balancer to the other node and recovers every event', async (t) => {
      const { client, node } = await cluster.connectBalanced();
      withRecovery(client);
      const survivor = 1 - node;
      const name = uniq('auction-');
      const ch = await subscribe(client, name);
      const sdk = cluster.nodes[survivor].sdk(APP1);
      await recoverThrough(t, {
        label: `${engine}, 2 nodes, SIGKILL`,
        pusher: client,
        watches: [watchPusherChannel(ch, 'bid')],
        sdks: [sdk],
        channels: name,
        event: 'bid',
        disrupt: async () => {
          await cluster.killNode(node);
          return `node ${node} killed`;
        },
        sendMarker: () => sdk.trigger(name, 'bid', { n: 0 }),
      });
      assert.equal(cluster.lb.lastBackend, survivor, `reconnected to the survivor: ${JSON.stringify(cluster.lb.log)}`);
    });
  });
}
