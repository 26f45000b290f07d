// Cluster additions to the harness: a real bus server (nats-server or redis-server) on a free
// loopback port that can be stopped and started again on the same port, N herald nodes on
// that bus, and a round-robin TCP load balancer in front of them for pusher-js.
//
// As in harness.mjs, every wait is an event wait or a poll with a deadline (WAIT_MS), and every
// process is stopped by the pid this module started: SIGTERM, SIGKILL after a deadline, and
// SIGKILL on exit for any that a crashed test file left behind.

import { spawn } from 'node:child_process';
import { before, afterEach, after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';

import {
  APP1,
  APP2,
  WAIT_MS,
  cleanupAll,
  eventually,
  freePort,
  makeClient,
  startServer,
  stopServer,
  uniq,
  waitForState,
  withDeadline,
} from './harness.mjs';

// ---------------------------------------------------------------------------------------------
// The bus server

const busProcs = new Set();
const busDirs = new Set();
process.on('exit', () => {
  for (const p of busProcs) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {}
  }
  for (const d of busDirs) {
    try {
      rmSync(d, { recursive: true, force: true });
    } catch {}
  }
});
// The test runner ends a file that overran its timeout with SIGTERM, which would skip the 'exit'
// handlers: exit instead, so they (these and the harness's) kill every server the file started.
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.once(sig, () => process.exit(128 + (sig === 'SIGTERM' ? 15 : 2)));
}

// How each engine's server is started and how we know it answers.
const ENGINES = {
  nats: {
    bin: 'nats-server',
    // JetStream on (history channels keep their events in a stream), its store in the bus's
    // temporary directory, which a restart of the bus keeps.
    args: (port, dir) => ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', path.join(dir, 'jetstream')],
    url: (port) => `nats://127.0.0.1:${port}`,
    // nats-server greets every client with an INFO line.
    hello: null,
    ready: (text) => text.startsWith('INFO '),
  },
  redis: {
    bin: 'redis-server',
    args: (port, dir) => [
      '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', dir, '--daemonize', 'no', '--protected-mode', 'no', '--loglevel', 'warning',
    ],
    url: (port) => `redis://127.0.0.1:${port}/0`,
    hello: 'PING\r\n',
    ready: (text) => text.startsWith('+PONG'),
  },
};

/** The engines a test file can parametrize over. */
export const BUS_ENGINES = Object.keys(ENGINES);

/** The cluster.secret every test node on a bus shares (a cluster without one refuses to start). */
export const CLUSTER_SECRET = 'herald-js-cluster-secret-0123456789abcdef';

/** One TCP exchange with the bus server: resolves true when it answers as ready. */
function probe(engine, port) {
  const spec = ENGINES[engine];
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let text = '';
    const done = (ok) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(2000, () => done(false));
    sock.on('error', () => done(false));
    sock.on('connect', () => {
      if (spec.hello) sock.write(spec.hello);
    });
    sock.on('data', (d) => {
      text += d.toString();
      if (text.includes('\n')) done(spec.ready(text));
    });
    sock.on('close', () => done(false));
  });
}

/**
 * A nats-server or redis-server child process on a free loopback port. stop() and start()
 * again keep the port, so herald nodes configured with url can reconnect to it.
 */
export class BusServer {
  constructor(engine) {
    if (!ENGINES[engine]) throw new Error(`unknown bus engine ${engine}`);
    this.engine = engine;
    this.port = null;
    this.proc = null;
    this.exitInfo = null;
    this.exited = null;
    this.output = '';
    this.dir = mkdtempSync(path.join(os.tmpdir(), `herald-js-${engine}-`));
    busDirs.add(this.dir);
  }

  get url() {
    return ENGINES[this.engine].url(this.port);
  }

  get running() {
    return this.proc !== null && this.exitInfo === null;
  }

  /**
   * Starts the server (on a new free port the first time, on the same port afterwards) and
   * waits until it answers. If the port is taken by another process on the first start, it
   * tries new ports; on a restart it tries the same port again until WAIT_MS.
   */
  async start() {
    const firstStart = this.port === null;
    const end = Date.now() + WAIT_MS;
    for (let attempt = 1; ; attempt++) {
      if (firstStart) this.port = await freePort();
      try {
        await this._spawnAndWait(end);
        return this;
      } catch (e) {
        const retry = /in use|bind/i.test(this.output) && Date.now() < end && (!firstStart || attempt < 5);
        if (!retry) throw e;
        if (!firstStart) await new Promise((r) => setTimeout(r, 100 * attempt)); // poll interval
      }
    }
  }

  async _spawnAndWait(end) {
    const spec = ENGINES[this.engine];
    this.output = '';
    this.exitInfo = null;
    let proc;
    try {
      proc = spawn(spec.bin, spec.args(this.port, this.dir), { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      throw new Error(`cannot start ${spec.bin} (apt-get install -y ${spec.bin}): ${e.message}`);
    }
    this.proc = proc;
    busProcs.add(proc);
    const keep = (chunk) => {
      this.output += chunk.toString();
      if (this.output.length > 100_000) this.output = this.output.slice(-50_000);
    };
    proc.stdout.on('data', keep);
    proc.stderr.on('data', keep);
    let spawnError = null;
    proc.on('error', (e) => {
      spawnError = e;
    });
    this.exited = new Promise((resolve) => {
      proc.on('close', (code, signal) => {
        busProcs.delete(proc);
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
    for (;;) {
      if (spawnError) throw new Error(`cannot start ${spec.bin} (apt-get install -y ${spec.bin}): ${spawnError.message}`);
      if (this.exitInfo) {
        throw new Error(`${spec.bin} exited before it answered (${JSON.stringify(this.exitInfo)}):\n${this.output}`);
      }
      if (await probe(this.engine, this.port)) return;
      if (Date.now() > end) {
        await this.stop();
        throw new Error(`${spec.bin} on port ${this.port} did not answer within ${WAIT_MS} ms:\n${this.output}`);
      }
      await new Promise((r) => setTimeout(r, 25)); // poll interval
    }
  }

  /**
   * Stops exactly the process this started: SIGTERM (or the given signal), then SIGKILL if it
   * has not exited within 30 s. Waits until the port no longer answers.
   */
  async stop(signal = 'SIGTERM') {
    if (!this.running) return this.exitInfo;
    try {
      this.proc.kill(signal);
    } catch {}
    try {
      await withDeadline(this.exited, 30_000, `${this.engine} server (pid ${this.proc.pid}) to exit after ${signal}`);
    } catch {
      try {
        this.proc.kill('SIGKILL');
      } catch {}
      await this.exited;
    }
    return this.exitInfo;
  }

  /** Stops the server and starts it again on the same port. */
  async restart() {
    await this.stop();
    return this.start();
  }
}

// ---------------------------------------------------------------------------------------------
// The load balancer

/**
 * A round-robin TCP proxy on a free loopback port in front of backends (objects with a .port,
 * e.g. HeraldServer; the list may be changed in place). A connection goes to the next backend
 * in turn; if that one refuses (a killed node), to the one after it, so a client can always
 * reach a live node. When either side closes, the other is closed too, so a client whose node
 * dies sees its connection end and reconnects through the balancer.
 */
export class LoadBalancer {
  constructor(backends) {
    this.backends = backends;
    this.next = 0;
    this.server = null;
    this.port = null;
    this.pairs = new Set();
    /** Every accepted connection, in order: {backend (index), open, refused: [indexes tried]}. */
    this.log = [];
  }

  async start() {
    this.server = net.createServer((client) => this._accept(client));
    this.port = await freePort();
    await new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', resolve);
    });
    return this;
  }

  _accept(client) {
    const entry = { backend: null, open: true, refused: [] };
    this.log.push(entry);
    client.pause();
    client.on('error', () => {});
    const pair = { client, upstream: null };
    this.pairs.add(pair);
    const end = () => {
      entry.open = false;
      this.pairs.delete(pair);
      client.destroy();
      if (pair.upstream) pair.upstream.destroy();
    };
    client.on('close', end);
    const tryBackend = (tries) => {
      if (client.destroyed) return;
      if (tries >= this.backends.length) {
        end();
        return;
      }
      const i = this.next % this.backends.length;
      this.next += 1;
      const up = net.connect({ host: '127.0.0.1', port: this.backends[i].port });
      pair.upstream = up;
      let connected = false;
      up.on('connect', () => {
        connected = true;
        entry.backend = i;
        client.pipe(up);
        up.pipe(client);
        client.resume();
      });
      up.on('error', () => {});
      up.on('close', () => {
        if (connected) {
          end();
        } else {
          entry.refused.push(i);
          tryBackend(tries + 1);
        }
      });
    };
    tryBackend(0);
  }

  /** The backend index the most recently accepted connection went to. */
  get lastBackend() {
    const e = this.log[this.log.length - 1];
    return e ? e.backend : null;
  }

  /** Closes the listener and every proxied connection. */
  async stop() {
    if (!this.server) return;
    for (const { client, upstream } of [...this.pairs]) {
      client.destroy();
      if (upstream) upstream.destroy();
    }
    await new Promise((resolve) => this.server.close(() => resolve()));
    this.server = null;
  }
}

// ---------------------------------------------------------------------------------------------
// A cluster of herald nodes

/**
 * A bus server, n herald nodes on it (node ids node-0.., the same apps) and a load balancer
 * in front of them. nodes[i] is a HeraldServer; killNode/restartNode replace it in place so the
 * load balancer follows.
 */
export class Cluster {
  constructor({ engine, size, apps = [APP1, APP2], config = {}, clusterConfig = {} }) {
    this.engine = engine;
    this.size = size;
    this.apps = apps;
    this.extraConfig = config;
    // More keys of every node's cluster section, e.g. {heartbeat: '500ms', node_timeout: '3s'}.
    this.clusterConfig = clusterConfig;
    // Its own prefix, as if other clusters shared the bus (letters and digits only).
    this.prefix = uniq('herald').replace(/[^A-Za-z0-9]/g, '');
    this.bus = new BusServer(engine);
    this.nodes = [];
    this.lb = null;
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'herald-js-cluster-'));
    busDirs.add(this.dir);
  }

  nodeId(i) {
    return `node-${i}`;
  }

  nodeConfig(i) {
    return {
      ...this.extraConfig,
      cluster: { url: this.bus.url, node_id: this.nodeId(i), prefix: this.prefix, secret: CLUSTER_SECRET, ...this.clusterConfig },
    };
  }

  async startNode(i, port) {
    const node = await startServer({ config: this.nodeConfig(i), apps: this.apps, dir: this.dir, port });
    node.nodeId = this.nodeId(i);
    this.nodes[i] = node;
    return node;
  }

  async start() {
    await this.bus.start();
    for (let i = 0; i < this.size; i++) await this.startNode(i);
    this.lb = await new LoadBalancer(this.nodes).start();
    return this;
  }

  /** SIGKILL to node i's pid; resolves once it has exited. */
  async killNode(i) {
    const node = this.nodes[i];
    node.killedByTest = true; // stop() does not expect it to exit 0
    node.proc.kill('SIGKILL');
    return withDeadline(node.exited, WAIT_MS, `node ${i} (pid ${node.proc.pid}) to exit after SIGKILL`);
  }

  /** Starts node i again on its port (same node id and config). */
  async restartNode(i) {
    return this.startNode(i, this.nodes[i].port);
  }

  /** A pusher-js client that connects through the load balancer (opts as for makeClient). */
  balancedClient(opts = {}) {
    const front = { port: this.lb.port, sdk: (app, extra) => this.nodes[0].sdk(app, extra) };
    return makeClient(front, opts);
  }

  /**
   * balancedClient, connected; returns {client, node}: the index of the node the load
   * balancer gave it (clients must be connected one at a time for this to be right).
   */
  async connectBalanced(opts = {}) {
    const before = this.lb.log.length;
    const client = this.balancedClient(opts);
    await waitForState(client, 'connected');
    const entry = this.lb.log[this.lb.log.length - 1];
    if (this.lb.log.length !== before + 1 || entry.backend === null) {
      throw new Error(`expected one new balanced connection, log: ${JSON.stringify(this.lb.log.slice(before))}`);
    }
    return { client, node: entry.backend };
  }

  /** GET the detailed /health (the metrics listener's) of every node: [{status, body}]. */
  async healths() {
    return Promise.all(this.nodes.map((n) => n.detail()));
  }

  /** Polls until every node's /health says the bus is connected and the node is ok. */
  async waitBusConnected(ms = WAIT_MS) {
    let last = [];
    await eventually(
      async () => {
        last = (await this.healths()).map((h) => h.body);
        return last.every((b) => b.status === 'ok' && b.cluster && b.cluster.connected === true);
      },
      ms,
      () => `every node's /health to report status ok, cluster.connected true (last: ${JSON.stringify(last)})`,
    );
  }

  /** Stops every node (throws unless each exited 0), the load balancer and the bus. */
  async stop() {
    const errors = [];
    for (const node of this.nodes) {
      if (node.killedByTest && node.exitInfo) continue;
      try {
        await stopServer(node);
      } catch (e) {
        errors.push(e);
      }
    }
    if (this.lb) await this.lb.stop();
    await this.bus.stop();
    if (errors.length) throw errors[0];
  }
}

/**
 * useCluster registers, in the current describe() (or file), the lifecycle of one cluster:
 * started before the tests (opts as for Cluster), clients closed after each test, everything
 * stopped after the last (nodes must exit 0 on SIGTERM). onStart receives the cluster.
 */
export function useCluster(opts, onStart) {
  let cluster;
  before(async () => {
    cluster = new Cluster(opts);
    try {
      await cluster.start();
    } catch (e) {
      await cluster.stop().catch(() => {});
      throw e;
    }
    onStart(cluster);
  });
  afterEach(() => cleanupAll());
  after(async () => {
    cleanupAll();
    if (cluster) await cluster.stop();
  });
}

/** The cluster shapes the test files run: each bus engine, with 2 and with 3 nodes. */
export const CLUSTER_SHAPES = BUS_ENGINES.flatMap((engine) => [2, 3].map((size) => ({ engine, size })));

// ---------------------------------------------------------------------------------------------
// Cluster-wide state: what clients and the REST API of each node see

/**
 * Short heartbeat settings (cluster.heartbeat, cluster.node_timeout) for the tests that wait
 * for a dead node to be noticed; the ms fields are the same durations for the tests' bounds.
 */
export const FAST_HEARTBEAT = Object.freeze({ heartbeat: '500ms', node_timeout: '3s' });
export const FAST_HEARTBEAT_MS = Object.freeze({ heartbeat: 500, nodeTimeout: 3000 });

/**
 * Records the presence frames a pusher-js client receives on channel, as they arrive and
 * before pusher-js filters them (it drops a member_removed for a user it does not list, so a
 * duplicate shows only here). added and removed are [{id, info, at}] in arrival order (at:
 * Date.now() on arrival); succeeded holds the presence data ({ids, hash, count}) of each
 * subscription_succeeded. wait('added' | 'removed', id) resolves the first such frame.
 */
export function presenceFrames(client, channel) {
  const log = { added: [], removed: [], succeeded: [] };
  const cb = (m) => {
    if (m.channel !== channel) return;
    const at = Date.now();
    const d = m.data || {};
    if (m.event === 'pusher_internal:member_added') log.added.push({ id: d.user_id, info: d.user_info, at });
    else if (m.event === 'pusher_internal:member_removed') log.removed.push({ id: d.user_id, at });
    else if (m.event === 'pusher_internal:subscription_succeeded') log.succeeded.push(d.presence);
  };
  client.connection.bind('message', cb);
  log.ids = (kind) => log[kind].map((x) => x.id);
  log.wait = (kind, id, ms = WAIT_MS) =>
    eventually(
      () => log[kind].find((x) => x.id === id),
      ms,
      () => `member_${kind} for ${id} on ${channel} (${kind} so far: ${JSON.stringify(log.ids(kind))})`,
    );
  log.stop = () => client.connection.unbind('message', cb);
  return log;
}

/** The user ids of a pusher-js presence channel's members, sorted. */
export function memberIds(channel) {
  const ids = [];
  channel.members.each((m) => ids.push(m.id));
  return ids.sort();
}

/** GET path (params) through the SDK on node, as JSON. */
export async function restGet(node, path, params = {}, app = APP1) {
  return (await node.sdk(app).get({ path, params })).json();
}

/**
 * Polls GET path on every node in nodes until view(json) deep-equals want on all of them
 * (a failed request counts as not yet); returns the ms it took. The error names the last
 * view of each node.
 */
export async function untilRestEverywhere(nodes, { path, params = {}, app = APP1, view = (j) => j, want, ms = WAIT_MS }) {
  const start = Date.now();
  let last = [];
  await eventually(
    async () => {
      last = await Promise.all(
        nodes.map(async (n) => {
          try {
            return view(await restGet(n, path, params, app));
          } catch (e) {
            return `error: ${e.status ?? ''} ${e.message}`;
          }
        }),
      );
      return last.every((v) => isDeepStrictEqual(v, want));
    },
    ms,
    () =>
      `GET ${path} ${JSON.stringify(params)} to give ${JSON.stringify(want)} on ${nodes.map((n) => n.nodeId).join(', ')} ` +
      `(last, per node: ${JSON.stringify(last)})`,
  );
  return Date.now() - start;
}

/** The sorted user ids of a GET /channels/{presence}/users answer. */
export const userIdsView = (j) => j.users.map((u) => u.id).sort();
