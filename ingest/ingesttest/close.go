package ingesttest

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/herald-rt/herald/ingest"
)

// testClose: Close stops the source's goroutines within its ctx and is idempotent; so is
// Close of a source never started, and Close with a ctx already done returns at once.
func testClose(t *testing.T, ns NewSource) {
	h := ns(t)
	// The harness's clients connect before the count: a Kafka client, for one, opens a
	// connection of its own for producing.
	h.Produce(t, 0, rec("warmup", int(warmups.Add(1))))
	goroutines := runtime.NumGoroutine()
	never := h.New(t, h.pipeline(t, &Sink{}), Options{})
	Stop(t, never)
	if st := never.Stats().State; st != ingest.StateStopped {
		t.Errorf("a source closed before Start: state %s, want stopped", st)
	}

	sink := &Sink{}
	s := h.start(t, sink, Options{})
	warmUp(t, h, sink)
	t0 := time.Now()
	Stop(t, s)
	t.Logf("Close took %v", time.Since(t0))
	if st := s.Stats().State; st != ingest.StateStopped {
		t.Errorf("after Close: state %s, want stopped", st)
	}
	t0 = time.Now()
	if err := s.Close(context.Background()); err != nil || time.Since(t0) > time.Second {
		t.Errorf("a second Close: %v after %v; want nil at once", err, time.Since(t0))
	}
	waitGoroutines(t, goroutines)

	s = h.start(t, sink, Options{})
	warmUp(t, h, sink)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	t0 = time.Now()
	err := s.Close(ctx)
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Close with a ctx already done took %v (%v)", d, err)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a ctx already done: %v; want nil or the ctx's error", err)
	}
	waitGoroutines(t, goroutines) // the source stops all the same
}
