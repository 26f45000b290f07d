package ingest

import (
	"context"
	"time"

	"github.com/herald-rt/herald"
)

// Reconnector is what a Publisher also implements when events it took can still be lost
// after Publish returned: on a node of a NATS cluster, Publish returns once the node's own
// server has the events (a round trip to it), and a server killed right then may not have
// passed them on to the other servers. Connection numbers the publisher's connection to its
// bus; it changes when the connection was lost and replaced.
//
// With one, the pipeline keeps the events it handed off lately and, once Connection has
// changed, hands off again those it had handed off on the lost connection within
// ResendWindow before its last hand-off there (at most ResendEvents and ResendBytes of data,
// none older than ResendAge): subscribers may get them twice, as at least once allows.
type Reconnector interface{ Connection() uint64 }

// How much of what was handed off on a lost connection is handed off again. A server
// passes what it received on to the other servers within milliseconds; what it had not
// passed on when it died came in its last moments, so the last second before the last
// hand-off on it covers that many times over. ResendEvents and ResendBytes bound the memory
// kept (the events' names, channels and data). ResendAge keeps an idle source from handing
// off again, after a connection lost long after, events the server had all the time to pass
// on; it is past the 12 s a server lost without closing its connections takes to be noticed
// (broker/nats: PingInterval × (MaxPingsOutstanding + 1)), with time to reconnect.
const (
	ResendWindow = time.Second
	ResendEvents = 4096
	ResendBytes  = 4 << 20
	ResendAge    = 30 * time.Second
)

// kept is an event handed off, on which connection and when (Unix nanoseconds).
type kept struct {
	ev   herald.Event
	conn uint64
	at   int64
}

// resent is the ring of the last ResendEvents events handed off (allocated on first use),
// and what was on the connection before the current one.
type resent struct {
	ring  []kept
	next  int // where the next event goes
	n     int // events in ring
	bytes int // their size
	conn  uint64
	buf   []herald.Event // the events handed off again and those that follow, reused
}

// keep remembers evs, handed off on conn at now.
func (r *resent) keep(evs []herald.Event, conn uint64, now int64) {
	if r.ring == nil {
		r.ring = make([]kept, ResendEvents)
	}
	for i := range evs {
		if r.n == len(r.ring) {
			r.drop()
		}
		r.ring[r.next] = kept{evs[i], conn, now}
		r.bytes += size(&evs[i])
		r.next = (r.next + 1) % len(r.ring)
		r.n++
		for r.bytes > ResendBytes && r.n > 1 {
			r.drop()
		}
	}
}

// drop forgets the oldest event.
func (r *resent) drop() {
	k := &r.ring[r.index(0)]
	r.bytes -= size(&k.ev)
	*k = kept{}
	r.n--
}

// size is what ev holds in memory, roughly.
func size(ev *herald.Event) int {
	return len(ev.Name) + len(ev.Channel) + len(ev.Data) + len(ev.SocketID) + len(ev.UserID)
}

// again is what must be handed off again, oldest first, before evs, now that the connection
// is conn: nil when it has not changed since the last call. The ring is then emptied: what
// is handed off again is kept anew, on the new connection.
func (r *resent) again(conn uint64, now int64, evs []herald.Event) []herald.Event {
	if conn == r.conn {
		return nil
	}
	r.conn = conn
	var last int64 // the last hand-off on a lost connection
	for i := range r.n {
		if k := &r.ring[r.index(i)]; k.conn != conn {
			last = max(last, k.at)
		}
	}
	out := r.buf[:0]
	for i := range r.n {
		k := &r.ring[r.index(i)]
		if k.conn != conn && k.at >= last-int64(ResendWindow) && k.at >= now-int64(ResendAge) {
			ev := k.ev
			ev.Resent = true
			out = append(out, ev)
		}
		*k = kept{}
	}
	r.n, r.next, r.bytes = 0, 0, 0
	if len(out) == 0 {
		return nil
	}
	r.buf = append(out, evs...)
	return r.buf
}

// index is the ring's position of its i-th event, oldest first.
func (r *resent) index(i int) int { return (r.next - r.n + i + len(r.ring)) % len(r.ring) }

// release lets the buffer of what was handed off again go.
func (r *resent) release() {
	clear(r.buf)
	r.buf = r.buf[:0]
}

// resendEvery is how often an idle pipeline looks for a replaced connection.
const resendEvery = 100 * time.Millisecond

// watch hands off again what a replaced connection may have lost while the source hands
// nothing off (Handle looks itself): every resendEvery until ctx is done. Without a
// Reconnector it returns at once.
func (p *Pipeline) watch(ctx context.Context) {
	if p.rc == nil {
		return
	}
	t := time.NewTicker(resendEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !p.mu.TryLock() {
			continue // Handle is at work, and looks itself
		}
		if p.rc.Connection() != p.sent.conn {
			_ = p.handoff(ctx, nil)
		}
		p.mu.Unlock()
	}
}
