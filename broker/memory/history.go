package memory

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
)

var _ herald.History = (*History)(nil)

// History is one node's herald.History on a Bus. Every History on one Bus shares its channel
// histories (the Bus's store), as every node of a cluster shares a Redis server: offsets are
// given once per channel, whichever node publishes.
//
// Publish gives the offset, keeps the entry and hands the message to the receiving nodes'
// queues holding the lock of the channel's shard, so every node receives one channel's events
// in offset order, whichever node published them, and Read never returns an offset that some
// node has not been handed yet. A channel's epoch is made when its history starts: at its
// first publish, and again after every entry it kept has expired (it is then dropped, offsets
// start at 1 again) or the store was lost (Bus.LoseHistory). Read of a channel with no history
// returns the zero Latest and creates nothing. What is lost when: an entry past Size at once,
// one older than TTL (never returned, its memory freed by the next use of its channel or
// shard), everything with the process. Entries share the published payload: neither may be
// modified.
type History struct {
	b *Broker
	s *store
}

// NewHistory returns the History beside b, on b's Bus's store.
func NewHistory(b *Broker) *History { return &History{b: b, s: b.bus.history} }

// LoseHistory drops every channel's history of the bus, as a restarted single node loses
// its own: the next publish of each channel starts a new epoch. For tests.
func (bus *Bus) LoseHistory() { bus.history.lose() }

// Publish implements herald.History. It fails with CodeUnavailable once the node's Broker is
// closed, having given no offset.
func (h *History) Publish(ctx context.Context, rule herald.HistoryRule, msg herald.BusMessage) (herald.Position, error) {
	if err := broker.CheckRule(rule); err != nil {
		return herald.Position{}, err
	}
	if h.b.closed.Load() {
		h.b.count.PublishErrors.Add(1)
		return herald.Position{}, herald.Errorf(herald.CodeUnavailable, "cluster bus: broker closed")
	}
	k := broker.Key{App: msg.App, Channel: msg.Channel}
	now := time.Now()
	sh := h.s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if msg.Key != "" {
		if pos, ok := sh.seen(k, msg.Key, now); ok {
			return pos, nil // kept and handed to every receiver when it was first published
		}
	}
	c := sh.live(k, now, rule.TTL)
	if c == nil {
		c = &channelLog{epoch: h.s.newEpoch()}
		sh.chans[k] = c
	}
	c.last++
	c.ttl = rule.TTL
	c.keep(herald.HistoryEntry{Offset: c.last, At: now.UnixMilli(), Frame: msg.Payload}, rule.Size)
	msg.Epoch, msg.Offset = c.epoch, c.last
	pos := herald.Position{Epoch: c.epoch, Offset: c.last}
	if msg.Key != "" {
		sh.keys[keyed{k, msg.Key}] = kept{pos: pos, until: now.Add(h.b.keyWindow)}
	}
	return pos, h.b.Publish(ctx, msg) // under the shard's lock: queued in offset order
}

// Read implements herald.History.
func (h *History) Read(_ context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	if err := broker.CheckRule(rule); err != nil {
		return herald.HistoryPage{}, err
	}
	k := broker.Key{App: app, Channel: channel}
	sh := h.s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	c := sh.live(k, time.Now(), rule.TTL)
	if c == nil {
		return herald.HistoryPage{}, nil
	}
	return herald.HistoryPage{Latest: herald.Position{Epoch: c.epoch, Offset: c.last}, Entries: c.after(after, limit)}, nil
}
