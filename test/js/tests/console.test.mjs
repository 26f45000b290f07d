// The console in a real browser: headless Chromium (Debian's) loads /console on the metrics
// listener, logs in with the token through the login form, a pusher-js client connects and subscribes, and the page shows the
// connection and the subscription (overview and debug log); the page's event creator sends an
// event, which reaches the pusher-js client and shows in the log as an API event.
//
// HERALD_CONSOLE_SCREENSHOTS=dir saves the overview and the debug console there as PNGs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import {
  APP1,
  APP2,
  WAIT_MS,
  startServer,
  stopServer,
  connectClient,
  subscribe,
  waitForBind,
  cleanupAll,
  uniq,
} from '../harness.mjs';
import { launchChromium } from '../chromium.mjs';

const TOKEN = 'console-test-token-' + process.pid;
const shots = process.env.HERALD_CONSOLE_SCREENSHOTS;

let server;
let page;

before(async () => {
  server = await startServer({ config: { console: { token: TOKEN } } });
  page = await launchChromium({ width: 1280, height: 860 });
});

after(async () => {
  cleanupAll();
  if (page) await page.close();
  await stopServer(server);
});

const consoleUrl = () => `http://127.0.0.1:${server.config.metrics.port}/console`;

test('the console refuses a request without the token, and the login form makes a session', async () => {
  const bare = await fetch(consoleUrl());
  assert.equal(bare.status, 401);
  // A token in the URL opens nothing: it would stay in the browser's history.
  const inUrl = await fetch(`${consoleUrl()}?token=${encodeURIComponent(TOKEN)}`, { redirect: 'manual' });
  assert.equal(inUrl.status, 401);
  assert.equal(inUrl.headers.get('set-cookie'), null);
  const tool = await fetch(`${consoleUrl()}/stream`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(tool.status, 200);
  assert.equal(tool.headers.get('content-type'), 'text/event-stream');
  await tool.body.cancel();

  // The browser is sent to the login form; a wrong token gets it back with an error.
  await page.goto(consoleUrl());
  await page.waitFor(`location.pathname === '/console/login' && !!document.getElementById('token')`, 'the login form');
  await page.evaluate(`document.getElementById('token').value = 'not-the-token'; document.querySelector('form').submit()`);
  await page.waitFor(`!!document.getElementById('login-error')`, 'the login form again, with its error');
  // The right token: the page, and no token in any URL the browser visited.
  await page.evaluate(`document.getElementById('token').value = ${JSON.stringify(TOKEN)}; document.querySelector('form').submit()`);
  await page.waitFor(`location.pathname === '/console' && !!document.getElementById('app')`, 'the page after the login');
  const { entries } = await page.send('Page.getNavigationHistory');
  for (const e of entries) assert.ok(!e.url.includes(TOKEN), `the token in the history: ${e.url}`);
  // The session cookie is HttpOnly: the page's own script cannot read it.
  assert.equal(await page.evaluate('document.cookie'), '');
  await page.waitFor(`document.getElementById('app').value === '${APP1.id}'`, 'the first app chosen');
  await page.waitFor(`document.body.dataset.live === '${APP1.id}'`, `the stream of ${APP1.id}'s log open`);
  assert.equal(await page.evaluate(`document.getElementById('status').textContent`), 'live');
});

test('the page shows a pusher-js connection and subscription, and its event creator reaches the client', async () => {
  const channel = uniq('console-');
  const client = await connectClient(server);
  const socketId = client.connection.socket_id;
  const ch = await subscribe(client, channel);

  // Overview: the connection is counted and the channel is in the top list.
  await page.waitFor(
    `document.querySelector('[data-stat=connections]').textContent === '1' && !!document.querySelector('#top tr[data-channel="${channel}"]')`,
    `the overview showing 1 connection and ${channel} in the top channels`,
  );
  assert.match(await page.evaluate(`document.querySelector('#top tr[data-channel="${channel}"]').textContent`), /1$/);

  if (shots) await page.screenshot(path.join(shots, 'console-overview.png'));

  // Debug console: the connection (its socket id) and the subscription (its channel).
  await page.evaluate(`document.querySelector('nav button[data-tab=debug]').click()`);
  await page.waitFor(
    `!!document.querySelector('#logrows tr[data-kind=connection_opened][data-socket="${socketId}"]')`,
    `the log showing connection_opened for ${socketId}`,
  );
  await page.waitFor(
    `!!document.querySelector('#logrows tr[data-kind=subscribed][data-channel="${channel}"][data-socket="${socketId}"]')`,
    `the log showing ${socketId} subscribed to ${channel}`,
  );

  // The event creator: what the page sends reaches the pusher-js client.
  await page.evaluate(`document.querySelector('nav button[data-tab=creator]').click()`);
  const got = waitForBind(ch, 'from-console', WAIT_MS);
  await page.evaluate(`(() => {
    document.getElementById('ev-channel').value = ${JSON.stringify(channel)};
    document.getElementById('ev-name').value = 'from-console';
    document.getElementById('ev-data').value = '{"hello":"browser"}';
    document.getElementById('ev-send').click();
  })()`);
  await page.waitFor(`document.getElementById('ev-result').textContent === '200 sent'`, 'the creator reporting 200 sent');
  assert.deepEqual(await got, { hello: 'browser' });

  // ... and shows in the log as an API event.
  await page.evaluate(`document.querySelector('nav button[data-tab=debug]').click()`);
  await page.waitFor(
    `!!document.querySelector('#logrows tr[data-kind=api_event][data-channel="${channel}"]')`,
    `the log showing the api_event on ${channel}`,
  );
  // The filter hides what does not match.
  await page.evaluate(`(() => { const f = document.getElementById('filter'); f.value = 'from-console'; f.dispatchEvent(new Event('input')); })()`);
  await page.waitFor(
    `[...document.querySelectorAll('#logrows tr')].every((r) => r.dataset.kind === 'api_event') && document.querySelectorAll('#logrows tr').length >= 1`,
    'the filter leaving only the API event',
  );
  if (shots) {
    await page.evaluate(`(() => { const f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input')); })()`);
    await page.screenshot(path.join(shots, 'console-debug.png'));
  }
});

test('the event creator refuses what the REST API refuses, with its error', async () => {
  await page.evaluate(`document.querySelector('nav button[data-tab=creator]').click()`);
  await page.evaluate(`(() => {
    document.getElementById('ev-channel').value = 'not a channel';
    document.getElementById('ev-name').value = 'x';
    document.getElementById('ev-send').click();
  })()`);
  await page.waitFor(`document.getElementById('ev-result').textContent.startsWith('400 ')`, 'the creator reporting 400');
  assert.match(await page.evaluate(`document.getElementById('ev-result').textContent`), /invalid character ' '/);
  // Another app, chosen on the page, is the one published to.
  const client = await connectClient(server, { app: APP2 });
  const channel = uniq('console-app2-');
  const ch = await subscribe(client, channel);
  await page.evaluate(`(() => { const s = document.getElementById('app'); s.value = '${APP2.id}'; s.dispatchEvent(new Event('change')); })()`);
  await page.waitFor(`document.body.dataset.live === '${APP2.id}' && new URLSearchParams(location.search).get('app') === '${APP2.id}'`, 'app2 chosen and its stream open');
  const got = waitForBind(ch, 'to-app2', WAIT_MS);
  await page.evaluate(`(() => {
    document.getElementById('ev-channel').value = ${JSON.stringify(channel)};
    document.getElementById('ev-name').value = 'to-app2';
    document.getElementById('ev-data').value = 'plain';
    document.getElementById('ev-send').click();
  })()`);
  assert.equal(await got, 'plain');
});
