package fanout

import "sync/atomic"

// Channel is the engine's part of one occupied channel: how many subscribers each worker
// has, so that a publisher skips workers with none. The layer above embeds it in its own
// channel (NewChannel) and names it to Subscribe, Unsubscribe and Dispatch; each worker
// keeps its subscribers of the channel in a list only it touches.
type Channel struct {
	wcount []atomic.Int32 // by worker
}

// NewChannel returns a channel's engine part, with no subscribers.
func (e *Engine) NewChannel() Channel { return Channel{wcount: make([]atomic.Int32, len(e.workers))} }

// Subscribed reports whether some connection on worker i is subscribed.
func (ch *Channel) Subscribed(i int) bool { return ch.wcount[i].Load() > 0 }
