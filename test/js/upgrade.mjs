// The rolling-upgrade scenario (tests/cluster-upgrade-*.test.mjs): nodes of the previous release
// (v0.1.0, commit 890a037, built from this clone's history) and of this one share one bus (NATS,
// Redis). pusher-js clients on every node subscribe to a public and a presence channel; the old
// nodes are then replaced one by one by new ones on the same port and config (the old one
// stopped, the new one started, its clients reconnecting to it). Throughout, every REST batch
// published from any node reaches every subscriber on every live node, in order (the clients of
// the node being replaced miss what is published while it is down, and only that), and every
// node agrees on the presence members (REST users list, and each client's member list kept by
// member_added / member_removed). Bundles (one bus message for a batch's events of one channel)
// are not sent while an old node is up, which would drop them, and are sent once the last one is
// gone.

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import {
  APP1,
  REPO_ROOT,
  WAIT_MS,
  cleanupAll,
  connectClient,
  eventually,
  scrapeMetrics,
  startServer,
  stopServer,
  subscribe,
  uniq,
} from './harness.mjs';
import { BusServer, CLUSTER_SECRET, FAST_HEARTBEAT, memberIds, untilRestEverywhere, userIdsView } from './cluster.mjs';

// The previous release: v0.1.0. A clone may not carry tags, so the commit is named.
const PREVIOUS = '890a037';
const PREVIOUS_VERSION = 'v0.1.0';

const sorted = (xs) => [...xs].sort();

// pusher-js reconnects at once after the server's 4200 close, but an attempt refused while the
// node is being replaced waits out its strategy's 15 s timeout before the next.
const RECONNECT_MS = 60_000;

/**
 * The herald binary of PREVIOUS: $HERALD_PREVIOUS_BIN, else the one built once per machine into
 * ~/.cache/herald-previous/<commit>/herald (git archive of the commit, go build with the module
 * cache), building it when missing. run-tests.mjs calls it before the tests, so that the build
 * does not count against a test file's timeout.
 */
export function previousBinary() {
  if (process.env.HERALD_PREVIOUS_BIN) return process.env.HERALD_PREVIOUS_BIN;
  const cache = path.join(os.homedir(), '.cache', 'herald-previous', PREVIOUS);
  const bin = path.join(cache, 'herald');
  if (existsSync(bin)) return bin;
  if (spawnSync('git', ['cat-file', '-e', `${PREVIOUS}^{commit}`], { cwd: REPO_ROOT }).status !== 0) {
    throw new Error(
      `commit ${PREVIOUS} (${PREVIOUS_VERSION}, the previous release) is not in the clone at ${REPO_ROOT}: ` +
        'the rolling-upgrade test builds it from there. Fetch the full history (git fetch --unshallow origin) and run again.',
    );
  }
  // Built beside the cache, so that the rename into it stays on one file system.
  mkdirSync(path.dirname(cache), { recursive: true });
  const dir = mkdtempSync(path.join(path.dirname(cache), 'build-'));
  try {
    execFileSync('sh', ['-c', `git -C "$0" archive ${PREVIOUS} | tar -x -C "$1"`, REPO_ROOT, dir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    execFileSync(
      'go',
      ['build', '-ldflags', `-X main.version=${PREVIOUS_VERSION}`, '-o', path.join(dir, 'herald'), './cmd/herald'],
      { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], timeout: 900_000 },
    );
    mkdirSync(cache, { recursive: true });
    renameSync(path.join(dir, 'herald'), bin); // whole or not at all
  } catch (e) {
    throw new Error(`building ${PREVIOUS} (${PREVIOUS_VERSION}) failed:\n${e.stderr ? e.stderr.toString() : e.message}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return bin;
}

/**
 * The scenario on engine's bus, t the running test: two PREVIOUS nodes and a new one, the old
 * replaced one by one.
 */
export async function rollingUpgrade(engine, t) {
  const oldBin = previousBinary();
  const bus = await new BusServer(engine).start();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-upgrade-'));
  const prefix = uniq('upgrade').replace(/[^A-Za-z0-9]/g, '');
  // v0.1.0 seals with cluster.secret as this release does: the old and the new nodes share it.
  const nodeConfig = (i) => ({ cluster: { url: bus.url, node_id: `node-${i}`, prefix, secret: CLUSTER_SECRET, ...FAST_HEARTBEAT } });
  // nodes[i]: a HeraldServer; kind[i]: 'old' or 'new'.
  const nodes = [];
  const kind = [];
  const start = async (i, k, port) => {
    nodes[i] = await startServer({ config: nodeConfig(i), apps: [APP1], dir, port, bin: k === 'old' ? oldBin : undefined });
    nodes[i].nodeId = `node-${i}`;
    kind[i] = k;
  };
  try {
    await start(0, 'old');
    await start(1, 'old');
    await start(2, 'new');
    const health0 = (await nodes[0].detail()).body;
    assert.equal(health0.version, PREVIOUS_VERSION, 'node-0 runs the previous release');

    const pub = uniq('upgrade-');
    const pres = uniq('presence-upgrade-');
    // Two clients per node, each subscribed to both channels as its own presence user.
    const clients = [];
    for (let i = 0; i < 3; i++) {
      for (const s of ['a', 'b']) {
        const user = `user-${i}${s}`;
        const client = await connectClient(nodes[i], { presence: () => ({ user_id: user, user_info: { node: i } }) });
        const c = { node: i, user, client, got: [] };
        c.pub = await subscribe(client, pub);
        c.pub.bind('tick', (d) => c.got.push(`${d.r}.${d.k}`));
        c.pres = await subscribe(client, pres);
        clients.push(c);
      }
    }
    const users = sorted(clients.map((c) => c.user));

    /** Every node up agrees on the members (REST), and so does every client of those nodes. */
    const presenceAgrees = async (what, down = -1) => {
      const want = sorted(clients.filter((c) => c.node !== down).map((c) => c.user));
      const live = nodes.filter((_, i) => i !== down);
      await untilRestEverywhere(live, { path: `/channels/${pres}/users`, view: userIdsView, want });
      const watching = clients.filter((c) => c.node !== down);
      await eventually(
        () => watching.every((c) => isDeepStrictEqual(memberIds(c.pres), want)),
        WAIT_MS,
        () => `${what}: every client's members to be ${want} (${watching.map((c) => `${c.user}: ${memberIds(c.pres)}`).join('; ')})`,
      );
    };

    let round = 0;
    /**
     * Publishes a batch of 10 events on the public channel from node `from` (REST
     * batch_events); every client not on node `down` gets all of them, in order, once.
     */
    const publish = async (what, from, down = -1) => {
      const r = ++round;
      const want = [];
      const batch = [];
      for (let k = 0; k < 10; k++) {
        batch.push({ channel: pub, name: 'tick', data: { r, k } });
        want.push(`${r}.${k}`);
      }
      await nodes[from].sdk(APP1).triggerBatch(batch);
      const watching = clients.filter((c) => c.node !== down);
      const of = (c) => c.got.filter((x) => x.startsWith(`${r}.`));
      await eventually(
        () => watching.every((c) => of(c).length >= want.length),
        WAIT_MS,
        () =>
          `${what}: round ${r} from node-${from} (${kind[from]}) to reach every client ` +
          `(${watching.map((c) => `${c.user} on node-${c.node}: ${of(c).length}`).join(', ')})`,
      );
      for (const c of watching) assert.deepEqual(of(c), want, `${what}: ${c.user} on node-${c.node} (${kind[c.node]}), round ${r}`);
    };
    const publishFromEach = async (what, down = -1) => {
      for (let i = 0; i < nodes.length; i++) if (i !== down) await publish(what, i, down);
    };

    /** Bundles the new nodes sent, and whether any of them uses bundles now. */
    const bundles = async () => {
      let sent = 0;
      const inUse = [];
      for (let i = 0; i < nodes.length; i++) {
        if (kind[i] !== 'new' || nodes[i].exitInfo) continue;
        const { samples } = await scrapeMetrics(nodes[i]);
        sent += samples.get('herald_bus_bundles_sent_total') ?? 0;
        const h = (await nodes[i].detail()).body.cluster;
        if ((h.features_in_use ?? []).includes('bundles')) inUse.push(i);
      }
      return { sent, inUse };
    };
    const noBundles = async (what) => {
      const b = await bundles();
      assert.equal(b.sent, 0, `${what}: no bundle sent while a ${PREVIOUS_VERSION} node is up`);
      assert.deepEqual(b.inUse, [], `${what}: bundles in use on no node while a ${PREVIOUS_VERSION} node is up`);
    };

    // The new node sees the old ones, at state stream version 1 without features.
    await eventually(
      async () => {
        const h = (await nodes[2].detail()).body.cluster;
        return (h.nodes ?? []).filter((n) => n.state_version === 1 && n.features.length === 0).length === 2;
      },
      WAIT_MS,
      async () => `node-2's /health to list node-0 and node-1 at state version 1 (${JSON.stringify((await nodes[2].detail()).body.cluster)})`,
    );
    await presenceAgrees('mixed cluster');
    await publishFromEach('mixed cluster');
    await noBundles('mixed cluster');

    // Replace the old nodes, one at a time.
    for (const i of [0, 1]) {
      const port = nodes[i].port;
      await stopServer(nodes[i]);
      const others = [0, 1, 2].filter((j) => j !== i);
      // While node i is down: its clients miss what is published, nobody else does.
      await presenceAgrees(`node-${i} down`, i);
      for (const j of others) await publish(`node-${i} down`, j, i);
      await start(i, 'new', port);
      const mine = clients.filter((c) => c.node === i);
      await eventually(
        () => mine.every((c) => c.client.connection.state === 'connected' && c.pub.subscribed && c.pres.subscribed),
        RECONNECT_MS,
        () => `node-${i}'s clients to reconnect to its new node (${mine.map((c) => `${c.user}: ${c.client.connection.state}`).join(', ')})`,
      );
      await presenceAgrees(`node-${i} replaced`);
      await publishFromEach(`node-${i} replaced`);
      if (kind.includes('old')) await noBundles(`node-${i} replaced, an old node left`);
    }

    // No old node left: every node uses bundles, and a batch goes as one.
    await eventually(
      async () => (await bundles()).inUse.length === 3,
      WAIT_MS,
      async () => `every node to use bundles (${JSON.stringify(await bundles())})`,
    );
    const before = (await bundles()).sent;
    await publishFromEach('all new');
    await presenceAgrees('all new');
    const after = (await bundles()).sent;
    assert.ok(after - before >= 3, `bundles sent: ${before} before three batches, ${after} after`);
    const names = (await nodes[0].detail()).body.cluster.nodes.map((n) => `${n.node_id}:${n.state_version}:${n.features}`);
    assert.deepEqual(names, ['node-0:2:bundles,keys', 'node-1:2:bundles,keys', 'node-2:2:bundles,keys'], "node-0's /health lists the nodes");
    t.diagnostic(`${engine}: ${round} batches, ${users.length} clients; ${after} bundles sent by the end`);
  } finally {
    cleanupAll();
    const errors = [];
    for (const n of nodes) {
      try {
        await stopServer(n);
      } catch (e) {
        errors.push(e);
      }
    }
    await bus.stop();
    rmSync(dir, { recursive: true, force: true });
    if (errors.length) throw errors[0];
  }
}
