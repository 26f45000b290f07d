// Unit tests of withRecovery against every pusher-js 8.x minor this package claims (installed
// as npm aliases, see package.json), each a real pusher-js client talking to a stand-in for
// herald's WebSocket side (fake-herald.mjs). No fixed sleeps: event waits and polls with a
// deadline; closes with 4200, on which pusher-js reconnects at once.

import { describe, test, before, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import Echo from 'laravel-echo';

// Through the package's own name, so the exports map is what is tested.
import { withRecovery, positionOf } from '@herald-rt/recovery';
import { FakeHerald, eventually } from './fake-herald.mjs';
import { VERSIONS, pkg, loadPusher, once } from './clients.mjs';

for (const mod of VERSIONS) {
  describe(`${mod} ${pkg.devDependencies[mod]}`, () => {
    let Pusher;
    let srv;
    const clients = new Set();

    before(async () => {
      Pusher = await loadPusher(mod);
    });
    afterEach(async () => {
      for (const c of clients) c.disconnect();
      clients.clear();
      if (srv) await srv.stop();
      srv = null;
    });

    async function start(opts) {
      srv = await new FakeHerald(opts).start();
      return srv;
    }

    function client(options = {}) {
      const p = new Pusher('app-key', {
        wsHost: '127.0.0.1',
        wsPort: srv.port,
        forceTLS: false,
        enabledTransports: ['ws'],
        disableStats: true,
        cluster: 'mt1',
        ...options,
      });
      clients.add(p);
      return p;
    }

    /** Subscribes and waits until herald's first recovery frame has given the position. */
    async function follow(p, name) {
      const ch = p.subscribe(name);
      await eventually(() => positionOf(p, name), `a position for ${name}`);
      return ch;
    }

    /** Records the n of every 'bid' the app's handler gets. */
    function bids(ch) {
      const got = [];
      ch.bind('bid', (d) => got.push(d.n));
      return got;
    }

    const upTo = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

    test('after a drop, pusher-js resubscribes with the last handled position and the app gets every event once, in order', async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-1');
      assert.deepEqual(positionOf(p, 'auction-1'), { epoch: 'e1', offset: 0 }, 'the first recovery frame gives the position');
      assert.equal(srv.subscribes('auction-1')[0].recover, undefined, 'nothing to recover on the first subscribe');
      const got = bids(ch);
      let seenAtRecovered = null;
      const recovered = once(ch, 'herald:recovered');
      ch.bind('herald:recovered', () => (seenAtRecovered = [...got]));

      for (const n of upTo(1, 3)) srv.publish('auction-1', 'bid', { n });
      await eventually(() => got.length === 3, () => `3 bids (got ${got})`);
      assert.deepEqual(positionOf(p, 'auction-1'), { epoch: 'e1', offset: 3 });

      srv.closeAll(4200);
      // Published while the client is away: kept in the history only.
      for (const n of upTo(4, 5)) srv.publish('auction-1', 'bid', { n });
      assert.deepEqual(await recovered, { recovered: true });
      assert.deepEqual((await srv.nthSubscribe('auction-1', 2)).recover, { epoch: 'e1', offset: 3 });
      assert.deepEqual(seenAtRecovered, upTo(1, 5), 'the replay is handled before herald:recovered');

      srv.publish('auction-1', 'bid', { n: 6 });
      await eventually(() => got.length === 6, () => `6 bids (got ${got})`);
      assert.deepEqual(got, upTo(1, 6));
      assert.deepEqual(positionOf(p, 'auction-1'), { epoch: 'e1', offset: 6 });
    });

    test("a position is committed only after the app's handlers ran, including handlers bound after withRecovery", async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-2');
      const seen = [];
      ch.bind('bid', (d) => seen.push([d.n, positionOf(p, 'auction-2').offset]));
      p.bind_global((event, d) => {
        if (event === 'bid') seen.push([`global ${d.n}`, positionOf(p, 'auction-2').offset]);
      });
      for (const n of upTo(1, 3)) srv.publish('auction-2', 'bid', { n });
      await eventually(() => seen.length === 6, () => `6 handler calls (got ${JSON.stringify(seen)})`);
      assert.deepEqual(seen, [
        [1, 0],
        ['global 1', 0],
        [2, 1],
        ['global 2', 1],
        [3, 2],
        ['global 3', 2],
      ]);
      assert.equal(positionOf(p, 'auction-2').offset, 3);
    });

    test('a position whose event never arrived is dropped with the connection: the event is replayed', async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-3');
      const got = bids(ch);
      for (const n of upTo(1, 2)) srv.publish('auction-3', 'bid', { n });
      await eventually(() => got.length === 2, () => `2 bids (got ${got})`);
      // Event 3 is announced and kept, but the connection closes before the event itself.
      const conn = srv.connOf('auction-3');
      const c = srv.chan('auction-3');
      c.latest = 3;
      c.entries.push({ offset: 3, frame: JSON.stringify({ event: 'bid', channel: 'auction-3', data: '{"n":3}' }) });
      srv.send(conn, 'pusher_internal:position', 'auction-3', { epoch: 'e1', offset: 3 });
      const recovered = once(ch, 'herald:recovered');
      conn.ws.close(4200, 'test');
      assert.deepEqual(await recovered, { recovered: true });
      assert.deepEqual((await srv.nthSubscribe('auction-3', 2)).recover, { epoch: 'e1', offset: 2 });
      assert.deepEqual(got, [1, 2, 3]);
    });

    test('epoch changed: herald:recovered {recovered: false, reason}, and the live events go on from the new position', async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-4');
      const got = bids(ch);
      srv.publish('auction-4', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      srv.restartHistory('e2');
      const recovered = once(ch, 'herald:recovered');
      srv.closeAll(4200);
      assert.deepEqual(await recovered, { recovered: false, reason: 'epoch_changed' });
      assert.deepEqual((await srv.nthSubscribe('auction-4', 2)).recover, { epoch: 'e1', offset: 1 });
      assert.deepEqual(positionOf(p, 'auction-4'), { epoch: 'e2', offset: 0 });
      srv.publish('auction-4', 'bid', { n: 2 });
      await eventually(() => got.length === 2, () => `bid 2 (got ${got})`);
      assert.deepEqual(positionOf(p, 'auction-4'), { epoch: 'e2', offset: 1 });
    });

    test('too old: herald:recovered {recovered: false, reason: "too_old"}, nothing replayed, the live events go on', async () => {
      await start({ keep: 2 });
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-5');
      const got = bids(ch);
      srv.publish('auction-5', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      const recovered = once(ch, 'herald:recovered');
      srv.closeAll(4200);
      for (const n of upTo(2, 5)) srv.publish('auction-5', 'bid', { n });
      assert.deepEqual(await recovered, { recovered: false, reason: 'too_old' });
      assert.deepEqual(positionOf(p, 'auction-5'), { epoch: 'e1', offset: 5 });
      srv.publish('auction-5', 'bid', { n: 6 });
      await eventually(() => got.length === 2, () => `bid 6 (got ${got})`);
      assert.deepEqual(got, [1, 6]);
    });

    test("a cluster's channel without events yet: the empty epoch is a position, and recovering from it replays the first events", async () => {
      await start({ cluster: true });
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-12');
      assert.deepEqual(positionOf(p, 'auction-12'), { epoch: '', offset: 0 });
      const got = bids(ch);
      const recovered = once(ch, 'herald:recovered');
      srv.closeAll(4200);
      for (const n of upTo(1, 3)) srv.publish('auction-12', 'bid', { n });
      assert.deepEqual(await recovered, { recovered: true });
      assert.deepEqual((await srv.nthSubscribe('auction-12', 2)).recover, { epoch: '', offset: 0 });
      assert.deepEqual(got, [1, 2, 3]);
      assert.deepEqual(positionOf(p, 'auction-12'), { epoch: 'e1', offset: 3 });
    });

    test('the first subscription gets no herald:recovered, only the position', async () => {
      await start();
      srv.publish('auction-6', 'bid', { n: 1 });
      const p = withRecovery(client());
      const ch = p.subscribe('auction-6');
      const events = [];
      ch.bind_global((event) => events.push(event));
      await eventually(() => positionOf(p, 'auction-6'), 'a position');
      assert.deepEqual(positionOf(p, 'auction-6'), { epoch: 'e1', offset: 1 });
      srv.publish('auction-6', 'marker', {});
      await eventually(() => events.includes('marker'), () => `the marker (got ${events})`);
      assert.deepEqual(events, ['pusher:subscription_succeeded', 'marker']);
    });

    test("the app's unsubscribe forgets the position, also while disconnected; a reconnect alone keeps it", async () => {
      await start();
      const p = withRecovery(client());
      let ch = await follow(p, 'auction-7');
      let got = bids(ch);
      srv.publish('auction-7', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');

      p.unsubscribe('auction-7');
      assert.equal(positionOf(p, 'auction-7'), undefined);
      await follow(p, 'auction-7');
      assert.equal((await srv.nthSubscribe('auction-7', 2)).recover, undefined);

      // Disconnected, then connected again: the resubscribe recovers.
      p.disconnect();
      p.connect();
      assert.deepEqual((await srv.nthSubscribe('auction-7', 3)).recover, { epoch: 'e1', offset: 1 });

      // Left while disconnected (pusher-js sends no unsubscribe then): forgotten too.
      await eventually(() => positionOf(p, 'auction-7'), 'a position');
      p.disconnect();
      p.unsubscribe('auction-7');
      ch = p.subscribe('auction-7');
      got = bids(ch);
      p.connect();
      assert.equal((await srv.nthSubscribe('auction-7', 4)).recover, undefined);
    });

    test('frames for a channel the app has left do not give it a position', async () => {
      await start();
      const p = withRecovery(client());
      await follow(p, 'auction-8');
      const other = await follow(p, 'auction-other');
      const conn = srv.connOf('auction-8');
      p.unsubscribe('auction-8');
      // What a server may still send before it reads the unsubscribe.
      srv.send(conn, 'pusher_internal:position', 'auction-8', { epoch: 'e1', offset: 1 });
      srv.send(conn, 'bid', 'auction-8', { n: 1 });
      srv.send(conn, 'pusher_internal:recovery', 'auction-8', { epoch: 'e1', offset: 1, recovered: true });
      const marker = once(other, 'marker');
      srv.send(conn, 'marker', 'auction-other', {});
      await marker;
      assert.equal(positionOf(p, 'auction-8'), undefined);
    });

    test('malformed positions are ignored', async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-9');
      const conn = srv.connOf('auction-9');
      const bad = [
        { epoch: 5, offset: 1 },
        { epoch: '', offset: 1 },
        { offset: 1 },
        { epoch: 'e1', offset: -1 },
        { epoch: 'e1', offset: 1.5 },
        { epoch: 'e1', offset: 2 ** 53 + 2 },
        { epoch: 'e1', offset: '3' },
        'not an object',
      ];
      const got = bids(ch);
      for (const [i, pos] of bad.entries()) {
        srv.send(conn, 'pusher_internal:position', 'auction-9', pos);
        srv.send(conn, 'bid', 'auction-9', { n: i });
      }
      await eventually(() => got.length === bad.length, () => `${bad.length} bids (got ${got})`);
      assert.deepEqual(positionOf(p, 'auction-9'), { epoch: 'e1', offset: 0 });
    });

    test('a private channel: the recover goes with the auth the authorizer gave', async () => {
      await start({ history: (name) => name.startsWith('private-') });
      const p = withRecovery(
        client({
          channelAuthorization: {
            customHandler: (params, cb) => setTimeout(() => cb(null, { auth: `app-key:sig-${params.socketId}` }), 5),
          },
        }),
      );
      const ch = await follow(p, 'private-bids');
      const got = bids(ch);
      srv.publish('private-bids', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      const recovered = once(ch, 'herald:recovered');
      srv.closeAll(4200);
      srv.publish('private-bids', 'bid', { n: 2 });
      assert.deepEqual(await recovered, { recovered: true });
      const sub = await srv.nthSubscribe('private-bids', 2);
      assert.match(sub.auth, /^app-key:sig-/);
      assert.deepEqual(sub.recover, { epoch: 'e1', offset: 1 });
      assert.deepEqual(got, [1, 2]);
    });

    test('channels without history frames never get a recover', async () => {
      await start({ history: () => false });
      const p = withRecovery(client());
      const ch = p.subscribe('plain');
      await once(ch, 'pusher:subscription_succeeded');
      const got = bids(ch);
      srv.publish('plain', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      srv.closeAll(4200);
      assert.equal((await srv.nthSubscribe('plain', 2)).recover, undefined);
      assert.equal(positionOf(p, 'plain'), undefined);
    });

    test('no_history (the rule was removed): herald:recovered says so and the position is forgotten', async () => {
      await start();
      const p = withRecovery(client());
      const ch = await follow(p, 'auction-11');
      const got = bids(ch);
      srv.publish('auction-11', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      srv.history = () => false;
      const recovered = once(ch, 'herald:recovered');
      srv.closeAll(4200);
      assert.deepEqual(await recovered, { recovered: false, reason: 'no_history' });
      assert.equal(positionOf(p, 'auction-11'), undefined);
      srv.publish('auction-11', 'bid', { n: 2 });
      await eventually(() => got.length === 2, () => `bid 2 (got ${got})`);
      // Not a second close so soon: pusher-js 8.0 and 8.1 give up on WebSocket after two
      // connections that end within 2 activity timeouts of opening (see README.md, Limits).
      p.disconnect();
      p.connect();
      assert.equal((await srv.nthSubscribe('auction-11', 3)).recover, undefined);
    });

    test('withRecovery is idempotent and refuses what is not a pusher-js client', async () => {
      await start();
      const p = client();
      assert.equal(withRecovery(p), p);
      const send = p.send_event;
      const unsubscribe = p.unsubscribe;
      assert.equal(withRecovery(p), p);
      assert.equal(p.send_event, send);
      assert.equal(p.unsubscribe, unsubscribe);
      const ch = await follow(p, 'auction-10');
      const got = bids(ch);
      srv.publish('auction-10', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      srv.closeAll(4200);
      assert.deepEqual((await srv.nthSubscribe('auction-10', 2)).recover, { epoch: 'e1', offset: 1 });
      for (const bad of [undefined, null, {}, { send_event() {} }]) {
        assert.throws(() => withRecovery(bad), TypeError);
      }
      assert.equal(positionOf({}, 'x'), undefined);
    });

    test('Laravel Echo: withRecovery(echo.connector.pusher); .listen gets the replay, and .herald:recovered', async () => {
      await start({ history: (name) => name.startsWith('auction-') || name.startsWith('presence-') });
      const echo = new Echo({
        broadcaster: 'pusher',
        Pusher,
        key: 'app-key',
        cluster: 'mt1',
        wsHost: '127.0.0.1',
        wsPort: srv.port,
        forceTLS: false,
        enabledTransports: ['ws'],
        disableStats: true,
      });
      clients.add({ disconnect: () => echo.disconnect() });
      const p = withRecovery(echo.connector.pusher);
      const got = [];
      const results = [];
      echo
        .channel('auction-echo')
        .listen('.bid', (d) => got.push(d.n))
        .listen('.herald:recovered', (r) => results.push(r));
      await eventually(() => positionOf(p, 'auction-echo'), 'a position');
      srv.publish('auction-echo', 'bid', { n: 1 });
      await eventually(() => got.length === 1, 'bid 1');
      srv.closeAll(4200);
      srv.publish('auction-echo', 'bid', { n: 2 });
      await eventually(() => results.length === 1, 'herald:recovered');
      assert.deepEqual(results, [{ recovered: true }]);
      assert.deepEqual(got, [1, 2]);
    });
  });
}
