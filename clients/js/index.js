// @herald-rt/recovery: the client side of herald's recovery (docs/protocol.md, "History and
// recovery") for pusher-js 8 and Laravel Echo.
//
// withRecovery(pusher) follows, per channel, the position {epoch, offset} of the last event the
// app's handlers have handled, and asks herald for the events after it whenever pusher-js
// subscribes again. It relies on one piece of pusher-js's behaviour that is not a documented
// API (checked in every pusher-js 8.x minor, see README.md): the Pusher constructor binds the
// connection's 'message' event to the channel dispatch, so a 'message' binding made later runs
// after the app's channel handlers for the same frame.

const STATE = Symbol.for('@herald-rt/recovery');

// The largest offset herald gives (docs/protocol.md: an integer from 0 to 2^53).
const MAX_OFFSET = 2 ** 53;

/**
 * Makes pusher (a pusher-js 8 client, or Laravel Echo's echo.connector.pusher) recover missed
 * events when it subscribes again, and emit 'herald:recovered' on a channel when herald
 * answers a recovery. Returns pusher. Calling it again on the same client does nothing more.
 */
export function withRecovery(pusher) {
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

  return pusher;
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
