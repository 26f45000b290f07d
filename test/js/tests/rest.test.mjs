// The Pusher REST API through the `pusher` server SDK, plus raw signed requests.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  record,
  subscribe,
  waitForBind,
  pusherJsErrorCode,
  restRequest,
  sdkError,
  useServer,
  stopServer,
  uniq,
  withDeadline,
  eventually,
  waitForState,
  WAIT_MS,
} from '../harness.mjs';

let server;
let sdk;

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
});

test('trigger to several channels at once reaches every channel', async () => {
  const names = [uniq('multi-a-'), uniq('multi-b-'), uniq('private-multi-c-')];
  const client = await connectClient(server);
  const recs = [];
  for (const n of names) recs.push(record(await subscribe(client, n), 'fan'));
  const res = await sdk.trigger(names, 'fan', { to: 'all' });
  assert.equal(res.status, 200);
  for (const r of recs) assert.deepEqual((await r.next()).data, { to: 'all' });
});

test('trigger with socket_id excludes that socket only', async () => {
  const name = uniq('excl-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  await sdk.trigger(name, 'not-for-a', 'x', { socket_id: a.socketId });
  await b.waitFor('not-for-a', { channel: name });
  await sdk.trigger(name, 'marker', 'm');
  await a.waitFor('marker', { channel: name });
  assert.ok(!a.seen('not-for-a'), 'the excluded socket received the event');
});

test('trigger with info=subscription_count returns the channel counts', async () => {
  const name = uniq('info-sc-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  const res = await sdk.trigger(name, 'ev', 'x', { info: 'subscription_count' });
  const body = await res.json();
  assert.deepEqual(body, { channels: { [name]: { subscription_count: 2 } } });
});

test('trigger on a presence channel with info=user_count,subscription_count counts users once', async () => {
  const name = uniq('presence-info-');
  const a1 = await RawClient.connect(server);
  const a2 = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a1.subscribeOk(name, { channelData: { user_id: 'a', user_info: {} } });
  await a2.subscribeOk(name, { channelData: { user_id: 'a', user_info: {} } });
  await b.subscribeOk(name, { channelData: { user_id: 'b', user_info: {} } });
  const res = await sdk.trigger(name, 'ev', 'x', { info: 'user_count,subscription_count' });
  const body = await res.json();
  assert.deepEqual(body, { channels: { [name]: { user_count: 2, subscription_count: 3 } } });
});

test('triggerBatch of 10 events delivers all of them', async () => {
  const client = await connectClient(server);
  const names = Array.from({ length: 5 }, () => uniq('batch-'));
  const recs = [];
  for (const n of names) recs.push(record(await subscribe(client, n), 'b'));
  const batch = [];
  for (let i = 0; i < 10; i++) {
    batch.push({ channel: names[i % 5], name: 'b', data: i % 2 ? { i } : `s${i}` });
  }
  const res = await sdk.triggerBatch(batch);
  assert.equal(res.status, 200);
  for (let c = 0; c < 5; c++) {
    const first = await recs[c].next();
    const second = await recs[c].next();
    const want = [c, c + 5].map((i) => (i % 2 ? { i } : `s${i}`));
    assert.deepEqual([first.data, second.data], want);
  }
});

test('triggerBatch of 11 events is refused with 400 and delivers nothing', async () => {
  const name = uniq('batch11-');
  const raw = await RawClient.connect(server);
  await raw.subscribeOk(name);
  const batch = Array.from({ length: 11 }, (_, i) => ({ channel: name, name: 'b', data: String(i) }));
  const err = await sdkError(() => sdk.triggerBatch(batch));
  assert.equal(err.status, 400, `status ${err.status} body ${err.body}`);
  await sdk.trigger(name, 'marker', 'm');
  await raw.waitFor('marker', { channel: name });
  assert.ok(!raw.seen('b'), 'part of a refused batch was delivered');
});

test('event data over 10 KB is refused with 413; exactly 10 KB is accepted', async () => {
  const name = uniq('big-');
  const raw = await RawClient.connect(server);
  await raw.subscribeOk(name);
  const err = await sdkError(() => sdk.trigger(name, 'too-big', 'x'.repeat(10 * 1024 + 1)));
  assert.equal(err.status, 413, `status ${err.status} body ${err.body}`);
  const res = await sdk.trigger(name, 'just-fits', 'y'.repeat(10 * 1024));
  assert.equal(res.status, 200);
  const m = await raw.waitFor('just-fits', { channel: name });
  assert.equal(m.rawData.length, 10 * 1024);
  assert.ok(!raw.seen('too-big'));
});

test('a request signed with the wrong secret gets 401', async () => {
  const bad = server.sdk({ ...APP1, secret: 'wrong-secret' });
  const err = await sdkError(() => bad.trigger(uniq('x-'), 'ev', 'x'));
  assert.equal(err.status, 401, `status ${err.status} body ${err.body}`);
  const err2 = await sdkError(() => bad.get({ path: '/channels' }));
  assert.equal(err2.status, 401);
});

test('an unknown app id gets 404', async () => {
  const ghost = server.sdk({ ...APP1, id: 'no-such-app' });
  const err = await sdkError(() => ghost.trigger(uniq('x-'), 'ev', 'x'));
  assert.equal(err.status, 404, `status ${err.status} body ${err.body}`);
});

test('GET /channels lists occupied channels, filter_by_prefix works, user_count for presence-', async () => {
  const tag = uniq('');
  const pub = `list-${tag}`;
  const pres = `presence-list-${tag}`;
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(pub);
  await a.subscribeOk(pres, { channelData: { user_id: 'u1', user_info: {} } });
  await b.subscribeOk(pres, { channelData: { user_id: 'u2', user_info: {} } });

  const all = await (await sdk.get({ path: '/channels' })).json();
  assert.ok(all.channels[pub], `public channel listed: ${JSON.stringify(all)}`);
  assert.ok(all.channels[pres], 'presence channel listed');

  const filtered = await (await sdk.get({ path: '/channels', params: { filter_by_prefix: 'presence-list-' } })).json();
  assert.ok(filtered.channels[pres]);
  assert.equal(filtered.channels[pub], undefined, 'filtered out');

  const counted = await (
    await sdk.get({ path: '/channels', params: { filter_by_prefix: 'presence-', info: 'user_count' } })
  ).json();
  assert.deepEqual(counted.channels[pres], { user_count: 2 });
});

test('GET /channels omits a channel once its last subscriber leaves', async () => {
  const name = uniq('vacate-');
  const a = await RawClient.connect(server);
  await a.subscribeOk(name);
  const before = await (await sdk.get({ path: '/channels', params: { filter_by_prefix: name } })).json();
  assert.deepEqual(Object.keys(before.channels), [name]);
  a.unsubscribe(name);
  await eventually(
    async () => {
      const body = await (await sdk.get({ path: '/channels', params: { filter_by_prefix: name } })).json();
      return Object.keys(body.channels).length === 0;
    },
    WAIT_MS,
    `${name} gone from /channels`,
  );
});

test('GET /channels/{name} reports occupied and subscription_count', async () => {
  const name = uniq('one-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name);
  await b.subscribeOk(name);
  const body = await (await sdk.get({ path: `/channels/${name}`, params: { info: 'subscription_count' } })).json();
  assert.equal(body.occupied, true);
  assert.equal(body.subscription_count, 2);
  const empty = await (await sdk.get({ path: `/channels/${uniq('nobody-')}` })).json();
  assert.equal(empty.occupied, false);
});

test('GET /channels/{presence} reports user_count', async () => {
  const name = uniq('presence-one-');
  const a = await RawClient.connect(server);
  const a2 = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name, { channelData: { user_id: 'a', user_info: {} } });
  await a2.subscribeOk(name, { channelData: { user_id: 'a', user_info: {} } });
  await b.subscribeOk(name, { channelData: { user_id: 'b', user_info: {} } });
  const body = await (await sdk.get({ path: `/channels/${name}`, params: { info: 'user_count,subscription_count' } })).json();
  assert.equal(body.occupied, true);
  assert.equal(body.user_count, 2);
  assert.equal(body.subscription_count, 3);
});

test('GET /channels/{presence}/users lists the user ids', async () => {
  const name = uniq('presence-users-');
  const a = await RawClient.connect(server);
  const b = await RawClient.connect(server);
  await a.subscribeOk(name, { channelData: { user_id: 'ua', user_info: { big: 'x' } } });
  await b.subscribeOk(name, { channelData: { user_id: 'ub', user_info: {} } });
  const body = await (await sdk.get({ path: `/channels/${name}/users` })).json();
  assert.deepEqual(
    body.users.sort((x, y) => x.id.localeCompare(y.id)),
    [{ id: 'ua' }, { id: 'ub' }],
  );
});

test('GET /channels/{non-presence}/users is refused with 400', async () => {
  const err = await sdkError(() => sdk.get({ path: `/channels/${uniq('pub-users-')}/users` }));
  assert.equal(err.status, 400, `status ${err.status} body ${err.body}`);
  const err2 = await sdkError(() => sdk.get({ path: `/channels/${uniq('private-users-')}/users` }));
  assert.equal(err2.status, 400);
});

test('terminateUserConnections closes every socket of that user with 4009 and no one else\'s', async () => {
  const victim1 = await RawClient.connect(server);
  const victim2 = await RawClient.connect(server);
  const bystander = await RawClient.connect(server);
  await victim1.signinOk({ id: 'victim' });
  await victim2.signinOk({ id: 'victim' });
  await bystander.signinOk({ id: 'bystander' });
  const pjs = await connectClient(server, { user: { id: 'victim' } });
  const signed = waitForBind(pjs, 'pusher:signin_success');
  pjs.signin();
  await signed;
  const pjsError = waitForBind(pjs.connection, 'error', WAIT_MS, (e) => pusherJsErrorCode(e) !== undefined);

  const res = await sdk.terminateUserConnections('victim');
  assert.equal(res.status, 200);
  const c1 = await withDeadline(victim1.closed, WAIT_MS, 'victim socket 1 closed');
  const c2 = await withDeadline(victim2.closed, WAIT_MS, 'victim socket 2 closed');
  assert.equal(c1.code, 4009);
  assert.equal(c2.code, 4009);
  assert.equal(pusherJsErrorCode(await pjsError), 4009);
  // 4009 is in pusher-js's "refused" range: it does not reconnect.
  await waitForState(pjs, 'disconnected');
  await bystander.ping();
  assert.ok(bystander.isOpen);
});

test('sdk.post to /events with a hand-built body delivers the event', async () => {
  const name = uniq('post-');
  const raw = await RawClient.connect(server);
  await raw.subscribeOk(name);
  const res = await sdk.post({ path: '/events', body: { name: 'posted', channels: [name], data: '{"via":"post"}' } });
  assert.equal(res.status, 200);
  const m = await raw.waitFor('posted', { channel: name });
  assert.equal(m.rawData, '{"via":"post"}');
});

test('raw REST: a correctly signed request succeeds (checks the test\'s own signer)', async () => {
  const name = uniq('rawrest-');
  const res = await restRequest(server, { method: 'POST', path: '/events', body: { name: 'ev', channels: [name], data: '"x"' } });
  assert.equal(res.status, 200, res.text);
  const get = await restRequest(server, { method: 'GET', path: '/channels', params: { filter_by_prefix: 'rawrest-' } });
  assert.equal(get.status, 200, get.text);
});

test('raw REST: a wrong body_md5 is refused with 401', async () => {
  const res = await restRequest(server, {
    method: 'POST',
    path: '/events',
    body: { name: 'ev', channels: [uniq('md5-')], data: 'x' },
    bodyMd5: '0123456789abcdef0123456789abcdef',
  });
  assert.equal(res.status, 401, res.text);
});

test('raw REST: an auth_timestamp 700 s old is refused with 401', async () => {
  const res = await restRequest(server, {
    method: 'POST',
    path: '/events',
    body: { name: 'ev', channels: [uniq('old-')], data: 'x' },
    timestamp: Math.floor(Date.now() / 1000) - 700,
  });
  assert.equal(res.status, 401, res.text);
  const get = await restRequest(server, {
    method: 'GET',
    path: '/channels',
    timestamp: Math.floor(Date.now() / 1000) - 700,
  });
  assert.equal(get.status, 401, get.text);
});

test('trigger and triggerBatch with an idempotency_key, repeated, deliver each event once', async () => {
  const name = uniq('idem-');
  const a = await RawClient.connect(server);
  await a.subscribeOk(name);
  const key = uniq('order-');
  for (let i = 0; i < 3; i++) {
    const res = await sdk.trigger(name, 'paid', { n: 1 }, { idempotency_key: key });
    assert.equal(res.status, 200);
  }
  for (let i = 0; i < 2; i++) {
    const res = await sdk.triggerBatch([{ channel: name, name: 'shipped', data: { n: 2 }, idempotency_key: key + '-b' }]);
    assert.equal(res.status, 200);
  }
  await sdk.trigger(name, 'marker', 'm');
  await a.waitFor('marker', { channel: name });
  assert.equal(a.filter((m) => m.event === 'paid').length, 1, 'paid delivered more than once');
  assert.equal(a.filter((m) => m.event === 'shipped').length, 1, 'shipped delivered more than once');
  const err = await sdkError(() => sdk.trigger(name, 'paid', 'x', { idempotency_key: 'has space' }));
  assert.equal(err.status, 400);
  assert.match(err.body, /idempotency_key/);
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
