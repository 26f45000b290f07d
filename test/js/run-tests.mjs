// `npm test`: builds herald once (unless HERALD_BIN is set), then runs every tests/*.test.mjs
// with Node's built-in test runner, one file at a time, each file with its own server(s).

import { spawnSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');

let tmp = null;
const env = { ...process.env };
if (!env.HERALD_BIN) {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'herald-js-bin-'));
  const bin = path.join(tmp, 'herald');
  const b = spawnSync('go', ['build', '-o', bin, './cmd/herald'], { cwd: ROOT, stdio: 'inherit' });
  if (b.status !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    console.error(`go build ./cmd/herald failed (status ${b.status})`);
    process.exit(1);
  }
  env.HERALD_BIN = bin;
}

// A CA made for this run and a certificate it signs for 127.0.0.1, for the tests that run herald
// with TLS (tls.test.mjs): every test process trusts the CA (NODE_EXTRA_CA_CERTS, read when
// Node starts), and finds the certificate's files in HERALD_TEST_TLS_DIR.
if (!env.HERALD_TEST_TLS_DIR) {
  tmp ??= mkdtempSync(path.join(os.tmpdir(), 'herald-js-bin-'));
  const dir = path.join(tmp, 'tls');
  mkdirSync(dir);
  const m = spawnSync('go', ['run', './internal/tlstest/mkcerts', dir], { cwd: ROOT, stdio: 'inherit' });
  if (m.status !== 0) {
    rmSync(tmp, { recursive: true, force: true });
    console.error(`go run ./internal/tlstest/mkcerts failed (status ${m.status})`);
    process.exit(1);
  }
  env.HERALD_TEST_TLS_DIR = dir;
  env.NODE_EXTRA_CA_CERTS = path.join(dir, 'ca.pem');
}

// The previous release's binary, for the rolling-upgrade files (upgrade.mjs): built once per
// machine into ~/.cache/herald-previous, here rather than inside a file's timeout.
if (!env.HERALD_PREVIOUS_BIN) {
  const { previousBinary } = await import('./upgrade.mjs');
  try {
    env.HERALD_PREVIOUS_BIN = previousBinary();
  } catch (e) {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
    console.error(e.message);
    process.exit(1);
  }
}

const args = process.argv.slice(2);
const files =
  args.length > 0
    ? args
    : readdirSync(path.join(HERE, 'tests'))
        .filter((f) => f.endsWith('.test.mjs'))
        .sort()
        .map((f) => path.join('tests', f));

const child = spawn(
  process.execPath,
  // A test's own waits (harness WAIT_MS, 20 s; 45 s for pusher-js's reconnect) end well before
  // this, so a failing test reports what it waited for rather than "test timed out".
  ['--test', '--test-concurrency=1', '--test-timeout=180000', ...files],
  { cwd: HERE, env, stdio: 'inherit' },
);
const forward = (sig) => () => child.kill(sig);
process.on('SIGINT', forward('SIGINT'));
process.on('SIGTERM', forward('SIGTERM'));
child.on('exit', (code, signal) => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
  process.exit(code ?? (signal ? 1 : 0));
});
