/**
 * What withRecovery uses of a pusher-js 8 client (written out rather than imported, so that the
 * typings resolve the same under every moduleResolution).
 */
export interface PusherLike {
  send_event(event_name: string, data: any, channel?: string): boolean;
  unsubscribe(channel_name: string): void;
  channel(name: string): { emit(eventName: string, data?: any): unknown } | undefined;
  connection: { bind(eventName: string, callback: Function, context?: any): unknown };
}

/** Where an event stands in its channel's history on herald. */
export interface Position {
  /** Names the channel's history; offsets of two epochs cannot be compared. */
  epoch: string;
  /** 1 for the channel's first event in its epoch, one more for each event after it. */
  offset: number;
}

/** Why herald could not replay what a client missed. */
export type RecoveryReason = 'epoch_changed' | 'too_old' | 'ahead' | 'no_history' | 'unavailable';

/** The data of the 'herald:recovered' event a channel emits when herald answers a recovery. */
export type Recovered = { recovered: true } | { recovered: false; reason: RecoveryReason | (string & {}) };

/**
 * The helper's reconnect schedule (README.md, "Reconnecting"). After a drop, the delay before
 * each attempt is `ratio` times the time the connection has been down, at least `first` and at
 * most `max` (ms), jittered down by up to half.
 */
export interface ReconnectOptions {
  /** The least delay, in ms (default 500): the first attempt comes within it of a drop. More than 0. */
  first?: number;
  /** The longest delay, in ms (default 5000): at least `first`. */
  max?: number;
  /** The delay as a fraction of the time the connection has been down (default 0.1). */
  ratio?: number;
}

/** withRecovery's options. */
export interface RecoveryOptions {
  /**
   * The helper's reconnect schedule after a drop: true or omitted for the defaults, an object
   * to tune it, false to leave pusher-js to its own (1 s after a drop, then 15 s and more
   * after a refused attempt).
   */
  reconnect?: boolean | ReconnectOptions;
}

/**
 * Makes pusher recover the events each channel missed while it was disconnected, and emit
 * 'herald:recovered' on a channel when herald answers a recovery; unless options.reconnect is
 * false, it also makes pusher-js try again on the helper's schedule once a connection has
 * dropped. Returns pusher; calling it again on the same client does nothing more (and ignores
 * the options). With Laravel Echo: withRecovery(echo.connector.pusher). Throws a TypeError for
 * options out of range.
 */
export function withRecovery<P extends PusherLike>(pusher: P, options?: RecoveryOptions): P;

/** The position of the last event of channel that pusher's app has handled, if any. */
export function positionOf(pusher: PusherLike, channel: string): Position | undefined;
