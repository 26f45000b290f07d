// Recovery with Laravel Echo: withRecovery(echo.connector.pusher), `.listen` on a public channel
// and on a presence channel (`join(...).listen`), authorized at an HTTP endpoint answering as
// Laravel's /broadcasting/auth (as in laravel-echo.test.mjs). Echo connects through a proxy that
// stalls and then refuses connections for 10 s while 50 events/s are published to both
// channels: each channel's listener gets every event once, in order, and `.herald:recovered`.

import { test, before, after, afterEach } from 'node:test';
import http from 'node:http';

import Echo from 'laravel-echo';

import { APP1, Pusher, TcpProxy, WAIT_MS, stopAllProxies, uniq, useServer, withDeadline } from '../harness.mjs';
import { RECOVERY_APPS, recoverThrough, stallThenOutage, watchChannel, withRecovery } from '../recovery.mjs';

let server;
let sdk;
let authUrl;
let authServer;
const echos = new Set();

useServer(
  (s) => {
    server = s;
    sdk = s.sdk(APP1);
  },
  { apps: RECOVERY_APPS },
);

// Laravel's /broadcasting/auth: the user from a header, presence channel_data {user_id, user_info}.
before(async () => {
  authServer = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const channel = form.get('channel_name');
      const user = req.headers['x-user'];
      if (req.method !== 'POST' || req.url !== '/broadcasting/auth' || !user) {
        res.writeHead(403, { 'content-type': 'application/json' }).end('{"message":"Forbidden"}');
        return;
      }
      const presence = channel.startsWith('presence-') ? { user_id: user, user_info: { id: user, name: `User ${user}` } } : undefined;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(sdk.authorizeChannel(form.get('socket_id'), channel, presence)));
    });
  });
  await new Promise((resolve) => authServer.listen(0, '127.0.0.1', resolve));
  authUrl = `http://127.0.0.1:${authServer.address().port}/broadcasting/auth`;
});

// Echo is disconnected while the server is still up: a pusher-js client disconnected while
// it retries a server that has gone can keep its retry timers (and this process) alive.
afterEach(async () => {
  for (const e of echos) e.disconnect();
  echos.clear();
  await stopAllProxies();
});
after(async () => {
  await new Promise((resolve) => authServer.close(resolve));
});

/** Resolves with the first call of an Echo callback registration (subscribed, here, ...). */
function once(register) {
  return withDeadline(new Promise((resolve) => register(resolve)), WAIT_MS, 'an Echo callback');
}

test('Echo behind a proxy that stalls, then refuses connections for 10 s: .listen on a public and a presence channel gets every event once, in order', async (t) => {
  const proxy = await new TcpProxy(server).start();
  const echo = new Echo({
    broadcaster: 'pusher',
    Pusher,
    key: APP1.key,
    cluster: 'mt1',
    wsHost: '127.0.0.1',
    wsPort: proxy.port,
    wssPort: proxy.port,
    forceTLS: false,
    enabledTransports: ['ws', 'wss'],
    disableStats: true,
    authEndpoint: authUrl,
    auth: { headers: { 'X-User': '7' } },
  });
  echos.add(echo);
  // The one line an app adds.
  const pusher = withRecovery(echo.connector.pusher);

  const auction = uniq('auction-');
  const room = uniq('room-');
  const pub = echo.channel(auction);
  const presence = echo.join(room);
  const watches = [
    watchChannel(auction, {
      listen: (cb) => pub.listen('BidPlaced', cb),
      onRecovered: (cb) => pub.listen('.herald:recovered', cb),
    }),
    watchChannel(`presence-${room}`, {
      listen: (cb) => presence.listen('BidPlaced', cb),
      onRecovered: (cb) => presence.listen('.herald:recovered', cb),
    }),
  ];
  await once((cb) => pub.subscribed(cb));
  await once((cb) => presence.here(cb));

  const channels = [auction, `presence-${room}`];
  await recoverThrough(t, {
    label: 'Laravel Echo, one node',
    pusher,
    watches,
    sdks: [sdk],
    channels,
    event: 'App\\Events\\BidPlaced',
    disrupt: stallThenOutage(proxy),
    sendMarker: () => sdk.trigger(channels, 'App\\Events\\BidPlaced', { n: 0 }),
  });
});
