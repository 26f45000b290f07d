// The drain a load balancer sees: on SIGTERM herald answers /ready 503 ("draining") at once
// while it keeps serving pusher-js clients and accepting new ones for shutdown.drain_delay;
// a second SIGTERM ends the delay, and every client gets 4200.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';

import {
  APP1,
  RawClient,
  connectClient,
  disconnectClient,
  eventually,
  record,
  subscribe,
  startServer,
  stopServer,
  cleanupAll,
  uniq,
  withDeadline,
  WAIT_MS,
} from '../harness.mjs';

let server;

after(async () => {
  cleanupAll();
  await stopServer(server); // throws unless it exited 0
});

test('SIGTERM: /ready 503 while clients are served and new ones connect; a second SIGTERM: 4200 to all', async () => {
  // A delay far longer than the test: only the second signal can end it.
  server = await startServer({ config: { shutdown: { drain_delay: '1h' } } });
  const sdk = server.sdk(APP1);
  const name = uniq('drain-');
  const before = await connectClient(server);
  const beforeCh = await subscribe(before, name);
  const rawBefore = await RawClient.connect(server);
  await rawBefore.subscribeOk(name);

  server.proc.kill('SIGTERM');
  let last;
  await eventually(
    async () => {
      const res = await fetch(`${server.httpUrl}/ready`, { signal: AbortSignal.timeout(WAIT_MS) });
      last = `${res.status} ${(await res.text()).trim()}`;
      return last === '503 {"ready":false,"status":"draining"}';
    },
    WAIT_MS,
    () => `/ready 503 draining (last: ${last})`,
  );
  assert.equal((await server.health()).body.status, 'draining');

  // The node still serves and accepts: pusher-js and raw clients connect and subscribe, and a
  // publish reaches those connected before the signal and after.
  const during = await connectClient(server);
  const duringCh = await subscribe(during, name);
  const rawDuring = await RawClient.connect(server);
  await rawDuring.subscribeOk(name);
  const got = [record(beforeCh, 'still-serving'), record(duringCh, 'still-serving')];
  const res = await sdk.trigger(name, 'still-serving', { n: 1 });
  assert.equal(res.status, 200);
  for (const r of got) assert.deepEqual((await r.next()).data, { n: 1 });
  for (const raw of [rawBefore, rawDuring]) await raw.waitFor('still-serving', { channel: name });

  // The 4200s are checked on the raw clients: pusher-js reconnects on 4200 at once, and a
  // pusher-js client whose retry meets a node that is gone may go on retrying after it is
  // disconnected (test/js/README.md); reconnect.test.mjs checks pusher-js's 4200.
  disconnectClient(before);
  disconnectClient(during);
  server.proc.kill('SIGTERM');
  for (const raw of [rawBefore, rawDuring]) {
    const close = await withDeadline(raw.closed, WAIT_MS, 'close after the second SIGTERM');
    assert.equal(close.code, 4200, JSON.stringify(close));
  }
  const exit = await withDeadline(server.exited, WAIT_MS, 'herald to exit after the second SIGTERM');
  assert.equal(exit.code, 0, server.output.slice(-3000));
  assert.match(server.output, /second signal: ending the drain delay/);
});
