package cluster

import (
	"strconv"
	"sync"
	"sync/atomic"
)

// requests are what the sender is asked to send next: by the receiver (another node asked for
// this node's snapshot or cache channels' events; a peer's batch was lost), by the bus watch
// (the bus came back), by the node (a new app, a change of this node's record). The sender
// takes them in its goroutine; wake tells it there are some.
type requests struct {
	wake      chan struct{}
	snapshot  atomic.Bool // send a snapshot next
	syncAll   atomic.Bool // ask every node for its snapshot next
	wantCache atomic.Bool // ask every node for its cache channels' events next
	// announce asks the next send for a batch even with nothing in it: this node's record
	// changed (pressure.go).
	announce atomic.Bool
	askOne   sync.Map // epoch string -> struct{}: ask that node for its snapshot next
	cacheFor sync.Map // epoch string -> struct{}: send that node our cache channels' events
}

// poke wakes the sender.
func (q *requests) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// want sets flag, one of q's, and wakes the sender.
func (q *requests) want(flag *atomic.Bool) {
	flag.Store(true)
	q.poke()
}

// askFor asks the node whose epoch is epoch for its snapshot.
func (q *requests) askFor(epoch uint64) {
	q.askOne.Store(strconv.FormatUint(epoch, 10), struct{}{})
	q.poke()
}

// cacheTo sends the node whose epoch is epoch this node's cache channels' events.
func (q *requests) cacheTo(epoch uint64) {
	q.cacheFor.Store(strconv.FormatUint(epoch, 10), struct{}{})
	q.poke()
}
