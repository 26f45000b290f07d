// Ingest: herald consumes a Redis stream itself (a real redis-server) and pusher-js clients
// receive what was produced, in stream order: in the template format (the channel named by a
// field of the entry) and in the pusher format (each entry a REST events body); a bad entry is
// skipped, counted by reason, and does not stop the stream.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';

import {
  APP1,
  connectClient,
  record,
  subscribe,
  startServer,
  stopServer,
  cleanupAll,
  expectMetrics,
  metricKey,
  uniq,
} from '../harness.mjs';
import { BusServer } from '../cluster.mjs';

let redis;
let server;

/** Sends one command to Redis over RESP and resolves with its first reply line. */
function redisCommand(port, ...args) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    sock.on('error', reject);
    sock.on('data', (d) => {
      reply += d.toString();
      if (reply.includes('\r\n')) {
        sock.destroy();
        if (reply.startsWith('-')) reject(new Error(`redis: ${reply.trim()}`));
        else resolve(reply.trim());
      }
    });
    sock.on('connect', () => {
      let cmd = `*${args.length}\r\n`;
      for (const a of args) cmd += `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`;
      sock.write(cmd);
    });
  });
}

before(async () => {
  redis = await new BusServer('redis').start();
  server = await startServer({
    config: {
      ingest: [
        {
          name: 'bids',
          app: APP1.id,
          redis: { url: redis.url, stream: 'bids', group: 'herald', start: 'earliest' },
          channel: 'auction-{value.item_id}',
          event: 'bid',
        },
        {
          name: 'raw',
          app: APP1.id,
          redis: { url: redis.url, stream: 'raw', group: 'herald', start: 'earliest' },
          format: 'pusher',
        },
      ],
    },
  });
});

afterEach(() => cleanupAll());

after(async () => {
  cleanupAll();
  if (server) await stopServer(server);
  if (redis) await redis.stop();
});

test('the detailed /health lists both sources up', async () => {
  const h = await server.detail();
  const byName = Object.fromEntries(h.body.ingest.map((s) => [s.name, s]));
  assert.equal(byName.bids.kind, 'redis_stream');
  assert.equal(byName.raw.kind, 'redis_stream');
  // A source reports up once its group is in place; poll briefly.
  for (let i = 0; i < 200 && (byName.bids.state !== 'up' || byName.raw.state !== 'up'); i++) {
    await new Promise((r) => setTimeout(r, 25)); // poll interval
    for (const s of (await server.detail()).body.ingest) byName[s.name] = s;
  }
  assert.equal(byName.bids.state, 'up', JSON.stringify(byName));
  assert.equal(byName.raw.state, 'up', JSON.stringify(byName));
});

test('stream entries reach pusher-js subscribers of the channel their field names, in order', async () => {
  const item = uniq('i');
  const client = await connectClient(server);
  const ch = await subscribe(client, `auction-${item}`);
  const got = record(ch, 'bid');
  for (let i = 0; i < 50; i++) await redisCommand(redis.port, 'XADD', 'bids', '*', 'item_id', item, 'amount', String(i));
  for (let i = 0; i < 50; i++) {
    const { data } = await got.next();
    // No "value" field: the value is the JSON object of the entry's fields.
    assert.deepEqual(data, { amount: String(i), item_id: item });
  }
});

test('pusher format: one entry, several channels; a bad entry is skipped and counted', async () => {
  const [a, b] = [uniq('pa-'), uniq('pb-')];
  const client = await connectClient(server);
  const ra = record(await subscribe(client, a), 'bid');
  const rb = record(await subscribe(client, b), 'bid');
  await redisCommand(redis.port, 'XADD', 'raw', '*', 'value', '{not json');
  await redisCommand(redis.port, 'XADD', 'raw', '*', 'value', JSON.stringify({ name: 'bid', channels: [a, b], data: { amount: 5 } }));
  await redisCommand(redis.port, 'XADD', 'raw', '*', 'value', JSON.stringify({ name: 'bid', channel: a, data: '{"amount":6}' }));
  assert.deepEqual((await ra.next()).data, { amount: 5 });
  assert.deepEqual((await rb.next()).data, { amount: 5 });
  assert.deepEqual((await ra.next()).data, { amount: 6 });
  await expectMetrics(server, {
    [metricKey('herald_ingest_bad_records_total', { reason: 'invalid_json', source: 'raw' })]: 1,
    [metricKey('herald_ingest_source_up', { source: 'raw' })]: 1,
  });
});
