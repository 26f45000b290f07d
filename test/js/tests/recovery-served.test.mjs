// The recovery helper as herald serves it (clients/js, embedded in the binary), loaded by a
// page of another origin in headless Chromium (Debian's) from herald's own URL, as
// docs/recovery.md shows: the plain script (/client/recovery.js, the global HeraldRecovery)
// and the ES module (/client/recovery.mjs, imported across origins: herald answers with CORS).
// In each page the app connects to herald, handles events of a history channel, disconnects,
// misses events, connects again and gets every event once, in order, with herald:recovered.
// A second load of the page revalidates the file with its ETag (304 from herald).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { APP1, REPO_ROOT, startServer, stopServer, uniq } from '../harness.mjs';
import { RECOVERY_APPS } from '../recovery.mjs';
import { launchChromium } from '../chromium.mjs';

const SCRIPT = '/client/recovery.js';
const MODULE = '/client/recovery.mjs';

// The app of both pages: what docs/recovery.md shows, with the helper given as `helper`.
const APP = `
window.startApp = ({ key, port, channel }) => {
  const t = (window.t = { got: [], recovered: [] });
  const pusher = new Pusher(key, { cluster: 'mt1', wsHost: '127.0.0.1', wsPort: port, forceTLS: false, enabledTransports: ['ws'], disableStats: true });
  window.pusher = helper.withRecovery(pusher);
  const ch = pusher.subscribe(channel);
  ch.bind('bid', (data) => t.got.push(data.n));
  ch.bind('herald:recovered', (r) => t.recovered.push({ handled: t.got.length, ...r }));
};
window.positionOf = (name) => helper.positionOf(window.pusher, name);
window.appReady = true;
`;

// A page without a bundler: pusher-js and the helper as plain scripts.
const scriptPage = (herald) => `<!doctype html>
<meta charset="utf-8">
<title>helper as a plain script</title>
<script src="/pusher.min.js"></script>
<script src="${herald}${SCRIPT}"></script>
<script>
const helper = HeraldRecovery;
${APP}
</script>
`;

// A page that imports the ES module from herald (another origin than the page's).
const modulePage = (herald) => `<!doctype html>
<meta charset="utf-8">
<title>helper as an ES module</title>
<script src="/pusher.min.js"></script>
<script type="module">
import * as helper from '${herald}${MODULE}';
${APP}
</script>
`;

let server;
let pages; // the page's own HTTP server: another origin than herald's
let page;

before(async () => {
  server = await startServer({ apps: RECOVERY_APPS });
  const pusherJs = readFileSync(path.join(REPO_ROOT, 'test', 'js', 'node_modules', 'pusher-js', 'dist', 'web', 'pusher.min.js'));
  pages = http.createServer((req, res) => {
    const p = new URL(req.url, 'http://x').pathname;
    const body = { '/script.html': scriptPage, '/module.html': modulePage }[p];
    if (body) res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(body(server.httpUrl));
    else if (p === '/pusher.min.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(pusherJs);
    else res.writeHead(404).end();
  });
  await new Promise((resolve) => pages.listen(0, '127.0.0.1', resolve));
  page = await launchChromium();
});

after(async () => {
  if (page) await page.close();
  if (pages) await new Promise((resolve) => pages.close(resolve));
  await stopServer(server);
});

const upTo = (n) => Array.from({ length: n }, (_, i) => i + 1);

test('docs/recovery.md shows the script tag and the import of the files herald serves', () => {
  const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'recovery.md'), 'utf8');
  assert.match(doc, new RegExp(`<script src="https://[^"]+${SCRIPT.replaceAll('.', '\\.')}"></script>`));
  assert.match(doc, /HeraldRecovery\.withRecovery\(/);
  assert.match(doc, new RegExp(`from 'https://[^']+${MODULE.replaceAll('.', '\\.')}'`));
});

for (const [kind, file] of [
  ['the plain script', 'script.html'],
  ['the ES module', 'module.html'],
]) {
  test(`${kind} from herald's own URL: a page of another origin recovers the events it missed`, async () => {
    // What the browser fetched from herald, and herald's answers (DevTools' Network domain).
    const fetched = [];
    const onMessage = (buf) => {
      const msg = JSON.parse(buf.toString());
      if (msg.method === 'Network.responseReceived' && msg.params.response.url.startsWith(server.httpUrl + '/client/')) {
        fetched.push({ url: msg.params.response.url, status: msg.params.response.status, headers: msg.params.response.headers });
      }
    };
    page.ws.on('message', onMessage);
    await page.send('Network.enable');
    try {
      const url = `http://127.0.0.1:${pages.address().port}/${file}`;
      await page.goto(url);
      await page.waitFor('window.appReady === true', `${file}: the page and the helper from herald`);
      assert.equal(await page.evaluate(`location.origin !== ${JSON.stringify(server.httpUrl)}`), true, 'the page is of another origin');
      assert.deepEqual(
        await page.evaluate(`performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.includes('/client/'))`),
        [server.httpUrl + (file === 'script.html' ? SCRIPT : MODULE)],
        'the page loaded the helper from herald',
      );

      const channel = uniq('auction-');
      await page.evaluate(`startApp(${JSON.stringify({ key: APP1.key, port: server.port, channel })})`);
      await page.waitFor(
        `pusher.connection.state === 'connected' && !!positionOf(${JSON.stringify(channel)})`,
        `the page connected and subscribed to ${channel}`,
      );
      const sdk = server.sdk(APP1);
      for (let n = 1; n <= 5; n++) await sdk.trigger(channel, 'bid', { n });
      await page.waitFor('t.got.length === 5', 'the five live events');
      await page.evaluate('pusher.disconnect()');
      await page.waitFor(`pusher.connection.state === 'disconnected'`, 'the page disconnected');
      for (let n = 6; n <= 15; n++) await sdk.trigger(channel, 'bid', { n });
      await page.evaluate('pusher.connect()');
      await page.waitFor('t.recovered.length === 1 && t.got.length >= 15', 'herald:recovered and the ten missed events');
      await sdk.trigger(channel, 'bid', { n: 16 });
      await page.waitFor('t.got.includes(16)', 'a live event after the recovery');
      const seen = await page.evaluate('({ got: t.got, recovered: t.recovered })');
      await page.evaluate('pusher.disconnect()');
      assert.deepEqual(seen.got, upTo(16), 'every event once, in order');
      assert.deepEqual(seen.recovered, [{ handled: 15, recovered: true }], 'one herald:recovered, after the ten replayed events');

      // herald's answers: 200 with an ETag and no-cache, CORS for the module; the page loaded
      // again revalidates the file it keeps (If-None-Match: 304).
      await page.goto(url + '?again');
      await page.waitFor('window.appReady === true', `${file} loaded again`);
      const served = file === 'script.html' ? SCRIPT : MODULE;
      const answers = fetched.filter((f) => new URL(f.url).pathname === served);
      assert.equal(answers.length, 2, `two loads of ${served}: ${JSON.stringify(answers.map((a) => a.status))}`);
      const [first, second] = answers;
      const header = (h, name) => Object.entries(h).find(([k]) => k.toLowerCase() === name)?.[1];
      assert.equal(first.status, 200);
      assert.equal(header(first.headers, 'cache-control'), 'no-cache');
      assert.match(header(first.headers, 'etag') ?? '', /^"[0-9a-f]{24}"$/);
      assert.equal(header(first.headers, 'access-control-allow-origin'), '*');
      assert.equal(second.status, 304, 'the second load revalidated the kept file');
    } finally {
      page.ws.off('message', onMessage);
      await page.send('Network.disable');
    }
  });
}
