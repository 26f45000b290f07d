// Recovery on the wire (docs/protocol.md, "History and recovery"), with a raw WebSocket client:
// the position before each event, the recovery frame, a malformed `recover` refused with
// InvalidRecovery on a connection that stays usable, `no_history`, a private channel's history
// only with a valid auth, positions per app; and the REST history endpoint through signed
// requests: events after `since`, `limit`, 404, 409, 401.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  APP2,
  RawClient,
  WAIT_MS,
  cleanupAll,
  hmacHex,
  restRequest,
  startServer,
  stopServer,
  subscribeRejection,
  uniq,
} from '../harness.mjs';
import { RECOVERY_APPS } from '../recovery.mjs';

let server;
let sdk;

before(async () => {
  server = await startServer({ apps: RECOVERY_APPS });
  sdk = server.sdk(APP1);
});
afterEach(() => cleanupAll());
after(async () => {
  cleanupAll();
  await stopServer(server);
});

/** Publishes bid {n} for n = from..to, one after the other. */
async function publish(name, from, to, app = APP1) {
  const s = app === APP1 ? sdk : server.sdk(app);
  for (let n = from; n <= to; n++) await s.trigger(name, 'bid', { n });
}

/** GET /channels/{name}/history, signed, with params. */
function history(name, params = {}, app = APP1) {
  return restRequest(server, { app, path: `/channels/${name}/history`, params });
}

/** The channel's epoch, from the REST history. */
async function epochOf(name) {
  const res = await history(name);
  assert.equal(res.status, 200, res.text);
  return res.json.epoch;
}

/** The frames on channel received so far, as [event, data] (pusher:pong and others left out). */
function framesOn(raw, channel) {
  return raw.filter((m) => m.channel === channel).map((m) => [m.event, m.data]);
}

/** Waits for the recovery frame on channel and returns every frame on it up to there. */
async function untilRecovery(raw, channel) {
  await raw.waitFor('pusher_internal:recovery', { channel });
  return framesOn(raw, channel);
}

test('a history channel: each event comes after its position; a subscribe gets the position to go on from', async () => {
  const name = uniq('auction-');
  await publish(name, 1, 2);
  const epoch = await epochOf(name);
  assert.equal(typeof epoch, 'string');
  assert.ok(epoch.length > 0 && epoch.length <= 64, `epoch ${JSON.stringify(epoch)}`);

  const raw = await RawClient.connect(server);
  await raw.subscribeOk(name);
  const rec = await raw.waitFor('pusher_internal:recovery', { channel: name });
  assert.deepEqual(rec.data, { epoch, offset: 2 }, 'no `recovered` when the subscribe did not ask to recover');
  assert.equal(typeof rec.rawData, 'string', 'data is a JSON string, as every event’s');

  raw.drain();
  await publish(name, 3, 4);
  await raw.waitFor((m) => m.event === 'bid' && m.data.n === 4, { channel: name });
  assert.deepEqual(framesOn(raw, name).slice(-4), [
    ['pusher_internal:position', { epoch, offset: 3 }],
    ['bid', { n: 3 }],
    ['pusher_internal:position', { epoch, offset: 4 }],
    ['bid', { n: 4 }],
  ]);
});

test('recover: the events after the position, each after its position, then recovered:true, then the live events', async () => {
  const name = uniq('auction-');
  await publish(name, 1, 5);
  const epoch = await epochOf(name);
  const raw = await RawClient.connect(server);
  raw.subscribe(name, { recover: { epoch, offset: 2 } });
  assert.deepEqual(await untilRecovery(raw, name), [
    ['pusher_internal:subscription_succeeded', {}],
    ['pusher_internal:position', { epoch, offset: 3 }],
    ['bid', { n: 3 }],
    ['pusher_internal:position', { epoch, offset: 4 }],
    ['bid', { n: 4 }],
    ['pusher_internal:position', { epoch, offset: 5 }],
    ['bid', { n: 5 }],
    ['pusher_internal:recovery', { epoch, offset: 5, recovered: true }],
  ]);
  await publish(name, 6, 6);
  await raw.waitFor((m) => m.event === 'bid' && m.data.n === 6, { channel: name });

  // Recovering from the latest position replays nothing.
  const raw2 = await RawClient.connect(server);
  raw2.subscribe(name, { recover: { epoch, offset: 6 } });
  assert.deepEqual(await untilRecovery(raw2, name), [
    ['pusher_internal:subscription_succeeded', {}],
    ['pusher_internal:recovery', { epoch, offset: 6, recovered: true }],
  ]);
});

test('recover from the empty epoch (a channel with no event yet): every event kept, or too_old once some are gone; null is no recovery', async () => {
  const name = uniq('auction-');
  await publish(name, 1, 3);
  const epoch = await epochOf(name);
  const raw = await RawClient.connect(server);
  raw.subscribe(name, { recover: { epoch: '', offset: 0 } });
  assert.deepEqual(await untilRecovery(raw, name), [
    ['pusher_internal:subscription_succeeded', {}],
    ['pusher_internal:position', { epoch, offset: 1 }],
    ['bid', { n: 1 }],
    ['pusher_internal:position', { epoch, offset: 2 }],
    ['bid', { n: 2 }],
    ['pusher_internal:position', { epoch, offset: 3 }],
    ['bid', { n: 3 }],
    ['pusher_internal:recovery', { epoch, offset: 3, recovered: true }],
  ]);

  const small = uniq('small-');
  await publish(small, 1, 6); // size 5: event 1 is gone
  raw.subscribe(small, { recover: { epoch: '', offset: 0 } });
  const r = (await raw.waitFor('pusher_internal:recovery', { channel: small })).data;
  assert.deepEqual(r, { epoch: await epochOf(small), offset: 6, recovered: false, reason: 'too_old' });

  const plain = uniq('auction-');
  raw.subscribe(plain, { recover: null });
  const frames = await untilRecovery(raw, plain);
  assert.equal(frames[0][0], 'pusher_internal:subscription_succeeded', JSON.stringify(frames));
  assert.ok(!('recovered' in frames[1][1]), `recover: null asks nothing: ${JSON.stringify(frames)}`);
});

test('recover from a position past the rule size, from another epoch, or ahead of the channel: recovered:false with the reason, nothing replayed', async () => {
  const small = uniq('small-');
  await publish(small, 1, 8); // size 5: events 1 to 3 are gone
  const epoch = await epochOf(small);
  const raw = await RawClient.connect(server);
  raw.subscribe(small, { recover: { epoch, offset: 1 } });
  assert.deepEqual(await untilRecovery(raw, small), [
    ['pusher_internal:subscription_succeeded', {}],
    ['pusher_internal:recovery', { epoch, offset: 8, recovered: false, reason: 'too_old' }],
  ]);

  const name = uniq('auction-');
  await publish(name, 1, 2);
  const e2 = await epochOf(name);
  raw.subscribe(name, { recover: { epoch: `${e2}-other`, offset: 1 } });
  assert.deepEqual((await raw.waitFor('pusher_internal:recovery', { channel: name })).data, {
    epoch: e2,
    offset: 2,
    recovered: false,
    reason: 'epoch_changed',
  });
  const ahead = uniq('auction-');
  await publish(ahead, 1, 2);
  const e3 = await epochOf(ahead);
  raw.subscribe(ahead, { recover: { epoch: e3, offset: 3 } });
  const r = (await raw.waitFor('pusher_internal:recovery', { channel: ahead })).data;
  assert.deepEqual(r, { epoch: e3, offset: 2, recovered: false, reason: 'ahead' });
  assert.ok(!raw.seen((m) => m.event === 'bid'), `nothing replayed: ${raw.describe()}`);
});

test('a malformed recover: pusher:subscription_error InvalidRecovery, status 400, and the connection stays usable', async () => {
  const BAD = [
    ['a string', 'x'],
    ['a number', 5],
    ['an array', [{ epoch: 'e', offset: 1 }]],
    ['epoch not a string', { epoch: 5, offset: 1 }],
    ['epoch empty', { epoch: '', offset: 1 }],
    ['epoch over 64 bytes', { epoch: 'e'.repeat(65), offset: 1 }],
    ['no epoch', { offset: 1 }],
    ['no offset', { epoch: 'e' }],
    ['offset negative', { epoch: 'e', offset: -1 }],
    ['offset fractional', { epoch: 'e', offset: 1.5 }],
    ['offset a string', { epoch: 'e', offset: '1' }],
    ['offset past 2^53', { epoch: 'e', offset: 2 ** 53 + 2 }],
    ['offset huge', { epoch: 'e', offset: 1e300 }],
  ];
  const raw = await RawClient.connect(server);
  for (const [what, recover] of BAD) {
    const name = uniq('auction-');
    raw.subscribe(name, { recover });
    const r = await subscribeRejection(raw, name);
    assert.equal(r.event, 'pusher:subscription_error', `${what}: ${r.msg.raw}`);
    assert.equal(r.msg.data.type, 'InvalidRecovery', `${what}: ${r.msg.raw}`);
    assert.equal(r.status, 400, `${what}: ${r.msg.raw}`);
    assert.ok(r.message, `${what}: a message`);
    await raw.ping();
    assert.ok(raw.isOpen, `${what}: the connection stays open`);
    assert.ok(!raw.seen((m) => m.channel === name && m.event !== 'pusher:subscription_error'), `${what}: ${raw.describe()}`);
  }
  // The bounds themselves are valid: a 64-byte epoch, offset 2^53.
  const edge = uniq('auction-');
  await raw.subscribeOk(edge);
  raw.unsubscribe(edge);
  raw.subscribe(edge, { recover: { epoch: 'e'.repeat(64), offset: 2 ** 53 } });
  const rec = await raw.waitFor((m) => m.event === 'pusher_internal:recovery' && 'recovered' in m.data, { channel: edge });
  assert.equal(rec.data.recovered, false, rec.raw);
  // The connection still subscribes and receives.
  const after = uniq('auction-');
  await raw.subscribeOk(after);
  await publish(after, 1, 1);
  await raw.waitFor('bid', { channel: after });
});

test('recover on a channel without history: recovered:false, reason no_history; the subscription works', async () => {
  const name = uniq('plain-');
  const raw = await RawClient.connect(server);
  raw.subscribe(name, { recover: { epoch: 'e', offset: 3 } });
  const frames = await untilRecovery(raw, name);
  assert.deepEqual(
    frames.map(([event]) => event),
    ['pusher_internal:subscription_succeeded', 'pusher_internal:recovery'],
  );
  const r = frames[1][1];
  assert.equal(r.recovered, false, JSON.stringify(r));
  assert.equal(r.reason, 'no_history', JSON.stringify(r));
  // No position to go on from: herald sends an empty epoch (offset 0), or none.
  assert.ok(!r.epoch, `no epoch for a channel without history: ${JSON.stringify(r)}`);
  await publish(name, 1, 1);
  await raw.waitFor('bid', { channel: name });
  assert.ok(!raw.seen((m) => m.event === 'pusher_internal:position'), 'no positions on a channel without history');
});

test('recover on a private channel without a valid auth: AuthError, nothing replayed; with a valid auth, the replay', async () => {
  const name = uniq('private-');
  await publish(name, 1, 3);
  const epoch = await epochOf(name);
  const raw = await RawClient.connect(server);
  // Signed for another socket: a valid signature of the wrong subscription.
  for (const auth of [undefined, `${APP1.key}:${'0'.repeat(64)}`, `${APP1.key}:${hmacHex(APP1.secret, `1.2:${name}`)}`]) {
    raw.subscribe(name, { ...(auth ? { auth } : {}), recover: { epoch, offset: 0 } });
    const r = await subscribeRejection(raw, name);
    assert.equal(r.event, 'pusher:subscription_error', r.msg.raw);
    assert.equal(r.msg.data.type, 'AuthError', r.msg.raw);
    assert.equal(r.status, 401, r.msg.raw);
    await raw.ping();
    assert.deepEqual(
      framesOn(raw, name).filter(([event]) => event !== 'pusher:subscription_error'),
      [],
      `nothing of ${name} but the error: ${raw.describe()}`,
    );
  }
  const extra = { auth: `${APP1.key}:${hmacHex(APP1.secret, `${raw.socketId}:${name}`)}` };
  raw.subscribe(name, { ...extra, recover: { epoch, offset: 1 } });
  assert.deepEqual((await untilRecovery(raw, name)).filter(([event]) => event !== 'pusher:subscription_error'), [
    ['pusher_internal:subscription_succeeded', {}],
    ['pusher_internal:position', { epoch, offset: 2 }],
    ['bid', { n: 2 }],
    ['pusher_internal:position', { epoch, offset: 3 }],
    ['bid', { n: 3 }],
    ['pusher_internal:recovery', { epoch, offset: 3, recovered: true }],
  ]);
});

test("another app's key cannot read this app's history: positions are per app", async () => {
  const name = uniq('auction-');
  await publish(name, 1, 3);
  const epoch = await epochOf(name);
  const raw = await RawClient.connect(server, APP2.key);
  raw.subscribe(name, { recover: { epoch, offset: 0 } });
  const frames = await untilRecovery(raw, name);
  assert.deepEqual(frames[0], ['pusher_internal:subscription_succeeded', {}]);
  assert.equal(frames.length, 2, `nothing of app 1 replayed to app 2: ${JSON.stringify(frames)}`);
  const r = frames[1][1];
  // App 2's channel of that name has had no event: offset 0 of its own epoch, replayed from
  // nothing (or epoch_changed, if epochs are per app).
  assert.equal(r.offset, 0, JSON.stringify(r));
  assert.ok(r.recovered === true || r.reason === 'epoch_changed', JSON.stringify(r));

  raw.subscribe(`${name}-b`, { recover: { epoch, offset: 3 } });
  const b = (await raw.waitFor('pusher_internal:recovery', { channel: `${name}-b` })).data;
  assert.equal(b.recovered, false, JSON.stringify(b));
  assert.ok(['ahead', 'epoch_changed'].includes(b.reason), JSON.stringify(b));
  assert.ok(!raw.seen((m) => m.event === 'bid'), `no event of app 1: ${raw.describe()}`);

  const res = await history(name, {}, APP2);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.latest, 0, res.text);
  assert.deepEqual(res.json.events, []);
});

test('REST history: the events after since, oldest first, limit, epoch; 404 without history, 409 for another epoch, 401 unsigned', async () => {
  const name = uniq('auction-');
  const before = Date.now();
  await publish(name, 1, 5);
  const all = await history(name);
  assert.equal(all.status, 200, all.text);
  const { epoch } = all.json;
  assert.equal(all.json.latest, 5);
  assert.equal(all.json.missing, 0);
  assert.deepEqual(
    all.json.events.map((e) => e.offset),
    [1, 2, 3, 4, 5],
  );
  for (const [i, e] of all.json.events.entries()) {
    assert.equal(e.event, 'bid');
    assert.equal(e.channel, name);
    assert.deepEqual(typeof e.data === 'string' ? JSON.parse(e.data) : e.data, { n: i + 1 });
    assert.ok(e.published_at >= before - 1000 && e.published_at <= Date.now() + 1000, `published_at ${e.published_at}`);
  }

  const offsets = async (params) => {
    const res = await history(name, params);
    assert.equal(res.status, 200, `${JSON.stringify(params)}: ${res.text}`);
    assert.equal(res.json.latest, 5);
    return res.json.events.map((e) => e.offset);
  };
  assert.deepEqual(await offsets({ since: 2 }), [3, 4, 5]);
  assert.deepEqual(await offsets({ limit: 2 }), [1, 2]);
  assert.deepEqual(await offsets({ since: 2, limit: 2 }), [3, 4]);
  assert.deepEqual(await offsets({ since: 5 }), []);
  assert.deepEqual(await offsets({ since: 1, epoch }), [2, 3, 4, 5]);

  const other = await history(name, { epoch: `${epoch}x` });
  assert.equal(other.status, 409, other.text);

  // Past the rule size: missing counts the events after since that are gone.
  const small = uniq('small-');
  await publish(small, 1, 8);
  const s = await history(small);
  assert.equal(s.status, 200, s.text);
  assert.deepEqual(
    s.json.events.map((e) => e.offset),
    [4, 5, 6, 7, 8],
  );
  assert.equal(s.json.missing, 3);
  assert.equal((await history(small, { since: 4 })).json.missing, 0);

  const none = await history(uniq('plain-'));
  assert.equal(none.status, 404, none.text);

  const unsigned = await fetch(`${server.httpUrl}/apps/${APP1.id}/channels/${name}/history`, {
    signal: AbortSignal.timeout(WAIT_MS),
  });
  assert.equal(unsigned.status, 401);
  const wrong = await restRequest(server, { path: `/channels/${name}/history`, secret: 'not-the-secret' });
  assert.equal(wrong.status, 401, wrong.text);
});
