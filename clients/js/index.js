// @herald-rt/recovery: the client side of herald's recovery (docs/protocol.md, "History and
// recovery") for pusher-js 8 and Laravel Echo.
//
// withRecovery(pusher) follows, per channel, the position {epoch, offset} of the last event the
// app's handlers have handled, and asks herald for the events after it whenever pusher-js
// subscribes again. It relies on one piece of pusher-js's behaviour that is not a documented
// API (checked in every pusher-js 8.x minor, see README.md): the Pusher constructor binds the
// connection's 'message' event to the channel dispatch, so a 'message' binding made later runs
// after the app's channel handlers for the same frame.
//
// It also drives pusher-js's reconnection once a connection has dropped (driveReconnects, the
// `reconnect` option), through internals of pusher-js that are the same in every 8.x minor
// (README.md, "What it relies on in pusher-js").

const STATE = Symbol.for('@herald-rt/recovery');

// The reconnect schedule's defaults (README.md, "Reconnecting"): the delay before the next
// attempt is RATIO times the time the connection has been down, at least FIRST and at most MAX
// ms, jittered down by up to half.
const RECONNECT_DEFAULTS = Object.freeze({ first: 500, max: 5000, ratio: 0.1 });
// An attempt still in flight (a socket connecting, or open and waiting for herald's
// pusher:connection_established) is left alone for this long before the helper replaces it.
const ATTEMPT_TIMEOUT_MS = 10_000;
// After a close with a back-off code, pusher-js tries again itself after this long.
const PUSHER_BACKOFF_MS = 1000;

// The largest offset herald gives (docs/protocol.md: an integer from 0 to 2^53).
const MAX_OFFSET = 2 ** 53;

/**
 * Makes pusher (a pusher-js 8 client, or Laravel Echo's echo.connector.pusher) recover missed
 * events when it subscribes again, and emit 'herald:recovered' on a channel when herald
 * answers a recovery. Unless options.reconnect is false, it also makes pusher-js try again on
 * the helper's schedule once a connection has dropped. Returns pusher. Calling it again on the
 * same client does nothing more (and ignores the options).
 */
export function withRecovery(pusher, options = {}) {
  if (
    !pusher ||
    typeof pusher.send_event !== 'function' ||
    typeof pusher.channel !== 'function' ||
    typeof pusher.unsubscribe !== 'function' ||
    !pusher.connection ||
    typeof pusher.connection.bind !== 'function'
  ) {
    throw new TypeError('withRecovery: expected a pusher-js client (new Pusher(key, options))');
  }
  if (pusher[STATE]) return pusher;
  const schedule = reconnectOptions(options);

  // positions: channel -> the position of the last event of it the app has handled (or that
  // herald's recovery frame said the live events go on from). pending: channel -> the position
  // of the event herald has just announced, committed once that event has been handled.
  const positions = new Map();
  const pending = new Map();
  Object.defineProperty(pusher, STATE, { value: { positions, pending } });

  const forget = (name) => {
    positions.delete(name);
    pending.delete(name);
  };

  // Every pusher:subscribe pusher-js sends goes through pusher.send_event (Channel.subscribe),
  // on the first subscription and on each resubscription after a reconnect.
  const sendEvent = pusher.send_event;
  pusher.send_event = function sendEventWithRecovery(name, data, channel) {
    if (data && typeof data === 'object' && typeof data.channel === 'string') {
      if (name === 'pusher:subscribe') {
        const pos = positions.get(data.channel);
        if (pos) data = { ...data, recover: { epoch: pos.epoch, offset: pos.offset } };
      } else if (name === 'pusher:unsubscribe') {
        forget(data.channel);
      }
    }
    return sendEvent.call(this, name, data, channel);
  };

  // The app's unsubscribe: pusher-js sends pusher:unsubscribe only when the channel was
  // subscribed, so a channel left while disconnected is forgotten here.
  const unsubscribe = pusher.unsubscribe;
  pusher.unsubscribe = function unsubscribeWithRecovery(name) {
    forget(name);
    return unsubscribe.call(this, name);
  };

  pusher.connection.bind('message', (event) => {
    if (!event || typeof event.channel !== 'string' || typeof event.event !== 'string') return;
    const name = event.channel;
    // A channel the app has left: pusher-js dropped the frame, and so do we.
    const channel = pusher.channel(name);
    if (!channel) return;
    switch (event.event) {
      case 'pusher_internal:position': {
        const pos = readPosition(event.data);
        if (pos) pending.set(name, pos);
        else pending.delete(name);
        return;
      }
      case 'pusher_internal:recovery': {
        pending.delete(name);
        const data = event.data && typeof event.data === 'object' ? event.data : {};
        // A channel without a history rule (the rule was removed since) has no position.
        const pos = data.reason === 'no_history' ? null : readPosition(data);
        if (pos) positions.set(name, pos);
        else positions.delete(name);
        if ('recovered' in data) {
          const result =
            data.recovered === true ? { recovered: true } : { recovered: false, reason: String(data.reason ?? '') };
          channel.emit('herald:recovered', result);
        }
        return;
      }
      default: {
        // The frame after a position is the event it announced; pusher-js has just handed it
        // to the app's handlers (this binding runs after pusher-js's own). Protocol frames of
        // the channel (presence member frames, ...) are not events and carry no position.
        if (event.event.startsWith('pusher_internal:')) return;
        const pos = pending.get(name);
        if (pos) {
          pending.delete(name);
          positions.set(name, pos);
        }
      }
    }
  });

  // A position announced but whose event did not arrive before the connection dropped is
  // not the app's: herald replays that event on recovery.
  pusher.connection.bind('state_change', (change) => {
    if (!change || change.current !== 'connected') pending.clear();
  });

  if (schedule) driveReconnects(pusher, schedule);
  return pusher;
}

/** Reads withRecovery's options: the reconnect schedule, or null when it is turned off. */
function reconnectOptions(options) {
  if (options === undefined || options === null) options = {};
  if (typeof options !== 'object') throw new TypeError('withRecovery: options must be an object');
  const r = options.reconnect;
  if (r === false) return null;
  if (r === undefined || r === null || r === true) return { ...RECONNECT_DEFAULTS };
  if (typeof r !== 'object') throw new TypeError('withRecovery: reconnect must be a boolean or {first, max, ratio}');
  const s = { ...RECONNECT_DEFAULTS };
  for (const k of ['first', 'max', 'ratio']) {
    if (r[k] === undefined) continue;
    if (typeof r[k] !== 'number' || !Number.isFinite(r[k]) || r[k] < 0) {
      throw new TypeError(`withRecovery: reconnect.${k} must be a finite number >= 0`);
    }
    s[k] = r[k];
  }
  if (s.first <= 0 || s.max < s.first) throw new TypeError('withRecovery: reconnect needs 0 < first <= max');
  return s;
}

// The pusher-js internals the reconnect driver uses; when one is missing (a pusher-js this
// helper does not know), the driver stays off and pusher-js reconnects on its own schedule.
function canDrive(pusher) {
  const cm = pusher.connection;
  return (
    typeof cm.connect === 'function' &&
    typeof cm.disconnectInternally === 'function' &&
    typeof cm.abortConnecting === 'function' &&
    typeof cm.clearRetryTimer === 'function' &&
    typeof cm.startConnecting === 'function' &&
    cm.strategy &&
    typeof cm.strategy.isSupported === 'function' &&
    typeof cm.state === 'string' &&
    pusher.timeline &&
    typeof pusher.timeline.info === 'function'
  );
}

/**
 * Drives pusher-js's reconnection after a drop: pusher-js alone waits 1 s after a connection
 * ends, then, after a refused attempt, its strategy's timeout (15 s, then 30 s, 60 s) before
 * it tries again. The helper makes an attempt on its own schedule instead (schedule: {first,
 * max, ratio}), at once on the browser's 'online' event, and stands aside when pusher-js must
 * not reconnect: after the app's disconnect(), a close with 4000-4099 (or 4300 and up), and in
 * state 'failed'. See README.md, "Reconnecting".
 */
function driveReconnects(pusher, schedule) {
  if (!canDrive(pusher)) return;
  const cm = pusher.connection;
  const d = {
    active: false, // the connection dropped and pusher-js is not connected again yet
    since: 0, // when it dropped
    nextAt: 0, // the earliest time of the helper's next attempt
    timer: null,
    handsOff: false, // a 4000-4099 close: pusher-js's call, until it is connected again
    backoffUntil: 0, // a 4100-4199 close: no attempt of the helper's before this
    gen: 0, // one more at each 'disconnected' (the app's disconnect(), or a refusal)
    live: new Map(), // pusher-js's transport connections not closed yet: cid -> when it began connecting
    win: null, // the window whose 'online' event the helper listens to, while active
  };

  const now = () => Date.now();
  // The delay before the next attempt: ratio times the time the connection has been down, at
  // least first and at most max, jittered down by up to half so that the clients a server
  // dropped together do not come back together.
  const delay = () => {
    const down = d.active ? now() - d.since : 0;
    const base = Math.min(schedule.max, Math.max(schedule.first, down * schedule.ratio));
    return base * (0.5 + Math.random() / 2);
  };

  const clearTimer = () => {
    if (d.timer !== null) clearTimeout(d.timer);
    d.timer = null;
  };
  const arm = (at) => {
    clearTimer();
    d.timer = setTimeout(tick, Math.max(0, at - now()));
  };

  const start = () => {
    if (d.active || d.handsOff) return;
    d.nextAt = now() + delay();
    d.active = true;
    d.since = now();
    if (typeof window !== 'undefined' && window && typeof window.addEventListener === 'function') {
      d.win = window;
      d.win.addEventListener('online', onOnline);
    }
    arm(d.nextAt);
  };

  const stop = () => {
    d.active = false;
    clearTimer();
    if (d.win) d.win.removeEventListener('online', onOnline);
    d.win = null;
  };

  // Whether pusher-js is between connections after a drop, and may be told to try now. In the
  // second between a connection's end and pusher-js's own retry, its state is still
  // 'connected' but it has no connection.
  const between = () =>
    d.active &&
    !d.handsOff &&
    !cm.connection &&
    (cm.state === 'connecting' || cm.state === 'unavailable' || cm.state === 'connected');

  // One attempt: what pusher-js's own retry does (ConnectionManager.retryIn's timer), at once.
  // While pusher-js is connecting or unavailable, only its strategy is restarted, without a
  // state change, so that 'unavailable' still comes when its unavailableTimeout says; in the
  // second before its own retry after a connection's end, that retry is made now.
  const attempt = () => {
    // Every transport connection of the current strategy is aborted here.
    d.live.clear();
    if (cm.state === 'connected' || !cm.strategy.isSupported()) {
      cm.disconnectInternally();
      cm.connect();
    } else {
      cm.abortConnecting();
      cm.clearRetryTimer();
      cm.startConnecting();
    }
    d.nextAt = now() + delay();
    arm(d.nextAt);
  };

  // The browser is online again: an attempt at once (pusher-js's own 'online' handler does the
  // same while it is connecting; the helper's attempt replaces its retry, not adds to it).
  function onOnline() {
    if (between() && d.backoffUntil <= now()) attempt();
  }

  function tick() {
    d.timer = null;
    if (!between()) {
      // Connected, or disconnected by the app or by herald: nothing more to do until the next drop.
      stop();
      return;
    }
    const t = now();
    const at = Math.max(d.nextAt, d.backoffUntil);
    if (t < at) return arm(at);
    // Offline (navigator.onLine false means no network at all): wait for 'online'.
    if (typeof navigator !== 'undefined' && navigator && navigator.onLine === false) return arm(t + delay());
    // An attempt in flight (pusher-js's own, or the helper's last) is left alone: when its
    // socket closes without a connection, the timer is armed again for the schedule's time.
    let newest = -Infinity;
    for (const began of d.live.values()) newest = Math.max(newest, began);
    if (newest > t - ATTEMPT_TIMEOUT_MS) return arm(newest + ATTEMPT_TIMEOUT_MS);
    attempt();
  }

  // Every transport connection pusher-js makes reports its states to the client's timeline
  // (TransportConnection.changeState: {cid, state}): 'connecting', 'open', 'closed'.
  const timeline = pusher.timeline;
  const info = timeline.info;
  timeline.info = function infoWithRecovery(event) {
    try {
      if (event && typeof event === 'object' && event.cid !== undefined && typeof event.state === 'string') {
        if (event.state === 'connecting') d.live.set(event.cid, now());
        else if (event.state === 'closed' && d.live.delete(event.cid) && d.active && d.timer !== null) {
          arm(Math.max(d.nextAt, d.backoffUntil));
        }
      }
    } catch {
      // the driver's bookkeeping never breaks pusher-js's timeline
    }
    return info.apply(this, arguments);
  };

  // Close codes (docs/protocol.md): pusher-js emits 'error' {type: 'WebSocketError', error:
  // {type: 'PusherError', data: {code}}} for the close codes it acts on, when a connection
  // closes and when herald refuses a handshake.
  cm.bind('error', (e) => {
    const code = e && e.type === 'WebSocketError' && e.error && e.error.data ? e.error.data.code : undefined;
    if (!Number.isInteger(code)) return;
    if (code >= 4000 && code <= 4099) {
      // 4000: pusher-js goes on over TLS by itself; 4001-4099: it does not reconnect.
      d.handsOff = true;
      stop();
    } else if ((code >= 4100 && code <= 4199) || (code >= 1002 && code <= 1004)) {
      // Back off: pusher-js tries again a second later; the helper not before that, and then
      // only after its own delay.
      d.backoffUntil = now() + PUSHER_BACKOFF_MS + delay();
    }
  });

  const bound = new WeakSet();
  cm.bind('state_change', (change) => {
    if (!change) return;
    const { previous, current } = change;
    if (current === 'connected') {
      stop();
      d.handsOff = false;
      d.backoffUntil = 0;
      // The connection's end, with or without a close code, is the drop: pusher-js stays
      // 'connected' for the second before its own retry.
      const conn = cm.connection;
      if (conn && typeof conn.bind === 'function' && !bound.has(conn)) {
        bound.add(conn);
        const gen = d.gen;
        conn.bind('closed', () => {
          // Not a drop: the app disconnected (or herald refused) since, or a newer connection
          // is already up (pusher-js replaced this one after a pong timeout).
          if (gen !== d.gen || d.handsOff || (cm.connection && cm.connection !== conn)) return;
          if (cm.state === 'disconnected' || cm.state === 'failed') return;
          start();
        });
      }
    } else if (current === 'disconnected' || current === 'failed') {
      d.gen += 1;
      stop();
    } else if (previous === 'connected' && (current === 'connecting' || current === 'unavailable')) {
      start();
    }
  });
}

/**
 * The position {epoch, offset} of the last event of channel that pusher's app has handled (or
 * that herald's last recovery answer gave), or undefined if there is none or withRecovery was
 * not called on pusher.
 */
export function positionOf(pusher, channel) {
  const state = pusher && pusher[STATE];
  const pos = state && state.positions.get(channel);
  return pos ? { epoch: pos.epoch, offset: pos.offset } : undefined;
}

// readPosition returns the position {epoch, offset} in data, or null when it holds none. The
// empty epoch with offset 0 is a position: a cluster's channel that has had no event yet.
function readPosition(data) {
  if (!data || typeof data !== 'object') return null;
  const { epoch, offset } = data;
  if (typeof epoch !== 'string') return null;
  if (!Number.isInteger(offset) || offset < 0 || offset > MAX_OFFSET) return null;
  if (epoch === '' && offset !== 0) return null;
  return { epoch, offset };
}
