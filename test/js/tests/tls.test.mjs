// herald terminating TLS itself (tls.cert_file, tls.key_file): pusher-js with forceTLS: true
// connects over wss://, the pusher SDK with useTLS: true triggers over https://, private and
// presence channels authorise as over plain WebSockets, and the plain protocols are refused on
// the port. The CA is made for the run by run-tests.mjs (internal/tlstest/mkcerts) and
// trusted through NODE_EXTRA_CA_CERTS: no certificate check is turned off anywhere.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { APP1, connectClient, record, subscribe, useServer, uniq, withDeadline, WAIT_MS } from '../harness.mjs';

const dir = process.env.HERALD_TEST_TLS_DIR;
if (!dir) throw new Error('HERALD_TEST_TLS_DIR is unset: run this file through `npm test -- tests/tls.test.mjs`');

let server;
useServer((s) => (server = s), {
  config: { tls: { cert_file: path.join(dir, 'cert.pem'), key_file: path.join(dir, 'key.pem') } },
});

const tlsClient = (opts = {}) =>
  connectClient(server, {
    ...opts,
    // With forceTLS, pusher-js's 'ws' transport connects to wssPort over wss:// (its 'wss' is
    // the fallback tried when plain ws:// fails).
    options: { forceTLS: true, wssPort: server.port, enabledTransports: ['ws'], ...(opts.options || {}) },
  });

test('pusher-js with forceTLS: true connects over wss:// and receives what the SDK triggers with useTLS: true', async () => {
  assert.equal(server.wsUrl.slice(0, 6), 'wss://');
  const client = await tlsClient();
  assert.equal(client.connection.usingTLS, true, 'pusher-js is on wss://');
  const name = uniq('tls-');
  const got = record(await subscribe(client, name), 'greet');
  const sdk = server.sdk(APP1);
  const res = await sdk.trigger(name, 'greet', { over: 'tls' });
  assert.equal(res.status, 200);
  assert.deepEqual((await got.next()).data, { over: 'tls' });
  // Channel queries over https:// too.
  const info = await (await sdk.get({ path: `/channels/${name}`, params: { info: 'subscription_count' } })).json();
  assert.equal(info.subscription_count, 1);
});

test('private and presence channels authorise over wss:// as over ws://', async () => {
  const sdk = server.sdk(APP1);
  const member = (id) => () => ({ user_id: id, user_info: { name: id } });
  const a = await tlsClient({ presence: member('ann') });
  const b = await tlsClient({ presence: member('bob') });
  const room = uniq('presence-tls-');
  const chA = await subscribe(a, room);
  const joined = record(chA, 'pusher:member_added');
  const chB = await subscribe(b, room);
  assert.equal((await joined.next()).data.id, 'bob');
  assert.equal(chB.members.count, 2);
  const priv = uniq('private-tls-');
  const got = record(await subscribe(a, priv), 'secret');
  await sdk.trigger(priv, 'secret', { n: 1 });
  assert.deepEqual((await got.next()).data, { n: 1 });
});

test('the TLS port does not speak plain HTTP or ws://', async () => {
  const plain = `http://127.0.0.1:${server.port}/health`;
  let answered = null;
  try {
    const res = await fetch(plain, { signal: AbortSignal.timeout(WAIT_MS) });
    answered = res.status;
  } catch {}
  assert.notEqual(answered, 200, 'plain HTTP got an answer on the TLS port');
  const res = await withDeadline(fetch(`${server.httpUrl}/health`), WAIT_MS, 'https /health');
  assert.equal(res.status, 200);
  assert.equal((await res.json()).status, 'ok');
});
