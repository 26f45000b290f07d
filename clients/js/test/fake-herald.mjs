// A small stand-in for herald's WebSocket side, enough for the helper's unit tests: it speaks
// the Pusher frames pusher-js needs and the history frames of docs/protocol.md ("History and
// recovery") for the channels it is told keep history, from a history in memory. The tests
// drive it (publish, drop a connection, send raw frames) and read what the client sent.
// The real server is exercised by test/js/tests/recovery*.test.mjs.

import http from 'node:http';

import { WebSocketServer } from 'ws';

export const WAIT_MS = Number(process.env.HERALD_TEST_WAIT_MS) || 20_000;

/** Polls fn() until it returns a truthy value, or throws after ms naming what. */
export async function eventually(fn, what, ms = WAIT_MS) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 10)); // poll interval
  }
}

export class FakeHerald {
  constructor({ epoch = 'e1', history = (name) => name.startsWith('auction-'), keep = 1000, cluster = false } = {}) {
    this.epoch = epoch;
    // As a cluster's store: a channel that has had no event has no epoch yet ('').
    this.cluster = cluster;
    this.history = history; // channel name -> whether it keeps history
    this.keep = keep; // events kept per channel
    this.channels = new Map(); // name -> {latest, entries: [{offset, frame}]}
    this.conns = new Set();
    this.received = []; // every frame a client sent: {conn, event, data}
    this.connections = 0; // connections accepted so far
    this.nextSocket = 1;
    // What happens to a new TCP connection: 'open' (a WebSocket as herald's), 'refuse' (closed
    // at once, before any byte: what a client sees of a server that is down), 'backoff' (the
    // handshake refused with pusher:error and close code 4100, as herald over capacity).
    this.gate = 'open';
    this.attempts = []; // every TCP connection made to the server: {at (Date.now()), gate}
    this.maxOpen = 0; // the most WebSocket connections open at once (not being closed by this server)
    this.answerPings = true; // false: pusher:ping gets no pusher:pong (a connection gone quiet)
  }

  async start() {
    this.http = http.createServer();
    // Before the HTTP server's own listener: a refused connection gets no byte.
    this.http.prependListener('connection', (socket) => {
      this.attempts.push({ at: Date.now(), gate: this.gate });
      if (this.gate === 'refuse') socket.destroy();
    });
    this.wss = new WebSocketServer({ server: this.http });
    await new Promise((resolve) => this.http.listen(0, '127.0.0.1', resolve));
    this.port = this.http.address().port;
    this.wss.on('connection', (ws) => this._accept(ws));
    return this;
  }

  async stop() {
    for (const c of this.conns) c.ws.terminate();
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise((resolve) => this.wss.close(resolve));
    await new Promise((resolve) => this.http.close(resolve));
  }

  _accept(ws) {
    if (this.gate === 'backoff') {
      ws.send(JSON.stringify({ event: 'pusher:error', data: { code: 4100, message: 'over capacity' } }));
      ws.close(4100, 'over capacity');
      return;
    }
    const conn = { ws, id: `${this.nextSocket++}.1`, subs: new Set() };
    this.conns.add(conn);
    this.connections += 1;
    // A connection this server has begun to close (closeAll) is closed for the client.
    this.maxOpen = Math.max(this.maxOpen, [...this.conns].filter((c) => !c.closing).length);
    ws.on('close', () => this.conns.delete(conn));
    ws.on('message', (raw) => {
      const msg = JSON.parse(raw.toString());
      this.received.push({ conn, event: msg.event, data: msg.data, channel: msg.channel });
      if (msg.event === 'pusher:subscribe') this._subscribe(conn, msg.data);
      else if (msg.event === 'pusher:unsubscribe') conn.subs.delete(msg.data.channel);
      else if (msg.event === 'pusher:ping' && this.answerPings) this.send(conn, 'pusher:pong', undefined, {});
    });
    this.send(conn, 'pusher:connection_established', undefined, { socket_id: conn.id, activity_timeout: 120 });
  }

  /** Sends one frame; data is JSON-encoded into a string as herald does. */
  send(conn, event, channel, data) {
    const frame = { event };
    if (channel !== undefined) frame.channel = channel;
    if (data !== undefined) frame.data = typeof data === 'string' ? data : JSON.stringify(data);
    conn.ws.send(JSON.stringify(frame));
  }

  chan(name) {
    let c = this.channels.get(name);
    if (!c) {
      c = { latest: 0, entries: [] };
      this.channels.set(name, c);
    }
    return c;
  }

  _subscribe(conn, data) {
    const name = data.channel;
    conn.subs.add(name);
    this.send(conn, 'pusher_internal:subscription_succeeded', name, {});
    if (!this.history(name)) {
      // As herald answers it: no position to go on from.
      if (data.recover !== undefined) {
        this.send(conn, 'pusher_internal:recovery', name, { epoch: '', offset: 0, recovered: false, reason: 'no_history' });
      }
      return;
    }
    const c = this.chan(name);
    const pos = { epoch: this.cluster && c.latest === 0 ? '' : this.epoch, offset: c.latest };
    const rec = data.recover;
    if (rec === undefined || rec === null) {
      this.send(conn, 'pusher_internal:recovery', name, pos);
      return;
    }
    let reason = null;
    if (rec.epoch === '' && rec.offset === 0) {
      // From before the channel's first event: everything, if nothing was dropped.
      if (c.entries.length > 0 && c.entries[0].offset > 1) reason = 'too_old';
    } else if (rec.epoch !== this.epoch) reason = 'epoch_changed';
    else if (rec.offset > c.latest) reason = 'ahead';
    else if (rec.offset < c.latest && (c.entries.length === 0 || c.entries[0].offset > rec.offset + 1)) reason = 'too_old';
    if (reason) {
      this.send(conn, 'pusher_internal:recovery', name, { ...pos, recovered: false, reason });
      return;
    }
    for (const e of c.entries) {
      if (e.offset > rec.offset) this._deliver(conn, name, e);
    }
    this.send(conn, 'pusher_internal:recovery', name, { ...pos, recovered: true });
  }

  _deliver(conn, name, e) {
    this.send(conn, 'pusher_internal:position', name, { epoch: this.epoch, offset: e.offset });
    conn.ws.send(e.frame);
  }

  /** Publishes an event: kept (history channels) and sent to every subscriber. */
  publish(name, event, data) {
    const frame = JSON.stringify({ event, channel: name, data: JSON.stringify(data) });
    const subs = [...this.conns].filter((c) => c.subs.has(name));
    if (!this.history(name)) {
      for (const c of subs) c.ws.send(frame);
      return;
    }
    const c = this.chan(name);
    c.latest += 1;
    const e = { offset: c.latest, frame };
    c.entries.push(e);
    if (c.entries.length > this.keep) c.entries.shift();
    for (const s of subs) this._deliver(s, name, e);
  }

  /** Loses every channel's history, as a restarted single node does. */
  restartHistory(epoch) {
    this.epoch = epoch;
    this.channels.clear();
  }

  /** The subscribes clients sent for channel, oldest first. */
  subscribes(channel) {
    return this.received.filter((f) => f.event === 'pusher:subscribe' && f.data.channel === channel).map((f) => f.data);
  }

  /** Waits for the n-th subscribe (1-based) for channel and returns its data. */
  nthSubscribe(channel, n) {
    return eventually(
      () => this.subscribes(channel)[n - 1],
      () => `subscribe #${n} for ${channel} (got ${JSON.stringify(this.subscribes(channel))})`,
    );
  }

  /** The connection subscribed to channel (the latest one). */
  connOf(channel) {
    return [...this.conns].reverse().find((c) => c.subs.has(channel));
  }

  /** Closes every connection with a close code; 4200 makes pusher-js reconnect at once. */
  closeAll(code = 4200) {
    for (const c of this.conns) {
      c.closing = true;
      c.ws.close(code, 'test');
    }
  }

  /** Cuts every connection without a close frame, as a network that drops does. */
  cutAll() {
    for (const c of this.conns) c.ws.terminate();
  }

  /** The TCP connections made since the Date.now() from. */
  attemptsSince(from) {
    return this.attempts.filter((a) => a.at >= from);
  }
}
