// Recovery for an app kept in a real PostgreSQL (Soketi's apps table with herald's history
// column), with pusher-js and the helper of clients/js (withRecovery): the app is created
// while herald runs, through the console's apps API, with a history rule (written to the
// table's history column); its key connects at once, and a client behind a proxy that stalls
// and then refuses connections for 10 s while 50 events/s are published gets every event once
// and in order. No restart.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import { TcpProxy, cleanupAll, makeClient, startServer, stopAllProxies, stopServer, subscribe, uniq, waitForState } from '../harness.mjs';
import { recoverThrough, stallThenOutage, watchPusherChannel, withRecovery } from '../recovery.mjs';
import { Postgres } from '../postgres.mjs';

const TOKEN = 'recovery-appstore-token-' + process.pid;
const RULES = [{ channels: 'auction-*', size: 1000, ttl: '10m' }];

let pg;
let server;

before(async () => {
  pg = await new Postgres({ soketiTable: true, historyColumn: true }).start();
  server = await startServer({
    apps: null,
    config: { console: { token: TOKEN }, app_store: { postgres: { url: pg.url, install_trigger: true }, refresh: '1s' } },
  });
});
afterEach(() => cleanupAll());
after(async () => {
  cleanupAll();
  await stopAllProxies();
  await stopServer(server);
  if (pg) await pg.stop();
});

/** Creates an app through the console's apps API; returns {id, key, secret, history}. */
async function createApp(body) {
  const res = await fetch(`http://127.0.0.1:${server.config.metrics.port}/console/api/apps`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 201, `POST /console/api/apps: ${res.status} ${text}`);
  return JSON.parse(text);
}

test('an app created in PostgreSQL with a history rule: pusher-js behind a proxy that stalls, then refuses connections for 10 s, at 50 events/s, gets every event once, in order, and herald:recovered', async (t) => {
  const created = await createApp({ id: uniq('js-auctions-'), history: RULES });
  assert.deepEqual(created.history, RULES, 'the apps API answers the rule it wrote');
  const app = { id: created.id, key: created.key, secret: created.secret };

  const proxy = await new TcpProxy(server).start();
  const client = withRecovery(makeClient({ port: proxy.port, sdk: (a, extra) => server.sdk(a, extra) }, { app }));
  await waitForState(client, 'connected');
  const name = uniq('auction-');
  const ch = await subscribe(client, name);
  const sdk = server.sdk(app);
  await recoverThrough(t, {
    label: 'an app store app',
    pusher: client,
    watches: [watchPusherChannel(ch, 'bid')],
    sdks: [sdk],
    channels: name,
    event: 'bid',
    disrupt: stallThenOutage(proxy),
    sendMarker: () => sdk.trigger(name, 'bid', { n: 0 }),
  });
});
