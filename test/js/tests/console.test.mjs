// The console in a real browser: headless Chromium (Debian's) loads /console on the metrics
// listener, logs in with the token through the login form, a pusher-js client connects and subscribes, and the page shows the
// connection and the subscription (overview and debug log); the page's event creator sends an
// event, which reaches the pusher-js client and shows in the log as an API event.
//
// The overview's charts read at a glance from the first minute: an x axis that grows with the
// data, a few ticks with units on the y axis, a caption under each chart, refusals one every
// 3 s drawn as separate bars, "single node" in the header; checked in the page's layout (sizes,
// nothing overflowing) and on a screenshot of the charts.
//
// HERALD_CONSOLE_SCREENSHOTS=dir saves the overview, the debug console and the charts there as
// PNGs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
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
  WebSocket,
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

/** Opens a WebSocket with a key herald does not know and resolves once herald has closed it. */
function refusedConnection() {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${server.wsUrl}/app/no-such-key?protocol=7`);
    ws.on('close', resolve);
    ws.on('error', reject);
  });
}

test('the charts read at a glance from the first minute: a growing x axis, ticks with units, captions, refusals as bars', async () => {
  await page.evaluate(`document.querySelector('nav button[data-tab=overview]').click()`);
  const client = await connectClient(server);
  const channel = uniq('charts-');
  await subscribe(client, channel);
  const sdk = server.sdk(APP1);
  const ticker = setInterval(() => sdk.trigger(channel, 'tick', { at: Date.now() }).catch(() => {}), 100);
  try {
    // One refused connection every 3 s, four times (the pause is the scenario's pacing).
    for (let i = 0; i < 4; i++) {
      const next = Date.now() + 3000;
      await refusedConnection();
      if (i < 3) await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
    await page.waitFor(
      `document.querySelectorAll('#chart-refused_per_s rect.bar').length >= 4 && Number(document.getElementById('chart-connections').dataset.points) >= 9` +
        ` && Number(document.querySelector('[data-now=out_per_s]').textContent) > 0`,
      'four refusals drawn as bars, nine points and messages to clients on the charts',
    );
  } finally {
    clearInterval(ticker);
  }

  assert.equal(await page.evaluate(`document.getElementById('node').textContent`), 'single node');
  const charts = await page.evaluate(`(() => {
    const M = { left: 44, right: 8 };
    const inside = (r, box) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5 && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5;
    return [...document.querySelectorAll('.chart')].map((c) => {
      const svg = c.querySelector('svg');
      const box = svg.getBoundingClientRect();
      const pw = box.width - M.left - M.right;
      const xs = [...svg.querySelectorAll('polyline')].flatMap((p) => p.getAttribute('points').split(' ').map((xy) => Number(xy.split(',')[0])));
      const bars = [...svg.querySelectorAll('rect.bar')].map((r) => ({ x: Number(r.getAttribute('x')), w: Number(r.getAttribute('width')) }));
      return {
        id: svg.id,
        title: c.querySelector('h3').textContent,
        caption: c.querySelector('.caption') ? c.querySelector('.caption').textContent : '',
        width: box.width,
        height: box.height,
        span: Number(svg.dataset.span),
        yticks: [...svg.querySelectorAll('text.ytick')].map((t) => t.textContent),
        xticks: [...svg.querySelectorAll('text.xtick')].map((t) => t.textContent),
        // Labels that overlap one another.
        clash: (() => {
          const r = [...svg.querySelectorAll('text')].map((t) => [t.textContent, t.getBoundingClientRect()]);
          const out = [];
          for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) {
            const [a, b] = [r[i][1], r[j][1]];
            if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) out.push(r[i][0] + ' / ' + r[j][0]);
          }
          return out;
        })(),
        // Every mark and label within the chart, and the card's content within the card.
        overflow: [...svg.querySelectorAll('*')].filter((e) => !inside(e.getBoundingClientRect(), box)).map((e) => e.outerHTML.slice(0, 120)),
        cardOverflow: c.scrollWidth > c.clientWidth + 1 || c.querySelector('h3').scrollWidth > c.querySelector('h3').clientWidth + 1,
        lines: svg.querySelectorAll('polyline').length,
        // How much of the plot's width the lines cover (the x axis grows with the data).
        cover: xs.length ? (Math.max(...xs) - Math.min(...xs)) / pw : 0,
        bars,
        pw,
      };
    });
  })()`);
  const byId = Object.fromEntries(charts.map((c) => [c.id, c]));
  assert.deepEqual(Object.keys(byId), ['chart-connections', 'chart-in_per_s', 'chart-out_per_s', 'chart-refused_per_s']);
  for (const c of charts) {
    const what = `${c.id}: ${JSON.stringify(c)}`;
    assert.ok(c.width >= 250 && c.height >= 120, `${c.id} is ${c.width}×${c.height}: ${what}`);
    assert.deepEqual(c.overflow, [], `${c.id}: marks or labels outside the chart`);
    assert.equal(c.cardOverflow, false, `${c.id}: its card overflows`);
    assert.ok(c.caption.length >= 30, `${c.id}: a caption says what it counts: ${what}`);
    assert.ok(c.yticks.length >= 3 && c.yticks[0] === '0', `${c.id}: a few y ticks from 0: ${c.yticks}`);
    const unit = c.id === 'chart-connections' ? /^\d+(\.\d+)?k?$/ : /^\d+(\.\d+)?k?\/s$/;
    for (const t of c.yticks.slice(1)) assert.match(t, unit, `${c.id}: y tick ${t}`);
    assert.ok(c.xticks.length >= 3 && c.xticks.includes('now'), `${c.id}: x ticks up to now: ${c.xticks}`);
    assert.deepEqual(c.clash, [], `${c.id}: labels that overlap`);
    assert.ok(c.span <= 15 * 60 * 1000, what);
  }
  assert.match(byId['chart-in_per_s'].caption, /REST API/, 'the caption says REST publishes are not messages from clients');
  assert.match(byId['chart-in_per_s'].title, /from clients/);
  // The x axis grows with the data: the connections line covers a good part of the plot, not
  // its right edge (on a fixed 15-minute axis, a minute covers 7%).
  assert.ok(byId['chart-connections'].cover >= 0.25, `the connections line covers ${byId['chart-connections'].cover} of the plot (span ${byId['chart-connections'].span} ms)`);
  assert.ok(byId['chart-connections'].span <= 60_000 || byId['chart-connections'].cover >= 0.4, JSON.stringify(byId['chart-connections']));
  // Refusals are bars with gaps between them, not a line and not a solid block.
  const refused = byId['chart-refused_per_s'];
  assert.equal(refused.lines, 0, 'no line on the refusals chart');
  const bars = refused.bars.sort((a, b) => a.x - b.x);
  const extent = bars[bars.length - 1].x + bars[bars.length - 1].w - bars[0].x;
  const filled = bars.reduce((n, b) => n + b.w, 0);
  assert.ok(filled <= 0.6 * extent, `the refusal bars fill ${filled} of the ${extent} px they spread over: ${JSON.stringify(bars)}`);
  // Nothing wider than the window.
  assert.equal(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth'), true, 'the page scrolls sideways');

  // The screenshot of the charts: the section's size, in the viewport.
  const rect = await page.evaluate(`(() => { const r = document.getElementById('charts-section').getBoundingClientRect(); return { x: r.x, y: r.y, width: r.width, height: r.height }; })()`);
  assert.ok(rect.y + rect.height <= 860, `the charts fit in the window: ${JSON.stringify(rect)}`);
  const dir = shots || mkdtempSync(path.join(os.tmpdir(), 'herald-console-'));
  const file = path.join(dir, 'console-charts-first-minute.png');
  const { data } = await page.send('Page.captureScreenshot', { format: 'png', clip: { ...rect, scale: 1 } });
  const png = Buffer.from(data, 'base64');
  if (shots) await import('node:fs').then((fs) => fs.writeFileSync(file, png));
  else rmSync(dir, { recursive: true, force: true });
  assert.equal(png.subarray(1, 4).toString(), 'PNG');
  const [w, h] = [png.readUInt32BE(16), png.readUInt32BE(20)];
  assert.ok(Math.abs(w - Math.round(rect.width)) <= 1 && Math.abs(h - Math.round(rect.height)) <= 1, `the screenshot is ${w}×${h}, the section ${rect.width}×${rect.height}`);
  assert.ok(png.length > 10_000, `a screenshot of ${png.length} bytes: the charts are drawn`);
});
