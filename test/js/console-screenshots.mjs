// Takes the console screenshots of docs/operations.md: a two-node cluster (NATS) with pusher-js
// clients on public, private and presence channels, a publisher and client events, photographed
// by headless Chromium on node-0's console; the overview after two minutes of changing traffic
// (HERALD_CHART_SECONDS), for its charts. Not a test: `node console-screenshots.mjs ../../docs`.

import path from 'node:path';

import { APP1, WebSocket, cleanupAll, eventually, subscribe, WAIT_MS } from './harness.mjs';
import { Cluster } from './cluster.mjs';
import { launchChromium } from './chromium.mjs';

const out = path.resolve(process.argv[2] || '.');
const TOKEN = 'screenshot-token-0123456789';

const cluster = await new Cluster({ engine: 'nats', size: 2, config: { console: { token: TOKEN } } }).start();
const timers = [];
let page;
try {
  await cluster.waitBusConnected();
  const plan = [
    ['prices', 10],
    ['chat-lobby', 6],
    ['private-orders', 4],
    ['presence-room', 4],
  ];
  const clients = [];
  let user = 0;
  for (const [channel, n] of plan) {
    for (let i = 0; i < n; i++) {
      const id = `user-${++user}`;
      const { client } = await cluster.connectBalanced({ presence: () => ({ user_id: id, user_info: { name: id } }) });
      await subscribe(client, channel);
      clients.push({ client, channel });
    }
  }
  // One refused connection (an unknown key), for the refusals table.
  const bad = new WebSocket(`ws://127.0.0.1:${cluster.nodes[0].port}/app/no-such-key?protocol=7`);
  bad.on('error', () => {});

  const sdk = cluster.nodes[0].sdk(APP1);
  let tick = 0;
  timers.push(setInterval(() => {
    tick++;
    sdk.trigger('prices', 'quote', { symbol: 'HRLD', price: (100 + Math.sin(tick / 5) * 3).toFixed(2) }).catch(() => {});
    if (tick % 3 === 0) sdk.trigger('chat-lobby', 'message', { from: 'bot', text: `hello #${tick}` }).catch(() => {});
  }, 250));
  const orders = clients.filter((c) => c.channel === 'private-orders');
  timers.push(setInterval(() => {
    const c = orders[tick % orders.length];
    c.client.channel('private-orders').trigger('client-typing', { at: Date.now() });
  }, 700));

  page = await launchChromium({ width: 1280, height: 820 });
  const base = `http://127.0.0.1:${cluster.nodes[0].config.metrics.port}/console`;
  await page.goto(`${base}/login`);
  await page.waitFor(`!!document.getElementById('token')`, 'the login form');
  await page.evaluate(`document.getElementById('token').value = ${JSON.stringify(TOKEN)}; document.querySelector('form').submit()`);
  await page.waitFor(`location.pathname === '/console' && !!document.getElementById('app')`, 'the page after the login');
  await page.waitFor(
    `document.querySelectorAll('#nodes tr').length === 3 && document.querySelectorAll('#top tr[data-channel]').length === 4 && document.querySelector('[data-stat=out_per_s]').textContent !== '0'`,
    'both nodes, four channels and traffic on the overview',
  );
  // A connection that comes and goes, for the log.
  await page.evaluate(`document.querySelector('nav button[data-tab=debug]').click()`);
  const { client: late } = await cluster.connectBalanced();
  await subscribe(late, 'chat-lobby');
  late.disconnect();
  await eventually(
    () => page.evaluate(`document.querySelectorAll('#logrows tr[data-kind=client_event]').length >= 2 && !!document.querySelector('#logrows tr[data-kind=connection_closed]')`),
    WAIT_MS,
    'client events and a closed connection in the log',
  );
  await page.screenshot(path.join(out, 'console-debug.png'));
  await page.evaluate(`document.querySelector('nav button[data-tab=overview]').click()`);
  // Two minutes of changing traffic for the charts: clients come and go on both nodes, the
  // publish rate steps up and down, and now and then a burst of unknown keys is refused.
  const extra = [];
  const chartMs = Number(process.env.HERALD_CHART_SECONDS || 120) * 1000;
  const until = Date.now() + chartMs;
  for (let step = 0; Date.now() < until; step++) {
    if (step % 6 < 3) {
      for (let i = 0; i < 4; i++) {
        const { client } = await cluster.connectBalanced();
        await subscribe(client, 'prices');
        extra.push(client);
      }
    } else {
      for (let i = 0; i < 3 && extra.length; i++) extra.shift().disconnect();
    }
    if (step % 5 === 4) {
      for (let i = 0; i < 5; i++) {
        const ws = new WebSocket(`ws://127.0.0.1:${cluster.nodes[i % 2].port}/app/no-such-key?protocol=7`);
        ws.on('error', () => {});
      }
    }
    if (step % 4 === 0) for (let i = 0; i < 20; i++) sdk.trigger('chat-lobby', 'message', { from: 'burst', n: i }).catch(() => {});
    await new Promise((r) => setTimeout(r, 5000)); // the pace of the traffic drawn, not a wait for a result
  }
  for (const c of extra) c.disconnect();
  // The clients' connections settled: no new ones in the last second.
  await page.waitFor(`document.querySelector('[data-stat=new_per_s]').textContent === '0'`, 'new connections/s back to 0');
  await page.screenshot(path.join(out, 'console-overview.png'));
  console.log(`wrote ${path.join(out, 'console-overview.png')} and console-debug.png`);
} finally {
  for (const t of timers) clearInterval(t);
  if (page) await page.close();
  cleanupAll();
  await cluster.stop();
}
