// Rate limits: client events per connection (pusher:error 4301 over the rate, connection stays)
// and signed REST requests per app (429 + Retry-After). Checked with pusher-js and the pusher
// SDK, with the counters in /metrics.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  record,
  subscribe,
  pusherJsErrorCode,
  restRequest,
  sdkError,
  startServer,
  stopServer,
  cleanupAll,
  expectMetrics,
  metricKey,
  eventually,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

// APP1 keeps the default client-event rate (10 per second, burst 10).
const SLOW_EVENTS = {
  id: 'ce3',
  key: 'ce3-key',
  secret: 'ce3-secret',
  enable_client_messages: true,
  enable_user_authentication: false,
  limits: { max_client_events_per_second: 3 },
};
const API_LIMITED = {
  id: 'api3',
  key: 'api3-key',
  secret: 'api3-secret',
  enable_client_messages: false,
  enable_user_authentication: false,
  limits: { max_api_requests_per_second: 3 },
};
const API_FREE = {
  id: 'api-free',
  key: 'api-free-key',
  secret: 'api-free-secret',
  enable_client_messages: false,
  enable_user_authentication: false,
};

let server;

before(async () => {
  server = await startServer({ apps: [APP1, SLOW_EVENTS, API_LIMITED, API_FREE] });
});
afterEach(async () => {
  cleanupAll();
  if (!server.exitInfo) await server.waitConnections(0);
});
after(async () => {
  cleanupAll();
  await stopServer(server);
});

const perApp = (name, app) => metricKey(name, { app_id: app.id });

// ---------------------------------------------------------------------------------------------
// Client events

test('client events over the default rate (10/s): pusher-js sender gets 4301 for each dropped one, stays connected; the receiver gets the accepted ones in order', async () => {
  const name = uniq('private-rate-');
  const sender = await connectClient(server);
  const receiver = await connectClient(server);
  const other = await connectClient(server);
  const chS = await subscribe(sender, name);
  const chR = await subscribe(receiver, name);
  const chO = await subscribe(other, name);
  const errors = record(sender.connection, 'error');
  const otherErrors = record(other.connection, 'error');
  const got = record(chR, 'client-n');
  const gotOther = record(chR, 'client-other');

  const SENT = 25;
  const t0 = Date.now();
  for (let i = 0; i < SENT; i++) assert.equal(chS.trigger('client-n', { i }), true);
  // Meanwhile another connection of the same app, on the same channel, has its own bucket.
  assert.equal(chO.trigger('client-other', { from: 'other' }), true);

  // Every event is either delivered or answered with an error.
  await eventually(
    () => got.items.length + errors.items.length === SENT,
    WAIT_MS,
    () => `delivered + refused == ${SENT} (delivered ${got.items.length}, refused ${errors.items.length})`,
  );
  // The server handled all of them within this time, refilling a token every 100 ms of it.
  const elapsed = Date.now() - t0;
  assert.deepEqual((await gotOther.next()).data, { from: 'other' });
  // Nothing more is on its way: a marker published after them arrives, the counts stay.
  const marker = record(chR, 'marker');
  await server.sdk().trigger(name, 'marker', 'm');
  await marker.next();
  const delivered = got.items.map((x) => x.data.i);
  assert.equal(delivered.length + errors.items.length, SENT);

  // The burst of 10 gets through, in order; the rest is refused, but for a token per 100 ms
  // the sends took to arrive (a busy machine may let a few more through).
  assert.deepEqual(delivered.slice(0, 10), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const most = 10 + Math.ceil(elapsed / 100) + 1;
  assert.ok(delivered.length <= most, `${delivered.length} of ${SENT} delivered at 10/s in ${elapsed} ms, want <= ${most}`);
  for (let i = 1; i < delivered.length; i++) assert.ok(delivered[i] > delivered[i - 1], `order: ${delivered}`);
  for (const e of errors.items) {
    assert.equal(pusherJsErrorCode(e.data), 4301, JSON.stringify(e.data));
    assert.match(e.data.data.message, /rate/);
  }
  assert.equal(otherErrors.items.length, 0, 'the other sender was limited');
  assert.equal(sender.connection.state, 'connected');

  await expectMetrics(server, {
    [perApp('herald_client_events_rate_limited_total', APP1)]: errors.items.length,
  });

  // The sender recovers once its bucket refills; its connection was never closed.
  let extraErrors = 0;
  await eventually(
    async () => {
      const before = errors.items.length;
      const n = got.items.length;
      chS.trigger('client-n', { i: 1000 + extraErrors });
      await eventually(
        () => got.items.length > n || errors.items.length > before,
        WAIT_MS,
        'the retry delivered or refused',
      );
      if (got.items.length > n) return true;
      extraErrors += 1;
      await new Promise((r) => setTimeout(r, 100)); // poll interval
      return false;
    },
    WAIT_MS,
    () => `a client event accepted again (${extraErrors} refused so far)`,
  );
  // Polled every 100 ms or more, while a token comes back every 100 ms: a slower machine
  // polls less often, so this bound only gets safer.
  assert.ok(extraErrors <= 3, `${extraErrors} more refusals before the bucket refilled`);
  assert.equal(sender.connection.state, 'connected');
  await expectMetrics(server, {
    [perApp('herald_client_events_rate_limited_total', APP1)]: errors.items.length,
    [perApp('herald_connected', APP1)]: 3,
    [perApp('herald_new_disconnections_total', APP1)]: 0,
  });
});

test('client events: the app\'s max_client_events_per_second (3) applies per connection (raw)', async () => {
  const name = uniq('private-rate3-');
  const a = await RawClient.connect(server, SLOW_EVENTS.key);
  const b = await RawClient.connect(server, SLOW_EVENTS.key);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  const SENT = 8;
  const t0 = Date.now();
  for (let i = 0; i < SENT; i++) a.send({ event: 'client-n', channel: name, data: { i } });
  b.send({ event: 'client-b', channel: name, data: {} });
  await a.waitFor('client-b', { channel: name });
  await eventually(
    () => b.filter('client-n').length + a.filter('pusher:error').length === SENT,
    WAIT_MS,
    () => `delivered + refused == ${SENT} (received by b: ${b.describe()}; by a: ${a.describe()})`,
  );
  const elapsed = Date.now() - t0;
  const delivered = b.filter('client-n').map((m) => m.data.i);
  const errs = a.filter('pusher:error');
  assert.deepEqual(delivered.slice(0, 3), [0, 1, 2]);
  // The burst of 3, and a token per 333 ms the sends took to arrive.
  const most = 3 + Math.ceil((elapsed * 3) / 1000) + 1;
  assert.ok(delivered.length <= most, `${delivered.length} delivered at 3/s in ${elapsed} ms, want <= ${most}: ${delivered}`);
  for (const e of errs) assert.equal(e.data.code, 4301, e.raw);
  assert.ok(!b.seen('pusher:error'), 'the receiver was limited');
  await a.ping();
  await expectMetrics(server, {
    [perApp('herald_client_events_rate_limited_total', SLOW_EVENTS)]: errs.length,
  });
});

// ---------------------------------------------------------------------------------------------
// REST API

test('REST rate (3/s): the SDK gets 429 with a JSON error over it, other apps are unaffected, it recovers; every call is counted', async () => {
  const sdk = server.sdk(API_LIMITED);
  const name = uniq('api-');
  const listener = await connectClient(server, { app: API_LIMITED });
  const got = record(await subscribe(listener, name), 'ev');
  let calls = 0;

  // 8 triggers at once: the burst of 3 passes, the rest is refused but for a token per 333 ms
  // the requests took to arrive (a busy machine may let one or two more through).
  const SENT = 8;
  calls += SENT;
  const t0 = Date.now();
  const results = await Promise.allSettled(Array.from({ length: SENT }, (_, i) => sdk.trigger(name, 'ev', { i })));
  const elapsed = Date.now() - t0;
  const ok = results.filter((r) => r.status === 'fulfilled');
  const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
  const most = 3 + Math.ceil((elapsed * 3) / 1000) + 1;
  assert.ok(ok.length >= 3 && ok.length <= most, `${ok.length} of ${SENT} accepted at 3/s in ${elapsed} ms, want 3..${most}`);
  for (const r of ok) assert.equal(r.value.status, 200);
  for (const e of failed) {
    assert.equal(e.status, 429, `${e.message} ${e.body}`);
    const body = JSON.parse(e.body);
    assert.equal(body.code, 429);
    assert.match(body.error, /\S/);
  }

  // Retry-After on the raw response; a badly signed request is 401, not 429 (it is rejected
  // before it counts against the rate). Raw requests go in batches of 6 at once until one is
  // limited: a batch outruns the refill (3/s) unless it takes seconds to arrive.
  let limited = null;
  const statuses = [];
  await eventually(
    async () => {
      calls += 6;
      const rs = await Promise.all(
        Array.from({ length: 6 }, () => restRequest(server, { app: API_LIMITED, path: '/channels' })),
      );
      for (const r of rs) statuses.push(`${r.status} ${r.status === 200 || r.status === 429 ? '' : r.text}`.trim());
      limited = rs.find((r) => r.status === 429) ?? null;
      return limited;
    },
    WAIT_MS,
    () => `a 429 from a raw request (statuses: ${statuses.join(', ')})`,
  );
  for (const st of statuses) assert.match(st, /^(200|429)$/, `raw request statuses: ${statuses.join(', ')}`);
  const retryAfter = limited.headers.get('retry-after');
  assert.match(retryAfter ?? '', /^[1-9]\d*$/, `Retry-After: ${retryAfter}`);
  assert.equal(limited.json.code, 429);
  calls += 1;
  const unsigned = await restRequest(server, { app: API_LIMITED, path: '/channels', secret: 'wrong' });
  assert.equal(unsigned.status, 401, unsigned.text);

  // Other apps are unaffected: same moment, same node.
  for (const other of [API_FREE, APP1]) {
    const res = await server.sdk(other).trigger(uniq('free-'), 'ev', 'x');
    assert.equal(res.status, 200);
  }

  // Recovery: within about a second a trigger is accepted again.
  const retryErrors = [];
  await eventually(
    async () => {
      calls += 1;
      try {
        await sdk.trigger(name, 'ev', { i: 'after' });
        return true;
      } catch (e) {
        retryErrors.push(e);
        await new Promise((r) => setTimeout(r, 150)); // poll interval
        return false;
      }
    },
    WAIT_MS,
    () => `the app accepted again (${retryErrors.length} refusals so far)`,
  );
  for (const e of retryErrors) assert.equal(e.status, 429, e.message);
  // The listener got exactly the accepted events: the burst's and the one after.
  await eventually(
    () => got.items.some((x) => x.data.i === 'after'),
    WAIT_MS,
    () => `the event after recovery (got: ${JSON.stringify(got.items.map((x) => x.data))})`,
  );
  assert.equal(got.items.length, ok.length + 1, JSON.stringify(got.items.map((x) => x.data)));

  await expectMetrics(server, {
    // Refused calls (429, 401) are counted too.
    [perApp('herald_http_calls_received_total', API_LIMITED)]: calls,
    [perApp('herald_http_calls_received_total', API_FREE)]: 1,
  });
});

test('REST rate default (0 = unlimited): 40 concurrent SDK triggers all succeed', async () => {
  const sdk = server.sdk(API_FREE);
  const before = (await expectMetrics(server, {})).get(perApp('herald_http_calls_received_total', API_FREE));
  const results = await withDeadline(
    Promise.all(Array.from({ length: 40 }, (_, i) => sdk.trigger(uniq('free-'), 'ev', { i }))),
    WAIT_MS,
    '40 triggers',
  );
  for (const r of results) assert.equal(r.status, 200);
  await expectMetrics(server, { [perApp('herald_http_calls_received_total', API_FREE)]: before + 40 });
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  assert.equal((await stopServer(server)).code, 0);
});
