// Ingest from Kafka: herald consumes topics of a real Kafka broker (kafka.mjs: the Go tests'
// broker, KRaft, from its jars) and pusher-js clients receive what a real Kafka client
// (kafkajs) produced:
//
//   - template format: records reach the channels their value names, with the event and data
//     their templates render from the value, key, header and partition, in the order of each
//     partition, on the consuming node and on another node of the cluster; records that are
//     not JSON or lack a field are skipped, counted by reason, and the partition goes on;
//   - pusher format: each record a REST events body (several channels, socket_id exclusion);
//     a record that is not JSON, one without a name (invalid_event) and one with both channel
//     and channels (invalid_body) are skipped and counted;
//   - at least once: the only consuming node killed with SIGKILL while records are produced
//     without pause, and started again: a subscriber on the other node gets every record
//     produced, each partition's first deliveries in produce order (duplicates allowed and
//     printed).
//
// Two nodes on a nats-server bus: node 0 carries the subscribers and the `trades` and `raw`
// sources; node 1 carries only the `ticks` source, and is the one killed.

import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import kafkajs from 'kafkajs';

import {
  APP1,
  WAIT_MS,
  connectClient,
  record,
  subscribe,
  startServer,
  stopServer,
  cleanupAll,
  eventually,
  expectMetrics,
  metricKey,
  withDeadline,
} from '../harness.mjs';
import { BusServer, CLUSTER_SECRET } from '../cluster.mjs';
import { KafkaBroker } from '../kafka.mjs';

const { Kafka, Partitioners, logLevel } = kafkajs;

let broker;
let kafka;
let producer;
let bus;
let nodes = [];
let skipReason = null;

const prefix = 'herald-js';

function nodeConfig(i, ingest) {
  return { cluster: { url: bus.url, node_id: `node-${i}`, prefix, secret: CLUSTER_SECRET }, ingest };
}

const kafkaSource = (topic, extra = {}) => ({
  brokers: [broker.addr],
  topics: [topic],
  group: `herald-${topic}`,
  start: 'earliest',
  ...extra,
});

const NODE0_INGEST = () => [
  {
    name: 'trades',
    app: APP1.id,
    kafka: kafkaSource('trades'),
    channel: '{value.symbol}.trade',
    event: '{header.kind}',
    data: '{{"seq":{value.seq},"key":"{key}","partition":{partition}}}',
  },
  { name: 'raw', app: APP1.id, kafka: kafkaSource('raw'), format: 'pusher' },
];

// The group forgets a killed member after session_timeout (6 s: the broker's minimum), and
// only then gives its partitions to the member the restarted node is.
const NODE1_INGEST = () => [
  {
    name: 'ticks',
    app: APP1.id,
    kafka: kafkaSource('ticks', { session_timeout: '6s' }),
    channel: '{topic}-{partition}',
    event: 'tick',
    data: '{value.seq}',
  },
];

before(async () => {
  broker = new KafkaBroker();
  try {
    await broker.start();
  } catch (e) {
    if (!e.noJava) throw e;
    skipReason = e.message; // "kafkabroker: java is not installed: apt-get install ..."
    return;
  }
  kafka = new Kafka({ clientId: 'herald-js-tests', brokers: [broker.addr], logLevel: logLevel.WARN });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      { topic: 'trades', numPartitions: 2 },
      { topic: 'raw', numPartitions: 1 },
      { topic: 'ticks', numPartitions: 2 },
    ],
  });
  await admin.disconnect();
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  bus = await new BusServer('nats').start();
  nodes[0] = await startServer({ config: nodeConfig(0, NODE0_INGEST()) });
  nodes[1] = await startServer({ config: nodeConfig(1, NODE1_INGEST()), dir: nodes[0].dir });
  for (const [n, names] of [[nodes[0], ['trades', 'raw']], [nodes[1], ['ticks']]]) await sourcesUp(n, names);
});

afterEach(() => cleanupAll());

after(async () => {
  cleanupAll();
  if (producer) await producer.disconnect();
  for (const n of nodes) if (n && !(n.killedByTest && n.exitInfo)) await stopServer(n);
  if (bus) await bus.stop();
  if (broker) await broker.stop();
});

function guard(t) {
  if (skipReason) t.skip(skipReason);
  return !skipReason;
}

/** Polls the detailed /health until every named source is listed with state 'up'. */
async function sourcesUp(node, names) {
  let last;
  await eventually(
    async () => {
      last = (await node.detail()).body.ingest;
      return names.every((name) => last?.some((s) => s.name === name && s.state === 'up'));
    },
    WAIT_MS,
    () => `sources ${names} up on ${node.httpUrl} (last detailed /health ingest: ${JSON.stringify(last)})`,
  );
}

/** Produces messages ({partition, key, value, headers}) to topic, acknowledged by the broker. */
function produce(topic, messages) {
  return producer.send({ topic, acks: -1, messages });
}

test('template format: each partition in order on its channel, on both nodes; bad records skipped', async (t) => {
  if (!guard(t)) return;
  const N = 30;
  const subs = [];
  for (const node of nodes) {
    const client = await connectClient(node);
    // Only event 'trade' is recorded: the name the {header.kind} template renders.
    for (const ch of ['BTC.trade', 'ETH.trade']) subs.push({ ch, node, rec: record(await subscribe(client, ch), 'trade') });
  }
  const symbols = ['BTC', 'ETH']; // partition i carries symbols[i]
  const trade = (p, seq) => ({
    partition: p,
    key: symbols[p],
    value: JSON.stringify({ symbol: symbols[p], seq }),
    headers: { kind: 'trade' },
  });
  for (let seq = 0; seq < N; seq += 5) {
    const messages = [];
    for (let i = seq; i < seq + 5; i++) messages.push(trade(0, i), trade(1, i));
    if (seq === 10) {
      // Among partition 0's records: not JSON, a record without seq, one without the header.
      messages.push(
        { partition: 0, value: '{not json', headers: { kind: 'trade' } },
        { partition: 0, value: JSON.stringify({ symbol: 'BTC' }), headers: { kind: 'trade' } },
        { partition: 0, value: JSON.stringify({ symbol: 'BTC', seq: -1 }) },
      );
    }
    await produce('trades', messages);
  }
  for (const { ch, node, rec } of subs) {
    const p = ch === 'BTC.trade' ? 0 : 1;
    const got = [];
    for (let i = 0; i < N; i++) got.push((await rec.next()).data);
    const want = Array.from({ length: N }, (_, seq) => ({ seq, key: symbols[p], partition: p }));
    assert.deepEqual(got, want, `${ch} on ${node.httpUrl}`);
  }
  await expectMetrics(nodes[0], {
    [metricKey('herald_ingest_bad_records_total', { reason: 'invalid_json', source: 'trades' })]: 1,
    [metricKey('herald_ingest_bad_records_total', { reason: 'missing_field', source: 'trades' })]: 2,
    [metricKey('herald_ingest_records_consumed_total', { source: 'trades' })]: 2 * N + 3,
    [metricKey('herald_ingest_events_published_total', { source: 'trades' })]: 2 * N,
  });
  // Every record is consumed: nothing else can still come to the channels.
  for (const { ch, rec } of subs) assert.equal(rec.items.length, N, `${ch}: ${JSON.stringify(rec.items.slice(N))}`);
});

test('pusher format: REST bodies with several channels and socket_id; bad bodies skipped', async (t) => {
  if (!guard(t)) return;
  const [a, b] = ['raw-a', 'raw-b'];
  const x = await connectClient(nodes[0]);
  const y = await connectClient(nodes[1]);
  const xa = record(await subscribe(x, a), 'bid');
  const xb = record(await subscribe(x, b), 'bid');
  const ya = record(await subscribe(y, a), 'bid');
  const bodies = [
    { name: 'bid', channels: [a, b], data: { amount: 5 } },
    '{not json',
    { channel: a, data: 'no name' },
    { name: 'bid', channel: a, channels: [b], data: 'both' },
    { name: 'bid', channel: a, data: '{"amount":6}', socket_id: x.connection.socket_id },
    { name: 'bid', channel: a, data: { amount: 7 } },
  ];
  await produce('raw', bodies.map((v) => ({ value: typeof v === 'string' ? v : JSON.stringify(v) })));
  const take = async (rec, n) => {
    const out = [];
    for (let i = 0; i < n; i++) out.push((await rec.next()).data);
    return out;
  };
  assert.deepEqual(await take(ya, 3), [{ amount: 5 }, { amount: 6 }, { amount: 7 }]);
  // x sent nothing, but its socket_id excludes it from amount 6, as in a REST publish.
  assert.deepEqual(await take(xa, 2), [{ amount: 5 }, { amount: 7 }]);
  assert.deepEqual(await take(xb, 1), [{ amount: 5 }]);
  await expectMetrics(nodes[0], {
    [metricKey('herald_ingest_bad_records_total', { reason: 'invalid_json', source: 'raw' })]: 1,
    [metricKey('herald_ingest_bad_records_total', { reason: 'invalid_event', source: 'raw' })]: 1,
    [metricKey('herald_ingest_bad_records_total', { reason: 'invalid_body', source: 'raw' })]: 1,
    [metricKey('herald_ingest_records_consumed_total', { source: 'raw' })]: 6,
  });
  assert.deepEqual([xa.items.length, xb.items.length, ya.items.length], [2, 1, 3]);
});

test('kill -9 of the consuming node mid-stream: every record delivered at least once, in order', async (t) => {
  if (!guard(t)) return;
  const client = await connectClient(nodes[0]);
  const recs = [record(await subscribe(client, 'ticks-0'), 'tick'), record(await subscribe(client, 'ticks-1'), 'tick')];
  const seen = (p) => recs[p].items.map((x) => x.data);
  const maxSeen = (p) => Math.max(-1, ...seen(p));

  // The producer: 5 records per partition at a time, acknowledged, without pause (a 10 ms
  // pacing timer between batches), until told to stop.
  let next = 0; // the next seq, the same on both partitions
  let stopping = false;
  let produceError = null;
  const producing = (async () => {
    while (!stopping) {
      const messages = [];
      for (let i = 0; i < 5; i++) for (const p of [0, 1]) messages.push({ partition: p, value: JSON.stringify({ seq: next + i }) });
      await produce('ticks', messages);
      next += 5;
      await new Promise((r) => setTimeout(r, 10)); // pacing the producer, not a wait
    }
  })().catch((e) => {
    produceError = e;
  });
  const ok = () => {
    if (produceError) throw produceError;
  };
  const waitSeen = (seq, what) =>
    eventually(
      () => (ok(), maxSeen(0) >= seq && maxSeen(1) >= seq),
      WAIT_MS * 2,
      () => `${what}: seq ${seq} on ticks-0 and ticks-1 (highest seen: ${maxSeen(0)}, ${maxSeen(1)}; produced up to ${next - 1})`,
    );

  let killedAt;
  let restartedAt;
  try {
    await waitSeen(100, 'the stream under way');
    const node = nodes[1];
    node.killedByTest = true; // a test that fails before the restart leaves it dead
    node.proc.kill('SIGKILL');
    await withDeadline(node.exited, WAIT_MS, `node 1 (pid ${node.proc.pid}) to exit after SIGKILL`);
    killedAt = next;
    // Records produced while no node consumes the topic.
    await eventually(() => (ok(), next >= killedAt + 100), WAIT_MS, () => `100 records produced after the kill (next ${next})`);
    nodes[1] = await startServer({ config: nodeConfig(1, NODE1_INGEST()), dir: node.dir, port: node.port });
    await sourcesUp(nodes[1], ['ticks']);
    restartedAt = next;
    await waitSeen(restartedAt + 100, 'the stream flowing again after the restart');
  } finally {
    stopping = true;
    await producing;
  }
  ok();
  const produced = next;

  for (const p of [0, 1]) {
    const missing = () => {
      const have = new Set(seen(p));
      const out = [];
      for (let s = 0; s < produced; s++) if (!have.has(s)) out.push(s);
      return out;
    };
    await eventually(
      () => missing().length === 0,
      WAIT_MS,
      () => `ticks-${p}: every seq 0..${produced - 1} (missing ${missing().length}: ${missing().slice(0, 20)})`,
    );
    const first = new Set();
    let last = -1;
    let dups = 0;
    for (const s of seen(p)) {
      if (first.has(s)) {
        dups++;
        continue;
      }
      assert.ok(s > last, `ticks-${p}: seq ${s} first delivered after ${last}`);
      first.add(s);
      last = s;
    }
    assert.equal(first.size, produced, `ticks-${p}: only seqs that were produced`);
    t.diagnostic(
      `ticks-${p}: ${produced} records produced (node killed at ${killedAt}, back at ${restartedAt}), all delivered, ${dups} duplicates`,
    );
  }
  await expectMetrics(nodes[1], { [metricKey('herald_ingest_source_up', { source: 'ticks' })]: 1 });
});
