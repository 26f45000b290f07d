// TLS as the docs set it up on a development machine: the self-signed certificate made by the
// openssl command of docs/configuration.md ("A self-signed certificate for development"),
// herald serving it, and pusher-js and the pusher SDK with the README's TLS options, in a Node
// process that trusts the certificate as the docs say (NODE_EXTRA_CA_CERTS). Without that
// trust, pusher-js never connects and no error event names the certificate: it fails silently,
// as the docs warn.
//
// The clients run in child processes: Node reads NODE_EXTRA_CA_CERTS once, at start, and this
// process trusts only the run's CA.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

import { APP1, HeraldServer, REPO_ROOT, WAIT_MS, eventually, freePort, stopServer, uniq, withDeadline } from '../harness.mjs';

const dir = mkdtempSync(path.join(os.tmpdir(), 'herald-tls-docs-'));
const cert = path.join(dir, 'cert.pem');
let server;

/** The one ```lang block of page (a repository path) after heading that contains needle. */
function docBlock(page, heading, lang, needle) {
  const text = readFileSync(path.join(REPO_ROOT, page), 'utf8');
  const from = text.indexOf(heading);
  assert.ok(from >= 0, `${page} has no heading ${heading}`);
  const re = new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g');
  re.lastIndex = from;
  for (let m; (m = re.exec(text)); ) if (m[1].includes(needle)) return m[1];
  throw new Error(`${page}: no ${lang} block with ${needle} after ${heading}`);
}

/** The README's TLS options, for herald on 127.0.0.1:port: pusher-js's and the SDK's. */
function readmeOptions(port) {
  const block = docBlock('README.md', '## Pointing a Pusher app at herald', 'js', 'forceTLS: true');
  const local = block.replaceAll("'herald.example.com'", "'127.0.0.1'").replaceAll('6001', String(port));
  const literal = (re) => {
    const m = local.match(re);
    assert.ok(m, `the README's TLS snippet has no ${re}`);
    return Function(`"use strict"; return (${m[1]});`)();
  };
  return {
    key: local.match(/new Pusher\('([^']+)'/)[1],
    client: literal(/new Pusher\('[^']+', (\{[\s\S]*?\})\);/),
    sdk: literal(/new Pusher\((\{[\s\S]*?\})\);/),
  };
}

// The client: pusher-js with the options given subscribes to a channel; the SDK triggers an
// event on it once subscribed; prints {states, usingTLS, got, errors} when the event arrives,
// or when pusher-js gives up a connection attempt ('unavailable').
const CLIENT = `
const { createRequire } = require('node:module');
const req = createRequire(process.env.TEST_JS_DIR + '/package.json');
const Pusher = req('pusher-js');
const PusherServer = req('pusher');
const { key, client, sdk, channel } = JSON.parse(process.env.TEST_OPTIONS);
const out = { states: [], errors: [], got: null, usingTLS: null };
const done = () => { console.log(JSON.stringify(out)); pusher.disconnect(); process.exit(0); };
const pusher = new Pusher(key, client);
pusher.connection.bind('state_change', (s) => { out.states.push(s.current); if (s.current === 'unavailable') done(); });
pusher.connection.bind('error', (e) => out.errors.push(JSON.stringify(e)));
const ch = pusher.subscribe(channel);
ch.bind('pusher:subscription_succeeded', () => {
  out.usingTLS = pusher.connection.usingTLS;
  new PusherServer(sdk).trigger(channel, 'greet', { over: 'tls' }).catch((e) => { out.errors.push(String(e)); done(); });
});
ch.bind('greet', (data) => { out.got = data; done(); });
`;

/** Runs CLIENT with env (NODE_EXTRA_CA_CERTS as given, or none) and returns what it printed. */
async function runClient(opts, extraCA) {
  const env = { ...process.env, TEST_JS_DIR: path.join(REPO_ROOT, 'test', 'js'), TEST_OPTIONS: JSON.stringify(opts) };
  delete env.NODE_EXTRA_CA_CERTS; // the run's CA: not what the docs' clients have
  if (extraCA) env.NODE_EXTRA_CA_CERTS = extraCA;
  const child = spawn(process.execPath, ['-e', CLIENT], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  try {
    // pusher-js's unavailableTimeout is 10 s: the untrusted client prints by then.
    const code = await withDeadline(new Promise((resolve) => child.on('exit', resolve)), 2 * WAIT_MS, () => `the client (stdout ${stdout}, stderr ${stderr})`);
    assert.equal(code, 0, `the client exited ${code}: ${stderr}`);
  } finally {
    child.kill('SIGKILL');
  }
  return JSON.parse(stdout.trim().split('\n').pop());
}

before(async () => {
  // The documented command, as written, in a directory of its own.
  const command = docBlock('docs/configuration.md', '### A self-signed certificate for development', 'sh', 'openssl req');
  execFileSync('sh', ['-c', command], { cwd: dir, stdio: 'pipe' });
  const config = { tls: { cert_file: cert, key_file: path.join(dir, 'key.pem') }, metrics: { host: '127.0.0.1', port: await freePort() } };
  server = new HeraldServer({ port: await freePort(), config, apps: [APP1], dir });
  // /health over TLS with the certificate as its only CA: the test process does not trust it.
  server.waitHealthy = (ms) =>
    eventually(
      () =>
        new Promise((resolve) => {
          if (server.exitInfo) throw new Error(`herald exited: ${server.output}`);
          https
            .get(`https://127.0.0.1:${server.port}/health`, { ca: readFileSync(cert) }, (res) => {
              res.resume();
              resolve(res.statusCode === 200);
            })
            .on('error', () => resolve(false));
        }),
      ms,
      () => `herald's /health over TLS (output: ${server.output.slice(-2000)})`,
    );
  await server.start();
});

after(async () => {
  await stopServer(server);
  rmSync(dir, { recursive: true, force: true });
});

test("the docs' openssl command makes a certificate for localhost and 127.0.0.1", () => {
  const text = execFileSync('openssl', ['x509', '-in', cert, '-noout', '-ext', 'subjectAltName'], { encoding: 'utf8' });
  assert.match(text, /DNS:localhost/);
  assert.match(text, /IP Address:127\.0\.0\.1/);
});

test("pusher-js and the SDK with the README's TLS options, trusting the certificate with NODE_EXTRA_CA_CERTS, connect over TLS", async () => {
  const opts = readmeOptions(server.port);
  assert.equal(opts.client.forceTLS, true);
  assert.equal(opts.client.wssPort, server.port, 'the snippet sets wssPort');
  assert.equal(opts.sdk.useTLS, true);
  const out = await runClient({ ...opts, channel: uniq('tls-docs-') }, cert);
  assert.deepEqual(out.got, { over: 'tls' }, `the event over TLS: ${JSON.stringify(out)}`);
  assert.equal(out.usingTLS, true);
  assert.equal(out.states[out.states.length - 1], 'connected', JSON.stringify(out.states));
});

test('without the trust, pusher-js fails silently: it never connects, and no error names the certificate', async (t) => {
  const opts = readmeOptions(server.port);
  const out = await runClient({ ...opts, channel: uniq('tls-docs-') }, null);
  t.diagnostic(`untrusted: ${JSON.stringify(out)}`);
  assert.equal(out.got, null);
  assert.ok(!out.states.includes('connected'), JSON.stringify(out.states));
  assert.equal(out.states[out.states.length - 1], 'unavailable', JSON.stringify(out.states));
  for (const e of out.errors) assert.doesNotMatch(e, /cert|self.signed|TLS|SSL/i, 'an error event names the certificate');
});

test('without wssPort, forceTLS: true dials port 443, not herald: pusher-js never connects', async (t) => {
  const opts = readmeOptions(server.port);
  delete opts.client.wssPort;
  const out = await runClient({ ...opts, channel: uniq('tls-docs-') }, cert);
  t.diagnostic(`no wssPort: ${JSON.stringify(out)}`);
  assert.equal(out.got, null);
  assert.ok(!out.states.includes('connected'), JSON.stringify(out.states));
});
