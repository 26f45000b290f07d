// Compiled (not run) by test/types.test.mjs: the typings accept what the README shows.
import Pusher from 'pusher-js';
import { withRecovery, positionOf, type Position, type Recovered } from '@herald-rt/recovery';

const pusher: Pusher = withRecovery(new Pusher('app-key', { cluster: 'mt1' }));
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
