// Shutdown and reconnect: SIGTERM closes clients with 4200 (reconnect now); pusher-js comes
// back by itself when a new server listens on the same port, and resubscribes.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  record,
  subscribe,
  waitForBind,
  waitForState,
  pusherJsErrorCode,
  startServer,
  stopServer,
  cleanupAll,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

let first;
let second;
let client;
let channel;
let privChannel;
let firstSocketId;
const name = uniq('reconnect-');
// pusher-js tries again after its fixed 15 s strategy timeout (see test/js/README.md); the wait
// for it allows three times that, for a busy machine.
const RECONNECT_MS = 45_000;
const privName = uniq('private-reconnect-');

before(async () => {
  first = await startServer();
});
after(async () => {
  cleanupAll();
  await stopServer(first); // SIGTERM if still running; throws unless it exited 0
  await stopServer(second); // SIGTERM if still running; throws unless it exited 0
});

test('SIGTERM: pusher-js and raw clients are closed with 4200 and the server exits 0', async () => {
  client = await connectClient(first);
  firstSocketId = client.connection.socket_id;
  channel = await subscribe(client, name);
  privChannel = await subscribe(client, privName);
  const raw = await RawClient.connect(first);
  await raw.subscribeOk(uniq('raw-'));
  const closeError = waitForBind(client.connection, 'error', WAIT_MS, (e) => pusherJsErrorCode(e) !== undefined);
  const leftConnected = waitForBind(client.connection, 'state_change', WAIT_MS, (s) => s.previous === 'connected');

  const info = await stopServer(first);
  assert.equal(info.code, 0);

  const rawClose = await withDeadline(raw.closed, WAIT_MS, 'raw close');
  assert.equal(rawClose.code, 4200, `close ${JSON.stringify(rawClose)}; received ${raw.describe()}; server output:\n${first.output}`);
  const err = await closeError;
  assert.equal(pusherJsErrorCode(err), 4200, JSON.stringify(err));
  const change = await leftConnected;
  assert.equal(change.current, 'connecting', '4200 means "reconnect now": pusher-js retries');
});

test('restart on the same port: pusher-js reconnects by itself, resubscribes and receives again', async () => {
  assert.ok(client, 'previous test set up the client');
  const resubscribed = waitForBind(channel, 'pusher:subscription_succeeded', RECONNECT_MS);
  const privResubscribed = waitForBind(privChannel, 'pusher:subscription_succeeded', RECONNECT_MS);
  second = await startServer({ port: first.port });
  await waitForState(client, 'connected', RECONNECT_MS);
  assert.notEqual(client.connection.socket_id, firstSocketId, 'a new socket id from the new server');
  await resubscribed;
  await privResubscribed;
  const sdk = second.sdk(APP1);
  const ev = record(channel, 'after-restart');
  const pev = record(privChannel, 'after-restart');
  await sdk.trigger([name, privName], 'after-restart', { back: true });
  assert.deepEqual((await ev.next()).data, { back: true });
  assert.deepEqual((await pev.next()).data, { back: true });
});

test('shutdown: the restarted server also exits 0 on SIGTERM', async () => {
  cleanupAll();
  const info = await stopServer(second);
  assert.equal(info.code, 0);
});
