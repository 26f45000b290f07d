// Server-side liveness: with activity_timeout 2s and pong_timeout 4s the server pings a silent
// client and closes it with 4201 if it never answers.
//
// Timing on a busy machine: every wait has the generous WAIT_MS deadline; the lower bounds
// ("not too early") are measured from before the socket was opened, so a client that is slow to
// see its frames cannot make them fail; the pong timeout is twice the activity timeout so a
// client that answers late still answers in time.

import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  RawClient,
  connectClient,
  disconnectClient,
  record,
  startServer,
  stopServer,
  cleanupAll,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

const ACTIVITY_S = 2;
const PONG_S = 4;
// The server's timers run on a coarse clock (100 ms ticks, checked by a 1 s sweep) that a busy
// machine may run late, so "not too early" allows this much.
const CLOCK_SLACK_MS = 1000;

let server;

before(async () => {
  server = await startServer({
    config: { activity_timeout: `${ACTIVITY_S}s`, pong_timeout: `${PONG_S}s` },
  });
});
after(async () => {
  cleanupAll();
  await stopServer(server); // SIGTERM if still running; throws unless it exited 0
});

test(`handshake advertises the configured activity_timeout (${ACTIVITY_S})`, async () => {
  const raw = await RawClient.connect(server);
  assert.equal(raw.established.data.activity_timeout, ACTIVITY_S);
  raw.close();
});

// The three slow checks each wait for several activity periods; they use separate sockets, so
// they run concurrently to keep the file short. Each closes what it opened.
describe('server heartbeat', { concurrency: true }, () => {
  test('silent client: server sends pusher:ping, then closes with 4201 when no pong comes', async () => {
    // Before the socket exists: the server's clock for it cannot start earlier.
    const t0 = Date.now();
    const raw = await RawClient.connect(server);
    const ping = await raw.waitFor('pusher:ping');
    const tPing = Date.now();
    // A late client only makes tPing later.
    assert.ok(tPing - t0 >= ACTIVITY_S * 1000 - CLOCK_SLACK_MS, `ping came too early: after ${tPing - t0} ms`);
    assert.equal(ping.channel, undefined);
    const close = await withDeadline(raw.closed, WAIT_MS, 'close after unanswered ping');
    assert.equal(close.code, 4201, `close ${JSON.stringify(close)}; received ${raw.describe()}`);
    const tClose = Date.now();
    const least = (ACTIVITY_S + PONG_S) * 1000 - CLOCK_SLACK_MS;
    assert.ok(tClose - t0 >= least, `closed too early: ${tClose - t0} ms after connecting, want >= ${least}`);
    raw.close();
  });

  test('client that answers pusher:ping with pusher:pong stays open across several ping periods', async () => {
    const t0 = Date.now();
    const raw = await RawClient.connect(server);
    for (let i = 0; i < 3; i++) {
      await raw.waitFor('pusher:ping');
      raw.send({ event: 'pusher:pong', data: {} });
    }
    // Three ping periods (> activity + pong timeout) have passed and the socket is still served.
    const elapsed = Date.now() - t0;
    assert.ok(elapsed >= 3 * ACTIVITY_S * 1000 - CLOCK_SLACK_MS, `three ping periods took only ${elapsed} ms`);
    await raw.ping();
    assert.ok(raw.isOpen);
    assert.equal(raw.closeInfo, null);
    raw.close();
  });

  test('pusher-js keeps a connection alive on a 2 s activity timeout (same socket, no error)', async () => {
    const client = await connectClient(server);
    const socketId = client.connection.socket_id;
    const errors = record(client.connection, 'error');
    const states = record(client.connection, 'state_change');
    // Watch the heartbeat traffic pusher-js sees: it pings after 2 s of silence (min of its own
    // 120 s and the server's 2 s) and answers the server's pings.
    const beats = [];
    let resolveBeats;
    const enough = new Promise((r) => (resolveBeats = r));
    client.connection.bind('message', (m) => {
      if (m.event === 'pusher:pong' || m.event === 'pusher:ping') {
        beats.push(m.event);
        if (beats.length >= 3) resolveBeats();
      }
    });
    await withDeadline(enough, WAIT_MS, () => `three heartbeat messages (seen: ${beats.join(', ') || 'none'})`);
    assert.equal(client.connection.state, 'connected');
    assert.equal(client.connection.socket_id, socketId, 'no reconnect happened');
    assert.equal(errors.items.length, 0, `errors: ${JSON.stringify(errors.items)}`);
    assert.equal(states.items.length, 0, `state changes: ${JSON.stringify(states.items)}`);
    disconnectClient(client);
  });
});

test('shutdown: SIGTERM stops the server with exit status 0', async () => {
  const info = await stopServer(server);
  assert.equal(info.code, 0);
});
