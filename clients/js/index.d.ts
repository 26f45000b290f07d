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
 * Makes pusher recover the events each channel missed while it was disconnected, and emit
 * 'herald:recovered' on a channel when herald answers a recovery. Returns pusher; calling it
 * again on the same client does nothing more. With Laravel Echo: withRecovery(echo.connector.pusher).
 */
export function withRecovery<P extends PusherLike>(pusher: P): P;

/** The position of the last event of channel that pusher's app has handled, if any. */
export function positionOf(pusher: PusherLike, channel: string): Position | undefined;
