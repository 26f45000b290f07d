package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald/ws"
)

// closeAnswerWait is how long a clean close waits for the server's close frame.
const closeAnswerWait = 2 * time.Second

// Cycles counts churn's connect–subscribe–disconnect cycles.
type Cycles struct {
	Attempted  int64  `json:"attempted"`
	Completed  int64  `json:"completed"` // subscribed to every channel, then disconnected
	Failed     int64  `json:"failed"`
	FirstError string `json:"first_error,omitempty"`
	Clean      int64  `json:"clean"`   // disconnected with a close frame
	Dropped    int64  `json:"dropped"` // disconnected by a reset, without one
	// CloseUnanswered counts clean disconnects the server did not answer with its close frame
	// within closeAnswerWait.
	CloseUnanswered int64   `json:"close_unanswered"`
	Seconds         float64 `json:"seconds"`
	RatePerSec      float64 `json:"rate_per_sec"` // completed cycles per second
}

// cycler runs churn's cycles; its counters are safe for concurrent use.
type cycler struct {
	cfg   ChurnConfig
	eps   []endpoint // the nodes; cycle i goes to node i mod len(eps)
	rec   *recorder  // their events are not counted: it only names the channels
	chans [][]int32  // by rotation

	completed, failed, clean, dropped, unanswered atomic.Int64
	mu                                            sync.Mutex
	firstErr                                      error
}

// runCycles starts cycles at cfg.Rate for cfg.Duration, cfg.Concurrency at a time, and
// waits for them. It fails when the first giveUpAfter cycles all fail.
func runCycles(ctx context.Context, cfg ChurnConfig, names []string) (Cycles, error) {
	eps, err := cfg.wsEndpoints()
	if err != nil {
		return Cycles{}, err
	}
	cy := &cycler{cfg: cfg, eps: eps, rec: newRecorder(names, 0, nil)}
	per := cfg.PerClient - 1
	for r := range churnChannels {
		ch := []int32{0}
		for k := range per {
			ch = append(ch, int32(1+(r+k)%churnChannels))
		}
		cy.chans = append(cy.chans, ch)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	giveUp := errors.New("gave up")
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.Duration)
	n := 0
	for ; ; n++ {
		at := start.Add(time.Duration(float64(n) / cfg.Rate * float64(time.Second)))
		if !at.Before(end) || sleepUntil(ctx, at) != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if cy.cycle(ctx, i) != nil && cy.failed.Load() >= giveUpAfter && cy.completed.Load() == 0 {
				cancel(giveUp)
			}
		}(n)
	}
	wg.Wait()
	c := Cycles{Attempted: int64(n), Completed: cy.completed.Load(), Failed: cy.failed.Load(), Clean: cy.clean.Load(),
		Dropped: cy.dropped.Load(), CloseUnanswered: cy.unanswered.Load(), Seconds: time.Since(start).Seconds()}
	if cy.firstErr != nil {
		c.FirstError = cy.firstErr.Error()
	}
	if c.Seconds > 0 {
		c.RatePerSec = float64(c.Completed) / c.Seconds
	}
	switch cause := context.Cause(ctx); {
	case cause == giveUp:
		return c, fmt.Errorf("churn: the first %d cycles failed and none completed; first error: %v", c.Failed, cy.firstErr)
	case cause != nil:
		return c, cause
	}
	return c, nil
}

// cycle connects client i to node i mod N, subscribes it and disconnects it: cleanly when i
// is even, by a reset when odd.
func (cy *cycler) cycle(ctx context.Context, i int) (err error) {
	tl := cy.cfg.Timeline
	if tl != nil {
		tl.Attempt()
	}
	defer func() {
		if err == nil {
			cy.completed.Add(1)
			return
		}
		cy.failed.Add(1)
		if tl != nil {
			tl.Failed()
		}
		cy.mu.Lock()
		if cy.firstErr == nil {
			cy.firstErr = err
		}
		cy.mu.Unlock()
	}()
	deadline := time.Now().Add(cy.cfg.Timeout)
	ep := cy.eps[nodeOf(i, len(cy.eps))]
	nc, err := ep.dial(ctx, i, deadline)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	chans := cy.chans[(i*max(cy.cfg.PerClient-1, 1))%len(cy.chans)]
	c := &client{rec: cy.rec, chans: chans, tracks: make([]track, len(chans))}
	pre, err := c.setup(nc, ep)
	if err != nil {
		return err
	}
	if tl != nil {
		tl.Connected(1)
		defer tl.Connected(-1)
	}
	if i%2 == 1 {
		cy.dropped.Add(1)
		if tcp, ok := tcpOf(nc); ok {
			_ = tcp.SetLinger(0) // close sends a reset
		}
		return nil
	}
	cy.clean.Add(1)
	if _, err := nc.Write(ws.AppendClientFrame(nil, ws.OpClose, []byte{0x03, 0xE8})); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	_ = nc.SetDeadline(time.Now().Add(closeAnswerWait))
	m := &ws.MessageReader{R: bufio.NewReader(io.MultiReader(bytes.NewReader(pre), nc)), Max: maxMessageBytes}
	for {
		op, _, err := m.Next()
		if err != nil {
			cy.unanswered.Add(1)
			return nil
		}
		if op == ws.OpClose {
			return nil
		}
	}
}
