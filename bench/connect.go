package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// giveUpAfter is how many failed attempts, with none succeeding, end the connect phase early:
// a server that refuses everything should not be tried 19,000 times.
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
}

// pool is the set of subscribed clients of one run.
type pool struct {
	clients []*client
}

// connect opens n subscribed clients, client i on channelOf(i), with t.Concurrency attempts in
// flight and at most t.Rate started per second, all within t.Timeout. Each client then runs
// (recording into rec, when not nil) until the pool is closed. It fails when no client could
// subscribe or the deadline passed; otherwise failures are only counted.
func connect(ctx context.Context, t Target, n int, channelOf func(int) string, rec *recorder) (*pool, Setup, error) {
	setup := Setup{Requested: n}
	ep, err := t.wsEndpoint()
	if err != nil {
		return nil, setup, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, t.Timeout, fmt.Errorf("connect phase over its %v deadline", t.Timeout))
	defer cancel()
	deadline, _ := ctx.Deadline()

	var (
		mu       sync.Mutex
		p        = &pool{clients: make([]*client, 0, n)}
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, t.Concurrency)
	)
	giveUp := errors.New("gave up")
	abort, stopAll := context.WithCancelCause(ctx)
	defer stopAll(nil)

	start := time.Now()
	started := 0
dispatch:
	for ; started < n; started++ {
		if t.Rate > 0 {
			at := start.Add(time.Duration(float64(started) / t.Rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-abort.Done():
					break dispatch
				}
			}
		}
		select {
		case sem <- struct{}{}:
		case <-abort.Done():
			break dispatch
		}
		wg.Add(1)
		go func(i int) {
			c, err := dialClient(abort, ep, i, channelOf(i), deadline)
			mu.Lock()
			if err != nil {
				setup.Failed++
				if firstErr == nil {
					firstErr = err
				}
				if setup.Failed >= giveUpAfter && len(p.clients) == 0 {
					stopAll(giveUp)
				}
			} else {
				p.clients = append(p.clients, c)
			}
			mu.Unlock()
			<-sem
			wg.Done()
			if c != nil {
				c.run(rec)
			}
		}(started)
	}
	wg.Wait()
	setup.Established = len(p.clients)
	setup.Seconds = time.Since(start).Seconds()
	if setup.Seconds > 0 {
		setup.RatePerSec = float64(setup.Established) / setup.Seconds
	}
	if firstErr != nil {
		setup.FirstError = firstErr.Error()
	}
	switch {
	case context.Cause(abort) == giveUp:
		p.close(t.Timeout)
		return nil, setup, fmt.Errorf("connect: the first %d attempts failed and none succeeded; first error: %v", setup.Failed, firstErr)
	case ctx.Err() != nil:
		p.close(t.Timeout)
		return nil, setup, fmt.Errorf("connect: %d of %d connections subscribed, %d failed, %d not attempted when the phase ended (%v); first error: %v",
			setup.Established, n, setup.Failed, n-started, context.Cause(ctx), firstErr)
	case setup.Established == 0:
		return nil, setup, fmt.Errorf("connect: none of %d connections could subscribe; first error: %v", n, firstErr)
	}
	return p, setup, nil
}

// lost counts clients whose connection ended before the pool closed it.
func (p *pool) lost() (n int, first error) {
	for _, c := range p.clients {
		select {
		case <-c.done:
			if c.lost {
				n++
				if first == nil {
					first = c.err
				}
			}
		default:
		}
	}
	return n, first
}

// close closes every client and waits, at most d, for their goroutines to end. After it
// returns nil, every client's samples may be read.
func (p *pool) close(d time.Duration) error {
	if p == nil {
		return nil
	}
	for _, c := range p.clients {
		c.close()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for _, c := range p.clients {
		select {
		case <-c.done:
		case <-timer.C:
			return fmt.Errorf("close: client goroutines still running after %v", d)
		}
	}
	return nil
}
