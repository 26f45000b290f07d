package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// giveUpAfter is how many failed attempts, with none succeeding, stop the connect phase from
// starting more: a server that refuses everything should not be tried 19,000 times. Attempts
// already in flight go on: in a burst (every client at once) the first to end are the
// refused ones, before any other has finished subscribing.
const giveUpAfter = 100

// Setup reports the connect phase: every connection dials, reads connection_established,
// subscribes and waits for subscription_succeeded.
type Setup struct {
	Requested   int     `json:"requested"`
	Established int     `json:"established"`
	Failed      int     `json:"failed"`
	FirstError  string  `json:"first_error,omitempty"`
	Seconds     float64 `json:"seconds"`
	RatePerSec  float64 `json:"rate_per_sec"` // Established / Seconds
	// PerNode is Established per node, in --ws order; only with several nodes.
	PerNode []int `json:"per_node,omitempty"`
}

func (s *Setup) merge(o Setup) {
	s.Requested += o.Requested
	s.Established += o.Established
	s.Failed += o.Failed
	if s.FirstError == "" {
		s.FirstError = o.FirstError
	}
	if len(s.PerNode) < len(o.PerNode) {
		s.PerNode = append(s.PerNode, make([]int, len(o.PerNode)-len(s.PerNode))...)
	}
	for k, n := range o.PerNode {
		s.PerNode[k] += n
	}
	s.Seconds = max(s.Seconds, o.Seconds)
	s.RatePerSec = 0
	if s.Seconds > 0 {
		s.RatePerSec = float64(s.Established) / s.Seconds
	}
}

// connect opens n subscribed clients into p, client i joining the channels chansOf(i), with
// t.Concurrency attempts in flight and at most t.Rate started per second. Client i is the
// run's connection first+i (first is non-zero in a child process, Target.Procs) and goes to
// node (first+i) mod N of t.WS. Each attempt has t.Timeout; the phase has t.Timeout beyond
// the time the rate needs. It fails when no client could subscribe or the phase ran out of
// time; otherwise failures are only counted.
func connect(ctx context.Context, t Target, p *pool, first, n int, chansOf func(i int) []int32) (Setup, error) {
	return connectWith(ctx, t, p, first, n, func(ctx context.Context, ep endpoint, node, i int, deadline time.Time) error {
		return p.dial(ctx, ep, node, i, chansOf(i), deadline)
	})
}

// dialFunc connects client i to ep, node node of the target, sets it up before deadline and
// attaches it to its pool.
type dialFunc func(ctx context.Context, ep endpoint, node, i int, deadline time.Time) error

// connectWith is connect with each client set up by dial: connect's subscribes to public
// channels, presence's signed joins.
func connectWith(ctx context.Context, t Target, p *pool, first, n int, dial dialFunc) (Setup, error) {
	return connectRouted(ctx, t, p, n, func(i, nodes int) int { return nodeOf(first+i, nodes) }, dial)
}

// connectRouted is connectWith with attempt i sent to node route(i, N) of the N nodes.
func connectRouted(ctx context.Context, t Target, p *pool, n int, route func(i, nodes int) int, dial dialFunc) (Setup, error) {
	setup := Setup{Requested: n}
	eps, err := t.wsEndpoints()
	if err != nil {
		return setup, err
	}
	if len(eps) > 1 {
		setup.PerNode = make([]int, len(eps))
	}
	phase := t.Timeout
	if t.Rate > 0 {
		phase += time.Duration(float64(n) / t.Rate * float64(time.Second))
	}
	ctx, cancel := context.WithTimeoutCause(ctx, phase, fmt.Errorf("connect phase over its %v deadline", phase))
	defer cancel()
	end, _ := ctx.Deadline()

	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, t.Concurrency)
		giveUp   = make(chan struct{}) // closed when giveUpAfter attempts failed before any succeeded
		gaveUp   bool
	)

	start := time.Now()
	started := 0
dispatch:
	for ; started < n; started++ {
		if t.Rate > 0 {
			at := start.Add(time.Duration(float64(started) / t.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				timer := time.NewTimer(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					break dispatch
				case <-giveUp:
					timer.Stop()
					break dispatch
				}
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break dispatch
		case <-giveUp:
			break dispatch
		}
		p.attempts.Add(1)
		if t.Timeline != nil {
			t.Timeline.Attempt()
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			began := time.Now()
			deadline := began.Add(t.Timeout)
			if deadline.After(end) {
				deadline = end
			}
			node := route(i, len(eps))
			err := dial(ctx, eps[node], node, i, deadline)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("%w (the attempt's deadline of %v passed)", err, deadline.Sub(began).Round(time.Millisecond))
			}
			<-sem
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				setup.Established++
				if setup.PerNode != nil {
					setup.PerNode[node]++
				}
				return
			}
			p.failed.Add(1)
			if t.Timeline != nil {
				t.Timeline.Failed()
			}
			setup.Failed++
			if firstErr == nil {
				firstErr = err
			}
			if setup.Failed >= giveUpAfter && setup.Established == 0 && !gaveUp {
				gaveUp = true
				close(giveUp)
			}
		}(started)
	}
	wg.Wait()
	setup.Seconds = time.Since(start).Seconds()
	if setup.Seconds > 0 {
		setup.RatePerSec = float64(setup.Established) / setup.Seconds
	}
	if firstErr != nil {
		setup.FirstError = firstErr.Error()
	}
	switch {
	case gaveUp && started < n:
		return setup, fmt.Errorf("connect: the first %d attempts failed and none succeeded; %d subscribed of %d started, %d not attempted; first error: %v",
			giveUpAfter, setup.Established, started, n-started, firstErr)
	case ctx.Err() != nil:
		return setup, fmt.Errorf("connect: %d of %d connections subscribed, %d failed, %d not attempted when the phase ended (%v); first error: %v",
			setup.Established, n, setup.Failed, n-started, context.Cause(ctx), firstErr)
	case setup.Established == 0 && n > 0:
		return setup, fmt.Errorf("connect: none of %d connections could subscribe; first error: %v", n, firstErr)
	}
	return setup, nil
}

// dial connects client i to ep, node node of the target, sets it up before deadline and
// attaches it to the pool.
func (p *pool) dial(ctx context.Context, ep endpoint, node, i int, chans []int32, deadline time.Time) error {
	c := &client{rec: p.rec, chans: chans, tracks: make([]track, len(chans)), shard: int32(i % latencyShards), node: int32(node), index: int32(i)}
	if p.re != nil && len(chans) == 1 {
		c.pos = &follow{}
	}
	err := p.open(ctx, ep, c, deadline, func(nc net.Conn) ([]byte, error) { return c.setup(nc, ep) })
	if err != nil && p.re != nil && ctx.Err() == nil {
		p.re.setupFailed(c, err)
	}
	return err
}

// open connects c (the run's client c.index) to ep, runs setup on the connection before
// deadline and attaches c to the pool with the bytes setup read past its last message.
func (p *pool) open(ctx context.Context, ep endpoint, c *client, deadline time.Time, setup func(net.Conn) ([]byte, error)) error {
	nc, err := ep.dial(ctx, int(c.index), deadline)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	pre, err := setup(nc)
	if !stop() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		nc.Close()
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", err, cause)
		}
		return err
	}
	return p.attach(c, nc, pre)
}
