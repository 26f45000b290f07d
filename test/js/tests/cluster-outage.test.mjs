// Cluster bus outage: the bus server (NATS, Redis) is stopped for 10 s under a running cluster.
// Clients stay connected; every node reports the bus down on /health (status bus_down,
// cluster.connected false) and /ready (503); a REST publish answers 503 with Retry-After and a
// JSON error. Once the bus is back on its port, cross-node delivery resumes by itself; the time
// it took is printed (the aim is under 5 s; the test waits much longer before failing).

import { describe, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  WAIT_MS,
  connectClient,
  eventually,
  record,
  restRequest,
  sdkError,
  subscribe,
  uniq,
} from '../harness.mjs';
import { CLUSTER_SHAPES, useCluster } from '../cluster.mjs';

const OUTAGE_MS = 10_000;
const RECOVERY_DEADLINE_MS = 2 * WAIT_MS;
const PROBE_INTERVAL_MS = 100;
const AIM_MS = 5_000; // how soon delivery should be back after the bus is; printed, not asserted

const recoveries = [];

for (const shape of CLUSTER_SHAPES) {
  describe(`${shape.engine}, ${shape.size} nodes`, () => {
    let cluster;
    useCluster(shape, (c) => {
      cluster = c;
    });

    test(`bus down for ${OUTAGE_MS / 1000} s: clients stay connected, nodes report it, publishes get 503; delivery resumes after`, async (t) => {
      const nodes = cluster.nodes;
      const name = uniq('cluster-outage-');
      const clients = [];
      for (let i = 0; i < nodes.length; i++) {
        const client = await connectClient(nodes[i]);
        const ch = await subscribe(client, name);
        clients.push({ node: i, client, ch, states: record(client.connection, 'state_change') });
      }
      // Cross-node delivery works before the outage.
      const before = clients.map((c) => record(c.ch, 'before'));
      await nodes[0].sdk(APP1).trigger(name, 'before', 1);
      for (const r of before) await r.next();

      await cluster.bus.stop();
      const downAt = Date.now();

      // Every node notices (polled: a node learns of the lost connection on its own schedule).
      for (let i = 0; i < nodes.length; i++) {
        let last;
        await eventually(
          async () => {
            last = await nodes[i].detail();
            return last.body.status === 'bus_down' && last.body.cluster && last.body.cluster.connected === false;
          },
          WAIT_MS,
          () => `node ${i} /health status bus_down, cluster.connected false (last: ${JSON.stringify(last)})`,
        );
      }
      t.diagnostic(`${shape.engine}/${shape.size}: every node reported the bus down ${Date.now() - downAt} ms after it stopped`);

      // For the rest of the outage, check the nodes' answers over and over.
      let checks = 0;
      do {
        for (let i = 0; i < nodes.length; i++) {
          const h = await nodes[i].health();
          assert.equal(h.status, 200, `node ${i} /health answers 200 while the bus is down`);
          assert.equal(h.body.status, 'bus_down', `node ${i} /health ${JSON.stringify(h.body)}`);
          const d = await nodes[i].detail();
          assert.equal(d.body.cluster.connected, false, `node ${i} detailed /health ${JSON.stringify(d.body)}`);
          const ready = await fetch(`${nodes[i].httpUrl}/ready`, { signal: AbortSignal.timeout(WAIT_MS) });
          const readyText = await ready.text();
          assert.equal(ready.status, 503, `node ${i} /ready while the bus is down: ${readyText}`);
          assert.equal(JSON.parse(readyText).status, 'bus_down', `node ${i} /ready: ${readyText}`);

          const err = await sdkError(() => nodes[i].sdk(APP1).trigger(name, 'during', { i }));
          assert.equal(err.status, 503, `node ${i}: SDK trigger while the bus is down: ${err.message} ${err.body}`);
          const raw = await restRequest(nodes[i], {
            method: 'POST',
            path: '/events',
            body: { name: 'during', channels: [name], data: '{}' },
          });
          assert.equal(raw.status, 503, `node ${i}: raw POST /events while the bus is down: ${raw.text}`);
          const retryAfter = Number(raw.headers.get('retry-after'));
          assert.ok(retryAfter >= 1, `node ${i}: 503 carries Retry-After (got ${raw.headers.get('retry-after')})`);
          assert.equal(typeof raw.json?.error, 'string', `node ${i}: 503 has a JSON error: ${raw.text}`);
        }
        for (const c of clients) {
          assert.equal(c.client.connection.state, 'connected', `client on node ${c.node} during the outage`);
        }
        checks += 1;
        await new Promise((r) => setTimeout(r, 250)); // poll interval
      } while (Date.now() - downAt < OUTAGE_MS);

      await cluster.bus.start();
      const upAt = Date.now();

      // Probe: every round, each node publishes; recovered once every client got a probe from
      // every other node. A publish refused while a node reconnects (503) is part of the wait.
      const probes = clients.map((c) => record(c.ch, 'probe'));
      const firstFrom = clients.map(() => new Map()); // client -> (from node -> ms after upAt)
      const refusals = [];
      let round = 0;
      await eventually(
        async () => {
          round += 1;
          await Promise.all(
            nodes.map(async (n, i) => {
              try {
                await n.sdk(APP1).trigger(name, 'probe', { from: i, round });
              } catch (e) {
                if (e.status !== 503) throw e;
                refusals.push(i);
              }
            }),
          );
          probes.forEach((p, k) => {
            for (const ev of p.items) {
              if (!firstFrom[k].has(ev.data.from)) firstFrom[k].set(ev.data.from, ev.at - upAt);
            }
          });
          return firstFrom.every((m, k) => nodes.every((_, i) => i === k || m.has(i)));
        },
        RECOVERY_DEADLINE_MS,
        () => `cross-node delivery after the bus came back (first probe arrivals: ${JSON.stringify(firstFrom.map((m) => [...m]))})`,
        PROBE_INTERVAL_MS,
      );
      const recoveryMs = Math.max(...firstFrom.flatMap((m, k) => [...m].filter(([from]) => from !== k).map(([, ms]) => ms)));
      recoveries.push(`${shape.engine}/${shape.size} nodes: ${recoveryMs} ms${recoveryMs > AIM_MS ? ` (over the ${AIM_MS} ms aim)` : ''}`);
      t.diagnostic(
        `${shape.engine}/${shape.size}: cross-node delivery back ${recoveryMs} ms after the bus answered ` +
          `(${round} probe rounds, ${refusals.length} publishes refused with 503 meanwhile, ${checks} outage checks)`,
      );

      await cluster.waitBusConnected();
      for (let i = 0; i < nodes.length; i++) {
        const ready = await fetch(`${nodes[i].httpUrl}/ready`, { signal: AbortSignal.timeout(WAIT_MS) });
        assert.equal(ready.status, 200, `node ${i} /ready after the bus is back: ${await ready.text()}`);
      }

      // Ordered, exactly-once delivery again, publishes alternating nodes.
      const seq = clients.map((c) => record(c.ch, 'seq'));
      for (let i = 0; i < 20; i++) {
        const res = await nodes[i % nodes.length].sdk(APP1).trigger(name, 'seq', { i });
        assert.equal(res.status, 200);
      }
      for (const r of seq) for (let i = 0; i < 20; i++) await r.next();
      const marks = clients.map((c) => record(c.ch, 'marker'));
      for (let i = 0; i < nodes.length; i++) await nodes[i].sdk(APP1).trigger(name, 'marker', { i });
      for (const m of marks) for (let i = 0; i < nodes.length; i++) await m.next();
      seq.forEach((r, k) =>
        assert.deepEqual(r.items.map((x) => x.data.i), [...Array(20).keys()], `client on node ${k} after recovery`),
      );

      for (const c of clients) {
        assert.equal(c.client.connection.state, 'connected');
        assert.deepEqual(c.states.items.map((x) => x.data), [], `client on node ${c.node} never left connected`);
      }
    });
  });
}

test('recovery times', (t) => {
  // Printed for the record, not asserted: the aim is under 5 s each.
  for (const r of recoveries) t.diagnostic(`bus restart -> cross-node delivery: ${r}`);
});
