package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"time"
)

// ReconnectCounts is how the clients the server closed came back, as pusher-js comes back
// (subSpec.Reconnect): after a close code 4200-4299 at once, after 4100-4199 or a close
// without a close frame a second later; never after 4000-4099 or a normal close. On a history
// channel each resubscribes with recover from the position of the last event it handled, as
// the clients/js helper does. A first connection that fails is tried again a second later,
// as pusher-js does, unless the server refused it with 4000-4099.
type ReconnectCounts struct {
	// Positioned counts the clients that knew their position in a history channel when the
	// run ended (0: the server keeps no history for the channel).
	Positioned int `json:"positioned"`
	Closed     int `json:"closed"` // connections the server ended that came back or tried to
	// SetupRetried counts the first connections that failed and were tried again; SetupLater
	// those of them that subscribed on a later try (they are in the delivery's expectations).
	SetupRetried int    `json:"setup_retried"`
	SetupLater   int    `json:"setup_later"`
	Reconnected  int    `json:"reconnected"` // subscribed again
	Attempts     int    `json:"attempts"`    // dials, the failed ones retried a second later
	FirstError   string `json:"first_error,omitempty"`
	// Recovered counts the resubscriptions answered recovered:true; NotRecovered the others
	// answered with a recovery frame, by reason; Plain those that named no position (none
	// known: not a history channel, or closed before its first recovery frame).
	Recovered    int            `json:"recovered"`
	NotRecovered map[string]int `json:"not_recovered,omitempty"`
	Plain        int            `json:"plain"`
}

func (r *ReconnectCounts) merge(o ReconnectCounts) {
	r.Positioned += o.Positioned
	r.Closed += o.Closed
	r.SetupRetried += o.SetupRetried
	r.SetupLater += o.SetupLater
	r.Reconnected += o.Reconnected
	r.Attempts += o.Attempts
	if r.FirstError == "" {
		r.FirstError = o.FirstError
	}
	r.Recovered += o.Recovered
	r.Plain += o.Plain
	for k, n := range o.NotRecovered {
		if r.NotRecovered == nil {
			r.NotRecovered = map[string]int{}
		}
		r.NotRecovered[k] += n
	}
}

// reconnectDelay is how long pusher-js waits before it reconnects after a close with code
// (0: no close frame), and whether it reconnects at all.
func reconnectDelay(code int) (time.Duration, bool) {
	switch {
	case code >= 4200 && code <= 4299:
		return 0, true
	case code >= 4100 && code <= 4199, code == 0, code == 1005, code == 1006:
		return time.Second, true
	}
	return 0, false
}

// follow is where a client stands in its history channel: the position of the last event it
// handled. Guarded by its client's mu.
type follow struct {
	epoch   string
	last    uint64 // offset of the last event handled, or of the recovery frame
	pending uint64 // the offset the last position frame announced, for the event after it
	hasNext bool   // pending is set
	known   bool   // epoch and last are a position
	asked   bool   // the current subscribe named a position: the next recovery frame answers it
}

// redialer brings back the clients of a pool that the server closed. It owns the goroutines
// it starts; stop ends them.
type redialer struct {
	p       *pool
	eps     []endpoint
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex // guards what follows
	stopped bool
	counts  ReconnectCounts
	// perClient, once expecting, is the first receipts a client that subscribes late adds
	// to its pool's recorder's expectation.
	perClient int64
	expecting bool
}

func newRedialer(p *pool, t Target) (*redialer, error) {
	eps, err := t.wsEndpoints()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &redialer{p: p, eps: eps, timeout: t.Timeout, ctx: ctx, cancel: cancel}
	rec := p.rec
	rec.other, rec.seen, rec.recoverFrom = r.frame, r.event, r.from
	return r, nil
}

// hungUp is called when the server ended c with code (0: no close frame): it starts c's
// reconnect when pusher-js would reconnect.
func (r *redialer) hungUp(c *client, code int) {
	if delay, ok := reconnectDelay(code); ok {
		r.start(c, delay, false)
	}
}

// setupFailed is called when c's first connection failed with err: it tries again a second
// later unless the server refused c with a close code pusher-js does not reconnect after.
func (r *redialer) setupFailed(c *client, err error) {
	var ce *closedError
	if errors.As(err, &ce) {
		if _, ok := reconnectDelay(ce.code); !ok {
			return
		}
	}
	r.start(c, time.Second, true)
}

// start counts c as closed, or as a first connection tried again (first), and starts its
// redial after delay, unless the redialer has stopped.
func (r *redialer) start(c *client, delay time.Duration, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if first {
		r.counts.SetupRetried++
	} else {
		r.counts.Closed++
	}
	r.wg.Go(func() { r.redial(c, delay, first) })
}

// awaitSetups waits, at most d, until every first connection tried again has subscribed, so
// that no event is published before them.
func (r *redialer) awaitSetups(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		r.mu.Lock()
		done := r.counts.SetupLater == r.counts.SetupRetried
		r.mu.Unlock()
		if done {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expect sets the recorder's expectation: perClient first receipts for each of established
// clients and of those that subscribed late; each that subscribes late from now on adds its
// own.
func (r *redialer) expect(established int, perClient int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.perClient, r.expecting = perClient, true
	r.p.rec.expect(int64(established+r.counts.SetupLater) * perClient)
}

// redial dials c again after delay and subscribes it, a second apart until it succeeds or
// the redialer stops; first says that c never subscribed yet.
func (r *redialer) redial(c *client, delay time.Duration, first bool) {
	ep := r.eps[int(c.node)%len(r.eps)]
	for {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.ctx.Done():
			t.Stop()
			return
		}
		c.mu.Lock()
		c.code, c.closed, c.pending, c.lastTx = 0, nil, nil, 0
		plain := c.pos == nil || !c.pos.known
		if c.pos != nil {
			c.pos.asked, c.pos.hasNext = false, false
		}
		c.mu.Unlock()
		err := r.p.open(r.ctx, ep, c, time.Now().Add(r.timeout), func(nc net.Conn) ([]byte, error) { return c.setup(nc, ep) })
		r.mu.Lock()
		r.counts.Attempts++
		switch {
		case err == nil && first:
			r.counts.SetupLater++
			if r.expecting {
				r.p.rec.expect(r.p.rec.expected.Load() + r.perClient)
			}
		case err == nil:
			r.counts.Reconnected++
			if plain {
				r.counts.Plain++
			}
		case r.counts.FirstError == "" && r.ctx.Err() == nil:
			r.counts.FirstError = err.Error()
		}
		r.mu.Unlock()
		if err == nil || r.ctx.Err() != nil {
			return
		}
		delay = time.Second
	}
}

// stop ends the reconnects in flight and waits for their goroutines; no reconnect starts
// after it.
func (r *redialer) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// report returns the counts so far.
func (r *redialer) report() ReconnectCounts {
	positioned := 0
	r.p.mu.Lock()
	for _, c := range r.p.clients {
		c.mu.Lock()
		if c.pos != nil && c.pos.known {
			positioned++
		}
		c.mu.Unlock()
	}
	r.p.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.counts
	out.Positioned = positioned
	out.NotRecovered = maps.Clone(r.counts.NotRecovered)
	return out
}

// from is the position c's subscribe names: its last event's, once it knows one; nil (a plain
// subscribe) on its first connection and on channels without history.
func (r *redialer) from(c *client, track int) any {
	if c.pos == nil || track != 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.pos
	if !f.known {
		return nil
	}
	f.asked = true
	return position{Epoch: f.epoch, Offset: f.last}
}

// event moves c's position to the event it has just handled, the one its position frame
// announced.
func (r *redialer) event(c *client, track, _ int, _ bool) {
	if c.pos == nil || track != 0 {
		return
	}
	c.mu.Lock()
	if f := c.pos; f.hasNext {
		f.last, f.hasNext = f.pending, false
	}
	c.mu.Unlock()
}

// frame handles position and recovery frames.
func (r *redialer) frame(c *client, p []byte) {
	if c.pos == nil {
		return
	}
	switch {
	case bytes.Contains(p, positionEvent):
		epoch, offset, ok := parsePosition(p)
		c.mu.Lock()
		f := c.pos
		if ok && f.epoch == "" && f.known {
			f.epoch = string(epoch) // the channel's first event gave it its epoch
		}
		f.pending, f.hasNext = offset, ok
		c.mu.Unlock()
	case bytes.Contains(p, recoveryEvent):
		d, ok := historyData(p)
		if !ok {
			return
		}
		c.mu.Lock()
		f := c.pos
		asked := f.asked
		f.epoch, f.last, f.known, f.asked, f.hasNext = d.Epoch, d.Offset, true, false, false
		c.mu.Unlock()
		if !asked {
			return // a first subscribe's position, or a plain resubscribe's
		}
		r.mu.Lock()
		switch {
		case d.Recovered != nil && *d.Recovered:
			r.counts.Recovered++
		default:
			if r.counts.NotRecovered == nil {
				r.counts.NotRecovered = map[string]int{}
			}
			r.counts.NotRecovered[fmt.Sprintf("recovered:false, %s", d.Reason)]++
		}
		r.mu.Unlock()
	}
}

// writeText writes the counts as a report line.
func (r *ReconnectCounts) writeText(b io.Writer) {
	fmt.Fprintf(b, "  reconnected  %d of %d dropped subscribers (%d dials): %d recovered, %d without a position; %d subscribers knew their position",
		r.Reconnected, r.Closed, r.Attempts, r.Recovered, r.Plain, r.Positioned)
	for _, k := range slices.Sorted(maps.Keys(r.NotRecovered)) {
		fmt.Fprintf(b, ", %d× %s", r.NotRecovered[k], k)
	}
	if r.SetupRetried > 0 {
		fmt.Fprintf(b, "; %d failed first connections tried again, %d of them subscribed", r.SetupRetried, r.SetupLater)
	}
	if r.FirstError != "" {
		fmt.Fprintf(b, " (first failed dial: %s)", r.FirstError)
	}
	fmt.Fprintln(b)
}
