// Compiled (not run) by test/types.test.mjs: the typings accept what the README shows.
import Pusher from 'pusher-js';
import { withRecovery, positionOf, type Position, type Recovered, type RecoveryOptions } from '@herald-rt/recovery';

const pusher: Pusher = withRecovery(new Pusher('app-key', { cluster: 'mt1' }));
const tuned: Pusher = withRecovery(new Pusher('app-key', { cluster: 'mt1' }), { reconnect: { first: 500, max: 5000 } });
const plain: Pusher = withRecovery(new Pusher('app-key', { cluster: 'mt1' }), { reconnect: false });
const options: RecoveryOptions = { reconnect: { ratio: 0.2 } };
void tuned;
void plain;
void options;
const channel = pusher.subscribe('auction-1');
channel.bind('herald:recovered', (r: Recovered) => {
  if (!r.recovered) {
    const reason: string = r.reason;
    void reason;
  }
});
const pos: Position | undefined = positionOf(pusher, 'auction-1');
const offset: number | undefined = pos?.offset;
void offset;
