// The console's Apps page and charts in a real browser, on a herald whose apps live in a real
// PostgreSQL (Soketi's apps table): headless Chromium creates an app on the Apps page (the
// secret is shown once), a pusher-js client connects with the new key and shows on the
// overview's charts (connections, messages per second), and the page disables the app: the
// client gets 4003. The charts draw the last 15 minutes from the node's ring.
//
// HERALD_CONSOLE_SCREENSHOTS=dir saves the overview with its charts and the Apps page there.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { WAIT_MS, startServer, stopServer, connectClient, subscribe, waitForBind, cleanupAll, uniq } from '../harness.mjs';
import { launchChromium } from '../chromium.mjs';
import { Postgres } from '../postgres.mjs';

const TOKEN = 'console-apps-token-' + process.pid;
const shots = process.env.HERALD_CONSOLE_SCREENSHOTS;

let pg;
let server;
let page;

before(async () => {
  pg = await new Postgres({ soketiTable: true }).start();
  server = await startServer({
    apps: null,
    config: { console: { token: TOKEN }, app_store: { postgres: { url: pg.url, install_trigger: true }, refresh: '1s' } },
  });
  page = await launchChromium({ width: 1280, height: 900 });
});

after(async () => {
  cleanupAll();
  if (page) await page.close();
  await stopServer(server);
  if (pg) await pg.stop();
});

const consoleUrl = () => `http://127.0.0.1:${server.config.metrics.port}/console`;

test('the Apps page creates an app whose key connects at once, and disables it: its client gets 4003', async () => {
  // Logged in through the login form, as an operator is (a token in a URL opens nothing).
  await page.goto(consoleUrl());
  await page.waitFor(`location.pathname === '/console/login' && !!document.getElementById('token')`, 'the login form');
  await page.evaluate(`document.getElementById('token').value = ${JSON.stringify(TOKEN)}; document.querySelector('form').submit()`);
  await page.waitFor(`location.pathname === '/console' && !!document.getElementById('status')`, 'the page after the login');
  await page.waitFor(`document.getElementById('status').textContent === 'live'`, 'the stream open');
  await page.evaluate(`document.querySelector('nav button[data-tab=apps]').click()`);
  await page.waitFor(`document.body.dataset.appsWritable === 'yes' && document.getElementById('apps-note').textContent.startsWith('0 apps')`,
    'the Apps page listing no app, writable');

  await page.evaluate(`(() => {
    document.getElementById('app-id').value = 'js-shop';
    document.getElementById('app-client').checked = true;
    document.getElementById('app-submit').click();
  })()`);
  await page.waitFor(`document.getElementById('app-result').textContent.includes('secret')`, 'the created app with its secret');
  const result = await page.evaluate(`document.getElementById('app-result').textContent`);
  const key = result.match(/key\s+(\S+)/)[1];
  const secret = result.match(/secret\s+(\S+)/)[1];
  assert.match(key, /^[0-9a-f]{20}$/);
  assert.match(secret, /^[0-9a-f]{32}$/);
  await page.waitFor(`!!document.querySelector('#apps-list tr[data-app="js-shop"]')`, 'js-shop listed');
  assert.ok(!(await page.evaluate(`document.getElementById('apps-list').textContent`)).includes(secret), 'the list shows no secret');

  // The new app's key connects, subscribes and receives: it is on the overview's charts.
  const app = { id: 'js-shop', key, secret };
  const client = await connectClient(server, { app });
  const channel = uniq('apps-');
  const ch = await subscribe(client, channel);
  const sdk = server.sdk(app);
  const got = waitForBind(ch, 'hello', WAIT_MS);
  await sdk.trigger(channel, 'hello', { n: 1 });
  assert.deepEqual(await got, { n: 1 });
  const ticker = setInterval(() => sdk.trigger(channel, 'tick', { at: Date.now() }).catch(() => {}), 200);
  try {
    await page.evaluate(`document.querySelector('nav button[data-tab=overview]').click()`);
    await page.waitFor(
      `document.querySelector('[data-now=connections]').textContent === '1' && Number(document.getElementById('chart-connections').dataset.points) >= 3` +
        ` && Number(document.querySelector('[data-now=out_per_s]').textContent) > 0 && document.querySelectorAll('#chart-out_per_s polyline').length === 1`,
      'the charts drawing the connection and the messages out',
    );
    await page.waitFor(`!!document.querySelector('#top tr[data-channel="${channel}"]')`, `${channel} in the app's top channels`);
    const line = await page.evaluate(`document.querySelector('#chart-connections polyline').getAttribute('points').split(' ').length`);
    assert.ok(line >= 3, `the connections line has ${line} points`);
    if (shots) await page.screenshot(path.join(shots, 'console-charts.png'));
  } finally {
    clearInterval(ticker);
  }

  // Disabling it on the page closes its client with 4003.
  const closed = new Promise((resolve) => client.connection.bind('error', (e) => e && e.data && resolve(e.data.code)));
  await page.evaluate(`document.querySelector('nav button[data-tab=apps]').click()`);
  await page.waitFor(`!!document.querySelector('#apps-list tr[data-app="js-shop"] button[data-do=disable]')`, 'the disable button');
  await page.evaluate(`document.querySelector('#apps-list tr[data-app="js-shop"] button[data-do=disable]').click()`);
  assert.equal(await closed, 4003);
  await page.waitFor(`document.querySelector('#apps-list tr[data-app="js-shop"] .badge').textContent === 'disabled'`, 'js-shop shown disabled');

  // Rotating the secret shows the new one, once.
  await page.evaluate(`document.querySelector('#apps-list tr[data-app="js-shop"] button[data-do=rotate]').click()`);
  await page.waitFor(`document.getElementById('app-result').textContent.startsWith('new secret of js-shop')`, 'the rotated secret');
  const rotated = (await page.evaluate(`document.getElementById('app-result').textContent`)).match(/: (\S+)$/)[1];
  assert.notEqual(rotated, secret);
  if (shots) await page.screenshot(path.join(shots, 'console-apps.png'));
});
