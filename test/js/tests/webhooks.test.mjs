// Webhooks: pusher-js clients make herald post channel_occupied, channel_vacated, member_added,
// member_removed and client_event to a Node HTTP receiver, which checks every request with the
// pusher server SDK (`pusher.webhook({headers, rawBody}).isValid()`), as a Laravel, Rails or
// Node backend does. The receiver is then down for 30 s (HERALD_WEBHOOK_OUTAGE_MS) and every
// webhook arrives once it is back, in order per channel. In a cluster of two nodes,
// occupied/vacated and member events fire once for the cluster.
//
// Nothing here waits for a webhook not to come: a "marker" event (a cache_miss of a fresh
// cache channel) decided after the leave delay has passed must arrive, and anything that
// should not have been sent would have come before it (one URL's events leave in order).

import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  APP1,
  PusherServer,
  WAIT_MS,
  cleanupAll,
  connectClient,
  disconnectClient,
  eventually,
  freePort,
  scrapeMetrics,
  startServer,
  stopServer,
  subscribe,
  uniq,
} from '../harness.mjs';
import { Cluster, untilRestEverywhere, userIdsView } from '../cluster.mjs';

const OUTAGE_MS = Number(process.env.HERALD_WEBHOOK_OUTAGE_MS) || 30_000;
const LEAVE_DELAY_MS = 1000;

const WEBHOOK_CONFIG = {
  batch_interval: '50ms',
  leave_delay: `${LEAVE_DELAY_MS}ms`,
  retry_max_backoff: '2s',
};

const verifier = new PusherServer({ appId: APP1.id, key: APP1.key, secret: APP1.secret, cluster: 'mt1' });

/**
 * A webhook endpoint on 127.0.0.1: every request is checked with the SDK and its events are
 * kept, with the time they arrived. down() closes the port (connections refused), up() opens
 * it again on the same port.
 */
class Receiver {
  constructor() {
    this.events = []; // {name, channel, ..., at}
    this.invalid = []; // requests the SDK refused
    this.requests = 0;
    this.server = null;
    this.port = null;
  }

  get url() {
    return `http://127.0.0.1:${this.port}/pusher/webhooks`;
  }

  async up() {
    this.port ??= await freePort();
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const rawBody = Buffer.concat(chunks).toString('utf8');
        this.requests += 1;
        const hook = verifier.webhook({ headers: req.headers, rawBody });
        if (!hook.isValid() || req.headers['x-test'] !== 'yes') {
          this.invalid.push({ headers: req.headers, rawBody });
          res.writeHead(401).end();
          return;
        }
        const at = Date.now();
        for (const ev of hook.getEvents()) this.events.push({ ...ev, at, time_ms: hook.getData().time_ms });
        res.writeHead(200).end();
      });
    });
    await eventually(
      () =>
        new Promise((resolve) => {
          server.once('error', () => resolve(false));
          server.listen(this.port, '127.0.0.1', () => resolve(true));
        }),
      WAIT_MS,
      `the receiver listening on ${this.port}`,
    );
    this.server = server;
  }

  async down() {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise((resolve) => s.close(() => resolve()));
  }

  /** The events of channel (all when undefined), as "name [user_id] [event]" strings. */
  list(channel) {
    return this.events
      .filter((e) => channel === undefined || e.channel === channel)
      .map((e) => [e.name, e.user_id, e.event].filter((x) => x !== undefined).join(' '));
  }

  /** Waits until an event matching pred has arrived; returns it. */
  async waitFor(pred, what) {
    return eventually(() => this.events.find(pred), WAIT_MS, () => `webhook ${what} (got ${JSON.stringify(this.list())})`);
  }

  /**
   * Makes each of nodes decide a marker (a cache_miss of a fresh cache channel) and waits for
   * every marker: whatever those nodes decided before it has arrived by then.
   */
  async marker(nodes) {
    const names = [];
    for (const node of nodes) {
      const name = uniq('cache-marker-');
      names.push(name);
      const c = await connectClient(node);
      await subscribe(c, name);
      disconnectClient(c);
    }
    for (const name of names) await this.waitFor((e) => e.name === 'cache_miss' && e.channel === name, `marker ${name}`);
  }
}

const presenceClient = (node, id) => connectClient(node, { presence: () => ({ user_id: id, user_info: { name: id } }) });

function appWithHook(receiver, extra = {}) {
  return {
    ...APP1,
    webhooks: [
      {
        url: receiver.url,
        event_types: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed', 'client_event', 'cache_miss'],
        headers: { 'X-Test': 'yes' },
        ...extra,
      },
    ],
  };
}

/** Waits out the leave delay of a leave that happened at `since`, with room for a busy server. */
function afterLeaveDelay(since) {
  const wait = since + 2 * LEAVE_DELAY_MS - Date.now();
  return new Promise((r) => setTimeout(r, Math.max(wait, 0)));
}

describe('webhooks, one node', () => {
  let server;
  const rx = new Receiver();
  before(async () => {
    await rx.up();
    server = await startServer({ apps: [appWithHook(rx)], config: { webhooks: WEBHOOK_CONFIG } });
  });
  afterEach(() => cleanupAll());
  after(async () => {
    cleanupAll();
    await stopServer(server);
    await rx.down();
  });

  test('occupied, members, client events and vacated, each verified with the SDK', async () => {
    const ch = uniq('presence-hooks-');
    const alice = await presenceClient(server, 'alice');
    await subscribe(alice, ch);
    await rx.waitFor((e) => e.name === 'member_added' && e.channel === ch && e.user_id === 'alice', 'member_added alice');

    const bob = await presenceClient(server, 'bob');
    const chB = await subscribe(bob, ch);
    chB.trigger('client-typing', { who: 'bob' });
    const ce = await rx.waitFor((e) => e.name === 'client_event' && e.channel === ch, 'client_event');
    assert.equal(ce.event, 'client-typing');
    assert.equal(ce.socket_id, bob.connection.socket_id);
    assert.equal(ce.user_id, 'bob');
    assert.deepEqual(JSON.parse(ce.data), { who: 'bob' });

    const bobLeft = Date.now();
    disconnectClient(bob);
    const removed = await rx.waitFor((e) => e.name === 'member_removed' && e.user_id === 'bob', 'member_removed bob');
    assert.ok(removed.at - bobLeft >= LEAVE_DELAY_MS, `member_removed after ${removed.at - bobLeft} ms; the leave delay is ${LEAVE_DELAY_MS} ms`);

    const aliceLeft = Date.now();
    disconnectClient(alice);
    await rx.waitFor((e) => e.name === 'channel_vacated' && e.channel === ch, 'channel_vacated');
    const vacated = rx.events.find((e) => e.name === 'channel_vacated' && e.channel === ch);
    assert.ok(vacated.at - aliceLeft >= LEAVE_DELAY_MS);
    assert.deepEqual(rx.list(ch), [
      'channel_occupied',
      'member_added alice',
      'member_added bob',
      'client_event bob client-typing',
      'member_removed bob',
      'member_removed alice',
      'channel_vacated',
    ]);
    assert.deepEqual(rx.invalid, []);
  });

  test('a page reload within the leave delay sends neither vacated nor occupied', async () => {
    const ch = uniq('presence-reload-');
    const first = await presenceClient(server, 'carol');
    await subscribe(first, ch);
    await rx.waitFor((e) => e.name === 'member_added' && e.channel === ch, 'member_added carol');
    const left = Date.now();
    disconnectClient(first); // the page unloads...
    const second = await presenceClient(server, 'carol'); // ...and loads again
    await subscribe(second, ch);
    await afterLeaveDelay(left);
    await rx.marker([server]);
    assert.deepEqual(rx.list(ch), ['channel_occupied', 'member_added carol']);
  });

  test(`the endpoint down for ${OUTAGE_MS / 1000} s: every webhook arrives once it is back, in order per channel`, async () => {
    const chs = [uniq('private-outage-a-'), uniq('private-outage-b-')];
    const already = rx.events.length;
    await rx.down();
    const start = Date.now();
    const a = await connectClient(server);
    const b = await connectClient(server);
    // Each client sends on its own channel, within the client-event rate (10/s, burst 10).
    const senders = [];
    for (const ch of chs) {
      const [ca, cb] = [await subscribe(a, ch), await subscribe(b, ch)];
      senders.push(senders.length === 0 ? ca : cb);
    }
    const want = { [chs[0]]: ['channel_occupied'], [chs[1]]: ['channel_occupied'] };
    for (let i = 0; i < 16; i++) {
      const k = i % 2;
      senders[k].trigger(`client-n${i}`, { i });
      want[chs[k]].push(`client_event client-n${i}`);
    }
    // herald tried while the endpoint was down (and failed): the metrics say so.
    await eventually(
      async () => {
        const m = (await scrapeMetrics(server)).samples;
        return (m.get('herald_webhook_requests_failed_total{app_id="app-id"}') ?? 0) >= 2;
      },
      WAIT_MS,
      'herald_webhook_requests_failed_total >= 2 while the endpoint is down',
    );
    const rest = OUTAGE_MS - (Date.now() - start);
    if (rest > 0) await new Promise((r) => setTimeout(r, rest)); // the outage itself
    assert.equal(rx.events.length, already, 'nothing can arrive while the endpoint is down');
    await rx.up();
    const backAt = Date.now();
    for (const ch of chs) {
      await eventually(() => rx.list(ch).length >= want[ch].length, WAIT_MS, () => `${ch}: ${JSON.stringify(rx.list(ch))}`);
      assert.deepEqual(rx.list(ch), want[ch], `${ch}: every event, once, in order`);
    }
    const m = (await scrapeMetrics(server)).samples;
    assert.ok(m.get('herald_webhook_requests_retried_total{app_id="app-id"}') >= 1);
    assert.equal(m.get('herald_webhook_events_dropped_total{app_id="app-id",reason="expired"}'), 0);
    assert.equal(m.get('herald_webhook_events_dropped_total{app_id="app-id",reason="queue_full"}'), 0);
    console.log(`outage ${OUTAGE_MS} ms: all ${want[chs[0]].length + want[chs[1]].length} events within ${Date.now() - backAt} ms of the endpoint's return`);
    assert.deepEqual(rx.invalid, []);
  });
});

describe('webhooks, a cluster of 2 nodes (nats)', () => {
  let cluster;
  const rx = new Receiver();
  before(async () => {
    await rx.up();
    cluster = new Cluster({ engine: 'nats', size: 2, apps: [appWithHook(rx)], config: { webhooks: WEBHOOK_CONFIG } });
    try {
      await cluster.start();
    } catch (e) {
      await cluster.stop().catch(() => {});
      throw e;
    }
  });
  afterEach(() => cleanupAll());
  after(async () => {
    cleanupAll();
    if (cluster) await cluster.stop();
    await rx.down();
  });

  test('occupied, vacated and member events fire once for the cluster', async () => {
    const [n0, n1] = cluster.nodes;
    const ch = uniq('presence-cluster-');
    const countsEverywhere = (n) =>
      untilRestEverywhere(cluster.nodes, {
        path: `/channels/${ch}`,
        params: { info: 'subscription_count' },
        view: (j) => j.subscription_count ?? 0,
        want: n,
      });
    const u1a = await presenceClient(n0, 'u1');
    await subscribe(u1a, ch);
    await countsEverywhere(1);
    // Node 1 knows u1 before u1 joins there too: a user's first sockets on two nodes within the
    // state's propagation delay would each be its first (docs/webhooks.md).
    await untilRestEverywhere(cluster.nodes, { path: `/channels/${ch}/users`, view: userIdsView, want: ['u1'] });
    const u1b = await presenceClient(n1, 'u1'); // the same user on the other node
    await subscribe(u1b, ch);
    const u2 = await presenceClient(n1, 'u2');
    await subscribe(u2, ch);
    await countsEverywhere(3);

    const left = Date.now();
    disconnectClient(u1a); // u1 is still on node 1: no member_removed
    await countsEverywhere(2);
    disconnectClient(u2);
    disconnectClient(u1b);
    await countsEverywhere(0);
    await rx.waitFor((e) => e.name === 'channel_vacated' && e.channel === ch, 'channel_vacated');
    await afterLeaveDelay(left);
    await rx.marker(cluster.nodes);
    const got = rx.list(ch);
    assert.deepEqual(
      [...got].sort(),
      ['channel_occupied', 'channel_vacated', 'member_added u1', 'member_added u2', 'member_removed u1', 'member_removed u2'],
      `each once: ${JSON.stringify(got)}`,
    );
    assert.ok(got.indexOf('channel_occupied') < got.indexOf('member_added u1'));
    assert.ok(got.indexOf('member_added u2') < got.indexOf('member_removed u2'));
    assert.deepEqual(rx.invalid, []);
  });

  test('a reload that lands on the other node sends no channel_vacated or member_removed', async () => {
    const [n0, n1] = cluster.nodes;
    const ch = uniq('presence-reload-');
    const before = await presenceClient(n0, 'dana');
    await subscribe(before, ch);
    await rx.waitFor((e) => e.name === 'member_added' && e.channel === ch, 'member_added dana');
    const left = Date.now();
    disconnectClient(before); // node 0 decides vacated and member_removed, held for the leave delay...
    const after = await presenceClient(n1, 'dana'); // ...while the page comes back on node 1
    await subscribe(after, ch);
    await afterLeaveDelay(left);
    await rx.marker(cluster.nodes);
    const got = rx.list(ch);
    assert.ok(!got.includes('channel_vacated') && !got.includes('member_removed dana'), JSON.stringify(got));
    // Node 1 may have seen the channel empty first (node 0's leave reached it before the
    // return) and said occupied again: the backend then hears occupied twice, never vacated.
    assert.equal(got[0], 'channel_occupied');
  });
});
