package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Read implements herald.History. It reads the channel's last message (Latest) and, when
// events after `after` are asked for, the channel's retained messages from its first,
// through an ephemeral consumer filtered on its subject: a few round trips, and a transfer
// that grows with the rule's Size. A channel with no message (or no stream) has the zero
// Latest; Read creates nothing.
func (h *History) Read(ctx context.Context, rule herald.HistoryRule, app, channel string, after uint64, limit int) (herald.HistoryPage, error) {
	const what = "nats history read"
	if err := broker.CheckRule(rule); err != nil {
		return herald.HistoryPage{}, err
	}
	if h.b.closed.Load() || !h.b.nc.IsConnected() {
		return herald.HistoryPage{}, broker.Unavailable(what, nil)
	}
	ctx, cancel := h.deadline(ctx)
	defer cancel()
	k := streamKey{app: app, rule: rule}
	for attempt := 0; ; attempt++ {
		s, err := h.stream(ctx, k, false)
		if err != nil || s == nil {
			if err != nil {
				err = fmt.Errorf("%s: %w", what, err)
			}
			return herald.HistoryPage{}, err
		}
		page, err := h.read(ctx, s, rule, app, channel, h.subject(k, channel), after, limit)
		if missing(err) && attempt == 0 { // the stream is gone: look for it again
			h.forget(k, s)
			continue
		}
		if err != nil {
			return herald.HistoryPage{}, fmt.Errorf("%s: %w", what, unavailable(err))
		}
		return page, nil
	}
}

func (h *History) read(ctx context.Context, s jetstream.Stream, rule herald.HistoryRule, app, channel, subject string, after uint64, limit int) (herald.HistoryPage, error) {
	var page herald.HistoryPage
	last, latest, err := lastOf(ctx, s, subject)
	if err != nil || last == 0 {
		return page, err
	}
	page.Latest = latest
	if limit <= 0 || after >= latest.Offset {
		return page, nil
	}
	c, err := createConsumer(ctx, s, jetstream.ConsumerConfig{FilterSubject: subject, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1, InactiveThreshold: time.Minute})
	if err != nil {
		return page, err
	}
	defer func() { _ = s.DeleteConsumer(context.WithoutCancel(ctx), c.CachedInfo().Name) }()
	made := time.Now()
	oldest := made.Add(-rule.TTL)
	// seen is the offset of the last message read of Latest's epoch. The page is complete
	// once it reaches Latest (what is missing before is gone: a prefix), or the limit: on a
	// cluster the consumer may be on a replica that has not yet stored what the leader
	// acknowledged, so a consumer that has nothing more before then is waited for, until
	// ctx's deadline, and never taken for the end of the history.
	var seen uint64
	for pending := c.CachedInfo().NumPending; seen < latest.Offset && len(page.Entries) < limit; {
		batch, err := c.Fetch(int(min(max(pending, 1), 256)), jetstream.FetchMaxWait(fetchWait))
		if unreached(err, made) {
			continue
		}
		if err != nil {
			return page, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return page, err
			}
			pending = md.NumPending
			p, err := positionOf(m.Headers())
			if err != nil {
				return page, fmt.Errorf("message %d of %s: %w", md.Sequence.Stream, subject, err)
			}
			if p.Epoch == latest.Epoch {
				seen = max(seen, p.Offset)
			}
			// Entries before the offset, past the TTL (the oldest: a prefix) or of another
			// epoch than Latest's (a channel that restarted since) are not returned, nor are
			// those stored after the last message read above.
			at := storedAt(md.Timestamp, m.Headers())
			if p.Epoch != latest.Epoch || p.Offset <= after || p.Offset > latest.Offset || len(page.Entries) == limit ||
				len(page.Entries) == 0 && !at.After(oldest) {
				continue
			}
			frame := m.Data()
			if a := h.b.auth; a != nil {
				if frame, err = a.OpenEntry(frame, app, channel, p); err != nil {
					// Not kept by a node with the secret: the page ends before it, or
					// when it is the first, starts after it (those events are gone).
					h.b.count.Forged.Add(1)
					if len(page.Entries) > 0 {
						limit = len(page.Entries)
					}
					continue
				}
			}
			page.Entries = append(page.Entries, herald.HistoryEntry{Offset: p.Offset, At: at.UnixMilli(), Frame: frame})
		}
		if err := batch.Error(); unreached(err, made) {
			continue
		} else if err != nil {
			return page, err
		}
		if n == 0 && seen < latest.Offset {
			// Nothing more: the replica is behind, or the rest expired since (then the
			// channel's last message is gone too, or of another epoch).
			if now, pos, err := lastOf(ctx, s, subject); err == nil && (now == 0 || pos.Epoch != latest.Epoch) {
				break
			}
		}
		if seen < latest.Offset && len(page.Entries) < limit && ctx.Err() != nil {
			return page, fmt.Errorf("%s: read up to offset %d of %d before the deadline: %w", subject, seen, latest.Offset, ctx.Err())
		}
	}
	return page, nil
}

// unreached reports whether err is a fetch from a consumer made at made that its server
// may not have made known to this node's server yet: "no responders" within reachWait of
// its creation (seen with nats-server 2.12 on a cluster, a consumer on another server than
// this node's). It waits a moment first when so.
func unreached(err error, made time.Time) bool {
	if !errors.Is(err, nats.ErrNoResponders) || time.Since(made) > reachWait {
		return false
	}
	time.Sleep(reachWait / 100) // the interval of the fetches until the consumer is reached
	return true
}

// reachWait bounds the time a read's consumer may take to be reachable from this node.
const reachWait = 2 * time.Second

// fetchWait bounds one fetch of a read's consumer that has nothing to give yet.
const fetchWait = 200 * time.Millisecond

// createConsumer creates an ephemeral consumer of s (tried again: on a cluster, JetStream
// places the consumer on one server of the stream's, picked at random among those it
// believes up, and for some seconds after a server is killed it still believes it up: a
// consumer placed there never answers).
func createConsumer(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	return retry(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return s.CreateConsumer(ctx, cfg) })
}

// storedAt is when a message was stored: JetStream's timestamp, or when that is not one (a
// consumer on a replica of nats-server 2.9 was seen giving 1 ns after 1970), the time the
// publishing node wrote in its Herald-At header.
func storedAt(ts time.Time, hdr nats.Header) time.Time {
	if ts.After(plausible) {
		return ts
	}
	if ms, err := strconv.ParseInt(hdr.Get(atHeader), 10, 64); err == nil {
		return time.UnixMilli(ms)
	}
	return ts
}

// plausible is before any message herald stored.
var plausible = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
