// Compiled (not run) by test/types.test.mjs under moduleResolution nodenext.
import { withRecovery, positionOf, type PusherLike, type Recovered } from '@herald-rt/recovery';

declare const pusher: PusherLike;
const same: PusherLike = withRecovery(pusher);
const tuned: PusherLike = withRecovery(pusher, { reconnect: { first: 250, max: 2000, ratio: 0.1 } });
void tuned;
const offset: number | undefined = positionOf(same, 'auction-1')?.offset;
const r: Recovered = { recovered: false, reason: 'too_old' };
void offset;
void r;
