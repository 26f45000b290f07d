// Laravel Echo 2 (laravel-echo, the `pusher` broadcaster over pusher-js) against herald, as a
// Laravel app runs it: Echo authorizes private and presence channels at an HTTP endpoint that
// answers as Laravel's /broadcasting/auth does (here a small Node server signing with the
// pusher SDK's authorizeChannel), and the app broadcasts through the Pusher REST API (here the
// pusher Node SDK, which speaks the same API as Laravel's pusher-php-server). Event names
// follow Laravel's: the event class's name, App\Events\... unless broadcastAs says otherwise.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import Echo from 'laravel-echo';

import { APP1, Pusher, WAIT_MS, record, useServer, uniq, withDeadline } from '../harness.mjs';

let server;
let sdk;
let auth; // the authorizer: {url, requests}
const echos = new Set();

useServer((s) => {
  server = s;
  sdk = s.sdk(APP1);
});

// The authorizer, as Laravel's /broadcasting/auth: a form-encoded POST of socket_id and
// channel_name; the user comes from the request (a session in Laravel, a header here); presence
// channels get channel_data {user_id, user_info}. A user named "intruder" is refused with 403.
before(async () => {
  const requests = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const socketId = form.get('socket_id');
      const channel = form.get('channel_name');
      const user = req.headers['x-user'];
      requests.push({ path: req.url, channel, user });
      if (req.method !== 'POST' || req.url !== '/broadcasting/auth' || !user || user === 'intruder') {
        res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"Forbidden"}');
        return;
      }
      const presence = channel.startsWith('presence-') ? { user_id: user, user_info: { id: user, name: `User ${user}` } } : undefined;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(sdk.authorizeChannel(socketId, channel, presence)));
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  auth = { url: `http://127.0.0.1:${srv.address().port}`, requests, srv };
});

afterEach(() => {
  for (const e of echos) e.disconnect();
  echos.clear();
});

after(async () => {
  await new Promise((resolve) => auth.srv.close(resolve));
});

/** An Echo client as docs/laravel.md configures it, signed in to the authorizer as user. */
async function echoFor(user) {
  const echo = new Echo({
    broadcaster: 'pusher',
    Pusher,
    key: APP1.key,
    cluster: 'mt1',
    wsHost: '127.0.0.1',
    wsPort: server.port,
    wssPort: server.port,
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    disableStats: true,
    authEndpoint: `${auth.url}/broadcasting/auth`,
    auth: { headers: { 'X-User': user } },
  });
  echos.add(echo);
  const pusher = echo.connector.pusher;
  if (pusher.connection.state !== 'connected') {
    await withDeadline(
      new Promise((resolve) => pusher.connection.bind('connected', resolve)),
      WAIT_MS,
      'Echo to connect',
    );
  }
  return echo;
}

/** Resolves with the first call of an Echo callback registration (listen, here, ...). */
function once(register) {
  return withDeadline(new Promise((resolve) => register(resolve)), WAIT_MS, 'an Echo callback');
}

/** Resolves once Echo's channel is subscribed (pusher:subscription_succeeded). */
function subscribed(channel) {
  return once((cb) => channel.subscribed(cb));
}

test('Echo public channel: .listen gets a broadcast event by its class name, and by broadcastAs', async () => {
  const echo = await echoFor('1');
  const name = uniq('orders.');
  const ch = echo.channel(name);
  await subscribed(ch);
  const shipped = once((cb) => ch.listen('OrderShipped', cb));
  const custom = once((cb) => ch.listen('.order.custom', cb));
  await sdk.trigger(name, 'App\\Events\\OrderShipped', { order: { id: 7 } });
  await sdk.trigger(name, 'order.custom', { n: 1 });
  assert.deepEqual(await shipped, { order: { id: 7 } });
  assert.deepEqual(await custom, { n: 1 });
});

test('Echo private channel: authorized at /broadcasting/auth, then .listen; a refused user gets an error', async () => {
  const echo = await echoFor('2');
  const name = uniq('user.');
  const ch = echo.private(name);
  await subscribed(ch);
  assert.ok(auth.requests.some((r) => r.channel === `private-${name}` && r.user === '2'), 'no auth request');
  const got = once((cb) => ch.listen('InvoicePaid', cb));
  await sdk.trigger(`private-${name}`, 'App\\Events\\InvoicePaid', { amount: 12 });
  assert.deepEqual(await got, { amount: 12 });

  const intruder = await echoFor('intruder');
  const err = await once((cb) => intruder.private(name).error(cb));
  assert.equal(err.status, 403);
});

test('Echo presence channel: here lists the members, joining and leaving follow them', async () => {
  const name = uniq('chat.');
  const first = await echoFor('10');
  const room = first.join(name);
  const here = await once((cb) => room.here(cb));
  assert.deepEqual(here, [{ id: '10', name: 'User 10' }]);
  const joining = record({ bind: (_, cb) => room.joining(cb) }, 'joining');
  const leaving = record({ bind: (_, cb) => room.leaving(cb) }, 'leaving');

  const second = await echoFor('11');
  const here2 = await once((cb) => second.join(name).here(cb));
  assert.deepEqual(
    here2.map((m) => m.id).sort(),
    ['10', '11'],
    `second member's here: ${JSON.stringify(here2)}`,
  );
  assert.deepEqual((await joining.next()).data, { id: '11', name: 'User 11' });

  second.leave(name);
  assert.deepEqual((await leaving.next()).data, { id: '11', name: 'User 11' });
});
