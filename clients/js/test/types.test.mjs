// The typings compile against what the README shows (test/types-check.ts), under the module
// resolution of bundlers; and under Node's own (nodenext) with the structural PusherLike,
// since pusher-js's own typings do not resolve there.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

function tsc(...args) {
  const r = spawnSync(process.execPath, [TSC, '--noEmit', '--strict', '--skipLibCheck', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 0, `tsc ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
}

test('index.d.ts: the README usage type-checks (moduleResolution bundler)', () => {
  tsc('--module', 'esnext', '--moduleResolution', 'bundler', 'test/types-check.ts');
});

test('index.d.ts: resolves under moduleResolution nodenext', () => {
  tsc('--module', 'nodenext', '--moduleResolution', 'nodenext', 'test/types-nodenext.ts');
});
